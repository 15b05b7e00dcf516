#!/usr/bin/env bash
# Slurm's job submission rate on this machine: the baseline for Tidepool's submission benchmark.
# Starts a throw-away single-node Slurm cluster (munged, slurmctld, slurmd on 127.0.0.1, 8 fake
# GPUs) in a fresh temp directory, has C concurrent clients submit N held jobs with
# `sbatch --hold --gres=gpu:1 --wrap true -o /dev/null`, and prints accepted jobs per second of
# wall time. Every daemon it starts is stopped by PID and the temp directory removed on exit.
# Must run as root (SlurmUser=root, mknod); installs slurm-wlm and munge with apt-get if missing.
# See bench/submit/README.md.
#
# Usage: bench/submit/slurm_baseline.sh [--clients C] [--jobs N] [--keep] [--json FILE] [--host-net]
#   --clients C   concurrent submitting clients, each a bash loop of sbatch calls (default: 8)
#   --jobs N      jobs submitted in all, split evenly over the clients (default: 2000)
#   --keep        keep the temp directory (configs, state, logs) and print its path
#   --json FILE   also write {"system","clients","jobs","accepted","seconds","jobs_per_second"}
#   --host-net    stay in the host's network namespace. By default the cluster runs in a private
#                 one (unshare --net, loopback only) where that works, because slurmctld and
#                 slurmd listen on 0.0.0.0 and have no bind-address setting
#   -h, --help    this text
# Exit status: 0 when all N jobs were accepted, 1 when some were not (figures still printed),
# 2 on a usage error, 3 when Slurm could not be set up or started.
set -euo pipefail

prog="slurm_baseline.sh"
clients=8
jobs=2000
keep=0
json=""
host_net=0
orig_args=("$@")

die() { echo "${prog}: $*" >&2; exit 3; }
usage_error() { echo "${prog}: $* (see --help)" >&2; exit 2; }
is_count() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --clients) [[ $# -ge 2 ]] || usage_error "--clients needs a value"; clients="$2"; shift 2 ;;
    --jobs) [[ $# -ge 2 ]] || usage_error "--jobs needs a value"; jobs="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --host-net) host_net=1; shift ;;
    --json) [[ $# -ge 2 ]] || usage_error "--json needs a file"; json="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done
is_count "${clients}" || usage_error "--clients must be a positive integer, got '${clients}'"
is_count "${jobs}" || usage_error "--jobs must be a positive integer, got '${jobs}'"
(( clients <= jobs )) || usage_error "--clients (${clients}) must not exceed --jobs (${jobs})"
if [[ -n "${json}" ]]; then
  json_dir="$(dirname -- "${json}")"
  [[ -d "${json_dir}" ]] || usage_error "--json: no directory ${json_dir}"
  json="$(cd -- "${json_dir}" && pwd)/$(basename -- "${json}")"
fi

[[ "$(id -u)" -eq 0 ]] || die "must run as root (the test cluster runs with SlurmUser=root and makes device nodes with mknod)"

# --- packages -----------------------------------------------------------------------------------
# slurm-wlm pulls in slurmctld, slurmd and slurm-client; munge is the authentication daemon.
missing=()
for pkg in slurm-wlm slurmctld slurmd slurm-client munge; do
  dpkg -s "${pkg}" >/dev/null 2>&1 || missing+=("${pkg}")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "${prog}: installing ${missing[*]} with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get install -y -qq "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
fi
for bin in munged slurmctld slurmd sbatch sinfo squeue scancel; do
  command -v "${bin}" >/dev/null 2>&1 || [[ -x "/usr/sbin/${bin}" ]] || die "${bin} not found after installing slurm-wlm and munge"
done
export PATH="${PATH}:/usr/sbin:/sbin"

# --- network namespace ------------------------------------------------------------------------------
# Re-executes this script in a private network namespace (bench/slurm_cluster_helpers.sh), after
# apt-get, which needs the network.
# shellcheck source=../slurm_cluster_helpers.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/../slurm_cluster_helpers.sh"
[[ "${host_net}" -eq 1 ]] || slurm_enter_netns "${prog}" "${BASH_SOURCE[0]}" "${orig_args[@]}"

# --- temp directory and cleanup -------------------------------------------------------------------
tmp="$(mktemp -d -t tidepool-slurm-bench.XXXXXX)"
client_pids=()

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  local pid
  for pid in "${client_pids[@]}"; do kill -TERM "${pid}" 2>/dev/null; done
  for pid in "${client_pids[@]}"; do wait "${pid}" 2>/dev/null; done
  # Slurm 22.05's scancel sends one kill RPC per job: a few seconds per thousand jobs.
  if [[ ${#slurm_cluster_pids[@]} -gt 0 ]]; then
    echo "${prog}: cancelling the jobs and stopping Slurm" >&2
    timeout $((30 + jobs / 20)) scancel --quiet --partition=bench >/dev/null 2>&1 \
      || echo "${prog}: scancel failed or timed out; stopping the daemons anyway" >&2
  fi
  slurm_cluster_stop
  if [[ "${keep}" -eq 1 ]]; then
    echo "${prog}: kept ${tmp}" >&2
  else
    rm -rf -- "${tmp}"
  fi
  exit "${rc}"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the cluster ------------------------------------------------------------------------------------
# One node of 8 fake GPUs (bench/slurm_cluster_helpers.sh), with the high-throughput settings of
# Slurm's High Throughput Computing Administration Guide (doc/html/high_throughput.shtml): no
# per-job scheduling attempt at submit (defer) and the guide's sample SchedulerParameters of a
# cluster sustaining hundreds of jobs/s.
slurm_cluster_start "${tmp}" bench 1 8 0 \
  "defer,batch_sched_delay=20,bf_continue,bf_interval=300,bf_min_age_reserve=10800,bf_resolution=600,bf_yield_interval=1000000,partition_job_depth=500,sched_max_job_start=200,sched_min_interval=2000000" \
  || die "Slurm did not start (see the logs above)"
slurmctld_pid="${slurm_cluster_pids[1]}"
munged_pid="${slurm_cluster_pids[0]}"
mkdir -p "${tmp}/log"

# --- submissions ------------------------------------------------------------------------------------
# Each client writes the count of its accepted jobs, and the CPU seconds it and its sbatch children
# used (bash's `times`), to its own files; sbatch errors go to a log. The daemons' CPU time comes
# from /proc, so the run can also be read as CPU per submission, which a busy machine distorts
# less than wall time.
cpu_ticks() {  # utime + stime of process $1, all threads, in clock ticks
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || { echo 0; return; }
  stat="${stat##*) }"
  awk '{ print $12 + $13 }' <<<"${stat}"
}
times_seconds() {  # sum of the four figures `times` prints (NmN.NNNs each)
  tr ' ' '\n' | awk -F'[ms]' 'NF >= 2 { t += $1 * 60 + $2 } END { printf "%.3f", t }'
}
cd "${tmp}/work"
read -r load1 _ </proc/loadavg || load1="?"
ctld_ticks0="$(cpu_ticks "${slurmctld_pid}")"
munged_ticks0="$(cpu_ticks "${munged_pid}")"
per_client=$((jobs / clients))
extra=$((jobs % clients))
t0="$(date +%s.%N)"
for ((c = 0; c < clients; c++)); do
  n=$((per_client + (c < extra ? 1 : 0)))
  (
    ok=0
    for ((j = 0; j < n; j++)); do
      if out="$(sbatch --hold --gres=gpu:1 --wrap true -o /dev/null 2>>"${tmp}/log/sbatch-${c}.err")" \
         && [[ "${out}" == "Submitted batch job "* ]]; then
        ok=$((ok + 1))
      fi
    done
    echo "${ok}" >"${tmp}/work/accepted-${c}"
    times >"${tmp}/work/times-${c}"  # not in a pipe: a subshell's `times` would not see sbatch
  ) &
  client_pids+=($!)
done
for pid in "${client_pids[@]}"; do wait "${pid}" || true; done
t1="$(date +%s.%N)"
client_pids=()
ctld_ticks1="$(cpu_ticks "${slurmctld_pid}")"
munged_ticks1="$(cpu_ticks "${munged_pid}")"

accepted=0
for ((c = 0; c < clients; c++)); do
  [[ -s "${tmp}/work/accepted-${c}" ]] && accepted=$((accepted + $(<"${tmp}/work/accepted-${c}")))
done
client_cpu="$(cat "${tmp}"/work/times-* 2>/dev/null | times_seconds)"
hz="$(getconf CLK_TCK 2>/dev/null || echo 100)"
ctld_cpu="$(awk -v a="${ctld_ticks0}" -v b="${ctld_ticks1}" -v hz="${hz}" 'BEGIN { printf "%.1f", (b - a) / hz }')"
munged_cpu="$(awk -v a="${munged_ticks0}" -v b="${munged_ticks1}" -v hz="${hz}" 'BEGIN { printf "%.1f", (b - a) / hz }')"
seconds="$(awk -v a="${t0}" -v b="${t1}" 'BEGIN { printf "%.3f", b - a }')"
rate="$(awk -v k="${accepted}" -v s="${seconds}" 'BEGIN { printf "%.1f", (s > 0 ? k / s : 0) }')"
pending="$(squeue -h -t PD -p bench -o '%i' 2>/dev/null | wc -l || true)"
on_disk="$(find "${tmp}/state" -mindepth 2 -maxdepth 2 -type d -name 'job.*' 2>/dev/null | wc -l)"

echo "slurm: ${jobs} jobs, ${clients} clients: ${rate} jobs/s (${seconds} s)"
echo "  accepted ${accepted}/${jobs}; squeue shows ${pending} pending; ${on_disk} job scripts in StateSaveLocation;" \
  "$(nproc) CPUs, load average ${load1} at the start" >&2
awk -v k="${accepted}" -v cl="${client_cpu}" -v ct="${ctld_cpu}" -v mu="${munged_cpu}" 'BEGIN {
  per = (k > 0) ? 1000 / k : 0
  printf "  CPU: clients (bash + sbatch) %.1f s = %.2f ms/job, slurmctld %.1f s = %.2f ms/job, munged %.1f s = %.2f ms/job\n",
    cl, cl * per, ct, ct * per, mu, mu * per
}' >&2
if [[ -n "${json}" ]]; then
  printf '{"system":"slurm","clients":%d,"jobs":%d,"accepted":%d,"seconds":%s,"jobs_per_second":%s}\n' \
    "${clients}" "${jobs}" "${accepted}" "${seconds}" "${rate}" >"${json}"
fi
if (( accepted < jobs )); then
  echo "${prog}: only ${accepted} of ${jobs} submissions accepted; first sbatch errors:" >&2
  cat "${tmp}"/log/sbatch-*.err 2>/dev/null | sort | uniq -c | sort -rn | head -n 5 >&2
  exit 1
fi

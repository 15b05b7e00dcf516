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
# slurmctld and slurmd bind 0.0.0.0 on their ports (no bind-address setting in Slurm). All traffic is
# to 127.0.0.1 anyway, but in a private network namespace nothing is reachable from outside at all.
# Re-executes this script there (after apt-get, which needs the network). Besides bringing lo up,
# it gives lo a second address, 127.0.0.2/32: Slurm resolves with getaddrinfo(AF_INET,
# AI_ADDRCONFIG), and glibc answers EAI_NONAME to that when the only IPv4 address is 127.0.0.1.
if [[ "${host_net}" -eq 0 && -z "${SLURM_BASELINE_IN_NETNS:-}" ]]; then
  if command -v unshare >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 \
     && unshare --net true >/dev/null 2>&1; then
    export SLURM_BASELINE_IN_NETNS=1
    exec unshare --net -- bash -c '
      if ! { ip link set lo up && ip addr add 127.0.0.2/32 dev lo; }; then
        echo "slurm_baseline.sh: cannot set up lo in the private network namespace (try --host-net)" >&2
        exit 3
      fi
      exec bash "$@"' slurm_baseline "${BASH_SOURCE[0]}" "${orig_args[@]}"
  fi
  echo "${prog}: note: no private network namespace (unshare --net failed); slurmctld and slurmd will listen on 0.0.0.0" >&2
fi

# --- temp directory and cleanup -------------------------------------------------------------------
tmp="$(mktemp -d -t tidepool-slurm-bench.XXXXXX)"
# munged insists that every directory above its socket be searchable (x) by all users.
chmod 0711 "${tmp}"
munged_pid=""
slurmctld_pid=""
slurmd_pid=""
client_pids=()

stop_pid() {  # stop_pid NAME PID: SIGTERM, wait up to 30 s, then SIGKILL. Only our own children.
  local name="$1" pid="$2" i
  [[ -n "${pid}" ]] || return 0
  kill -0 "${pid}" 2>/dev/null || { wait "${pid}" 2>/dev/null || true; return 0; }
  kill -TERM "${pid}" 2>/dev/null || true
  for ((i = 0; i < 300; i++)); do
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${pid}" 2>/dev/null; then
    echo "${prog}: ${name} (pid ${pid}) ignored SIGTERM for 30 s, sending SIGKILL" >&2
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  wait "${pid}" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  local pid
  for pid in "${client_pids[@]}"; do kill -TERM "${pid}" 2>/dev/null; done
  for pid in "${client_pids[@]}"; do wait "${pid}" 2>/dev/null; done
  # Slurm 22.05's scancel sends one kill RPC per job: a few seconds per thousand jobs.
  if [[ -n "${slurmctld_pid}" ]] && kill -0 "${slurmctld_pid}" 2>/dev/null; then
    echo "${prog}: cancelling the jobs and stopping Slurm" >&2
    timeout $((30 + jobs / 20)) scancel --quiet --partition=bench >/dev/null 2>&1 \
      || echo "${prog}: scancel failed or timed out; stopping the daemons anyway" >&2
  fi
  stop_pid slurmd "${slurmd_pid}"
  stop_pid slurmctld "${slurmctld_pid}"
  stop_pid munged "${munged_pid}"
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

show_logs() {  # daemons' log files, and their stdout/stderr where the log file stayed empty
  local f
  for f in "${tmp}"/log/*; do
    [[ -s "${f}" ]] || continue
    [[ "${f}" == *.out && -s "${f%.out}.log" ]] && continue
    echo "----- tail of ${f}" >&2
    tail -n 25 "${f}" >&2
  done
}
fail_start() { echo "${prog}: $*" >&2; show_logs; exit 3; }

mkdir -p "${tmp}"/{etc,state,spool/slurmd,run,log,dev,munge,munge-socket,work}
chmod 0700 "${tmp}/munge"        # key and seed: private
chmod 0755 "${tmp}/munge-socket" # socket: munged requires a directory searchable by all

# --- ports ------------------------------------------------------------------------------------------
port_busy() {  # listening on TCP port $1 (any address)?
  if command -v ss >/dev/null 2>&1; then
    [[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}
pick_ports() {  # pick_ports COUNT: first of COUNT consecutive free ports in 20000-29999
  local count="$1" p i k ok
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + RANDOM % (10000 - count)))
    ok=1
    for ((k = 0; k < count; k++)); do
      port_busy $((p + k)) && { ok=0; break; }
    done
    [[ "${ok}" -eq 1 ]] && { echo "${p}"; return 0; }
  done
  return 1
}
# slurmctld listens on 4 ports (clients pick one at random, as the high-throughput guide suggests
# against listen-queue overflows); slurmd takes the port right after them.
ctld_ports=4
ctld_port="$(pick_ports $((ctld_ports + 1)))" || die "no $((ctld_ports + 1)) consecutive free TCP ports found in 20000-29999"
slurmd_port=$((ctld_port + ctld_ports))

# --- munge --------------------------------------------------------------------------------------------
# A private munged: own key, socket, pid, log and seed files; more threads than the default 2, as
# Slurm's high-throughput guide recommends (every sbatch call needs one credential).
munge_socket="${tmp}/munge-socket/munge.socket"
(( ${#munge_socket} < 100 )) || die "temp path too long for a unix socket: ${munge_socket} (set TMPDIR to a shorter directory)"
dd if=/dev/urandom of="${tmp}/munge/munge.key" bs=1024 count=1 status=none
chmod 0600 "${tmp}/munge/munge.key"
# In --foreground mode munged logs to stderr (munged.out), not to --log-file.
munged --foreground --socket="${munge_socket}" --key-file="${tmp}/munge/munge.key" \
  --pid-file="${tmp}/run/munged.pid" --log-file="${tmp}/log/munged.log" \
  --seed-file="${tmp}/munge/munged.seed" --num-threads=10 \
  >"${tmp}/log/munged.out" 2>&1 &
munged_pid=$!
for ((i = 0; i < 100; i++)); do
  [[ -S "${munge_socket}" ]] && break
  kill -0 "${munged_pid}" 2>/dev/null || fail_start "munged exited at start"
  sleep 0.1
done
[[ -S "${munge_socket}" ]] || fail_start "munged did not create ${munge_socket} within 10 s"

# --- fake GPUs --------------------------------------------------------------------------------------
# Character devices with the NVIDIA major number 195; slurmd only stat()s the files named in
# gres.conf (no NVML here: AutoDetect=off), so they need not be backed by a driver.
for g in 0 1 2 3 4 5 6 7; do
  mknod "${tmp}/dev/nvidia${g}" c 195 "${g}" || die "mknod ${tmp}/dev/nvidia${g} failed (no CAP_MKNOD, or a nodev mount? set TMPDIR elsewhere)"
done

# --- slurm.conf and gres.conf -----------------------------------------------------------------------
host="$(hostname -s)"
[[ -n "${host}" ]] || die "hostname -s is empty"
# The node line uses the hardware as slurmd sees it (slurmd -C), without RealMemory so a
# fluctuating figure cannot drain the node.
node_hw="$(slurmd -C 2>/dev/null | head -n 1 | tr ' ' '\n' | grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' | tr '\n' ' ' || true)"
[[ -n "${node_hw}" ]] || node_hw="CPUs=$(nproc)"

cat >"${tmp}/etc/gres.conf" <<EOF
AutoDetect=off
Name=gpu File=${tmp}/dev/nvidia[0-7]
EOF
: >"${tmp}/etc/plugstack.conf"

cat >"${tmp}/etc/slurm.conf" <<EOF
# Throw-away single-node cluster of ${prog}; see bench/submit/README.md.
ClusterName=tpbench
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${ctld_port}-$((ctld_port + ctld_ports - 1))
SlurmdPort=${slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${munge_socket}
StateSaveLocation=${tmp}/state
SlurmdSpoolDir=${tmp}/spool/slurmd
SlurmctldPidFile=${tmp}/run/slurmctld.pid
SlurmdPidFile=${tmp}/run/slurmd.pid
SlurmctldLogFile=${tmp}/log/slurmctld.log
SlurmdLogFile=${tmp}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=${tmp}/etc/plugstack.conf
TmpFS=${tmp}/work
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
PriorityType=priority/basic
GresTypes=gpu
# High-throughput settings from Slurm's High Throughput Computing Administration Guide
# (doc/html/high_throughput.shtml): a big job table, no per-job scheduling attempt at submit
# (defer) and the guide's sample SchedulerParameters of a cluster sustaining hundreds of jobs/s.
MaxJobCount=200000
SchedulerParameters=defer,batch_sched_delay=20,bf_continue,bf_interval=300,bf_min_age_reserve=10800,bf_resolution=600,bf_yield_interval=1000000,partition_job_depth=500,sched_max_job_start=200,sched_min_interval=2000000
NodeName=${host} NodeAddr=127.0.0.1 ${node_hw}Gres=gpu:8 State=UNKNOWN
PartitionName=bench Nodes=${host} Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="${tmp}/etc/slurm.conf"

# --- daemons ----------------------------------------------------------------------------------------
# The guide asks for high open-file and stack limits for slurmctld: raise ours to the hard limits
# (this shell and its children only).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
ulimit -s unlimited 2>/dev/null || true
slurmctld -D -f "${SLURM_CONF}" >"${tmp}/log/slurmctld.out" 2>&1 &
slurmctld_pid=$!
slurmd -D -f "${SLURM_CONF}" -N "${host}" >"${tmp}/log/slurmd.out" 2>&1 &
slurmd_pid=$!

state=""
for ((i = 0; i < 600; i++)); do
  kill -0 "${slurmctld_pid}" 2>/dev/null || fail_start "slurmctld exited at start"
  kill -0 "${slurmd_pid}" 2>/dev/null || fail_start "slurmd exited at start"
  state="$(sinfo -h -n "${host}" -o '%t' 2>/dev/null || true)"
  [[ "${state}" == "idle" ]] && break
  sleep 0.1
done
[[ "${state}" == "idle" ]] || fail_start "node ${host} not idle after 60 s (sinfo state: '${state:-no answer}')"

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

#!/usr/bin/env bash
# bench/submit: Tidepool's durable submission rate (API and CLI) and submit-to-placed latency,
# and Slurm's submission rate, measured side by side in one run on this machine, with the ratios.
#
# The same figures on the etcd store (three etcd members on this machine, fsync on, as a highly
# available Tidepool runs), with its ratio to SQLite's.
#
# Each system is measured at every client count given: at 8 clients a store whose commit takes a
# few milliseconds (etcd's) is bound by that latency, not by the machine, while sbatch already
# fills the CPUs; at 16 each runs at what the machine allows.
#
# Usage: bench/submit/run.sh [--clients C[,C...]] [--jobs N] [--cli-jobs M] [--slurm-jobs S]
#                            [--out DIR] [--no-etcd]
#   --clients C,...  concurrent clients, one measurement of every system per count (default 8,16)
#   --jobs N         jobs through Tidepool's API (default 5000)
#   --cli-jobs M     jobs through `tidepool submit`, one process each, at the first count only
#                    (default 1000)
#   --slurm-jobs S   jobs through sbatch (default 2000); 0 skips Slurm
#   --out DIR        where the JSON figures go (default build/release/bench-submit): for each
#                    count C, tidepool-cC.json, tidepool-etcd-cC.json and slurm-cC.json
#   --no-etcd        skip the etcd store
# Needs the release build (scripts/test or cmake --build --preset release) and, for Slurm, root.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
client_counts=8,16
jobs=5000
cli_jobs=1000
slurm_jobs=2000
out="${repo}/build/release/bench-submit"
with_etcd=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --clients) client_counts="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --cli-jobs) cli_jobs="$2"; shift 2 ;;
    --slurm-jobs) slurm_jobs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-etcd) with_etcd=0; shift ;;
    -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
IFS=, read -r -a counts <<< "${client_counts}"
for c in "${counts[@]}"; do
  [[ "${c}" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --clients: '${c}' is not a count" >&2; exit 2; }
done
tidepool="${repo}/build/release/bin/tidepool"
bench="${repo}/build/release/bench/tidepool_submit_bench"
for binary in "${tidepool}" "${bench}"; do
  [[ -x "${binary}" ]] || { echo "run.sh: ${binary} is missing; build the release preset first" >&2; exit 2; }
done
if [[ ${with_etcd} -eq 1 ]]; then
  command -v etcd > /dev/null || { echo "run.sh: etcd is missing (scripts/setup installs it)" >&2; exit 2; }
  # shellcheck source=bench/etcd_helpers.sh
  source "${repo}/bench/etcd_helpers.sh"
fi
mkdir -p "${out}"

etcd_dir=""
etcd_pids=()
stop_etcd() {
  for pid in "${etcd_pids[@]}"; do kill "${pid}" 2> /dev/null || true; done
  wait 2> /dev/null || true
  [[ -z "${etcd_dir}" ]] || rm -rf "${etcd_dir}"
  etcd_dir=""
  etcd_pids=()
}
trap stop_etcd EXIT

first=1
for c in "${counts[@]}"; do
  cli=$((first == 1 ? cli_jobs : 0))
  first=0
  echo "== Tidepool (API$([[ ${cli} -gt 0 ]] && echo " and CLI")), ${c} clients"
  "${bench}" --tidepool "${tidepool}" --clients "${c}" --jobs "${jobs}" \
    --cli-jobs "${cli}" --json "${out}/tidepool-c${c}.json"
  if [[ ${with_etcd} -eq 1 ]]; then
    echo "== Tidepool on etcd (three members, fsync on), ${c} clients"
    etcd_dir=$(mktemp -d)
    start_etcd_cluster "${etcd_dir}" --max-txn-ops 10000 --max-request-bytes 33554432
    "${bench}" --tidepool "${tidepool}" --clients "${c}" --jobs "${jobs}" \
      --cli-jobs "${cli}" --etcd "${etcd_endpoints}" --json "${out}/tidepool-etcd-c${c}.json"
    stop_etcd
  fi
  if [[ "${slurm_jobs}" -gt 0 ]]; then
    echo "== Slurm (sbatch --hold), ${c} clients"
    bash "${repo}/bench/submit/slurm_baseline.sh" --clients "${c}" --jobs "${slurm_jobs}" \
      --json "${out}/slurm-c${c}.json"
  fi
done

python3 - "${out}" "${client_counts}" <<'PY'
import json, os, sys
out, counts = sys.argv[1], sys.argv[2].split(",")
def figures(name):
    path = os.path.join(out, name)
    return json.load(open(path)) if os.path.exists(path) else None
for c in counts:
    s, e, slurm = (figures(f"{n}-c{c}.json") for n in ("tidepool", "tidepool-etcd", "slurm"))
    print(f"== Side by side, {c} clients")
    rate = slurm["jobs_per_second"] if slurm else None
    if rate:
        print(f"  Slurm sbatch:        {rate:8.0f} jobs/s")
    def line(label, value):
        ratio = f"  ({value / rate:.1f}x Slurm)" if rate else ""
        print(f"  {label:<20} {value:8.0f} jobs/s{ratio}")
    line("Tidepool API:", s["api_jobs_per_second"])
    if s["cli_jobs"]:
        line("Tidepool CLI:", s["cli_jobs_per_second"])
    print(f"  submit-to-placed:    p50 {s['placed_p50_ms']:.1f} ms, p99 {s['placed_p99_ms']:.1f} ms "
          f"({s['nodes']} nodes, {s['pending_backlog']} jobs pending)")
    if e:
        line("Tidepool API (etcd):", e["api_jobs_per_second"])
        print(f"  etcd against SQLite: API {e['api_jobs_per_second'] / s['api_jobs_per_second']:.2f}x"
              + (f", CLI {e['cli_jobs_per_second'] / s['cli_jobs_per_second']:.2f}x"
                 if s["cli_jobs"] and e["cli_jobs"] else "")
              + f"; etcd commits {e['api_commit_ms']:.2f} ms, {e['api_jobs_per_commit']:.1f} jobs each")
PY

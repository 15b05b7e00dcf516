#!/usr/bin/env bash
# bench/submit: Tidepool's durable submission rate (API and CLI) and submit-to-placed latency,
# and Slurm's submission rate, measured side by side in one run on this machine, with the ratios.
#
# The same figures on the etcd store (three etcd members on this machine, fsync on, as a highly
# available Tidepool runs), with its ratio to SQLite's.
#
# Usage: bench/submit/run.sh [--clients C] [--jobs N] [--cli-jobs M] [--slurm-jobs S] [--out DIR]
#                            [--no-etcd]
#   --clients C     concurrent clients for every measurement (default 8)
#   --jobs N        jobs through Tidepool's API (default 5000)
#   --cli-jobs M    jobs through `tidepool submit`, one process each (default 1000)
#   --slurm-jobs S  jobs through sbatch (default 2000); 0 skips Slurm
#   --out DIR       where the JSON figures go (default build/release/bench-submit)
#   --no-etcd       skip the etcd store
# Needs the release build (scripts/test or cmake --build --preset release) and, for Slurm, root.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
clients=8
jobs=5000
cli_jobs=1000
slurm_jobs=2000
out="${repo}/build/release/bench-submit"
with_etcd=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --clients) clients="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --cli-jobs) cli_jobs="$2"; shift 2 ;;
    --slurm-jobs) slurm_jobs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-etcd) with_etcd=0; shift ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
tidepool="${repo}/build/release/bin/tidepool"
bench="${repo}/build/release/bench/tidepool_submit_bench"
for binary in "${tidepool}" "${bench}"; do
  [[ -x "${binary}" ]] || { echo "run.sh: ${binary} is missing; build the release preset first" >&2; exit 2; }
done
mkdir -p "${out}"

echo "== Tidepool (API and CLI)"
"${bench}" --tidepool "${tidepool}" --clients "${clients}" --jobs "${jobs}" \
  --cli-jobs "${cli_jobs}" --json "${out}/tidepool.json"
if [[ ${with_etcd} -eq 1 ]]; then
  echo "== Tidepool on etcd (three members, fsync on)"
  command -v etcd > /dev/null || { echo "run.sh: etcd is missing (scripts/setup installs it)" >&2; exit 2; }
  etcd_dir=$(mktemp -d)
  etcd_pids=()
  stop_etcd() {
    for pid in "${etcd_pids[@]}"; do kill "${pid}" 2> /dev/null || true; done
    wait 2> /dev/null || true
    rm -rf "${etcd_dir}"
  }
  trap stop_etcd EXIT
  # shellcheck source=bench/etcd_helpers.sh
  source "${repo}/bench/etcd_helpers.sh"
  start_etcd_cluster "${etcd_dir}" --max-txn-ops 10000 --max-request-bytes 33554432
  "${bench}" --tidepool "${tidepool}" --clients "${clients}" --jobs "${jobs}" \
    --cli-jobs "${cli_jobs}" --etcd "${etcd_endpoints}" --json "${out}/tidepool-etcd.json"
  stop_etcd
  trap - EXIT
  python3 - "${out}/tidepool.json" "${out}/tidepool-etcd.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
e = json.load(open(sys.argv[2]))
print(f"== etcd against SQLite, {s['clients']} clients")
print(f"  API: SQLite {s['api_jobs_per_second']:.0f} jobs/s, etcd {e['api_jobs_per_second']:.0f} jobs/s "
      f"({e['api_jobs_per_second'] / s['api_jobs_per_second']:.2f}x)")
if s["cli_jobs"]:
    print(f"  CLI: SQLite {s['cli_jobs_per_second']:.0f} jobs/s, etcd {e['cli_jobs_per_second']:.0f} jobs/s "
          f"({e['cli_jobs_per_second'] / s['cli_jobs_per_second']:.2f}x)")
PY
fi
if [[ "${slurm_jobs}" -gt 0 ]]; then
  echo "== Slurm (sbatch --hold)"
  bash "${repo}/bench/submit/slurm_baseline.sh" --clients "${clients}" --jobs "${slurm_jobs}" \
    --json "${out}/slurm.json"
  python3 - "${out}/tidepool.json" "${out}/slurm.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))
slurm = s["jobs_per_second"]
print(f"== Side by side, {t['clients']} clients")
print(f"  Slurm sbatch:        {slurm:8.0f} jobs/s")
print(f"  Tidepool API:        {t['api_jobs_per_second']:8.0f} jobs/s  ({t['api_jobs_per_second'] / slurm:.1f}x Slurm)")
if t["cli_jobs"]:
    print(f"  Tidepool CLI:        {t['cli_jobs_per_second']:8.0f} jobs/s  ({t['cli_jobs_per_second'] / slurm:.1f}x Slurm)")
print(f"  submit-to-placed:    p50 {t['placed_p50_ms']:.1f} ms, p99 {t['placed_p99_ms']:.1f} ms "
      f"({t['nodes']} nodes, {t['pending_backlog']} jobs pending)")
try:
    e = json.load(open(sys.argv[1].replace("tidepool.json", "tidepool-etcd.json")))
    print(f"  Tidepool API (etcd): {e['api_jobs_per_second']:8.0f} jobs/s  ({e['api_jobs_per_second'] / slurm:.1f}x Slurm)")
except FileNotFoundError:
    pass
PY
fi

#!/usr/bin/env bash
# bench/submit: Tidepool's durable submission rate (API and CLI) and submit-to-placed latency,
# and Slurm's submission rate, measured side by side in one run on this machine, with the ratios.
#
# Usage: bench/submit/run.sh [--clients C] [--jobs N] [--cli-jobs M] [--slurm-jobs S] [--out DIR]
#   --clients C     concurrent clients for every measurement (default 8)
#   --jobs N        jobs through Tidepool's API (default 5000)
#   --cli-jobs M    jobs through `tidepool submit`, one process each (default 1000)
#   --slurm-jobs S  jobs through sbatch (default 2000); 0 skips Slurm
#   --out DIR       where the JSON figures go (default build/release/bench-submit)
# Needs the release build (scripts/test or cmake --build --preset release) and, for Slurm, root.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
clients=8
jobs=5000
cli_jobs=1000
slurm_jobs=2000
out="${repo}/build/release/bench-submit"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --clients) clients="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --cli-jobs) cli_jobs="$2"; shift 2 ;;
    --slurm-jobs) slurm_jobs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
PY
fi

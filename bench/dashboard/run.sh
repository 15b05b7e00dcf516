#!/usr/bin/env bash
# bench/dashboard: the web dashboard's speed at scale, measured alone. Runs the browser test's
# scale case (tests/browser/dashboard_test.py: 1,000 nodes of 8 GPUs, 10,000 jobs, headless
# Chromium) with nothing else running, and checks its figures against the budgets themselves: the
# pool view's first paint under 1 s and each view's update under 200 ms of script time. The test
# suite runs the same case beside other tests and fails it only five times over a budget.
#
# Usage: bench/dashboard/run.sh [--repeat R] [--out DIR]
#   --repeat R   runs of the case (default 3); the figures of each are printed, and the
#                exit status is 1 if any run missed a budget
#   --out DIR    where each run's scale.json and screenshots go (default
#                build/release/bench-dashboard/run-K)
# Needs the release build (tidepool), chromium, chromium-driver and python3-selenium
# (scripts/setup installs them).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
repeat=3
out="${repo}/build/release/bench-dashboard"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeat) repeat="${2:-}"; shift 2 ;;
    --out) out="${2:-}"; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "${repeat}" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --repeat: '${repeat}' is not a count" >&2; exit 2; }
[[ -n "${out}" ]] || { echo "run.sh: --out needs a folder" >&2; exit 2; }
tidepool="${repo}/build/release/bin/tidepool"
[[ -x "${tidepool}" ]] || { echo "run.sh: ${tidepool} is missing; build the release preset first" >&2; exit 2; }

status=0
for ((k = 1; k <= repeat; k++)); do
  echo "== the dashboard at 1,000 nodes, run ${k} of ${repeat}"
  mkdir -p "${out}/run-${k}"
  TIDEPOOL_BROWSER_BUDGET_SLACK=1 PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 \
    "${repo}/tests/browser/dashboard_test.py" "${tidepool}" "${repo}" "${out}/run-${k}" scale ||
    status=1
done
exit "${status}"

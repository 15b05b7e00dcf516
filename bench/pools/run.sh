#!/usr/bin/env bash
# Tidepool against FGD on pools derived from openb's node list (derive_pools.py), with the FGD
# protocol (seeds 42-51, medians at 100% of GPU capacity arrived): a placement rule must win by its
# mechanism, not by the one pool it was studied on. Prints, per pool and pod list, both policies'
# GPU allocation and the difference. See bench/README.md.
#
# Usage: bench/pools/run.sh [--traces DIR] [--out DIR] [--lists "default gpuspec10 ..."]
#   --traces DIR   openb traces (default: ../shared/traces/openb beside the repository)
#   --out DIR      where the pools and the results go (default: build/release/bench-pools)
#   --lists NAMES  pod lists by suffix (default: default gpuspec10 gpuspec33 cpu250 multigpu40)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
traces="${repo}/../shared/traces/openb"
out="${repo}/build/release/bench-pools"
lists="default gpuspec10 gpuspec33 cpu250 multigpu40"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --traces) traces="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --lists) lists="$2"; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
tidepool="${repo}/build/release/bin/tidepool"
[[ -x "${tidepool}" ]] || { echo "run.sh: ${tidepool} is missing; build the release preset first" >&2; exit 2; }
[[ -f "${traces}/openb_node_list_gpu_node.csv" ]] || { echo "run.sh: no openb traces in ${traces} (--traces DIR)" >&2; exit 2; }

python3 "${repo}/bench/pools/derive_pools.py" "${traces}/openb_node_list_gpu_node.csv" "${out}/pools"
pods=()
for list in ${lists}; do pods+=(--pods "${traces}/openb_pod_list_${list}.csv"); done
for pool in "${out}"/pools/*.csv; do
  name="$(basename "${pool}" .csv)"
  "${tidepool}" sim pack --nodes "${pool}" "${pods[@]}" --policy fgd,tidepool --seeds 42-51 \
    --out "${out}/${name}" > "${out}/${name}.txt" 2>&1
  echo "== ${name}"
  python3 - "${out}/${name}.txt" <<'PY'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"^openb_pod_list_(\S+)\s+(06-FGD|07-Tidepool)\s+\d+\s+([\d.]+)\s+([\d.]+)", line)
    if m:
        rows.setdefault(m.group(1), {}).setdefault(m.group(2), (float(m.group(3)), float(m.group(4))))
for name, by in sorted(rows.items()):
    fgd, tp = by["06-FGD"], by["07-Tidepool"]
    print(f"  {name:12} FGD {fgd[0]:6.2f}  Tidepool {tp[0]:6.2f}  {tp[0] - fgd[0]:+5.2f} pp"
          f"   fragmentation {fgd[1]:5.2f} / {tp[1]:5.2f}")
PY
done

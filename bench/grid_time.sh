#!/usr/bin/env bash
# Times the whole FGD experiment grid (every published pod list x every policy x seeds 42-51) with
# the release build of `tidepool sim pack`, then one single run (default pod list, seed 42) for
# fgd and for tidepool. Prints wall-clock seconds. See bench/README.md.
#
# Usage: bench/grid_time.sh [--traces DIR] [--bin PATH] [--threads N] [--single-only]
#   --traces DIR   openb traces: node list, pod lists and fgd-results/
#                  (default: ../shared/traces/openb relative to the repository root)
#   --bin PATH     the tidepool binary (default: build/release/bin/tidepool)
#   --threads N    worker threads for the grid (default: the program's default, all cores)
#   --single-only  skip the grid, time only the single runs
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
traces="${repo_root}/../shared/traces/openb"
bin="${repo_root}/build/release/bin/tidepool"
threads=""
single_only=0

while [[ $# -gt 0 ]]; do
  case "$1" in
    --traces) traces="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --single-only) single_only=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "grid_time.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

[[ -d "${traces}" ]] && traces="$(cd "${traces}" && pwd)"
nodes="${traces}/openb_node_list_gpu_node.csv"
default_pods="${traces}/openb_pod_list_default.csv"
fgd_results="${traces}/fgd-results"
for needed in "${nodes}" "${default_pods}" "${fgd_results}/analysis_allo_discrete.csv" \
              "${fgd_results}/analysis_frag_discrete.csv"; do
  if [[ ! -f "${needed}" ]]; then
    echo "grid_time.sh: missing ${needed}" >&2
    echo "  The openb traces (see ../shared/traces/README.md) are not in this checkout;" >&2
    echo "  pass their folder with --traces DIR." >&2
    exit 1
  fi
done
if [[ ! -x "${bin}" ]]; then
  echo "grid_time.sh: no tidepool binary at ${bin}" >&2
  echo "  Build the release preset first (cmake --preset release && cmake --build --preset" >&2
  echo "  release), or pass one with --bin PATH." >&2
  exit 1
fi

out="$(mktemp -d "${TMPDIR:-/tmp}/tidepool-grid-time.XXXXXX")"
trap 'rm -rf "${out}"' EXIT

# timed LABEL COMMAND...: runs COMMAND with its output in a log; prints LABEL and wall seconds.
timed() {
  local label="$1"
  shift
  local log="${out}/${label//[^A-Za-z0-9]/_}.log"
  local TIMEFORMAT=%R
  if ! { time "$@" > "${log}" 2>&1; } 2> "${log}.time"; then
    echo "grid_time.sh: '${label}' failed; the end of its output:" >&2
    tail -n 20 "${log}" >&2
    exit 1
  fi
  printf '%-24s %10s s\n' "${label}" "$(tail -n 1 "${log}.time")"
}

echo "tidepool:  ${bin}"
echo "traces:    ${traces}"
echo "cores:     $(nproc)"
echo
if [[ "${single_only}" -eq 0 ]]; then
  grid_args=(sim pack --nodes "${nodes}" --pods "${traces}" --published-only
             --compare "${fgd_results}" --policy all --seeds 42-51 --out "${out}/grid")
  [[ -n "${threads}" ]] && grid_args+=(--threads "${threads}")
  timed "grid (all runs)" "${bin}" "${grid_args[@]}"
fi
for policy in fgd tidepool; do
  timed "single run: ${policy}" "${bin}" sim pack --nodes "${nodes}" --pods "${default_pods}" \
    --policy "${policy}" --seeds 42 --threads 1 --out "${out}/single-${policy}"
done

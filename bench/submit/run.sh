#!/usr/bin/env bash
# bench/submit: Tidepool's durable submission rate (API and CLI) and submit-to-placed latency,
# and Slurm's submission rate, measured side by side in one run on this machine, with the ratios.
#
# The same figures on the etcd store (three etcd members on this machine, fsync on, as a highly
# available Tidepool runs), with its ratio to SQLite's.
#
# Each system is measured at every client count given: at 8 clients a store whose commit takes a
# few milliseconds (etcd's) is bound by that latency, not by the machine, while sbatch already
# fills the CPUs; at 16 and 32 the SQLite store runs at what the machine allows, while etcd's
# commits carry more jobs each as the clients grow. The API rates of the two stores are
# measured R times, alternating, and their medians compared: one run's rate moves by a fifth from
# run to run on a small shared machine.
#
# Usage: bench/submit/run.sh [--clients C[,C...]] [--jobs N] [--cli-jobs M] [--slurm-jobs S]
#                            [--repeat R] [--out DIR] [--no-etcd]
#   --clients C,...  concurrent clients, one measurement of every system per count
#                    (default 8,16,32)
#   --jobs N         jobs through Tidepool's API (default 5000)
#   --cli-jobs M     jobs through `tidepool submit`, one process each, at the first count only
#                    (default 1000)
#   --slurm-jobs S   jobs through sbatch (default 2000); 0 skips Slurm
#   --repeat R       API runs of each store per count, alternating (default 3; the CLI and Slurm
#                    are measured in the first)
#   --out DIR        where the JSON figures go (default build/release/bench-submit): for each
#                    count C, tidepool-cC.json, tidepool-etcd-cC.json and slurm-cC.json (the first
#                    run), and tidepool[-etcd]-cC-rK.json for run K >= 2
#   --no-etcd        skip the etcd store
# Needs the release build (scripts/test or cmake --build --preset release) and, for Slurm, root.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
client_counts=8,16,32
jobs=5000
cli_jobs=1000
slurm_jobs=2000
out="${repo}/build/release/bench-submit"
with_etcd=1
repeat=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --clients) client_counts="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --cli-jobs) cli_jobs="$2"; shift 2 ;;
    --slurm-jobs) slurm_jobs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-etcd) with_etcd=0; shift ;;
    --repeat) repeat="$2"; shift 2 ;;
    -h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
IFS=, read -r -a counts <<< "${client_counts}"
[[ "${repeat}" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --repeat: '${repeat}' is not a count" >&2; exit 2; }
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
  for ((k = 1; k <= repeat; k++)); do
    cli=$((first == 1 && k == 1 ? cli_jobs : 0))
    suffix=$([[ ${k} -eq 1 ]] || echo "-r${k}")
    echo "== Tidepool (API$([[ ${cli} -gt 0 ]] && echo " and CLI")), ${c} clients, run ${k} of ${repeat}"
    "${bench}" --tidepool "${tidepool}" --clients "${c}" --jobs "${jobs}" \
      --cli-jobs "${cli}" --json "${out}/tidepool-c${c}${suffix}.json"
    if [[ ${with_etcd} -eq 1 ]]; then
      echo "== Tidepool on etcd (three members, fsync on), ${c} clients, run ${k} of ${repeat}"
      etcd_dir=$(mktemp -d)
      start_etcd_cluster "${etcd_dir}" --max-txn-ops 10000 --max-request-bytes 33554432
      "${bench}" --tidepool "${tidepool}" --clients "${c}" --jobs "${jobs}" --cli-jobs "${cli}" \
        --etcd "${etcd_endpoints}" --json "${out}/tidepool-etcd-c${c}${suffix}.json"
      stop_etcd
    fi
  done
  first=0
  if [[ "${slurm_jobs}" -gt 0 ]]; then
    echo "== Slurm (sbatch --hold), ${c} clients"
    bash "${repo}/bench/submit/slurm_baseline.sh" --clients "${c}" --jobs "${slurm_jobs}" \
      --json "${out}/slurm-c${c}.json"
  fi
done

python3 - "${out}" "${client_counts}" "${repeat}" <<'PY'
import json, os, statistics, sys
out, counts, repeat = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
def figures(name):
    path = os.path.join(out, name)
    return json.load(open(path)) if os.path.exists(path) else None
def runs(system, c):
    found = [figures(f"{system}-c{c}{'' if k == 1 else f'-r{k}'}.json") for k in range(1, repeat + 1)]
    return [f for f in found if f]
for c in counts:
    s, e, slurm = (figures(f"{n}-c{c}.json") for n in ("tidepool", "tidepool-etcd", "slurm"))
    on_sqlite = runs("tidepool", c)
    api = statistics.median(f["api_jobs_per_second"] for f in on_sqlite)
    print(f"== Side by side, {c} clients (API: the median of {len(on_sqlite)} runs)")
    rate = slurm["jobs_per_second"] if slurm else None
    if rate:
        print(f"  Slurm sbatch:        {rate:8.0f} jobs/s")
    def line(label, value):
        ratio = f"  ({value / rate:.1f}x Slurm)" if rate else ""
        print(f"  {label:<20} {value:8.0f} jobs/s{ratio}")
    line("Tidepool API:", api)
    if s["cli_jobs"]:
        line("Tidepool CLI:", s["cli_jobs_per_second"])
    print(f"  submit-to-placed:    p50 {s['placed_p50_ms']:.1f} ms, p99 {s['placed_p99_ms']:.1f} ms "
          f"({s['nodes']} nodes, {s['pending_backlog']} jobs pending; first run)")
    if e:
        on_etcd = runs("tidepool-etcd", c)
        etcd_api = statistics.median(f["api_jobs_per_second"] for f in on_etcd)
        line("Tidepool API (etcd):", etcd_api)
        each = ", ".join(f"{f['api_jobs_per_second']:.0f}" for f in on_etcd)
        each_sqlite = ", ".join(f"{f['api_jobs_per_second']:.0f}" for f in on_sqlite)
        print(f"  etcd against SQLite: API {etcd_api / api:.2f}x"
              + (f", CLI {e['cli_jobs_per_second'] / s['cli_jobs_per_second']:.2f}x"
                 if s["cli_jobs"] and e["cli_jobs"] else "")
              + f" (runs: etcd {each}; SQLite {each_sqlite} jobs/s)")
        print(f"  etcd commits {statistics.median(f['api_commit_ms'] for f in on_etcd):.2f} ms, "
              f"{statistics.median(f['api_jobs_per_commit'] for f in on_etcd):.1f} jobs each "
              "(medians)")
PY

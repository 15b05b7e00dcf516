#!/usr/bin/env bash
# bench/scale: the scale of one leader. For each pool size N: a fresh three-member etcd (fsync on),
# one `tidepool server` on it, N agents (8 GPUs each) heartbeating every 2 s with 8 GPU samples,
# and a backlog of pending jobs; measures the heartbeat answer latency, the scheduling pass and
# store commit times, and the leader's CPU and memory (tidepool_scale_bench), then finds the
# largest N whose heartbeat p99 stays under the target, and says what grows with what.
#
# Usage: bench/scale/run.sh [--sizes LIST] [--jobs J] [--pending capacity|quota] [--window S]
#                           [--period S] [--target-ms MS] [--bisect K] [--out DIR] [--bin DIR]
#                           [--perf] [--keep] [more options below]
#   --sizes LIST       pool sizes in agents (= nodes), ascending (default 1000,2500,5000,10000)
#   --jobs J           jobs kept pending (default 100000)
#   --pending WHY      capacity: the pool is filled first by one 8-GPU job per node and the
#                      backlog waits for GPUs (default); quota: the backlog's tenant may use one GPU
#   --window S         seconds measured per size (default 60)
#   --period S         seconds between an agent's heartbeats (default 2)
#   --target-ms MS     the heartbeat p99 a size must stay under, with no beat failed (default 100)
#   --bisect K         then K more sizes between the largest that held and the smallest that did
#                      not (default 2; 0: none)
#   --max-txn-ops N    etcd's --max-txn-ops and the store's max_txn_ops (default 10000, as
#                      deploy/ha)
#   --max-request-bytes N   etcd's --max-request-bytes and the store's (default 33554432)
#   --array-size N     jobs per submission, a job array (default 1000)
#   --bench-args "..." more options for tidepool_scale_bench (see its --help)
#   --out DIR          where the JSON figures go (default build/release/bench-scale)
#   --bin DIR          the tidepool programs to measure (default build/release/bin)
#   --perf             record the server with perf over each window: ${out}/perf-N.data
#   --keep             keep each size's folder (configs, logs, etcd data) and print where
# Needs the release build (tidepool, tidepool_scale_bench) and etcd. Every process it starts is
# stopped by its PID, and its temporary folders removed, when it exits.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
sizes="1000,2500,5000,10000"
jobs=100000
pending=capacity
window=60
period=2
target_ms=100
bisect=2
max_txn_ops=10000
max_request_bytes=33554432
array_size=1000
bench_args=""
out="${repo}/build/release/bench-scale"
keep=0
perf=0
bin="${repo}/build/release/bin"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sizes) sizes="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --pending) pending="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --period) period="$2"; shift 2 ;;
    --target-ms) target_ms="$2"; shift 2 ;;
    --bisect) bisect="$2"; shift 2 ;;
    --max-txn-ops) max_txn_ops="$2"; shift 2 ;;
    --max-request-bytes) max_request_bytes="$2"; shift 2 ;;
    --array-size) array_size="$2"; shift 2 ;;
    --bench-args) bench_args="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --perf) perf=1; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
tidepool="${bin}/tidepool"
bench="${repo}/build/release/bench/tidepool_scale_bench"
for binary in "${tidepool}" "${bench}"; do
  [[ -x "${binary}" ]] || { echo "run.sh: ${binary} is missing; build the release preset first" >&2; exit 2; }
done
command -v etcd > /dev/null || { echo "run.sh: etcd is missing (scripts/setup installs it)" >&2; exit 2; }
mkdir -p "${out}"
# Each agent holds a connection: the server and the bench need a descriptor per agent.
ulimit -n "$(ulimit -Hn)" 2> /dev/null || true

pids=()
dirs=()
cleanup() {
  for pid in "${pids[@]}"; do kill "${pid}" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do wait "${pid}" 2> /dev/null || true; done
  pids=()
  if [[ ${keep} -eq 0 ]]; then
    for dir in "${dirs[@]}"; do rm -rf "${dir}"; done
  fi
  dirs=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=bench/etcd_helpers.sh
source "${repo}/bench/etcd_helpers.sh"

# run_size N: one measurement; its figures in ${out}/scale-N.json. Exit status 0 when it ran.
run_size() {
  local n="$1"
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/tidepool-scale-XXXXXX")
  dirs+=("${dir}")
  python3 - "${dir}" "${n}" <<'PY'
import sys
dir, n = sys.argv[1], int(sys.argv[2])
# 32 nodes of 8 H100 per leaf, 8 leaves per spine.
lines = ["site: scale", "spines:"]
leaves = (n + 31) // 32
for spine in range((leaves + 7) // 8):
    lines += [f"  - name: spine-{spine}", "    leaves:"]
    for leaf in range(spine * 8, min(leaves, spine * 8 + 8)):
        count = min(32, n - leaf * 32)
        lines += [f"      - name: leaf-{leaf}", "        nodes:",
                  f"          - name: l{leaf:04d}", f"            count: {count}",
                  "            gpu_model: H100", "            gpus: 8", "            cpus: 96",
                  "            memory_gib: 1024"]
open(f"{dir}/cluster.yaml", "w").write("\n".join(lines) + "\n")
# prod may use every GPU but one (the pool's filler and, with --pending capacity, the backlog);
# backlog one GPU and no more (the backlog with --pending quota).
open(f"{dir}/tenants.yaml", "w").write(f"""orgs:
  - name: bench
    tenants:
      - name: prod
        quota:
          H100: {{guaranteed_gpus: {n * 8 - 1}}}
      - name: backlog
        quota:
          H100: {{guaranteed_gpus: 1, borrowing_limit_gpus: 0}}
""")
PY
  start_etcd_cluster "${dir}" --max-txn-ops "${max_txn_ops}" \
    --max-request-bytes "${max_request_bytes}" --quota-backend-bytes 8589934592 \
    --auto-compaction-mode periodic --auto-compaction-retention 1h
  pids+=("${etcd_pids[@]}")
  local endpoints="${etcd_endpoints}"
  local member_pids
  member_pids=$(IFS=,; echo "${etcd_pids[*]}")
  cat > "${dir}/server.yaml" <<EOF
listen: 127.0.0.1:0
cluster: cluster.yaml
tenants: tenants.yaml
database: ${dir}/tidepool.db
admin_token_file: ${dir}/admin.token
logs: ${dir}/logs
rate_limit: {per_second: 0}
admission: {max_pending_jobs: 10000000, submissions_per_second: 0}
store: {kind: etcd, endpoints: [${endpoints}], prefix: /scale, max_txn_ops: ${max_txn_ops}, max_request_bytes: ${max_request_bytes}}
EOF
  "${tidepool}" server --config "${dir}/server.yaml" --port-file "${dir}/port" > "${dir}/server.log" 2>&1 &
  local server=$!
  pids+=("${server}")
  # Ready once it leads: the port written and the first admin token.
  for _ in $(seq 600); do
    [[ -s "${dir}/port" && -s "${dir}/admin.token" ]] && break
    kill -0 "${server}" 2> /dev/null || break
    sleep 0.1
  done
  if [[ ! -s "${dir}/port" || ! -s "${dir}/admin.token" ]]; then
    echo "run.sh: the server did not start; its log:" >&2
    tail -20 "${dir}/server.log" >&2
    return 1
  fi
  port=$(head -1 "${dir}/port")
  local status=0
  local -a perf_args=()
  if [[ ${perf} -eq 1 ]]; then perf_args=(--perf "${out}/perf-${n}.data"); fi
  # shellcheck disable=SC2086 # bench_args are words
  "${bench}" "${perf_args[@]}" --server "127.0.0.1:${port}" --cluster "${dir}/cluster.yaml" \
    --admin-token-file "${dir}/admin.token" --server-pid "${server}" --etcd-pids "${member_pids}" \
    --jobs "${jobs}" --pending "${pending}" --window "${window}" --period "${period}" \
    --array-size "${array_size}" --json "${out}/scale-${n}.json" ${bench_args} || status=$?
  if [[ ${status} -ne 0 ]]; then
    echo "run.sh: the bench failed at ${n} agents (status ${status}); the server log's tail:" >&2
    tail -20 "${dir}/server.log" >&2
    rm -f "${out}/scale-${n}.json"
  fi
  if [[ ${keep} -eq 1 ]]; then echo "  (kept: ${dir})"; fi
  cleanup
  return "${status}"
}

# held N: whether the figures of size N meet the target (p99 under it, nothing failed or refused).
held() {
  python3 - "${out}/scale-$1.json" "${target_ms}" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except FileNotFoundError:
    sys.exit(1)
h = r["heartbeats"]
ok = h["p99_ms"] < float(sys.argv[2]) and h["failed"] == 0 and h["refused"] == 0 and h["sent"] > 0
sys.exit(0 if ok else 1)
PY
}

rm -f "${out}"/scale-*.json
ran=()
for n in ${sizes//,/ }; do
  echo "== ${n} agents, ${jobs} pending jobs (${pending})"
  run_size "${n}" || true
  ran+=("${n}")
done
# Bisection between the largest size that held and the smallest above it that did not.
for _ in $(seq "${bisect}"); do
  lo=0
  hi=0
  for n in $(printf '%s\n' "${ran[@]}" | sort -n); do
    if held "${n}"; then
      if [[ ${hi} -eq 0 ]]; then lo=${n}; fi
    elif [[ ${hi} -eq 0 && ${lo} -gt 0 ]]; then
      hi=${n}
    fi
  done
  [[ ${lo} -gt 0 && ${hi} -gt 0 ]] || break
  mid=$(((lo + hi) / 2 / 250 * 250))
  [[ ${mid} -gt ${lo} && ${mid} -lt ${hi} ]] || break
  echo "== ${mid} agents (between ${lo}, which held, and ${hi}, which did not)"
  run_size "${mid}" || true
  ran+=("${mid}")
done

python3 - "${out}" "${target_ms}" <<'PY'
import glob, json, os, sys
out, target = sys.argv[1], float(sys.argv[2])
runs = sorted((json.load(open(f)) for f in glob.glob(os.path.join(out, "scale-*.json"))),
              key=lambda r: r["agents"])
if not runs:
    print("no size ran to the end")
    sys.exit(1)
print(f"\n== one leader on etcd (three members): heartbeats every {runs[0]['period_s']:g} s, "
      f"{runs[0]['pending_jobs']} jobs pending ({runs[0]['pending_for']})")
print(f"{'agents':>7} {'beats/s':>8} {'failed':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
      f"{'pass p50':>9} {'pass p99':>9} {'commit p50':>11} {'commits/s':>10} {'CPU %':>6} "
      f"{'RSS MiB':>8} {'etcd CPU %':>10} {'others %':>8}")
held = []
for r in runs:
    h = r["heartbeats"]
    ok = h["p99_ms"] < target and h["failed"] == 0 and h["refused"] == 0
    if ok:
        held.append(r["agents"])
    print(f"{r['agents']:>7} {r['beats_per_second']:>8.0f} {h['failed'] + h['refused']:>7} "
          f"{h['p50_ms']:>8.1f} {h['p99_ms']:>8.1f} {h['max_ms']:>8.0f} "
          f"{r['pass_ms']['p50']:>9.1f} {r['pass_ms']['p99']:>9.1f} {r['commit_ms']['p50']:>11.1f} "
          f"{r['commit_ms']['per_second']:>10.1f} {r['server_cpu_percent']:>6.0f} "
          f"{r['server_rss_mib']:>8.0f} {r['etcd_cpu_percent']:>10.0f} "
          f"{r['other_processes_cpu_percent']:>8.0f}{'' if ok else '  *'}")
print(f"(* p99 at or over {target:g} ms, or heartbeats that failed; CPU % of one core; others: "
      f"what other processes of the machine ran meanwhile)")
print(f"largest pool held (p99 < {target:g} ms, no failed beat): "
      + (f"{max(held)} agents" if held else "none of the sizes run"))

# What grows with what.
print("\n== what grows with what")
for r in runs:
    g = r["growth"]
    if g:
        curve = ", ".join(f"{p['pending']}: {p['pass_mean_ms']:.1f}" for p in g)
        print(f"  {r['agents']} agents: mean pass ms at pending jobs {curve}")
for r in runs:
    print(f"  {r['agents']} agents: {r['rss_per_pending_job_kib']:.2f} KiB of server RSS per "
          f"pending job; pass with nothing pending {r['pass_ms_nothing_pending']['mean']:.1f} ms")
def slope(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0
if len(runs) >= 2:
    xs = [r["agents"] for r in runs]
    registered = [next(p["rss_mib"] for p in r["phases"] if p["phase"].endswith("registered"))
                  for r in runs]
    print(f"  server RSS per agent (registered, no jobs): {1024 * slope(xs, registered):.1f} KiB")
    print(f"  server CPU per heartbeat: "
          + ", ".join(f"{r['agents']}: {10 * r['server_cpu_percent'] / r['beats_per_second']:.2f} ms"
                      for r in runs if r["beats_per_second"] > 0))
summary = {"target_ms": target, "largest_held": max(held) if held else 0, "runs": runs}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
print(f"\nfigures: {out}/scale-*.json, {out}/summary.json")
PY

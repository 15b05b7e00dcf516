#!/usr/bin/env bash
# `tidepool shadow --slurm` against a real Slurm: a throw-away cluster on 127.0.0.1
# (bench/slurm_cluster_helpers.sh: munged, slurmctld, 4 slurmd of 4 fake GPUs each, in a private
# network namespace), 200 short jobs submitted with sbatch (1, 2 or 4 GPUs, some over 2 nodes, of
# three accounts), and the shadow following squeue until every job has ended (the test cluster has
# no slurmdbd, so sacct is off: the squeue-only path). Then it checks the report against what
# Slurm itself shows:
#   - every submitted job is listed exactly once, and nothing else;
#   - Slurm's start time and nodes in the report are those squeue shows for the job;
#   - Tidepool never starts a job before its submission, and never gives a GPU to two jobs at once;
#   - the summary has both schedules, each with all 200 jobs started;
#   - the gray rollout, on the saved squeue --json read as a trace: with 30% of jobs by hash, and
#     with whole tenants, only the chosen jobs are compared, the others keep Slurm's start unless
#     counted as held up, and no GPU is shared.
# Needs root (SlurmUser=root, mknod) and Debian's slurm-wlm and munge; exits 77 (ctest: skipped),
# saying why, when it is not root or Slurm cannot start. Every daemon is stopped by PID and the
# folder removed at exit (kept, for a look, with SHADOW_TEST_KEEP=1).
#
# Usage: shadow_slurm_test.sh TIDEPOOL_BINARY SOURCE_DIR
set -euo pipefail

tidepool="$(realpath "${1:?usage: shadow_slurm_test.sh TIDEPOOL_BINARY SOURCE_DIR}")"
source_dir="$(realpath "${2:?usage: shadow_slurm_test.sh TIDEPOOL_BINARY SOURCE_DIR}")"
jobs=200
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

[[ "$(id -u)" -eq 0 ]] || skip "needs root (the test cluster runs with SlurmUser=root and makes device nodes)"
export PATH="${PATH}:/usr/sbin:/sbin"
for bin in munged slurmctld slurmd sbatch squeue sinfo; do
  command -v "${bin}" >/dev/null 2>&1 || skip "${bin} is not installed (apt-get install slurm-wlm munge)"
done

# shellcheck source=../bench/slurm_cluster_helpers.sh
source "${source_dir}/bench/slurm_cluster_helpers.sh"
slurm_enter_netns shadow_slurm_test "${BASH_SOURCE[0]}" "$@"

work="$(mktemp -d -t tp-shadow.XXXXXX)"
chmod 0711 "${work}"  # munged wants every folder above its socket searchable by all
shadow_pid=""
cleanup() {
  local rc=$?
  trap - EXIT
  set +e
  [[ -z "${shadow_pid}" ]] || { kill -TERM "${shadow_pid}" 2>/dev/null; wait "${shadow_pid}" 2>/dev/null; }
  if [[ ${#slurm_cluster_pids[@]} -gt 0 ]]; then
    timeout 30 scancel --quiet --partition=shadow >/dev/null 2>&1
    slurm_cluster_stop
  fi
  if [[ -n "${SHADOW_TEST_KEEP:-}" ]]; then
    echo "kept ${work}"
  else
    rm -rf -- "${work}"
  fi
  exit "${rc}"
}
trap cleanup EXIT

# The main scheduler runs at every submission and end; backfill every second.
slurm_cluster_start "${work}/slurm" shadow 4 4 16 "bf_interval=1,sched_min_interval=0" \
  || skip "Slurm could not start on this machine (see the logs above)"

# 200 jobs of 0.2 to 0.9 s: 1, 2 or 4 GPUs on one node, every tenth job 4 GPUs on each of 2 nodes.
cd "${work}/slurm/work"
accounts=(vision speech ads)
: >"${work}/submitted"
t0=$(date +%s)
for ((i = 0; i < jobs; i++)); do
  gres=$((1 << (i % 3)))
  nodes=1
  ((i % 10 == 9)) && { gres=4; nodes=2; }
  id="$(sbatch --parsable -A "${accounts[i % 3]}" -N "${nodes}" --gres="gpu:${gres}" \
    -o /dev/null --wrap "sleep 0.$((2 + i % 8))")" || fail "sbatch refused job ${i}"
  echo "${id}" >>"${work}/submitted"
done
echo "submitted ${jobs} jobs in $(($(date +%s) - t0)) s"

# The shadow follows squeue every second until every job has ended (at most 90 s).
timeout 90 "${tidepool}" shadow --slurm --interval 1s --until-done --format json \
  --out "${work}/report" >"${work}/report.json" 2>"${work}/shadow.err" &
shadow_pid=$!
wait "${shadow_pid}" || { cat "${work}/shadow.err" >&2; fail "tidepool shadow failed"; }
shadow_pid=""
grep -q "sacct does not answer" "${work}/shadow.err" \
  || fail "expected the note that sacct does not answer (no slurmdbd here)"
echo "all ended after $(($(date +%s) - t0)) s"

# What Slurm itself shows: job id, start (local time), nodes.
squeue -h -t all -o '%i|%S|%N' >"${work}/squeue.txt"

python3 - "${work}" "${jobs}" <<'EOF'
import json, subprocess, sys, time
work, jobs = sys.argv[1], int(sys.argv[2])
report = json.load(open(f"{work}/report.json"))
submitted = [line.strip() for line in open(f"{work}/submitted") if line.strip()]
rows = report["jobs"]
ids = [r["id"] for r in rows]
def check(ok, text):
    if not ok:
        print("FAIL:", text, file=sys.stderr)
        sys.exit(1)
check(len(ids) == len(set(ids)), "a job is listed twice")
check(sorted(ids, key=int) == sorted(submitted, key=int),
      f"listed {len(ids)} jobs, submitted {len(submitted)}: they differ")
def expand(hostlist):
    return subprocess.run(["scontrol", "show", "hostnames", hostlist], capture_output=True,
                          text=True, check=True).stdout.split()
slurm = {}
for line in open(f"{work}/squeue.txt"):
    job, start, nodes = line.strip().split("|")
    slurm[job] = (int(time.mktime(time.strptime(start, "%Y-%m-%dT%H:%M:%S"))), expand(nodes))
held = {}
for r in rows:
    check(r["state"] == "ended" and r["chosen"], f"job {r['id']}: {r['state']}, chosen {r['chosen']}")
    start, nodes = slurm[r["id"]]
    seen = r["observed"]
    check(seen["start"] == start, f"job {r['id']}: Slurm's start {seen['start']}, squeue shows {start}")
    names = [p.split(":")[0] for p in seen["nodes"].split()]
    check(sorted(names) == sorted(nodes), f"job {r['id']}: Slurm's nodes {names}, squeue shows {nodes}")
    ours = r["tidepool"]
    check(ours["start"] is not None and ours["start"] >= r["submit"],
          f"job {r['id']}: Tidepool starts it at {ours['start']}, submitted at {r['submit']}")
    check(ours["end"] is not None, f"job {r['id']}: no end in Tidepool's schedule")
    gpus = 0
    for place in ours["nodes"].split():
        check(place.count(":") == 1, f"job {r['id']}: a place without GPUs in Tidepool's schedule: {r}")
        node, ranges = place.split(":")
        for part in ranges.split(","):
            a, _, b = part.partition("-")
            for g in range(int(a), int(b or a) + 1):
                held.setdefault((node, g), []).append((ours["start"], ours["end"], r["id"]))
                gpus += 1
    check(gpus == r["gpus"], f"job {r['id']}: {gpus} GPUs in Tidepool's schedule, asked {r['gpus']}")
for gpu, spans in held.items():
    spans.sort()
    for a, b in zip(spans, spans[1:]):
        check(a[1] <= b[0], f"GPU {gpu} held by jobs {a[2]} and {b[2]} at once")
for side in ("observed", "tidepool"):
    s = report["summary"][side]
    check(s["jobs"] == jobs and s["started"] == jobs, f"{side} summary: {s}")
    check(s["conflicts"] == 0, f"{side} summary has conflicts: {s}")
    for key in ("wait_mean_s", "wait_p50_s", "wait_p95_s", "makespan_s", "gpu_allocation_percent",
                "fragmentation_percent", "nodes_per_multi_gpu_job", "slowdown_mean"):
        check(key in s, f"{side} summary lacks {key}")
print(f"ok: {jobs} jobs listed once each; Slurm's starts and nodes as squeue shows them; "
      f"Tidepool's after submission, no GPU shared")
EOF
# The gray rollout, offline on what Slurm shows now (a saved squeue --json read as a trace):
# 30% of jobs by hash, then whole tenants (the first seed that takes one or two of the three).
squeue --json >"${work}/squeue.json"
sinfo --json >"${work}/sinfo.json"
python3 - "${tidepool}" "${work}" <<'EOF'
import json, subprocess, sys
tidepool, work = sys.argv[1], sys.argv[2]
def check(ok, text):
    if not ok:
        print("FAIL:", text, file=sys.stderr)
        sys.exit(1)
def shadow(*args):
    out = subprocess.run([tidepool, "shadow", "--trace", f"{work}/squeue.json", "--sinfo",
                          f"{work}/sinfo.json", "--format", "json", *args],
                         capture_output=True, text=True)
    check(out.returncode == 0, f"tidepool shadow {' '.join(args)}: {out.stderr}")
    return json.loads(out.stdout)
def check_rollout(report, what):
    rows = report["jobs"]
    chosen = [r for r in rows if r["chosen"]]
    check(0 < len(chosen) < len(rows), f"{what}: {len(chosen)} of {len(rows)} jobs chosen")
    for side in ("observed", "tidepool"):
        check(report["summary"][side]["jobs"] == len(chosen), f"{what}: {side} summary")
    held = {}
    for r in rows:
        ours, seen = r["tidepool"], r["observed"]
        check(ours["start"] is not None, f"{what}: job {r['id']} never starts")
        if not r["chosen"]:
            check(ours["start"] - seen["start"] == r["displaced_s"] >= 0,
                  f"{what}: job {r['id']} left to Slurm moved: {seen} -> {ours}")
        for place in ours["nodes"].split():
            node, ranges = place.split(":")
            for part in ranges.split(","):
                a, _, b = part.partition("-")
                for g in range(int(a), int(b or a) + 1):
                    held.setdefault((node, g), []).append((ours["start"], ours["end"], r["id"]))
    for gpu, spans in held.items():
        spans.sort()
        for a, b in zip(spans, spans[1:]):
            check(a[1] <= b[0], f"{what}: GPU {gpu} held by jobs {a[2]} and {b[2]} at once")
    return len(chosen), report["displaced"]
n, moved = check_rollout(shadow("--share", "30%", "--by", "hash"), "30% by hash")
print(f"ok: 30% by hash: {n} jobs to Tidepool, {moved} of Slurm's held up, no GPU shared")
for seed in range(50):
    report = shadow("--share", "30%", "--by", "tenant", "--seed", str(seed))
    if len(report["share"]["tenants"]) in (1, 2):
        break
tenants = report["share"]["tenants"]
check(len(tenants) in (1, 2), "no seed below 50 takes one or two tenants of three")
for r in report["jobs"]:
    check(r["chosen"] == (r["tenant"] in tenants), f"job {r['id']} of {r['tenant']}: chosen {r['chosen']}")
n, moved = check_rollout(report, "30% by tenant")
print(f"ok: 30% by tenant (seed {seed}: {', '.join(tenants)}): {n} jobs to Tidepool, {moved} of Slurm's held up")
EOF
# Both summaries, for the log.
sed -n '/^figure/,$p' "${work}/report/report.txt"

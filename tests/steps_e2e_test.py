#!/usr/bin/env python3
"""Step telemetry end to end: data/examples/steps/allreduce-gang.yaml, the shipped all-reduce
example, run as a gang of 2 tasks x 2 GPUs on a real `tidepool server` on 127.0.0.1 with two agents
of fake GPUs (2 H100 each), its tasks meeting at MASTER_ADDR:MASTER_PORT and all-reducing over
loopback TCP, each step reported through data/examples/steps/tidepool_steps.py.

usage: steps_e2e_test.py TIDEPOOL SOURCE_DIR

Checks, once the job has succeeded:
  - GET /v1/jobs/ID has a step_summary with every step of both tasks (2 x STEPS), step-time
    quantiles, the communication share, the all-reduce's bytes and bandwidth and the MFU (the spec
    declares model_flops_per_step; the fake GPUs are H100s);
  - `tidepool job ID` shows them;
  - the communication share the server computed from the reported lines is within 5% (relative) of
    the job's own measurement: each rank prints its loop's wall time and compute time by its own
    clock, and the job's share is 1 - sum(compute) / sum(wall) over both ranks.
Prints "steps_e2e: job comm share J, server comm share S (difference D%), ...".

Every wait polls with a deadline; every process started here is stopped by its PID at the end.
"""

import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from service_e2e_test import OPENER, Failure, Pool, check, wait_until  # noqa: E402

OVERALL_S = 60
TOLERANCE = 0.05  # relative


class StepsPool(Pool):
    """Two nodes of 2 fake H100 each, one tenant `vision` (the example's) owning them."""

    def tenants_yaml(self):
        total = len(self.nodes) * self.gpus_per_node
        return "\n".join([
            "orgs:",
            "  - name: research",
            "    tenants:",
            "      - name: vision",
            f"        quota: {{H100: {{guaranteed_gpus: {total}}}}}",
        ]) + "\n"

    def text(self, path):
        request = urllib.request.Request(self.base + path)
        request.add_header("Authorization", "Bearer " + self.api.token)
        with OPENER.open(request, timeout=10) as response:
            return response.read().decode("utf-8", errors="replace")

    def cli(self, *args):
        env = dict(os.environ, TIDEPOOL_SERVER=self.base, TIDEPOOL_TOKEN=self.api.token,
                   XDG_CONFIG_HOME=self.path("xdg"))
        env.pop("TIDEPOOL_CONFIG", None)
        env.pop("TIDEPOOL_CA_CERT", None)
        done = subprocess.run([self.tidepool, *args], env=env, capture_output=True, text=True,
                              timeout=30, check=False)
        check(done.returncode == 0, f"tidepool {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout


def own_measure(log):
    """The job's own figures: its ranks' `allreduce_job:` lines, summed."""
    ranks = [dict(kv.split("=", 1) for kv in line.split()[1:])
             for line in log.splitlines() if line.startswith("allreduce_job: rank=")]
    return ranks


def run(tidepool, source_dir):
    started = time.monotonic()
    pool = StepsPool(tidepool, 2, 2)
    ok = False
    try:
        pool.start_server()
        pool.start_agents()
        steps_dir = os.path.join(os.path.abspath(source_dir), "data", "examples", "steps")
        with open(os.path.join(steps_dir, "allreduce-gang.yaml"), encoding="utf-8") as f:
            spec = f.read().replace("${DEMO_DIR}", steps_dir)
        steps = int(re.search(r'(?m)^  STEPS: "(\d+)"', spec).group(1))
        pool.write("allreduce-gang.yaml", spec)
        job = pool.submit(pool.path("allreduce-gang.yaml"))
        print(f"job {job} submitted at {time.monotonic() - started:.1f} s")

        def ended():
            view = pool.api.get(f"/v1/jobs/{job}")
            return view if view["state"] in ("succeeded", "failed", "cancelled") else None

        view = wait_until("the job ends", ended, OVERALL_S - (time.monotonic() - started), 0.2)
        print(f"job {job} {view['state']} at {time.monotonic() - started:.1f} s on "
              f"{', '.join(p['node'] for p in view.get('last_placement', view['placement']))}")
        check(view["state"] == "succeeded", f"the job did not succeed: {view}")
        check(len(view.get("ran_on", [])) == 2, f"the gang did not span both nodes: {view}")

        summary = view.get("step_summary")
        check(summary is not None, f"the job shows no step_summary: {view}")
        check(summary["steps"] == 2 * steps,
              f"{summary['steps']} steps reported, expected {2 * steps}: {summary}")
        check(summary.get("last_step") == steps - 1, f"last step: {summary}")
        for key in ("p50_us", "p90_us", "p99_us", "comm_share", "mean_compute_us",
                    "mean_allreduce_us", "mean_allreduce_bytes", "allreduce_bus_bytes_per_s",
                    "mfu"):
            check(key in summary, f"step_summary has no {key}: {summary}")
        check(summary["comm_share_source"] == "step_minus_compute", f"source: {summary}")
        check(summary["mean_allreduce_bytes"] == 4 * int(
            re.search(r'(?m)^  ALLREDUCE_FLOATS: "(\d+)"', spec).group(1)), f"bytes: {summary}")
        check("refused_lines" not in summary, f"lines were refused: {summary}")

        shown = pool.cli("job", str(job))
        for label in ("Steps:", "Comm share:", "All-reduce:", "MFU:"):
            check(label in shown, f"`tidepool job {job}` shows no '{label}':\n{shown}")
        print("\n".join(line for line in shown.splitlines()
                        if line.strip().split(":")[0] in ("Steps", "Comm share", "All-reduce",
                                                          "MFU")))

        ranks = []
        for task in (0, 1):
            ranks += own_measure(pool.text(f"/v1/jobs/{job}/logs?task={task}"))
        check(len(ranks) == 2, f"expected the measurement of 2 ranks in the logs, got {ranks}")
        wall = sum(int(r["wall_us"]) for r in ranks)
        compute = sum(int(r["compute_us"]) for r in ranks)
        own = 1 - compute / wall
        server = summary["comm_share"]
        difference = abs(server - own) / own
        print(f"steps_e2e: job comm share {own:.4f} (its own clock, ranks "
              f"{', '.join(r['comm_share'] for r in ranks)}), server comm share {server:.4f} "
              f"(difference {100 * difference:.2f}%, bound {100 * TOLERANCE:.0f}%); "
              f"step p50 {summary['p50_us'] / 1000:.1f} ms, all-reduce "
              f"{summary['mean_allreduce_us'] / 1000:.1f} ms of {summary['mean_allreduce_bytes']} "
              f"bytes, MFU {100 * summary['mfu']:.1f}%")
        check(difference <= TOLERANCE,
              f"the server's comm share {server:.4f} is {100 * difference:.1f}% off the job's "
              f"own {own:.4f}")
        check(time.monotonic() - started < OVERALL_S,
              f"the run took {time.monotonic() - started:.0f} s, over {OVERALL_S} s")
        print(f"PASS in {time.monotonic() - started:.0f} s")
        ok = True
    finally:
        if not ok:
            pool.show_logs()
        pool.close(keep=False)
    return 0


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return run(argv[0], argv[1])
    except Failure as failure:
        print(f"FAIL: {failure}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

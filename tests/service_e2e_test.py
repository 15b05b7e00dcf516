#!/usr/bin/env python3
"""The demo's inference service end to end: a real `tidepool server` on 127.0.0.1, agents of
fake GPUs, data/examples/demo/service.yaml submitted as it ships (its folder and first port
filled in), and data/examples/demo/load_generator.py reading the service's endpoints from the API
(--service) while its load steps up and down.

usage: service_e2e_test.py TIDEPOOL SOURCE_DIR [NODES]

  - A low rate that one replica serves; the service is at 1 replica.
  - A step up to a rate that needs about 3: the service has as many replicas ready as it wants
    (at least 3) within its stable_window + 10 s of the step (GET /v1/services/ID every 0.5 s).
  - Back down: a replica is drained (its phase "draining", then its job cancelled "drained"),
    and the load generator, which stops sending to it once it leaves the endpoints, has had no
    request fail over the whole run.
Prints "service_e2e: step up reached N replicas in X s (bound Y s); failed requests F; drained K".

NODES (default 4, with 2 GPUs each; 1: one node of 4 GPUs): the pool's nodes, one agent each,
all with --address 127.0.0.1: the nodes share one machine's ports, which the server's port per
replica (unique among the replicas at one address) keeps apart, and the replicas spread over them.

Every wait polls with a deadline; every process started here is stopped by its PID at the end.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

LOW_RATE, HIGH_RATE = 5, 40  # requests/s: 1 replica, ~3 replicas (service.yaml's comment)
LOW_SECONDS = 6  # then HIGH_RATE for the bound on the step up, then LOW_RATE until the end
HIGH_REPLICAS = 3  # the count the step up must reach at least
POLL_S = 0.5
OVERALL_S = 120  # the whole run, setup included, must end before this


class Failure(Exception):
    """A check failed."""


def check(condition, message):
    if not condition:
        raise Failure(message)


def wait_until(what, predicate, timeout_s, interval_s=0.1):
    """Polls `predicate` until it returns a true value (returned); Failure after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except (OSError, ValueError) as error:  # not up yet (refused, no file yet): again
            last_error = error
        time.sleep(interval_s)
    raise Failure(f"not within {timeout_s:.0f} s: {what}" +
                  (f" (last error: {last_error})" if last_error else ""))


def free_ports(count):
    """The first of `count` consecutive ports free on 127.0.0.1 now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
        taken = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                taken.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in taken:
                s.close()
    raise Failure(f"found no {count} consecutive free ports")


# The API on 127.0.0.1: no proxy of the environment in between.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Api:
    def __init__(self, base, token):
        self.base, self.token = base, token

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Authorization", "Bearer " + self.token)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with OPENER.open(request, timeout=10) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raise Failure(f"{method} {path}: HTTP {error.code} {error.read()[:500]!r}") from None

    def get(self, path):
        return self.call("GET", path)


class Pool:
    """A server and its agents in a scratch folder; close() stops them by PID."""

    def __init__(self, tidepool, nodes, gpus_per_node):
        self.tidepool = tidepool
        self.work = tempfile.mkdtemp(prefix="tidepool-service-e2e-test.")
        os.chmod(self.work, 0o711)  # the agents, as root, run tasks as uids of their own
        self.agents, self.others, self.server = [], [], None
        self.nodes = [f"node-{i}" for i in range(1, nodes + 1)]
        self.gpus_per_node = gpus_per_node
        self.write("cluster.yaml", self.cluster_yaml())
        self.write("tenants.yaml", self.tenants_yaml())
        self.write("server.yaml", "\n".join([
            f"cluster: {self.work}/cluster.yaml",
            f"tenants: {self.work}/tenants.yaml",
            f"database: {self.work}/tidepool.db",
            f"logs: {self.work}/logs",
            "tick: 1s",
            "heartbeat_timeout: 5s",
            "simulate_unregistered_nodes: false",
        ]) + "\n")

    def path(self, name):
        return os.path.join(self.work, name)

    def write(self, name, text, mode=0o644):
        with open(os.open(self.path(name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w",
                  encoding="utf-8") as out:
            out.write(text)

    def cluster_yaml(self):
        lines = ["site: e2e", "spines:", "  - name: spine-1", "    leaves:",
                 "      - name: leaf-1", "        nodes:"]
        for node in self.nodes:
            lines.append(f"          - {{name: {node}, gpu_model: H100, "
                         f"gpus: {self.gpus_per_node}, cpus: 64, memory_gib: 512}}")
        return "\n".join(lines) + "\n"

    def tenants_yaml(self):
        total = len(self.nodes) * self.gpus_per_node
        return "\n".join([
            "orgs:",
            "  - name: products",
            "    tenants:",
            "      - name: ads",
            f"        quota: {{H100: {{guaranteed_gpus: {total}}}}}",
        ]) + "\n"

    def start(self, argv, log_name, env=None):
        log = open(self.path(log_name), "wb")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   stdin=subprocess.DEVNULL)
        log.close()
        return process

    def start_server(self):
        port_file = self.path("server.port")
        self.server = self.start([self.tidepool, "server", "--config", self.path("server.yaml"),
                                  "--listen", "127.0.0.1:0", "--port-file", port_file],
                                 "server.log")

        def port():
            check(self.server.poll() is None, "the server exited: " + self.log("server.log"))
            with open(port_file, encoding="utf-8") as f:
                text = f.read().strip()
            return int(text) if text.isdigit() else None

        self.base = f"http://127.0.0.1:{wait_until('the server writes its port', port, 30)}"
        self.token_file = self.path("tidepool.db.admin-token")
        with open(self.token_file, encoding="utf-8") as f:
            self.api = Api(self.base, f.read().strip())
        wait_until("the server answers", lambda: self.api.get("/v1/nodes"), 30)

    def start_agents(self):
        for node in self.nodes:
            secret = self.api.call("POST", "/v1/tokens", {"role": "agent", "node": node})["secret"]
            self.write(node + ".token", secret, 0o600)
            self.agents.append(self.start(
                [self.tidepool, "agent", "--server", self.base, "--node", node,
                 "--address", "127.0.0.1", "--gpus", f"fake:{self.gpus_per_node}xH100",
                 "--token-file", self.path(node + ".token"),
                 "--state-dir", self.path("agents/" + node),
                 "--checkpoint-root", self.path("checkpoints"), "--heartbeat-interval", "1s",
                 "--grace-period", "3s", "--cgroups", "none", "--stop-tasks-on-exit"],
                f"agent-{node}.log"))

        def all_ready():
            states = {n["name"]: n["state"] for n in self.api.get("/v1/nodes")["nodes"]}
            return all(states.get(node) == "ready" for node in self.nodes)

        wait_until("every node has its agent and is ready", all_ready, 30)

    def submit(self, spec_path):
        env = dict(os.environ, TIDEPOOL_SERVER=self.base, TIDEPOOL_TOKEN=self.api.token,
                   XDG_CONFIG_HOME=self.path("xdg"))
        env.pop("TIDEPOOL_CONFIG", None)
        env.pop("TIDEPOOL_CA_CERT", None)
        done = subprocess.run([self.tidepool, "submit", "--parsable", spec_path], env=env,
                              capture_output=True, text=True, timeout=30, check=False)
        check(done.returncode == 0, f"tidepool submit: {done.stderr.strip()}")
        return int(done.stdout.strip())

    def log(self, name, tail=6000):
        try:
            with open(self.path(name), encoding="utf-8", errors="replace") as f:
                return f.read()[-tail:]
        except FileNotFoundError:
            return "(no log)"

    def show_logs(self):
        names = ["server.log"] + [f"agent-{node}.log" for node in self.nodes]
        names += ["load.out"]
        for name in names:
            print(f"--- {name}\n{self.log(name)}", file=sys.stderr)
        task_logs = self.path("agents")
        for root, _, files in os.walk(task_logs):
            for name in sorted(files):
                if name.endswith(".log"):
                    path = os.path.relpath(os.path.join(root, name), self.work)
                    print(f"--- {path}\n{self.log(path, 2000)}", file=sys.stderr)

    def close(self, keep):
        # The load generator first, then the agents (they stop their tasks: the replicas), then
        # the server.
        for group in (self.others, self.agents, [self.server] if self.server else []):
            for process in group:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in group:
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if not keep:
            shutil.rmtree(self.work, ignore_errors=True)


def service_spec(source_dir, first_port):
    """service.yaml as shipped, with ${DEMO_DIR} (as `tidepool demo` does) and a free first port."""
    demo_dir = os.path.join(os.path.abspath(source_dir), "data", "examples", "demo")
    with open(os.path.join(demo_dir, "service.yaml"), encoding="utf-8") as f:
        text = f.read()
    text = text.replace("${DEMO_DIR}", demo_dir)
    text, count = re.subn(r"(?m)^(  metrics_port:) \d+", rf"\1 {first_port}", text)
    check(count == 1, "service.yaml has no 'metrics_port: N' line under service")
    return demo_dir, text


def run(tidepool, source_dir, nodes):
    started = time.monotonic()
    gpus = 4 if nodes == 1 else 2
    pool = Pool(tidepool, nodes, gpus)
    ok = False
    try:
        pool.start_server()
        pool.start_agents()
        demo_dir, spec = service_spec(source_dir, free_ports(4))
        pool.write("service.yaml", spec)
        service = pool.submit(pool.path("service.yaml"))
        view_path = f"/v1/services/{service}"
        view = pool.api.get(view_path)
        stable_window = int(re.search(r"(?m)^  stable_window: (\d+)s", spec).group(1))
        bound_s = stable_window + 10
        print(f"service {service}: {view['name']}, target {view['target']}, "
              f"{view['min_replicas']}..{view['max_replicas']} replicas; bound {bound_s} s")

        wait_until("the first replica is an endpoint",
                   lambda: len(pool.api.get(view_path)["endpoints"]) == 1, 30)
        print(f"first replica ready at {time.monotonic() - started:.1f} s")

        high_seconds = bound_s  # a step up slower than the bound fails, not the schedule
        steps = f"{LOW_RATE}:{LOW_SECONDS},{HIGH_RATE}:{high_seconds},{LOW_RATE}:{OVERALL_S}"
        load = pool.start(
            [sys.executable, os.path.join(demo_dir, "load_generator.py"),
             "--service", pool.base + view_path, "--token-file", pool.token_file,
             "--steps", steps, "--json", pool.path("load.json")], "load.out",
            dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        pool.others.append(load)
        load_started = time.monotonic()
        step_up_at = load_started + LOW_SECONDS
        step_down_at = step_up_at + high_seconds

        reached = None  # (seconds after the step, replicas)
        draining = {}  # job -> when first seen draining
        drained = set()  # jobs cancelled "drained"
        last = None
        while True:
            now = time.monotonic()
            check(now - started < OVERALL_S, f"the run passed {OVERALL_S} s; last view: {view}")
            check(load.poll() is None, "the load generator exited early: " + pool.log("load.out"))
            view = pool.api.get(view_path)
            phases = [r["phase"] for r in view["replicas"]]
            ready = phases.count("ready")
            wanted = view["wanted"]
            summary = (wanted, tuple(sorted(phases)), len(view["endpoints"]))
            if summary != last:
                reason = (view["decision"] or {}).get("reason", "")
                print(f"t {now - load_started:5.1f} s: wanted {wanted}, replicas "
                      f"{','.join(phases) or '-'}, endpoints {len(view['endpoints'])}: {reason}")
                last = summary
            if now < step_up_at:
                check(wanted in (None, 1) and ready <= 1,
                      f"before the step up the service should hold 1 replica: {view}")
            elif reached is None and wanted is not None and wanted >= HIGH_REPLICAS and \
                    ready >= wanted:
                reached = (now - step_up_at, ready)
                print(f"step up: {ready} replicas ready {reached[0]:.1f} s after the step")
            if reached is None and now - step_up_at > bound_s:
                raise Failure(f"the step up did not reach {HIGH_REPLICAS} ready replicas within "
                              f"{bound_s} s; last view: {json.dumps(view)}")
            for replica in view["replicas"]:
                if replica["phase"] == "draining" and replica["job"] not in draining:
                    check(now >= step_down_at, f"replica {replica['job']} drained before the "
                                               f"step down: {view}")
                    draining[replica["job"]] = now
                    print(f"t {now - load_started:5.1f} s: replica {replica['job']} draining")
                    check(all(e["job"] != replica["job"] for e in view["endpoints"]),
                          f"a draining replica is still an endpoint: {view}")
            for job in sorted(set(draining) - drained):
                details = pool.api.get(f"/v1/jobs/{job}")
                if details["state"] != "running":
                    check(details["state"] == "cancelled" and "drained" in details["message"],
                          f"drained replica {job} ended otherwise: {details}")
                    drained.add(job)
                    print(f"t {now - load_started:5.1f} s: replica {job} stopped: "
                          f"{details['message']}")
            # Done once a drained replica has been stopped (a request sent to it late fails).
            if drained and reached is not None:
                break
            time.sleep(max(0.0, POLL_S - (time.monotonic() - now)))

        time.sleep(1.5)  # requests sent around the stop have answered or failed by now
        load.send_signal(signal.SIGINT)  # ends the schedule; those in flight finish
        try:
            status = load.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise Failure("the load generator did not end within 20 s of SIGINT") from None
        output = pool.log("load.out")
        print(output.rstrip())
        with open(pool.path("load.json"), encoding="utf-8") as f:
            result = json.load(f)
        check(result["sent"] > 0, f"no request was sent: {result}")
        print(f"service_e2e: step up reached {reached[1]} replicas in {reached[0]:.1f} s "
              f"(bound {bound_s} s); failed requests {result['failed']}; drained {len(drained)}")
        check(result["failed"] == 0 and status == 0,
              f"{result['failed']} of {result['sent']} requests failed (exit status {status})")
        check(reached[0] <= bound_s, f"the step up took {reached[0]:.1f} s, over {bound_s} s")
        print(f"PASS in {time.monotonic() - started:.0f} s")
        ok = True
    finally:
        if not ok:
            pool.show_logs()
        pool.close(keep=False)
    return 0


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return run(argv[0], argv[1], int(argv[2]) if len(argv) == 3 else 4)
    except Failure as failure:
        print(f"FAIL: {failure}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

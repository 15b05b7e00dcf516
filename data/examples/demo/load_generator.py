#!/usr/bin/env python3
"""Open-loop load on the demo's inference replicas (service_replica.py): GET /infer at a set rate.

Requests leave on schedule whether or not earlier ones have been answered (open loop), as users'
requests do, round-robin over the targets, which come from one of:
  --targets HOST:PORT,...  a fixed list;
  --targets-file FILE      one host:port a line, re-read every second;
  --service URL            a Tidepool service, e.g. http://127.0.0.1:8470/v1/services/7: its
                           "endpoints" (the replicas ready to serve) are read again every
                           --refresh seconds in the background, with the token of --token-file
                           or of $TIDEPOOL_TOKEN; a failed read keeps the endpoints it had.
A target that leaves the list gets no new request (those it has in flight finish). While the list
is empty a due request waits for a target, for at most its --timeout. A request fails when it gets
no 200 within --timeout, counted from when it was due (so time spent waiting for a free worker or
for a target counts), or when the connection fails.

One line a second goes to standard output: the rate, the targets in the list ("targets N"), how
many of them were sent requests in that second ("used N"), the requests in flight, the answers
of that second and their p95; then a summary "sent N ok N failed N p95_ms X". SIGINT or SIGTERM
ends the schedule early: no new requests, those in flight finish, then the summary. Exit status:
0 when every request succeeded, 1 when any failed, 2 for bad arguments (an unreadable token file,
a --service whose first read fails). Standard library only.
"""
import argparse
import concurrent.futures
import http.client
import itertools
import json
import math
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request


def parse_target(text):
    """'host:port' -> (host, port); ValueError saying what is wrong."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"'{text.strip()}' is not host:port")
    return host.strip("[]"), int(port)  # [::1]:8000 -> ::1


def read_targets_file(path):
    with open(path, encoding="utf-8") as f:
        return [parse_target(line) for line in f if line.strip() and not line.startswith("#")]


def parse_steps(text):
    """'RATE:SECONDS,...' -> [(rate, seconds)]; ValueError saying what is wrong."""
    steps = []
    for item in text.split(","):
        try:
            rate, seconds = map(float, item.split(":"))
        except ValueError:
            rate = seconds = -1.0
        if not (0 <= rate < math.inf and 0 < seconds < math.inf):  # NaN fails too
            raise ValueError(f"'{item}' is not RATE:SECONDS (a rate >= 0, seconds > 0)")
        steps.append((rate, seconds))
    return steps


def parse_service_url(text):
    """The URL of GET /v1/services/{id}; ValueError saying what is wrong."""
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"'{text}' is not an http(s) URL such as "
                         "http://127.0.0.1:8470/v1/services/7")
    return text


def read_token_file(path):
    with open(path, encoding="utf-8") as f:
        token = f.read().strip()
    if not token:
        raise ValueError(f"{path} is empty")
    return token


# The service's API on a local network: no proxy of the environment in between.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def read_endpoints(url, token, timeout_s):
    """GET the service: its endpoints as [(host, port)]; OSError or ValueError saying why not."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}",
                                                   "Accept": "application/json"})
    try:
        with OPENER.open(request, timeout=timeout_s) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as e:
        detail = e.read(500).decode("utf-8", "replace").strip()
        raise ValueError(f"GET {url}: HTTP {e.code} {detail}") from None
    except urllib.error.URLError as e:  # refused, unknown host, timed out
        raise OSError(f"GET {url}: {e.reason}") from None
    except (OSError, http.client.HTTPException) as e:
        raise OSError(f"GET {url}: {e}") from None
    endpoints = body.get("endpoints") if isinstance(body, dict) else None
    if not isinstance(endpoints, list):
        raise ValueError(f"GET {url}: the answer has no \"endpoints\" list")
    targets = []
    for endpoint in endpoints:
        address = endpoint.get("url") if isinstance(endpoint, dict) else None
        try:
            parts = urllib.parse.urlsplit(address)
            if parts.scheme != "http" or not parts.hostname or parts.port is None:
                raise ValueError
        except (TypeError, ValueError):
            raise ValueError(f"GET {url}: an endpoint's url is not http://HOST:PORT: "
                             f"{json.dumps(endpoint)[:200]}") from None
        targets.append((parts.hostname, parts.port))
    return targets


def tally(results):
    """[(ok, latency_s)] -> ok, failed, the nearest-rank p95 of the successes in ms (or None)."""
    latencies = sorted(latency for ok, latency in results if ok)
    p95 = round(latencies[-(-len(latencies) * 95 // 100) - 1] * 1000, 1) if latencies else None
    return len(latencies), len(results) - len(latencies), p95


class Stats:
    """Counts shared by the sending loop and the workers, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sent = self.in_flight = 0
        self.results, self.second = [], []  # (ok, latency_s): all, and since the last line
        self.used = set()  # the targets sent requests since the last line

    def started(self):
        with self.lock:
            self.sent += 1
            self.in_flight += 1

    def sending_to(self, target):
        with self.lock:
            self.used.add(target)

    def done(self, ok, latency_s):
        with self.lock:
            self.in_flight -= 1
            self.results.append((ok, latency_s))
            self.second.append((ok, latency_s))

    def take_second(self):
        with self.lock:
            second, self.second = self.second, []
            used, self.used = len(self.used), set()
            return second, used, self.in_flight


class Targets:
    """The current targets, shared by the sending loop, the workers and the service's reader."""

    def __init__(self, targets):
        self.changed = threading.Condition()
        self.current, self.index = list(targets), 0

    def replace(self, targets):
        with self.changed:
            self.current = list(targets)
            self.changed.notify_all()

    def count(self):
        with self.changed:
            return len(self.current)

    def pick(self, deadline):
        """The next target round-robin, waiting while there is none; None at `deadline`."""
        with self.changed:
            while not self.current:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self.changed.wait(remaining)
            self.index += 1
            return self.current[self.index % len(self.current)]


class TargetsFile:
    """--targets-file, re-read on each reload() (every second)."""

    def __init__(self, path, targets):
        self.path, self.targets = path, targets

    def reload(self):
        try:
            self.targets.replace(read_targets_file(self.path))
        except (OSError, ValueError) as e:  # keep the last good list: a demo may be mid-edit
            print(f"--targets-file: {e}; keeping the previous targets", file=sys.stderr)


class ServiceEndpoints:
    """--service: a thread reads the service's endpoints every `refresh_s` until stop()."""

    def __init__(self, url, token, refresh_s, targets):
        self.url, self.token, self.refresh_s, self.targets = url, token, refresh_s, targets
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.loop, name="service-endpoints", daemon=True)
        self.read_timeout_s = min(5.0, max(1.0, refresh_s))

    def read(self):
        self.targets.replace(read_endpoints(self.url, self.token, self.read_timeout_s))

    def loop(self):
        last_error = None
        while not self.stopping.wait(self.refresh_s):
            try:
                self.read()
                last_error = None
            except (OSError, ValueError) as e:  # the server restarting, say: keep the endpoints
                if str(e) != last_error:  # once per cause, not every refresh
                    print(f"--service: {e}; keeping the previous endpoints", file=sys.stderr,
                          flush=True)
                last_error = str(e)

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopping.set()


def send(targets, stats, due, timeout_s):
    """One GET /infer to the next target; (succeeded, seconds since it was due)."""
    deadline = due + timeout_s
    target = targets.pick(deadline)
    ok = False
    remaining = deadline - time.monotonic()
    if target is not None and remaining > 0:
        stats.sending_to(target)
        conn = http.client.HTTPConnection(*target, timeout=remaining)
        try:
            conn.request("GET", "/infer")
            response = conn.getresponse()
            response.read()
            ok = response.status == 200
        except (OSError, http.client.HTTPException):
            pass  # refused, reset or timed out: a failure like any other
        finally:
            conn.close()
    latency = time.monotonic() - due
    return ok and latency <= timeout_s, latency


class Reporter:
    """Prints a line a second, and re-reads a targets file at the same pace."""

    def __init__(self, stats, targets, reload, stop):
        self.stats, self.targets, self.reload, self.stop = stats, targets, reload, stop
        self.rate = 0.0
        self.started = time.monotonic()
        self.next_line = self.started + 1

    def tick(self):
        if time.monotonic() < self.next_line:
            return
        self.next_line += 1
        self.reload()
        second, used, in_flight = self.stats.take_second()
        ok, failed, p95 = tally(second)
        print(f"t {time.monotonic() - self.started:5.1f}s rate {self.rate:g}/s "
              f"targets {self.targets.count()} used {used} in_flight {in_flight} ok {ok} "
              f"failed {failed} p95_ms {'-' if p95 is None else p95}", flush=True)

    def wait_until(self, deadline, stoppable=True):
        """Ticks until `deadline`; False if stopped first (SIGINT, SIGTERM) when `stoppable`."""
        while (now := time.monotonic()) < deadline:
            if stoppable and self.stop.is_set():
                return False
            self.tick()
            time.sleep(min(0.02, deadline - now))
        return not (stoppable and self.stop.is_set())


class SetupError(Exception):
    """The targets cannot be had: a bad argument (exit status 2)."""


def make_targets(args):
    """The Targets, the reload of each second and the service's reader (or None)."""
    if args.targets is not None:
        return Targets(args.targets), lambda: None, None
    if args.targets_file is not None:
        targets = Targets(read_targets_file(args.targets_file))
        return targets, TargetsFile(args.targets_file, targets).reload, None
    token = args.token or os.environ.get("TIDEPOOL_TOKEN", "").strip()
    if not token:
        raise SetupError("--service needs a token: --token-file FILE or $TIDEPOOL_TOKEN")
    targets = Targets([])
    service = ServiceEndpoints(args.service, token, args.refresh, targets)
    try:
        service.read()  # a wrong URL or token is an argument's fault: said at once
    except (OSError, ValueError) as e:
        raise SetupError(f"--service: {e}") from None
    return targets, lambda: None, service


def run(args):
    try:
        targets, reload, service = make_targets(args)
    except (OSError, SetupError, ValueError) as e:
        print(f"{os.path.basename(sys.argv[0])}: error: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stats = Stats()
    reporter = Reporter(stats, targets, reload, stop)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.max_in_flight)
    if service is not None:
        service.start()

    def finished(future):  # a worker's bug must not leave the request counted in flight
        stats.done(*(future.result() if future.exception() is None else (False, 0.0)))

    step_end = reporter.started
    for rate, seconds in args.steps:
        reporter.rate, step_start, step_end = rate, step_end, step_end + seconds
        # Each request is due at its own time, so a late one does not delay the rest.
        for k in itertools.count():
            due = step_start + k / rate if rate > 0 else step_end
            if due >= step_end or not reporter.wait_until(due):
                break
            stats.started()
            pool.submit(send, targets, stats, due, args.timeout).add_done_callback(finished)
        if not reporter.wait_until(step_end):
            print("stopped: waiting for the requests in flight", file=sys.stderr, flush=True)
            break
    reporter.rate = 0.0
    while stats.in_flight:  # each ends within about --timeout
        reporter.wait_until(time.monotonic() + 0.05, stoppable=False)
    pool.shutdown()
    if service is not None:
        service.stop()
    return summarize(stats, args)


def summarize(stats, args):
    ok, failed, p95 = tally(stats.results)
    print(f"sent {stats.sent} ok {ok} failed {failed} p95_ms {'-' if p95 is None else p95}",
          flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            summary = {"sent": stats.sent, "ok": ok, "failed": failed, "p95_ms": p95}
            f.write(json.dumps(summary) + "\n")
    return 1 if failed else 0


def option(parse):
    """An argparse type from a function raising ValueError: argparse names the option with it."""
    def convert(text):
        try:
            return parse(text)
        except (OSError, ValueError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return convert


def positive(kind):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not 0 < value < math.inf:
            raise ValueError(f"'{text}' is not a number above 0")
        return value
    return option(parse)


def targets_file(path):
    read_targets_file(path)  # for its errors: a bad file is a bad argument
    return path


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--targets", metavar="HOST:PORT,...", help="the replicas, comma-separated",
                       type=option(lambda text: [parse_target(t) for t in text.split(",")]))
    where.add_argument("--targets-file", metavar="FILE", type=option(targets_file),
                       help="the replicas, one host:port a line ('#' comments), re-read every "
                            "second: a replica left out of it gets no new requests")
    where.add_argument("--service", metavar="URL", type=option(parse_service_url),
                       help="a Tidepool service's URL, http(s)://SERVER/v1/services/ID: the "
                            "replicas are its endpoints, read again every --refresh seconds")
    p.add_argument("--token-file", metavar="FILE", dest="token", type=option(read_token_file),
                   help="with --service: the file of the API token (default $TIDEPOOL_TOKEN)")
    p.add_argument("--refresh", type=positive(float), metavar="SECONDS",
                   help="with --service: how often to read its endpoints (default 1)")
    p.add_argument("--steps", required=True, metavar="RATE:SECONDS,...", type=option(parse_steps),
                   help='the schedule: requests per second for how many seconds, in turn, e.g. '
                        '"20:30,80:60,20:60"')
    p.add_argument("--max-in-flight", type=positive(int), default=256, metavar="N",
                   help="worker threads, so requests outstanding at once; later ones wait for a "
                        "worker (default 256)")
    p.add_argument("--timeout", type=positive(float), default=10, metavar="SECONDS",
                   help="a request without a 200 this long after it was due fails (default 10)")
    p.add_argument("--json", metavar="FILE", help="also write the summary to FILE as JSON")
    args = p.parse_args(argv)
    if args.service is None and (args.token is not None or args.refresh is not None):
        p.error("--token-file and --refresh go with --service")
    args.refresh = args.refresh or 1.0
    return args


if __name__ == "__main__":
    sys.exit(run(parse_args(sys.argv[1:])))

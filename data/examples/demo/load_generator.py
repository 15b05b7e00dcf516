#!/usr/bin/env python3
"""Open-loop load on the demo's inference replicas (service_replica.py): GET /infer at a set rate.

Requests leave on schedule whether or not earlier ones have been answered (open loop), as users'
requests do, round-robin over the targets. A request fails when it gets no 200 within --timeout,
counted from when it was due (so time spent waiting for a free worker counts), or when the
connection fails. One line a second goes to standard output, then a summary
"sent N ok N failed N p95_ms X". Exit status: 0 when every request succeeded, 1 when any failed,
2 for bad arguments. Standard library only.
"""
import argparse
import concurrent.futures
import http.client
import itertools
import json
import math
import sys
import threading
import time


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

    def started(self):
        with self.lock:
            self.sent += 1
            self.in_flight += 1

    def done(self, ok, latency_s):
        with self.lock:
            self.in_flight -= 1
            self.results.append((ok, latency_s))
            self.second.append((ok, latency_s))

    def take_second(self):
        with self.lock:
            second, self.second = self.second, []
            return second, self.in_flight


def send(target, due, timeout_s):
    """One GET /infer; (succeeded, seconds since it was due)."""
    remaining = due + timeout_s - time.monotonic()
    ok = False
    if target is not None and remaining > 0:
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


class Targets:
    """The targets from --targets, or from --targets-file re-read every second."""

    def __init__(self, args):
        self.path, self.index = args.targets_file, 0
        self.current = args.targets if args.targets is not None else read_targets_file(self.path)

    def reload(self):
        if self.path is None:
            return
        try:
            self.current = read_targets_file(self.path)
        except (OSError, ValueError) as e:  # keep the last good list: a demo may be mid-edit
            print(f"--targets-file: {e}; keeping the previous targets", file=sys.stderr)

    def next(self):
        if not self.current:
            return None  # the request fails: nobody to send it to
        self.index += 1
        return self.current[self.index % len(self.current)]


class Reporter:
    """Prints a line a second, and re-reads the targets file at the same pace."""

    def __init__(self, stats, targets):
        self.stats, self.targets, self.rate = stats, targets, 0.0
        self.started = time.monotonic()
        self.next_line = self.started + 1

    def tick(self):
        if time.monotonic() < self.next_line:
            return
        self.next_line += 1
        self.targets.reload()
        second, in_flight = self.stats.take_second()
        ok, failed, p95 = tally(second)
        print(f"t {time.monotonic() - self.started:5.1f}s rate {self.rate:g}/s "
              f"targets {len(self.targets.current)} in_flight {in_flight} ok {ok} "
              f"failed {failed} p95_ms {'-' if p95 is None else p95}", flush=True)

    def wait_until(self, deadline):
        while (now := time.monotonic()) < deadline:
            self.tick()
            time.sleep(min(0.02, deadline - now))


def run(args):
    stats, targets = Stats(), Targets(args)
    reporter = Reporter(stats, targets)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.max_in_flight)

    def finished(future):  # a worker's bug must not leave the request counted in flight
        stats.done(*(future.result() if future.exception() is None else (False, 0.0)))

    step_end = reporter.started
    try:
        for rate, seconds in args.steps:
            reporter.rate, step_start, step_end = rate, step_end, step_end + seconds
            # Each request is due at its own time, so a late one does not delay the rest.
            for k in itertools.count():
                due = step_start + k / rate if rate > 0 else step_end
                if due >= step_end:
                    break
                reporter.wait_until(due)
                stats.started()
                pool.submit(send, targets.next(), due, args.timeout).add_done_callback(finished)
            reporter.wait_until(step_end)
    except KeyboardInterrupt:
        print("interrupted: waiting for the requests in flight", file=sys.stderr)
    reporter.rate = 0.0
    while stats.in_flight:  # each ends within about --timeout
        reporter.wait_until(time.monotonic() + 0.05)
    pool.shutdown()
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
    p.add_argument("--steps", required=True, metavar="RATE:SECONDS,...", type=option(parse_steps),
                   help='the schedule: requests per second for how many seconds, in turn, e.g. '
                        '"20:30,80:60,20:60"')
    p.add_argument("--max-in-flight", type=positive(int), default=256, metavar="N",
                   help="worker threads, so requests outstanding at once; later ones wait for a "
                        "worker (default 256)")
    p.add_argument("--timeout", type=positive(float), default=10, metavar="SECONDS",
                   help="a request without a 200 this long after it was due fails (default 10)")
    p.add_argument("--json", metavar="FILE", help="also write the summary to FILE as JSON")
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(run(parse_args(sys.argv[1:])))

#!/usr/bin/env python3
"""One replica of the demo's inference service: an HTTP server whose answers slow down with load.

GET /infer    answers after S x max(1, n / K) ms, with n requests in flight (this one included),
              K --slots and S --service-time-ms: past its slots the replica shares itself out
              (processor sharing), so latency grows with load as on a real model server.
GET /metrics  vLLM's metric names in the Prometheus text format 0.0.4 (Tidepool's "vllm" preset).
GET /healthz  200 "ok"; 503 "draining" after SIGTERM.
SIGTERM (or SIGINT) drains: the replica answers the requests in flight and any that still arrive
until nothing has been in flight for 1 s, for at most --drain-seconds, then exits 0. At most one
log line a second goes to standard error. Standard library only.
"""
import argparse
import bisect
import http.server
import itertools
import json
import math
import os
import random
import signal
import sys
import tempfile
import threading
import time
import urllib.parse

# vLLM's bounds for vllm:e2e_request_latency_seconds, cut to the demo's range.
BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def family(name, kind, text):
    return [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]


class Replica:
    """The replica's figures, shared by the handler threads under one lock."""

    def __init__(self, slots, service_time_s, jitter):
        self.slots, self.service_time_s, self.jitter = slots, service_time_s, jitter
        self.lock = threading.Lock()
        self.in_flight = 0
        self.successes = 0
        self.bucket_counts = [0] * (len(BUCKETS) + 1)  # per bucket and +Inf; summed when written
        self.latency_sum_s = 0.0
        # The time past a request's own service time: the wait its load added (vLLM's queue time).
        self.queue_sum_s = 0.0
        self.recent_s = []  # latencies since the last log line
        self.last_busy = time.monotonic()
        self.draining = False

    def begin(self):
        """Counts a request in and returns how long it takes, given the load it joins."""
        with self.lock:
            self.in_flight += 1
            load = self.in_flight
        delay = self.service_time_s * max(1.0, load / self.slots)
        if self.jitter:
            delay *= random.uniform(1 - self.jitter, 1 + self.jitter)
        return delay

    def finish(self, latency_s):
        # The counter and the histogram change together, so a scrape always sees them agree.
        with self.lock:
            self.in_flight -= 1
            self.successes += 1
            self.latency_sum_s += latency_s
            self.queue_sum_s += max(0.0, latency_s - self.service_time_s)
            self.bucket_counts[bisect.bisect_left(BUCKETS, latency_s)] += 1  # le: <= bound
            self.recent_s.append(latency_s)
            self.last_busy = time.monotonic()

    def exposition(self):
        """The metrics in the Prometheus text exposition format 0.0.4, with vLLM's names."""
        with self.lock:
            n, total, lat_sum = self.in_flight, self.successes, self.latency_sum_s
            queue_sum = self.queue_sum_s
            cumulative = list(itertools.accumulate(self.bucket_counts))
        m, e2e = 'model_name="demo"', "vllm:e2e_request_latency_seconds"  # vLLM labels by model
        lines = family("vllm:num_requests_running", "gauge", "Requests being processed.")
        lines.append(f"vllm:num_requests_running{{{m}}} {min(n, self.slots)}")
        lines += family("vllm:num_requests_waiting", "gauge", "Requests waiting for a slot.")
        lines.append(f"vllm:num_requests_waiting{{{m}}} {max(0, n - self.slots)}")
        lines += family("vllm:request_success_total", "counter", "Requests answered.")
        lines.append(f'vllm:request_success_total{{finished_reason="stop",{m}}} {total}')
        lines += family(e2e, "histogram", "End-to-end request latency in seconds.")
        for bound, count in zip([*map(repr, BUCKETS), "+Inf"], cumulative):
            lines.append(f'{e2e}_bucket{{le="{bound}",{m}}} {count}')
        lines.append(f"{e2e}_sum{{{m}}} {lat_sum!r}")
        lines.append(f"{e2e}_count{{{m}}} {total}")
        queue = "vllm:request_queue_time_seconds"
        lines += family(queue, "histogram", "Time requests waited past their service time.")
        lines.append(f'{queue}_bucket{{le="+Inf",{m}}} {total}')
        lines.append(f"{queue}_sum{{{m}}} {queue_sum!r}")
        lines.append(f"{queue}_count{{{m}}} {total}")
        return "\n".join(lines) + "\n"  # the format wants the last line ended too

    def take_recent(self):
        with self.lock:
            recent, self.recent_s = self.recent_s, []
            return recent, self.in_flight


def make_handler(replica):
    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = 10  # an idle or slow client must not hold a thread (and the drain) for ever

        def do_GET(self):
            path = urllib.parse.urlsplit(self.path).path
            if path == "/infer":
                self.infer()
            elif path == "/metrics":
                self.reply(200, replica.exposition(), "text/plain; version=0.0.4; charset=utf-8")
            elif path == "/healthz":
                draining = replica.draining
                self.reply(503 if draining else 200, "draining\n" if draining else "ok\n")
            else:
                self.reply(404, "not found\n")

        def infer(self):
            start = time.monotonic()
            delay = replica.begin()
            time.sleep(delay)
            latency = time.monotonic() - start
            replica.finish(latency)
            body = json.dumps({"ok": True, "latency_ms": round(latency * 1000, 1)}) + "\n"
            self.reply(200, body, "application/json")

        def reply(self, status, body, content_type="text/plain; charset=utf-8"):
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass  # one line a second from the main loop instead of one per request

    return Handler


class Server(http.server.ThreadingHTTPServer):
    # Handler threads are joined on close, so that a request accepted is always answered.
    daemon_threads = False


def write_metrics_file(path, text):
    # A temporary file renamed over PATH: a reader never sees half a scrape. A failed write is
    # reported, not fatal: the requests in flight matter more than the file.
    if not path:
        return
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".metrics.")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide it from an agent of another user
        os.replace(tmp, path)
    except OSError as e:
        print(f"cannot write --metrics-file: {e}", file=sys.stderr, flush=True)


def log_second(replica):
    recent, in_flight = replica.take_recent()
    if not recent and not in_flight:
        return  # quiet when idle
    recent.sort()
    p95 = recent[max(0, -(-len(recent) * 95 // 100) - 1)] * 1000 if recent else 0.0
    print(f"{time.strftime('%H:%M:%S')} rate {len(recent)}/s in_flight {in_flight} "
          f"p95_ms {p95:.0f}", file=sys.stderr, flush=True)


def drained(replica, signalled_at, drain_s, now):
    if now - signalled_at >= drain_s:
        return True
    with replica.lock:
        quiet_since = max(replica.last_busy, signalled_at)
        return replica.in_flight == 0 and now - quiet_since >= 1.0


def serve(replica, server, args):
    def on_signal(*_):  # /healthz says "draining" at once; the loop below times the drain
        replica.draining = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}).start()
    next_tick, signalled_at = time.monotonic() + 1, None
    while True:
        time.sleep(0.1)
        now = time.monotonic()
        if now >= next_tick:
            next_tick += 1
            log_second(replica)
            write_metrics_file(args.metrics_file, replica.exposition())
        if replica.draining and signalled_at is None:
            signalled_at = now
            print(f"draining (at most {args.drain_seconds:g} s)", file=sys.stderr, flush=True)
        if signalled_at is not None and drained(replica, signalled_at, args.drain_seconds, now):
            break
    server.shutdown()  # no new connections
    server.server_close()  # waits for the requests still being answered
    write_metrics_file(args.metrics_file, replica.exposition())
    print(f"drained: {replica.successes} requests answered in all", file=sys.stderr, flush=True)


def number(kind, low, high=None):
    """An argparse type: a `kind` in [low, high) (argparse names the option in its error)."""
    def parse(text):
        value = kind(text)
        if not low <= value < (math.inf if high is None else high):  # NaN and inf fail too
            raise argparse.ArgumentTypeError(f"{text} is not in [{low}, {high or 'inf'})")
        return value
    parse.__name__ = kind.__name__  # argparse's "invalid int value"
    return parse


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=number(int, 0, 65536), default=0,
                   help="port to listen on; 0 (the default) picks a free one. The port is printed "
                        "alone on the first line of standard output")
    p.add_argument("--slots", type=number(int, 1), default=4,
                   help="requests served at full speed at once; past them they share (default 4)")
    p.add_argument("--service-time-ms", type=number(float, 0), default=100,
                   help="time of one request when the replica has a free slot (default 100)")
    p.add_argument("--jitter", type=number(float, 0, 1), default=0, metavar="F",
                   help="multiply each delay by a random factor in [1-F, 1+F]; without it the "
                        "replica is deterministic")
    p.add_argument("--drain-seconds", type=number(float, 0), default=10,
                   help="on SIGTERM, keep answering for at most this long; the replica exits "
                        "sooner once nothing has been in flight for 1 s (default 10)")
    p.add_argument("--metrics-file", metavar="PATH",
                   help="also write the /metrics text to PATH every second (replaced atomically)")
    return p.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    replica = Replica(args.slots, args.service_time_ms / 1000, args.jitter)
    server = Server((args.host, args.port), make_handler(replica))
    print(server.server_address[1], flush=True)
    write_metrics_file(args.metrics_file, replica.exposition())
    serve(replica, server, args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

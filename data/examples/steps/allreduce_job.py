"""An nccl-tests-like all-reduce job for Tidepool, in Python with the standard library only.

Each task of the gang is one rank (RANK of WORLD_SIZE, as the agent sets them). The ranks meet at
MASTER_ADDR:MASTER_PORT (rank 0 listens there), join a ring over TCP, and run STEPS steps of:
  - compute: COMPUTE_MS milliseconds of simulated work (a sleep; COMPUTE_MODE=busy spins instead);
  - all-reduce: a ring all-reduce (reduce-scatter, then all-gather) of a float32 buffer of
    ALLREDUCE_FLOATS values between all the ranks, checked against the expected sum.
Every step is reported through tidepool_steps.py (its time, compute time, all-reduce time and
bytes) to $TIDEPOOL_STEP_REPORT. At the end each rank prints its own measurement, over the whole
loop by its own clock (not from the reported lines):

  allreduce_job: rank=0 world=2 steps=40 wall_us=2400000 compute_us=1500000 allreduce_us=880000
      allreduce_bytes=1048576 comm_share=0.3750 algbw_MBps=47.7 busbw_MBps=47.7

comm_share = (wall - compute) / wall, the share of the loop not spent computing; algbw = bytes /
all-reduce time, busbw = algbw x 2 (N-1) / N, as nccl-tests print them.

Run it outside Tidepool too: RANK=0 WORLD_SIZE=1 python3 allreduce_job.py (one rank: no ring).
"""

import array
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tidepool_steps import StepReporter  # noqa: E402  (the helper ships beside this file)

CONNECT_TIMEOUT_S = 60.0


def setting(name, default):
    value = os.environ.get(name, "")
    return int(value) if value else default


def connect(address, port, deadline):
    """A connection to address:port, retried until `deadline` (the other side may start later)."""
    while True:
        try:
            return socket.create_connection((address, port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def read_line(conn):
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            raise ConnectionError("the peer closed the connection during the rendezvous")
        data += chunk
        if len(data) > 65536:
            raise ConnectionError("the rendezvous message is too long")
    return data.decode()


def rendezvous(rank, world, master_addr, master_port):
    """The ring's two connections: (to the next rank, from the previous one)."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    if rank == 0:
        server = socket.create_server((master_addr, master_port), reuse_port=False)
        own_address = master_addr
    else:
        master = connect(master_addr, master_port, deadline)
        own_address = master.getsockname()[0]  # the address that reaches the master
    ring = socket.create_server((own_address, 0))
    ring_port = ring.getsockname()[1]
    if rank == 0:
        table = {0: [own_address, ring_port]}
        members = []
        server.settimeout(CONNECT_TIMEOUT_S)
        while len(table) < world:
            conn, peer = server.accept()
            hello = json.loads(read_line(conn))
            other = int(hello["rank"])
            if other <= 0 or other >= world or other in table:
                raise ValueError(f"unexpected rank {other} at the rendezvous")
            table[other] = [peer[0], int(hello["port"])]
            members.append(conn)
        message = (json.dumps({str(r): table[r] for r in table}) + "\n").encode()
        for conn in members:
            conn.sendall(message)
            conn.close()
        server.close()
    else:
        master.sendall((json.dumps({"rank": rank, "port": ring_port}) + "\n").encode())
        table = {int(r): v for r, v in json.loads(read_line(master)).items()}
        master.close()
    nxt = table[(rank + 1) % world]
    to_next = connect(nxt[0], nxt[1], deadline)
    ring.settimeout(CONNECT_TIMEOUT_S)
    from_prev, _ = ring.accept()
    ring.close()
    for conn in (to_next, from_prev):
        conn.settimeout(None)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return to_next, from_prev


def receive_into(conn, view):
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("a peer of the ring closed its connection")
        got += n


def exchange(to_next, from_prev, send_bytes, receive_view):
    """Sends to the next rank while receiving from the previous one (a ring step)."""
    sender = threading.Thread(target=to_next.sendall, args=(send_bytes,))
    sender.start()
    receive_into(from_prev, receive_view)
    sender.join()


def ring_allreduce(buffer, rank, world, to_next, from_prev):
    """Sums `buffer` (array('f')) over the ranks, in place: reduce-scatter, then all-gather."""
    if world == 1:
        return
    n = len(buffer)
    bounds = [(n * i // world, n * (i + 1) // world) for i in range(world)]
    incoming = bytearray(4 * ((n + world - 1) // world))
    for s in range(world - 1):  # reduce-scatter: chunk (rank - s - 1) gathers one more term
        send_lo, send_hi = bounds[(rank - s) % world]
        recv_lo, recv_hi = bounds[(rank - s - 1) % world]
        view = memoryview(incoming)[:4 * (recv_hi - recv_lo)]
        exchange(to_next, from_prev, buffer[send_lo:send_hi].tobytes(), view)
        received = array.array("f")
        received.frombytes(view)
        buffer[recv_lo:recv_hi] = array.array("f", map(float.__add__, buffer[recv_lo:recv_hi],
                                                       received))
    for s in range(world - 1):  # all-gather: chunk (rank - s) is complete; pass it on
        send_lo, send_hi = bounds[(rank - s + 1) % world]
        recv_lo, recv_hi = bounds[(rank - s) % world]
        view = memoryview(incoming)[:4 * (recv_hi - recv_lo)]
        exchange(to_next, from_prev, buffer[send_lo:send_hi].tobytes(), view)
        received = array.array("f")
        received.frombytes(view)
        buffer[recv_lo:recv_hi] = received


def compute(milliseconds, busy):
    if not busy:
        time.sleep(milliseconds / 1000.0)
        return
    end = time.perf_counter() + milliseconds / 1000.0
    while time.perf_counter() < end:
        pass


def main():
    rank = setting("RANK", 0)
    world = setting("WORLD_SIZE", 1)
    steps = setting("STEPS", 40)
    compute_ms = setting("COMPUTE_MS", 30)
    floats = setting("ALLREDUCE_FLOATS", 262144)  # 1 MiB of float32
    busy = os.environ.get("COMPUTE_MODE", "sleep") == "busy"
    if world > 1:
        to_next, from_prev = rendezvous(rank, world, os.environ.get("MASTER_ADDR", "127.0.0.1"),
                                        setting("MASTER_PORT", 29500))
    else:
        to_next = from_prev = None
    nbytes = 4 * floats
    expected = float(world * (world + 1) // 2)
    reporter = StepReporter()
    total_compute_us = total_allreduce_us = 0
    loop_start = time.perf_counter_ns()
    for _ in range(steps):
        with reporter.step() as step:
            # The step's gradients: rank r contributes r + 1 to every value.
            buffer = array.array("f", [float(rank + 1)]) * floats
            t0 = time.perf_counter_ns()
            with step.compute():
                compute(compute_ms, busy)
            t1 = time.perf_counter_ns()
            with step.allreduce(nbytes=nbytes):
                ring_allreduce(buffer, rank, world, to_next, from_prev)
            t2 = time.perf_counter_ns()
        if buffer[0] != expected or buffer[-1] != expected or buffer[floats // 2] != expected:
            print(f"allreduce_job: rank {rank}: wrong sum {buffer[0]}, expected {expected}",
                  file=sys.stderr)
            return 1
        total_compute_us += (t1 - t0) // 1000
        total_allreduce_us += (t2 - t1) // 1000
    wall_us = (time.perf_counter_ns() - loop_start) // 1000
    reporter.close()
    for conn in (to_next, from_prev):
        if conn is not None:
            conn.close()
    share = (wall_us - total_compute_us) / wall_us if wall_us > 0 else 0.0
    algbw = nbytes * steps / (total_allreduce_us / 1e6) / 1e6 if total_allreduce_us else 0.0
    busbw = algbw * 2 * (world - 1) / world
    print(f"allreduce_job: rank={rank} world={world} steps={steps} wall_us={wall_us} "
          f"compute_us={total_compute_us} allreduce_us={total_allreduce_us} "
          f"allreduce_bytes={nbytes} comm_share={share:.4f} algbw_MBps={algbw:.1f} "
          f"busbw_MBps={busbw:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

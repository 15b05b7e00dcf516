"""Report a training job's steps to Tidepool, from Python, with the standard library only.

The Tidepool agent gives every task of a job a file in the environment variable
TIDEPOOL_STEP_REPORT; a task appends one line per step to it, which the agent forwards to the
server (docs/step-telemetry.md has the protocol). Outside Tidepool (the variable unset) every call
here does nothing, so a training script may use it unconditionally.

    from tidepool_steps import StepReporter

    steps = StepReporter()
    for batch in loader:
        with steps.step() as step:
            with step.compute():
                loss = model(batch)
                loss.backward()
            with step.allreduce(nbytes=gradient_bytes):
                all_reduce(gradients)
            optimizer.step()

Each step's line then says its wall time, the time spent in step.compute() and in
step.allreduce() (each optional), and the bytes all-reduced: the server shows the job's step-time
distribution, its communication share ((step - compute) / step when the compute time is given, else
all-reduce / step) and, with the spec's model_flops_per_step, its MFU. StepReporter.report() writes
a line from figures measured elsewhere.
"""

import os
import time

__all__ = ["StepReporter", "format_step_line"]

_ENV = "TIDEPOOL_STEP_REPORT"


def format_step_line(step, time_us, compute_us=None, allreduce_us=None, allreduce_bytes=None):
    """One line of the protocol (with its newline); parts are clamped to the step's time."""
    fields = [f"step={int(step)}", f"time_us={max(0, int(time_us))}"]
    for key, value in (("compute_us", compute_us), ("allreduce_us", allreduce_us)):
        if value is not None:
            fields.append(f"{key}={min(max(0, int(value)), max(0, int(time_us)))}")
    if allreduce_bytes is not None and allreduce_us is not None:
        fields.append(f"allreduce_bytes={max(0, int(allreduce_bytes))}")
    return " ".join(fields) + "\n"


def _now_us():
    return time.perf_counter_ns() // 1000


class _Phase:
    def __init__(self, step, name):
        self._step, self._name, self._start = step, name, 0

    def __enter__(self):
        self._start = _now_us()
        return self

    def __exit__(self, *exc):
        elapsed = _now_us() - self._start
        setattr(self._step, self._name, getattr(self._step, self._name) + elapsed)
        return False


class _Step:
    """One step being timed: its phases add up their time (a step may all-reduce twice)."""

    def __init__(self, reporter, number):
        self._reporter, self.number = reporter, number
        self.compute_us, self.allreduce_us, self.allreduce_bytes = 0, 0, 0
        self._timed = set()
        self._start = 0

    def compute(self):
        self._timed.add("compute")
        return _Phase(self, "compute_us")

    def allreduce(self, nbytes=None):
        self._timed.add("allreduce")
        if nbytes is not None:
            self._timed.add("bytes")
            self.allreduce_bytes += int(nbytes)
        return _Phase(self, "allreduce_us")

    def __enter__(self):
        self._start = _now_us()
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self._reporter.report(
                self.number, _now_us() - self._start,
                compute_us=self.compute_us if "compute" in self._timed else None,
                allreduce_us=self.allreduce_us if "allreduce" in self._timed else None,
                allreduce_bytes=self.allreduce_bytes if "bytes" in self._timed else None)
        return False


class StepReporter:
    """Appends step lines to $TIDEPOOL_STEP_REPORT (or `path`); a no-op when there is neither."""

    def __init__(self, path=None, first_step=0):
        path = path if path is not None else os.environ.get(_ENV, "")
        self._fd = -1
        if path:
            # O_APPEND: each line is one write at the file's end, whatever else writes to it.
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._next = first_step

    @property
    def enabled(self):
        return self._fd >= 0

    def step(self, number=None):
        """A context manager timing one step (numbered from first_step unless given)."""
        if number is None:
            number = self._next
        self._next = number + 1
        return _Step(self, number)

    def report(self, step, time_us, compute_us=None, allreduce_us=None, allreduce_bytes=None):
        """Writes one step's line from figures in microseconds (integers)."""
        if self._fd < 0:
            return
        line = format_step_line(step, time_us, compute_us, allreduce_us, allreduce_bytes)
        os.write(self._fd, line.encode("ascii"))

    def close(self):
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

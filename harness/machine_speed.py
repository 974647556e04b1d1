"""How fast the machine runs Python at the moment: a fixed loop, timed.

A shared or virtual machine does not run at one speed. In this project's VM the same
pure-Python loop, timed every 0.2 s on an otherwise idle machine, took 20 to 36 ms, in
stretches of a second or more. A latency run that falls into a slow stretch carries a
higher load than its fraction of max throughput says (max throughput is the best of its
attempts, so it was measured on a fast stretch), and its p99 shows the machine, not the
engine.

The harness times the probe before and after every measured run, and the report shows
each run's *machine speed*: the suite's fastest probe divided by the slower of the run's
two, so 1.00 is the best the machine did in that suite and 0.70 means it ran 30% slower
around that run. The numbers are not corrected by it: a reader sees which runs to
distrust, and a rerun can be asked for.

Pure: the only effect is the time it takes (about 10 ms).
"""

from __future__ import annotations

import time

#: Iterations of one timing: about 3 ms at this VM's best.
PROBE_ITERATIONS = 50_000
#: Timings per probe; the fastest counts (the machine's speed, not a stray interrupt).
PROBE_REPEATS = 3


def _loop(iterations: int) -> int:
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return total


def probe_ms(iterations: int = PROBE_ITERATIONS, repeats: int = PROBE_REPEATS) -> float:
    """The fastest of ``repeats`` timings of a fixed pure-Python loop, in milliseconds."""
    if iterations < 1 or repeats < 1:
        raise ValueError(f"a probe needs positive iterations and repeats, got {iterations} and {repeats}")
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        _loop(iterations)
        best = min(best, time.perf_counter() - started)
    return best * 1e3


def speed(probes: list[float] | None, fastest: float | None) -> float | None:
    """A run's machine speed: ``fastest`` (the suite's best probe) over the slower of the
    run's probes; None when either is unknown (reports made before probes existed)."""
    if not probes or not fastest:
        return None
    return fastest / max(probes)

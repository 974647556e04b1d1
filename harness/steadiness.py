"""How steady the machine's CPU is: a fixed loop, timed over and over for a few seconds.

On the shared virtual machines weir is measured on, the host sometimes takes time from a
running vCPU: for tens to hundreds of milliseconds the same Python loop runs about 1.8
times slower, and now and then for minutes on end (docs/harness.md). The
load average inside the VM does not show it, and it decides the tail of open-loop runs.
A suite probes it before and after its runs, so a report says what the machine was like,
and every open-loop run probes it while it runs (``HostProbe``), so a report says which
runs met a slow stretch.

The probe spins: it runs ``LOOP_ITERATIONS`` additions back to back for ``seconds``. A
probe that slept between loops would never see a slowdown (it is the running vCPU that
loses time; a sleeping one only wakes late). Each 20 ms window keeps its fastest loop,
and the summary is the median window and the share of windows over ``SLOW_FACTOR``
times that median. A steady slowdown shows in the median itself (on the machine of
2026-11-25: 133-140 us calm, 243-252 us in a slow hour), a bursty one in the share.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import trio

#: Additions per timed loop (about 140 us of CPython on the project's VM).
LOOP_ITERATIONS = 3_000
#: The windows a run is cut into (seconds).
WINDOW_S = 0.020
#: A window whose fastest loop took this many times the median window's is slow.
SLOW_FACTOR = 1.4
#: Additions per loop of the probe inside a run (about 7 us): short, because it takes the
#: job's thread.
RUN_LOOP_ITERATIONS = 150
#: How often the probe inside a run times its loop (seconds): ten loops to a window, about
#: 0.35% of the thread.
RUN_INTERVAL_S = 0.002


def _loop(iterations: int) -> int:
    x = 0
    for i in range(iterations):
        x += i * i
    return x


def probe(seconds: float = 3.0) -> dict[str, Any]:
    """Time the fixed loop back to back for ``seconds``; the summary (``summarise``)."""
    samples: list[tuple[float, float]] = []
    end = time.perf_counter() + seconds
    while True:
        started = time.perf_counter()
        if started >= end:
            break
        _loop(LOOP_ITERATIONS)
        samples.append((started, time.perf_counter() - started))
    return summarise(samples, seconds)


class HostProbe(trio.abc.Instrument):
    """The probe inside one run: after an ``epoll`` at least ``interval_s`` after its last
    loop, it times a short loop in the job's thread; ``summary`` cuts the loops into 20 ms
    windows as ``summarise`` does. ``ReplayRun`` adds it to the run's Trio loop when the
    schedule starts; it goes with the loop.

    It measures the thread that runs the job, between the job's steps: a slow window means
    the host took time from that vCPU then, whatever the job was doing. An ``epoll`` comes
    at least once a round of the scheduler, so a loaded job is probed as often as an idle
    one. What it costs is one clock read per ``epoll`` and one loop per ``interval_s``.
    """

    def __init__(
        self, interval_s: float = RUN_INTERVAL_S, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._due = 0.0
        self.started: float | None = None
        self.samples: list[tuple[float, float]] = []

    def start(self) -> None:
        """From now on (the schedule's anchor), loops count."""
        self.started = self._clock()
        self._due = self.started

    def after_io_wait(self, timeout: float) -> None:
        clock = self._clock
        started = clock()
        if self.started is None or started < self._due:
            return
        self._due = started + self.interval_s
        _loop(RUN_LOOP_ITERATIONS)
        self.samples.append((started, clock() - started))

    def summary(self) -> dict[str, Any]:
        """``summarise`` of the loops so far, from ``start`` to the last loop, with every
        window's fastest loop (``windows_us``: microseconds, space-separated), so that a
        report can hold the run against the calmest run of its suite (``calm_loop_us``)."""
        seconds = 0.0 if self.started is None or not self.samples else self.samples[-1][0] - self.started
        return {
            **summarise(self.samples, round(seconds, 3)),
            # one string, not a list: report.json is indented, and a list takes a line a window
            "windows_us": " ".join(f"{w * 1e6:.1f}" for w in window_fastest(self.samples)),
        }


def window_fastest(samples: Sequence[tuple[float, float]], window_s: float = WINDOW_S) -> list[float]:
    """The fastest loop of each ``window_s`` window that has one, in order (seconds).
    ``samples``: (start, duration) of each loop, in seconds."""
    if not samples:
        return []
    first = samples[0][0]
    fastest: dict[int, float] = {}
    for start, duration in samples:
        k = int((start - first) / window_s)
        fastest[k] = min(fastest.get(k, duration), duration)
    return [fastest[k] for k in sorted(fastest)]


def _slow(windows: Sequence[float], reference: float) -> tuple[float, int]:
    """The share of ``windows`` over ``SLOW_FACTOR`` times ``reference``, and the longest
    run of them (windows)."""
    longest = run = slow = 0
    for w in windows:
        is_slow = w > SLOW_FACTOR * reference
        slow += is_slow
        run = run + 1 if is_slow else 0
        longest = max(longest, run)
    return slow / len(windows), longest


def summarise(
    samples: Sequence[tuple[float, float]], seconds: float, window_s: float = WINDOW_S
) -> dict[str, Any]:
    """``samples``: (start, duration) of each loop, in seconds. The median of the windows'
    fastest loops (us), the share of windows slower than ``SLOW_FACTOR`` times it, and
    the longest run of slow windows (ms)."""
    windows = window_fastest(samples, window_s)
    if not windows:
        return {"seconds": seconds, "loop_us": None, "slow_share": None, "longest_slow_ms": None}
    median = statistics.median(windows)
    share, longest = _slow(windows, median)
    return {
        "seconds": seconds,
        "loop_us": round(median * 1e6, 1),
        "slow_share": round(share, 4),
        "longest_slow_ms": round(longest * window_s * 1e3, 1),
    }


def calm_loop_us(summaries: Sequence[dict[str, Any] | None]) -> float | None:
    """The loop time of the calmest of some runs' probes: the lowest median window. The
    runs of one suite share a machine and a process, so a run whose every window was slow
    shows against it (its own median would not)."""
    medians = [s["loop_us"] for s in summaries if s and s.get("loop_us")]
    return min(medians) if medians else None


def windows_us(summary: dict[str, Any] | None) -> list[float]:
    """Every window's fastest loop of a run's probe (us; none for a probe that kept none)."""
    return [float(w) for w in ((summary or {}).get("windows_us") or "").split()]


def slow_share(summary: dict[str, Any] | None, reference_us: float | None = None) -> float | None:
    """The share of a run's windows over ``SLOW_FACTOR`` times ``reference_us`` (the run's
    own median window without one, or for a probe that kept no windows)."""
    if not summary or summary.get("slow_share") is None:
        return None
    windows = windows_us(summary)
    if reference_us is None or not windows:
        return float(summary["slow_share"])
    return _slow(windows, reference_us)[0]


def pooled_slow_share(summaries: Sequence[dict[str, Any] | None], reference_us: float) -> float:
    """The share of all the windows of some runs' probes over ``SLOW_FACTOR`` times
    ``reference_us`` (0 when they kept none)."""
    windows = [w for s in summaries for w in windows_us(s)]
    return _slow(windows, reference_us)[0] if windows else 0.0


def slow_label(summary: dict[str, Any] | None, reference_us: float | None = None) -> str:
    """A run's probe in a few characters for a table cell: '12% slow', or '–'."""
    share = slow_share(summary, reference_us)
    return "–" if share is None else f"{share:.0%} slow"


def loop_label(summary: dict[str, Any] | None) -> str:
    """A run's median window for a progress line: 'loop 8.1 us', or 'not probed'."""
    if not summary or summary.get("loop_us") is None:
        return "not probed"
    return f"loop {summary['loop_us']:.1f} us"


def describe(summary: dict[str, Any] | None) -> str:
    """One phrase for a report: '136 us a loop, 2.0% of windows slow (longest 40 ms)'."""
    if not summary or summary.get("loop_us") is None:
        return "not measured"
    return (
        f"{summary['loop_us']:.0f} us a loop, {summary['slow_share']:.1%} of 20 ms windows over "
        f"{SLOW_FACTOR}x that (longest {summary['longest_slow_ms']:.0f} ms)"
    )

"""The machine-steadiness probe a suite runs before and after its runs, and its report line."""

from __future__ import annotations

import pytest

from harness import report as rep
from harness import steadiness


def _samples(durations_us_per_window: list[float], loops_per_window: int = 4) -> list[tuple[float, float]]:
    """Loops starting every 5 ms, ``loops_per_window`` to a 20 ms window, each window's
    loops taking its duration (one of them slower still, which the fastest-loop rule ignores)."""
    samples = []
    t = 0.0
    for us in durations_us_per_window:
        for i in range(loops_per_window):
            samples.append((t, us * 1e-6 * (3 if i == 1 else 1)))
            t += 0.020 / loops_per_window
    return samples


def test_a_steady_machine_has_no_slow_windows() -> None:
    summary = steadiness.summarise(_samples([140.0] * 50), seconds=1.0)
    assert summary == {"seconds": 1.0, "loop_us": 140.0, "slow_share": 0.0, "longest_slow_ms": 0.0}


def test_slow_windows_are_counted_against_the_median_and_the_longest_run_named() -> None:
    windows = [140.0] * 40 + [260.0] * 6 + [140.0] * 2 + [250.0] * 2  # 50 windows, 8 slow
    summary = steadiness.summarise(_samples(windows), seconds=1.0)
    assert summary["loop_us"] == 140.0
    assert summary["slow_share"] == pytest.approx(8 / 50)
    assert summary["longest_slow_ms"] == pytest.approx(6 * 20.0)


def test_a_machine_slow_throughout_shows_in_the_loop_time_not_the_share() -> None:
    summary = steadiness.summarise(_samples([250.0] * 50), seconds=1.0)
    assert summary["loop_us"] == 250.0 and summary["slow_share"] == 0.0


def test_the_probe_times_the_loop_for_the_time_asked() -> None:
    summary = steadiness.probe(0.1)
    assert summary["seconds"] == 0.1
    assert summary["loop_us"] is not None and summary["loop_us"] > 0
    assert 0.0 <= summary["slow_share"] <= 1.0
    assert steadiness.summarise([], seconds=0.0)["loop_us"] is None


def test_the_report_states_the_steadiness_or_that_it_was_not_measured() -> None:
    base = {"configurations": [], "correctness": [], "datasets": {}, "spec": {}, "suite": "quick"}
    start = {"seconds": 3.0, "loop_us": 136.0, "slow_share": 0.02, "longest_slow_ms": 40.0}
    end = {"seconds": 3.0, "loop_us": 252.0, "slow_share": 0.0, "longest_slow_ms": 0.0}
    md = rep.markdown({**base, "steadiness": {"start": start, "end": end}})
    assert "at start 136 us a loop, 2.0% of 20 ms windows over 1.4x that (longest 40 ms)" in md
    assert "at end 252 us a loop, 0.0% of 20 ms windows" in md
    assert "at start not measured; at end not measured" in rep.markdown(base)  # reports made before the probe

"""The machine-steadiness probe a suite runs before and after its runs, and its report line."""

from __future__ import annotations

import pytest

from weir.harness import report as rep
from weir.harness import steadiness


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


class _FakeClock:
    """A clock that moves only when the test sets it: the probe's loop takes no time on it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_probe_in_a_run_times_its_loop_once_per_interval_after_start() -> None:
    clock = _FakeClock()
    probe = steadiness.HostProbe(interval_s=0.002, clock=clock)
    probe.after_io_wait(0.0)
    assert probe.samples == []  # not started: the schedule has not begun
    probe.start()
    times = [0.0, 0.0005, 0.0019, 0.0021, 0.0030, 0.0041, 0.0100]
    for t in times:
        clock.now = t
        probe.after_io_wait(0.0)
    # a loop at start, then the first epoll at least 2 ms after the last loop
    assert [s for s, _ in probe.samples] == [0.0, 0.0021, 0.0041, 0.0100]
    assert all(duration == 0.0 for _, duration in probe.samples)  # the fake clock stood still
    summary = probe.summary()
    assert summary["seconds"] == 0.01 and summary["slow_share"] == 0.0


def test_the_probe_in_a_run_sees_slow_windows_against_its_own_median_or_the_calmest_run() -> None:
    probe = steadiness.HostProbe()
    probe.start()
    probe.samples = _samples([7.0] * 45 + [12.0] * 5, loops_per_window=10)
    summary = probe.summary()
    assert summary["loop_us"] == 7.0
    assert summary["windows_us"] == " ".join(["7.0"] * 45 + ["12.0"] * 5)
    assert summary["slow_share"] == pytest.approx(5 / 50)
    assert steadiness.slow_label(summary) == "10% slow"
    # a run slow throughout is slow only against a calmer run of the same suite
    slow = steadiness.HostProbe()
    slow.start()
    slow.samples = _samples([12.0] * 50, loops_per_window=10)
    slow_summary = slow.summary()
    assert slow_summary["slow_share"] == 0.0
    calm = steadiness.calm_loop_us([slow_summary, None, summary])
    assert calm == 7.0
    assert steadiness.slow_share(slow_summary, calm) == 1.0
    assert steadiness.slow_label(summary, calm) == "10% slow"
    assert steadiness.slow_label(None) == "–" and steadiness.calm_loop_us([None]) is None
    # a probe that kept no windows (reports before them) falls back on its own share
    assert steadiness.slow_share({"loop_us": 9.0, "slow_share": 0.25}, calm) == 0.25
    assert (
        steadiness.loop_label(slow_summary) == "loop 12.0 us" and steadiness.loop_label(None) == "not probed"
    )


def test_the_report_names_each_runs_slow_windows_next_to_its_p99() -> None:
    def run(p99_us: float, windows_us: list[float] | None) -> dict:
        host = None
        if windows_us is not None:
            median = sorted(windows_us)[len(windows_us) // 2]
            windows = " ".join(f"{w:.1f}" for w in windows_us)
            host = {
                "seconds": 0.2,
                "loop_us": median,
                "slow_share": 0.0,
                "longest_slow_ms": 0.0,
                "windows_us": windows,
            }
        return {
            "latency_us": {"p50": 1000.0, "p90": 2000.0, "p99": p99_us, "p99.9": 1.0, "max": 1.0},
            "host": host,
        }

    calm = [8.0] * 10
    half = {**run(9000.0, calm), "fraction": 0.5, "target_rate": 1.0, "throughput": 1.0, "sustained": True}
    # slow throughout (against the calm run, not its own median), a quarter slow, calm
    half["repeats"] = [run(30000.0, [14.0] * 10), run(9000.0, [8.0] * 6 + [12.0] * 4), run(6000.0, calm)]
    config = {"buffer_timeout_ms": 1}
    top = {"fraction": None, "latency_us": half["latency_us"], "checkpoints_completed": 0}
    report = {
        "suite": "quick", "correctness": [], "datasets": {}, "spec": {},
        "configurations": [{"group": "g", "key": "g 1ms", "config": config, "max_throughput": 2.0,
                            "runs": [top, half]}],
    }  # fmt: skip
    assert rep.host_calm_us(report) == 8.0
    (target,) = rep.targets(report)
    assert target["runs"] == "30.00 (100% slow) / 9.00 (40% slow) / 6.00 (0% slow)"
    assert rep.target_value(target) == "9.00 ms (runs: 30.00 (100% slow) / 9.00 (40% slow) / 6.00 (0% slow))"
    md = rep.markdown(report)
    assert "| 30.00 (100% slow) / 9.00 (40% slow) / 6.00 (0% slow) |" in md
    assert "the calmest run of the report (8.0 us a loop)" in md
    # one figure for the report: the median run (10 windows) counts once, through the repeats
    assert rep.host_slow_overall(report) == (pytest.approx(14 / 30), 8.0)
    assert (
        "the open-loop runs (a loop timed in the job's thread every 2 ms): 47% of the open-loop runs' 20 ms "
        in md
    )
    # the max-throughput attempts are held against the calmest attempt, not an open-loop run
    busy = [14.0] * 10
    report["configurations"][0]["throughput_attempts"] = [2.0, 1.0]
    report["configurations"][0]["throughput_attempts_host"] = [
        run(0.0, busy)["host"],
        run(0.0, [14.0] * 5 + [21.0] * 5)["host"],
    ]
    assert rep.attempts_calm_us(report) == 14.0
    assert rep.each_attempt(report["configurations"][0], 14.0) == "2 (0% slow), 1 (50% slow)"
    assert "| 2 (0% slow), 1 (50% slow) |" in rep.markdown(report)
    assert rep.each_attempt({"max_throughput": 3.0}) == "3"  # reports before attempts were probed
    # the plot marks the runs that met a slow host in 10% of their windows or more
    assert [rep._host_slow(r, 8.0) for r in half["repeats"]] == [True, True, False]
    # a report made before runs were probed lists the p99s alone
    for r in half["repeats"]:
        r["host"] = None
    assert rep.targets(report)[0]["runs"] == "30.00 / 9.00 / 6.00"
    assert rep.host_slow_overall(report) is None and rep.describe_host(report) == "not probed"
    unprobed = rep.markdown(report)  # says nothing of a probe it does not have
    assert "calmest run of the report" not in unprobed and "(host slow windows)" not in unprobed

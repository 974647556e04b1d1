"""User metrics with PyFlink's names, read as the task reports them."""

from __future__ import annotations

import pytest

from weir.core.metrics import MetricGroup
from weir.errors import UsageError


class Clock:
    def __init__(self) -> None:
        self.now_ms = 0

    def __call__(self) -> int:
        return self.now_ms


def test_counter_gauge_meter_and_distribution_report_by_dotted_name() -> None:
    clock = Clock()
    root = MetricGroup(clock)
    counter = root.add_group("io").counter("lines")
    counter.inc()
    counter.inc(5)
    counter.dec(2)
    assert counter.get_count() == 4
    root.gauge("queue", lambda: 7)
    meter = root.meter("events", time_span_in_seconds=10)
    for second in range(20):
        clock.now_ms = second * 1000
        meter.mark_event(3)
    distribution = root.add_group("key", "value").distribution("sizes")
    for v in (4, 1, 7):
        distribution.update(v)
    snapshot = root.snapshot()
    assert snapshot == {
        "queue": 7,
        "events": {"count": 60, "rate": 3.0},
        "io.lines": 4,
        "key.value.sizes": {"count": 3, "sum": 12, "min": 1, "max": 7, "mean": 4.0},
    }
    clock.now_ms = 100_000  # nothing marked for far longer than the span
    assert root.snapshot()["events"] == {"count": 60, "rate": 0.0}


def test_registering_a_name_again_returns_the_first_metric_or_names_the_clash() -> None:
    root = MetricGroup(Clock())
    assert root.counter("n") is root.counter("n")
    with pytest.raises(
        UsageError, match="metric 'n' is already a Counter, cannot register it again as a Distribution"
    ):
        root.distribution("n")
    with pytest.raises(UsageError, match="time_span_in_seconds as a positive integer, got 0"):
        root.meter("m", 0)


def test_a_failing_gauge_reports_its_error_instead_of_failing_the_report() -> None:
    root = MetricGroup(Clock())
    root.gauge("bad", lambda: 1 // 0)
    assert root.snapshot()["bad"].startswith("<gauge failed: ZeroDivisionError")

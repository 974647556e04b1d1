"""User metrics: what ``runtime_context.get_metrics_group()`` hands a function, with
PyFlink's names (``pyflink.metrics``): ``MetricGroup.add_group/counter/gauge/meter/
distribution``, ``Counter.inc/dec/get_count``, ``Meter.mark_event/get_count``,
``Distribution.update``.

Each operator subtask has one root group; its metrics are read by ``snapshot()`` into the
task's statistics (``TaskStatistics.user_metrics``), which the job's result, ``weir run``'s
summary and the dashboard show. Metric names are dotted paths from the operator:
``add_group("io").counter("lines")`` is ``io.lines``; ``add_group("key", "value")`` adds
the two groups ``key.value`` (Flink's key/value group).

Pure: the clock (for meters) is a parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weir.errors import UsageError


class Metric:
    """Base of every metric."""

    def value(self, now_ms: int) -> Any:
        raise NotImplementedError


class Counter(Metric):
    def __init__(self) -> None:
        self._count = 0

    def inc(self, n: int = 1) -> None:
        self._count += n

    def dec(self, n: int = 1) -> None:
        self._count -= n

    def get_count(self) -> int:
        return self._count

    def value(self, now_ms: int) -> int:
        return self._count


class Gauge(Metric):
    """A value read from the user's callable each time the metrics are reported."""

    def __init__(self, obj: Callable[[], Any]) -> None:
        self._obj = obj

    def value(self, now_ms: int) -> Any:
        try:
            return self._obj()
        except Exception as exc:  # a failing gauge must not fail the report
            return f"<gauge failed: {type(exc).__name__}: {exc}>"


class Meter(Metric):
    """Events and their rate per second over the last ``time_span_in_seconds`` (Flink's MeterView)."""

    def __init__(self, time_span_in_seconds: int, clock_ms: Callable[[], int]) -> None:
        self.time_span_s = time_span_in_seconds
        self._clock_ms = clock_ms
        self._count = 0
        self._by_second: dict[int, int] = {}

    def mark_event(self, value: int = 1) -> None:
        self._count += value
        second = self._clock_ms() // 1000
        self._by_second[second] = self._by_second.get(second, 0) + value
        if len(self._by_second) > 2 * self.time_span_s:
            self._prune(second)

    def _prune(self, second: int) -> None:
        oldest = second - self.time_span_s
        self._by_second = {s: n for s, n in self._by_second.items() if s > oldest}

    def get_count(self) -> int:
        return self._count

    def get_rate(self, now_ms: int | None = None) -> float:
        second = (self._clock_ms() if now_ms is None else now_ms) // 1000
        self._prune(second)
        return sum(self._by_second.values()) / self.time_span_s

    def value(self, now_ms: int) -> dict[str, Any]:
        return {"count": self._count, "rate": self.get_rate(now_ms)}


class Distribution(Metric):
    """Values reported through ``update``, summarised as count, sum, min, max and mean."""

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0
        self.min: Any = None
        self.max: Any = None

    def update(self, value: int) -> None:
        self.count += 1
        self.sum += value
        self.min = value if self.min is None or value < self.min else self.min
        self.max = value if self.max is None or value > self.max else self.max

    def value(self, now_ms: int) -> dict[str, Any]:
        mean = self.sum / self.count if self.count else None
        return {"count": self.count, "sum": self.sum, "min": self.min, "max": self.max, "mean": mean}


class MetricGroup:
    """A named container of metrics and subgroups (``pyflink.metrics.MetricGroup``)."""

    def __init__(self, clock_ms: Callable[[], int], path: tuple[str, ...] = ()) -> None:
        self._clock_ms = clock_ms
        self._path = path
        self._metrics: dict[str, Metric] = {}
        self._groups: dict[str, MetricGroup] = {}

    def add_group(self, name: str, extra: str | None = None) -> MetricGroup:
        group = self._group(name)
        return group if extra is None else group._group(extra)

    def _group(self, name: str) -> MetricGroup:
        _check_name("metric group", name)
        if name not in self._groups:
            self._groups[name] = MetricGroup(self._clock_ms, (*self._path, name))
        return self._groups[name]

    def _register(self, name: str, metric: Metric) -> Any:
        _check_name("metric", name)
        existing = self._metrics.get(name)
        if existing is not None:
            if type(existing) is not type(metric):
                raise UsageError(
                    f"metric '{'.'.join((*self._path, name))}' is already a {type(existing).__name__}, "
                    f"cannot register it again as a {type(metric).__name__}"
                )
            return existing  # Flink returns the metric registered first under a name
        self._metrics[name] = metric
        return metric

    def counter(self, name: str) -> Counter:
        return self._register(name, Counter())

    def gauge(self, name: str, obj: Callable[[], Any]) -> None:
        if not callable(obj):
            raise UsageError(f"gauge '{name}' needs a callable that returns its value, got {obj!r}")
        self._register(name, Gauge(obj))

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:
        if (
            isinstance(time_span_in_seconds, bool)
            or not isinstance(time_span_in_seconds, int)
            or time_span_in_seconds < 1
        ):
            raise UsageError(
                f"meter '{name}' needs time_span_in_seconds as a positive integer, got {time_span_in_seconds!r}"
            )
        return self._register(name, Meter(time_span_in_seconds, self._clock_ms))

    def distribution(self, name: str) -> Distribution:
        return self._register(name, Distribution())

    def snapshot(self) -> dict[str, Any]:
        """Every metric of this group and its subgroups, by dotted name."""
        now_ms = self._clock_ms()
        out: dict[str, Any] = {}
        self._collect(now_ms, out)
        return out

    def _collect(self, now_ms: int, out: dict[str, Any]) -> None:
        for name, metric in self._metrics.items():
            out[".".join((*self._path, name))] = metric.value(now_ms)
        for group in self._groups.values():
            group._collect(now_ms, out)


def _check_name(what: str, name: object) -> None:
    if not isinstance(name, str) or not name:
        raise UsageError(f"a {what} name must be a non-empty string, got {name!r}")

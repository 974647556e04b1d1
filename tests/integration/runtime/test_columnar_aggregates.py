"""Aggregates and RunningAggregates end to end, vectorized and per-record, against an oracle.

At parallelism 1, 2 and 4, on the heap and the LMDB backend, with checkpoints every few
milliseconds: the vectorized window (with allowed lateness) and a per-record copy of the
same aggregates (a plain AggregateFunction, which never runs vectorized) both equal a
plain Python oracle; the running aggregates' last row per key equals the key's totals.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest

from weir.columnar import Aggregates, RunningAggregates, count, key, max, mean, sum, window_end, window_start
from weir.columnar.aggregates import AggregatesWindowFunction
from weir.common import Configuration, Duration, Types, WatermarkStrategy
from weir.core.functions import AggregateFunction
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.window import TumblingEventTimeWindows

EVENT = Types.TUPLE([Types.LONG(), Types.LONG(), Types.DOUBLE(), Types.LONG()])
EVENTS = 4_000
SIZE = 1_000


def event(i: int) -> tuple[int, int, float, int]:
    """(key, value, value / 4, event time): at most 300 ms out of order, no record late."""
    return (i * 7919) % 23, (i * 31) % 200 - 100, ((i * 17) % 40) / 4, i * 3 + (i * 104_729) % 300


class PerRecord(AggregateFunction):
    """The same aggregates as a plain AggregateFunction: never vectorized."""

    def __init__(self, agg: Aggregates) -> None:
        self.spec = agg.spec

    def create_accumulator(self) -> Any:
        return self.spec.create_accumulator()

    def add(self, value: Any, accumulator: Any) -> Any:
        return self.spec.add(value, accumulator)

    def get_result(self, accumulator: Any) -> Any:
        return self.spec.result(accumulator, None, None, None)

    def merge(self, a: Any, b: Any) -> Any:
        return self.spec.merge(a, b)


def oracle() -> Counter[Any]:
    panes: dict[tuple[int, int], list[tuple[int, float]]] = defaultdict(list)
    for i in range(EVENTS):
        k, v, f, t = event(i)
        panes[(k, t - t % SIZE)].append((v, f))
    out: Counter[Any] = Counter()
    for (k, start), items in panes.items():
        values = [v for v, _ in items]
        floats = [f for _, f in items]
        out[
            (k, start, start + SIZE, len(items), sum_of(values), max_of(values), sum_of(floats) / len(items))
        ] += 1
    return out


def sum_of(values: list[Any]) -> Any:
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


def max_of(values: list[Any]) -> Any:
    best = values[0]
    for v in values[1:]:
        if v > best:
            best = v
    return best


@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_both_paths_equal_the_oracle(parallelism: int, backend: str) -> None:
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", 1)
    conf.set_string("state.backend.type", backend)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(20)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(300)
    ).with_timestamp_assigner(lambda e, _: e[3])
    source = env.from_collection([event(i) for i in range(EVENTS)], type_info=EVENT)
    keyed = source.assign_timestamps_and_watermarks(strategy).key_by(lambda e: e[0], key_type=Types.LONG())
    agg = Aggregates(key(), window_start(), window_end(), count(), sum(1), max(1), mean(2))
    window = TumblingEventTimeWindows.of(SIZE)
    vectorized = keyed.window(window).allowed_lateness(200).aggregate(agg)
    per_record = keyed.window(window).aggregate(PerRecord(agg), AggregatesWindowFunction(agg.spec))
    running = keyed.process(RunningAggregates(key(), count(), sum(1)))
    branches = [
        vectorized.map(lambda r: ("vectorized", tuple(r))),
        per_record.map(lambda r: ("per-record", tuple(r))),
        running.map(lambda r: ("running", tuple(r))),
    ]
    results = branches[0].union(*branches[1:]).execute_and_collect(limit=10**6)
    got: dict[str, Counter[Any]] = defaultdict(Counter)
    last: dict[int, tuple[int, int]] = {}
    for path, record in results:
        if path == "running":
            k, n, total = record
            if n > last.get(k, (0, 0))[0]:
                last[k] = (n, total)
        else:
            got[path][record] += 1
    expected = oracle()
    assert got["vectorized"] == expected
    assert got["per-record"] == expected
    totals: dict[int, tuple[int, int]] = {}
    for i in range(EVENTS):
        k, v, _, _ = event(i)
        n, total = totals.get(k, (0, 0))
        totals[k] = (n + 1, total + v)
    assert last == totals

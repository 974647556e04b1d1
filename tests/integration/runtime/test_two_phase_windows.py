"""Two-phase Aggregates windows end to end: the same rows as one phase and as an oracle.

At parallelism 1, 2 and 4, on the heap and the LMDB backend, with a checkpoint every 20 ms
(the writers hand their held rows over before each barrier): a tumbling window of
``Aggregates`` keyed by ``weir.columnar.field(0)`` gives the oracle's rows with
``table.optimizer.agg-phase-strategy`` AUTO (two phases) and ONE_PHASE. ``weir plan``'s
notes say which windows combine before the shuffle and why the others do not.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest

from weir import columnar as col
from weir.common import Configuration, Duration, Types, WatermarkStrategy
from weir.datastream import OutputTag, StreamExecutionEnvironment
from weir.datastream.window import (
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from weir.graph.stream_graph import generate_stream_graph
from weir.operators.explain import explain_graph

EVENT = Types.TUPLE([Types.LONG(), Types.LONG(), Types.DOUBLE(), Types.LONG()])
EVENTS = 6_000
SIZE = 500


def event(i: int) -> tuple[int, int, float, int]:
    """(key, value, a float, event time): at most 300 ms out of order, no record late."""
    return (i * 7919) % 13, (i * 31) % 200 - 100, ((i * 17) % 40) / 4, i * 2 + (i * 104_729) % 300


def environment(parallelism: int, backend: str, strategy: str) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", 1)
    conf.set_string("state.backend.type", backend)
    conf.set_string("table.optimizer.agg-phase-strategy", strategy)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(20)
    return env


def keyed(env: StreamExecutionEnvironment) -> Any:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(300)
    ).with_timestamp_assigner(col.timestamp_field(3))
    source = env.from_collection([event(i) for i in range(EVENTS)], type_info=EVENT)
    return source.assign_timestamps_and_watermarks(strategy).key_by(col.field(0))


AGGREGATES = (col.key(), col.window_start(), col.count(), col.sum(1), col.min(1), col.max(2), col.last(1))


def oracle() -> Counter[Any]:
    panes: dict[tuple[int, int], list[tuple[int, float]]] = defaultdict(list)
    for i in range(EVENTS):
        k, v, f, t = event(i)
        panes[(k, t - t % SIZE)].append((v, f))
    return Counter(
        (k, start, len(items), sum(v for v, _ in items), min(v for v, _ in items), max(f for _, f in items))
        for (k, start), items in panes.items()
    )


@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_two_phases_give_the_one_phase_rows(parallelism: int, backend: str) -> None:
    got = {}
    for strategy in ("AUTO", "ONE_PHASE"):
        env = environment(parallelism, backend, strategy)
        rows = keyed(env).window(TumblingEventTimeWindows.of(SIZE)).aggregate(col.Aggregates(*AGGREGATES))
        notes = explain_graph(generate_stream_graph(env))
        window_note = next(n for n in notes.values() if "Aggregates(" in n)
        assert ("two-phase:" in window_note) == (strategy == "AUTO"), window_note
        got[strategy] = [tuple(r) for r in rows.execute_and_collect(limit=10**6)]
    lasts = {}
    for i in range(EVENTS):  # last(1): the value of the pane's last record in arrival order at p=1
        k, v, _, t = event(i)
        lasts[(k, t - t % SIZE)] = v
    expected = oracle()
    for strategy, rows in got.items():
        assert Counter(r[:6] for r in rows) == expected, strategy
        if parallelism == 1:  # one source subtask: arrival order is the events' order
            assert all(r[6] == lasts[(r[0], r[1])] for r in rows), strategy
    if parallelism == 1:
        assert got["AUTO"] == got["ONE_PHASE"]  # the same rows in the same order


@pytest.mark.parametrize(
    ("build", "why"),
    [
        (lambda k: k.window(TumblingEventTimeWindows.of(SIZE)).aggregate(col.Aggregates(col.key(), col.sum(2))),
         "one phase: a float sum or mean"),
        (lambda k: k.window(SlidingEventTimeWindows.of(SIZE, 300)).aggregate(col.Aggregates(col.key(), col.sum(1))),
         "one phase: the window size 500 ms is not a multiple of its slide 300 ms"),
        (lambda k: k.window(SlidingEventTimeWindows.of(SIZE, 250)).aggregate(col.Aggregates(col.key(), col.last(1))),
         "one phase: last() or a float min/max over sliding windows"),
        (lambda k: k.window(TumblingProcessingTimeWindows.of(SIZE)).aggregate(col.Aggregates(col.key(), col.sum(1))),
         "is not an event-time window"),
        (lambda k: k.window(TumblingEventTimeWindows.of(SIZE)).side_output_late_data(OutputTag("late", EVENT))
         .aggregate(col.Aggregates(col.key(), col.sum(1))),
         "one phase: a late-data side output needs the late records themselves"),
        (lambda k: k.window(SlidingEventTimeWindows.of(SIZE, 250)).aggregate(col.Aggregates(col.key(), col.sum(1))),
         "two-phase: partial rows"),
    ],
)  # fmt: skip
def test_the_plan_says_why_a_window_aggregates_in_one_phase(build: Any, why: str) -> None:
    env = environment(2, "hashmap", "AUTO")
    build(keyed(env)).print()
    notes = explain_graph(generate_stream_graph(env))
    window_note = next(n for n in notes.values() if "Aggregates(" in n)
    assert why in window_note, window_note


def test_a_key_selector_function_aggregates_in_one_phase() -> None:
    env = environment(2, "hashmap", "AUTO")
    stream = keyed(env).map(lambda e: e, output_type=EVENT).key_by(lambda e: e[0], key_type=Types.LONG())
    stream.window(TumblingEventTimeWindows.of(SIZE)).aggregate(col.Aggregates(col.key(), col.sum(1))).print()
    notes = explain_graph(generate_stream_graph(env))
    assert "one phase: the key is not weir.columnar.field(i)" in next(
        n for n in notes.values() if "Aggregates(" in n
    )

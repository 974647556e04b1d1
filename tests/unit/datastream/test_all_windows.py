"""``window_all``/``count_window_all``: AllWindowedStream with keyless all-window functions, at parallelism 1."""

from __future__ import annotations

from typing import Any

import pytest

from weir.common import Duration, Types, WatermarkStrategy
from weir.common.watermark_strategy import TimestampAssigner
from weir.datastream import (
    AllWindowedStream,
    AllWindowFunction,
    ProcessAllWindowFunction,
    StreamExecutionEnvironment,
)
from weir.datastream.window import CountEvictor, CountTrigger, TumblingEventTimeWindows
from weir.errors import UsageError

PAIR = Types.TUPLE([Types.STRING(), Types.INT()])


class ByField(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


def stream(env: StreamExecutionEnvironment) -> Any:
    data = [("a", 1_000), ("b", 2_000), ("a", 6_000), ("c", 12_000)]
    return env.from_collection(data, type_info=PAIR).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(
            ByField()
        )
    )


class Describe(ProcessAllWindowFunction):
    def process(self, context: Any, elements: Any) -> Any:
        window = context.window()
        yield (window.start, window.end, sorted(e[0] for e in elements))


class Count(AllWindowFunction):
    def apply(self, window: Any, inputs: Any) -> Any:
        return [(window.start, len(list(inputs)))]


def collect(ds: Any) -> list[Any]:
    with ds.execute_and_collect() as results:
        return sorted(results)


def test_process_all_window_function_gets_context_and_elements() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(3)
    windowed = stream(env).window_all(TumblingEventTimeWindows.of(Duration.of_seconds(10)))
    assert isinstance(windowed, AllWindowedStream)
    out = windowed.process(Describe())
    assert out.get_transformation().parallelism == 1
    assert collect(out) == [(0, 10_000, ["a", "a", "b"]), (10_000, 20_000, ["c"])]


def test_apply_reduce_and_aggregate_with_all_window_functions() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    windowed = stream(env).window_all(TumblingEventTimeWindows.of(Duration.of_seconds(10)))
    assert collect(windowed.apply(Count())) == [(0, 3), (10_000, 1)]

    windowed = stream(env).window_all(TumblingEventTimeWindows.of(Duration.of_seconds(10)))
    summed = windowed.reduce(lambda a, b: ("sum", a[1] + b[1]), window_function=Count())
    assert collect(summed) == [(0, 1), (10_000, 1)]


def test_count_window_all_and_evictor() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    ds = env.from_collection([("x", i) for i in range(7)], type_info=PAIR)
    assert collect(ds.count_window_all(3).reduce(lambda a, b: (a[0], a[1] + b[1]))) == [("x", 3), ("x", 12)]

    ds = env.from_collection([("x", i) for i in range(7)], type_info=PAIR)
    from weir.datastream.window import GlobalWindows

    last_two_every_three = (
        ds.window_all(GlobalWindows.create()).trigger(CountTrigger.of(3)).evictor(CountEvictor.of(2))
    )
    assert collect(last_two_every_three.reduce(lambda a, b: (a[0], a[1] + b[1]))) == [("x", 3), ("x", 9)]


def test_keyed_window_functions_are_refused() -> None:
    from weir.datastream import ProcessWindowFunction

    class Keyed(ProcessWindowFunction):
        def process(self, key: Any, context: Any, elements: Any) -> Any:
            return []

    env = StreamExecutionEnvironment.get_execution_environment()
    windowed = stream(env).window_all(TumblingEventTimeWindows.of(Duration.of_seconds(10)))
    with pytest.raises(UsageError, match="ProcessAllWindowFunction"):
        windowed.process(Keyed())
    with pytest.raises(UsageError, match="non-keyed window"):
        windowed.apply(Keyed())


def test_plan_says_why_an_evictor_runs_per_record() -> None:
    from weir.operators.window import explain

    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([("x", 1)], type_info=PAIR)
    ds.key_by(lambda r: r[0]).count_window(3).evictor(CountEvictor.of(2)).sum(1).print()
    graph = env.get_stream_graph()
    node = next(n for n in graph.nodes.values() if n.operator is not None and n.operator.kind == "window")
    vectorized, reason = explain(node)
    assert not vectorized and reason == "per-record: evictor CountEvictor(2) needs every element of a window"

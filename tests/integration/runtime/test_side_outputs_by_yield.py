"""Side outputs the PyFlink way: a function of an operator whose side output is read may
``yield output_tag, value``, and ``value`` goes to that side output, not the main one."""

from __future__ import annotations

from typing import Any

import pytest

from weir.common import Configuration, Duration, Types, WatermarkStrategy
from weir.common.watermark_strategy import TimestampAssigner
from weir.datastream import (
    CoProcessFunction,
    KeyedProcessFunction,
    OutputTag,
    ProcessFunction,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
)
from weir.datastream.window import TumblingEventTimeWindows

ODD = OutputTag("odd", Types.LONG())


def make_env(parallelism: int) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", 1)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    return env


def main_and_side(main: Any, tag: OutputTag) -> tuple[list[Any], list[Any]]:
    both = main.map(lambda v: ("main", v)).union(main.get_side_output(tag).map(lambda v: ("side", v)))
    records = both.execute_and_collect(limit=10_000)
    return sorted(v for k, v in records if k == "main"), sorted(v for k, v in records if k == "side")


class Split(ProcessFunction):
    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Any:
        if value % 2:
            yield ODD, value
        else:
            yield value


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_process_function_yields_to_a_side_output(parallelism: int) -> None:
    env = make_env(parallelism)
    main = env.from_collection(list(range(20)), type_info=Types.LONG()).process(Split(), Types.LONG())
    evens, odds = main_and_side(main, ODD)
    assert evens == list(range(0, 20, 2))
    assert odds == list(range(1, 20, 2))


def test_a_flat_map_yields_to_a_side_output_as_in_pyflink() -> None:
    # PyFlink runs flat_map as a process function, so its results are routed the same way.
    env = make_env(1)
    main = env.from_collection(list(range(6)), type_info=Types.LONG()).flat_map(
        lambda v: [(ODD, v)] if v % 2 else [v, v], output_type=Types.LONG()
    )
    evens, odds = main_and_side(main, ODD)
    assert (evens, odds) == ([0, 0, 2, 2, 4, 4], [1, 3, 5])


class KeyedSplit(KeyedProcessFunction):
    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:
        ctx.timer_service().register_event_time_timer(value[1] + 10)
        yield ODD, value[1]

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Any:
        yield ODD, -timestamp
        yield timestamp


class Stamp(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


def test_a_keyed_process_function_yields_to_a_side_output_from_elements_and_timers() -> None:
    env = make_env(2)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(
        Stamp()
    )
    main = (
        env.from_collection(
            [("a", 1), ("b", 2), ("a", 3)], type_info=Types.TUPLE([Types.STRING(), Types.LONG()])
        )
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda p: p[0], key_type=Types.STRING())
        .process(KeyedSplit(), Types.LONG())
    )
    timers, side = main_and_side(main, ODD)
    assert timers == [11, 12, 13]
    assert side == [-13, -12, -11, 1, 2, 3]


class CoSplit(CoProcessFunction):
    def process_element1(self, value: Any, ctx: CoProcessFunction.Context) -> Any:
        yield value

    def process_element2(self, value: Any, ctx: CoProcessFunction.Context) -> Any:
        yield ODD, value


def test_a_co_process_function_yields_to_a_side_output() -> None:
    env = make_env(1)
    first = env.from_collection([2, 4], type_info=Types.LONG())
    second = env.from_collection([1, 3], type_info=Types.LONG())
    main = first.connect(second).process(CoSplit(), Types.LONG())
    assert main_and_side(main, ODD) == ([2, 4], [1, 3])


class CountAndReportLarge(ProcessWindowFunction):
    def process(self, key: Any, context: ProcessWindowFunction.Context, elements: Any) -> Any:
        values = [e[1] for e in elements]
        yield key, len(values)
        for v in values:
            if v >= 5:
                yield ODD, v


def test_a_process_window_function_yields_to_a_side_output() -> None:
    env = make_env(2)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Stamp())
    records = [("a", 1), ("a", 5), ("b", 2), ("a", 12), ("b", 7)]
    main = (
        env.from_collection(records, type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda p: p[0], key_type=Types.STRING())
        .window(TumblingEventTimeWindows.of(Duration.of_millis(10)))
        .process(CountAndReportLarge(), Types.TUPLE([Types.STRING(), Types.INT()]))
    )
    counts, large = main_and_side(main, ODD)
    assert counts == [("a", 1), ("a", 2), ("b", 2)]
    assert large == [5, 7, 12]


def test_without_a_reader_of_the_side_output_the_pair_stays_on_the_main_output() -> None:
    # As PyFlink: routing happens only for an operator whose side outputs are read.
    env = make_env(1)
    out = env.from_collection([1, 2]).process(Split()).execute_and_collect(limit=10)
    assert out == [(ODD, 1), 2]

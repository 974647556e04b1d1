"""The public API: PyFlink's names and shapes, and one clear error per bad input."""

from __future__ import annotations

import pickle

import pytest

from weir.common import Configuration, Duration, Row, Time, Types, WatermarkStrategy
from weir.common.typeinfo import RowTypeInfo
from weir.datastream import (
    CheckpointingMode,
    KeyedProcessFunction,
    MapFunction,
    OutputTag,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
)
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
)
from weir.errors import UsageError


@pytest.mark.parametrize("bad", [0, -1, "2", 2.0, True])
def test_bad_parallelism_is_rejected_everywhere(env: StreamExecutionEnvironment, bad: object) -> None:
    with pytest.raises(UsageError, match="parallelism"):
        env.set_parallelism(bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"parallelism of operator 'Map' must be a positive integer"):
        env.from_collection([1]).map(lambda x: x).set_parallelism(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -5, 32769, "128"])
def test_max_parallelism_outside_range_is_rejected(env: StreamExecutionEnvironment, bad: object) -> None:
    with pytest.raises(UsageError, match=r"within 1\.\.32768"):
        env.set_max_parallelism(bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"within 1\.\.32768"):
        env.from_collection([1]).map(lambda x: x).set_max_parallelism(bad)  # type: ignore[arg-type]


def test_parallelism_above_max_parallelism_names_both(env: StreamExecutionEnvironment) -> None:
    m = env.from_collection([1]).map(lambda x: x).name("window").set_max_parallelism(128)
    with pytest.raises(
        UsageError, match=r"parallelism 300 exceeds max_parallelism 128 for operator 'window'"
    ):
        m.set_parallelism(300)
    n = env.from_collection([1]).map(lambda x: x).name("w2").set_parallelism(10)
    with pytest.raises(UsageError, match=r"parallelism 10 exceeds max_parallelism 4 for operator 'w2'"):
        n.set_max_parallelism(4)


def test_non_parallel_source_stays_at_one(env: StreamExecutionEnvironment) -> None:
    with pytest.raises(UsageError, match="non-parallel"):
        env.from_collection([1, 2]).set_parallelism(2)


def test_window_on_a_non_keyed_stream_is_an_error(env: StreamExecutionEnvironment) -> None:
    s = env.from_collection([1])
    with pytest.raises(UsageError, match=r"window\(\) needs a KeyedStream: call key_by"):
        s.window(TumblingEventTimeWindows.of(Time.seconds(1)))
    with pytest.raises(UsageError, match=r"count_window\(\) needs a KeyedStream"):
        s.count_window(3)


def test_settings_on_a_keyed_stream_are_errors(env: StreamExecutionEnvironment) -> None:
    keyed = env.from_collection([1]).key_by(lambda x: x)
    for call in (lambda: keyed.set_parallelism(2), lambda: keyed.name("x"), lambda: keyed.uid("u")):
        with pytest.raises(UsageError, match="KeyedStream"):
            call()


def test_settings_on_a_union_are_errors(env: StreamExecutionEnvironment) -> None:
    u = env.from_collection([1]).union(env.from_collection([2]))
    with pytest.raises(UsageError, match="no operator of its own"):
        u.set_parallelism(2)


def test_non_callable_functions_are_rejected(env: StreamExecutionEnvironment) -> None:
    s = env.from_collection([1])
    with pytest.raises(UsageError, match=r"map\(\) needs a MapFunction or a callable"):
        s.map(42)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"key_by\(\) needs a KeySelector"):
        s.key_by("field")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="KeyedProcessFunction needs a KeyedStream"):
        s.process(KeyedProcessFunction())


def test_type_info_must_be_called(env: StreamExecutionEnvironment) -> None:
    with pytest.raises(UsageError, match=r"forget the parentheses"):
        env.from_collection([1]).map(lambda x: x, output_type=Types.LONG)  # type: ignore[arg-type]


def test_map_function_classes_and_callables_both_work(env: StreamExecutionEnvironment) -> None:
    class Double(MapFunction):
        def map(self, value: int) -> int:
            return value * 2

    s = env.from_collection([1], type_info=Types.LONG())
    a = s.map(Double(), output_type=Types.LONG())
    b = s.map(lambda v: v * 2)
    assert a.get_type() == Types.LONG() and b.get_type() is None
    assert s.filter(bool).get_type() == Types.LONG()


def test_from_source_validates_its_arguments(env: StreamExecutionEnvironment) -> None:
    src = NumberSequenceSource(1, 10)
    with pytest.raises(UsageError, match="needs a Source"):
        env.from_source([1, 2], WatermarkStrategy.no_watermarks(), "s")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="WatermarkStrategy"):
        env.from_source(src, None, "s")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="start <= end"):
        NumberSequenceSource(10, 1)


def test_window_assigners_follow_flink() -> None:
    tumbling = TumblingEventTimeWindows.of(Time.seconds(10))
    assert tumbling.assign_windows(None, 12_345) == [TimeWindow(10_000, 20_000)]
    assert tumbling.assign_windows(None, -1) == [TimeWindow(-10_000, 0)]
    sliding = SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5))
    assert sliding.assign_windows(None, 12_000) == [TimeWindow(10_000, 20_000), TimeWindow(5_000, 15_000)]
    offset = TumblingEventTimeWindows.of(Time.hours(1), Time.minutes(15))
    assert offset.assign_windows(None, 0) == [TimeWindow(-45 * 60_000, 15 * 60_000)]
    assert EventTimeSessionWindows.with_gap(Time.seconds(3)).assign_windows(None, 7) == [TimeWindow(7, 3007)]
    with pytest.raises(UsageError, match="positive size"):
        TumblingEventTimeWindows.of(0)
    with pytest.raises(UsageError, match="offset"):
        TumblingEventTimeWindows.of(Time.seconds(1), Time.seconds(2))


def test_windowed_stream_options_are_validated(env: StreamExecutionEnvironment) -> None:
    ws = env.from_collection([1]).key_by(lambda x: x).window(TumblingEventTimeWindows.of(Time.seconds(1)))
    with pytest.raises(UsageError, match="non-negative"):
        ws.allowed_lateness(-1)
    with pytest.raises(UsageError, match="OutputTag"):
        ws.side_output_late_data("late")  # type: ignore[arg-type]
    late = OutputTag("late")
    out = ws.allowed_lateness(500).side_output_late_data(late).reduce(lambda a, b: a + b)
    spec = out.get_transformation().operator  # type: ignore[attr-defined]
    assert spec.options["allowed_lateness_ms"] == 500 and spec.options["late_data_tag"] == late


def test_configuration_validates_known_keys() -> None:
    conf = Configuration()
    conf.set_string("execution.buffer-timeout.interval", "5 ms")
    conf.set_string("some.unknown.key", "kept")
    assert conf.get_string("some.unknown.key") == "kept"
    with pytest.raises(UsageError, match=r"execution.checkpointing.interval: expected a duration"):
        conf.set_string("execution.checkpointing.interval", "soon")
    with pytest.raises(UsageError, match=r"state.backend.type: expected one of hashmap, lmdb"):
        conf.set_string("state.backend.type", "rocks")
    with pytest.raises(UsageError, match=r"parallelism.default: must be positive"):
        conf.set_integer("parallelism.default", 0)


def test_environment_settings_round_trip_through_configuration() -> None:
    conf = Configuration()
    conf.set_string("execution.checkpointing.interval", "10 s")
    conf.set_string("restart-strategy.type", "fixed-delay")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    assert env.get_checkpoint_interval() == 10_000
    env.enable_checkpointing(500, CheckpointingMode.AT_LEAST_ONCE)
    env.set_buffer_timeout(0)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.get_checkpoint_config().enable_unaligned_checkpoints()
    env.get_checkpoint_config().set_aligned_checkpoint_timeout(Duration.of_seconds(3))
    env.get_config().set_auto_watermark_interval(50)
    c = env.get_configuration()
    assert c.get_string("execution.checkpointing.interval") == "500 ms"
    assert env.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    assert env.get_buffer_timeout() == 0
    assert env.get_runtime_mode() is RuntimeExecutionMode.BATCH
    assert env.get_checkpoint_config().is_unaligned_checkpoints_enabled()
    assert env.get_checkpoint_config().get_aligned_checkpoint_timeout() == Duration.of_seconds(3)
    assert env.get_config().get_auto_watermark_interval() == 50
    with pytest.raises(UsageError, match="buffer timeout"):
        env.set_buffer_timeout(-2)
    with pytest.raises(UsageError, match="at least 10 ms"):
        env.enable_checkpointing(0)


def test_row_behaves_like_pyflinks() -> None:
    named = Row(name="Alice", age=11)
    assert named.name == "Alice" and named["age"] == 11 and named[0] == "Alice"
    assert named.as_dict() == {"name": "Alice", "age": 11}
    assert Row("name", "age")("Alice", 11) == named
    assert Row(1, "a") == Row(1, "a") and Row(1, "a") != Row(2, "a")
    assert pickle.loads(pickle.dumps(named)) == named
    assert repr(Row(1, "a")) == "<Row(1, 'a')>"  # PyFlink's Row.__repr__
    with pytest.raises(TypeError):
        Row(1, a=2)


def test_types_describe_rows_and_tuples() -> None:
    row = Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()])
    assert isinstance(row, RowTypeInfo) and row.get_field_names() == ["id", "name"]
    assert repr(Types.TUPLE([Types.INT(), Types.DOUBLE()])) == "Tuple2<Integer, Double>"
    assert Types.ROW([Types.LONG()]) == Types.ROW([Types.LONG()])
    with pytest.raises(UsageError, match="same length"):
        Types.ROW_NAMED(["a"], [Types.LONG(), Types.LONG()])


def test_keyed_aggregation_checks_field_positions(env: StreamExecutionEnvironment) -> None:
    keyed = env.from_collection([(1, 2)], type_info=Types.TUPLE([Types.LONG(), Types.LONG()])).key_by(
        lambda t: t[0]
    )
    keyed.sum(1)
    with pytest.raises(UsageError, match="out of range"):
        keyed.sum(5)


def test_duration_and_watermark_strategy() -> None:
    assert Duration.of_seconds(2).to_milliseconds() == 2000
    ws = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(200)).with_idleness(
        Duration.of_seconds(1)
    )
    assert ws.max_out_of_orderness_ms == 200 and ws.idle_timeout_ms == 1000
    assigned = ws.with_timestamp_assigner(lambda e, ts: e[1])
    assert assigned.timestamp_assigner is not None
    assert assigned.timestamp_assigner.extract_timestamp(("k", 42), 0) == 42
    with pytest.raises(UsageError, match="must not be negative"):
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(-1))

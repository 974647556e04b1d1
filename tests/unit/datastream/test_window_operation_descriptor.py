"""WindowOperationDescriptor: the windowed streams describe their operators with it."""

from __future__ import annotations

from weir.common import Time, Types
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.window import (
    CountTrigger,
    GlobalWindows,
    TumblingEventTimeWindows,
    WindowOperationDescriptor,
)


def test_name_and_description_follow_pyflink() -> None:
    d = WindowOperationDescriptor(
        TumblingEventTimeWindows.of(Time.seconds(5)), CountTrigger.of(3), 0, None, None, None, None
    )
    assert d.generate_op_name() == "TumblingEventTimeWindows"
    assert (
        d.generate_op_desc("Window", "ReduceFunction")
        == "Window(TumblingEventTimeWindows(5000, 0), CountTrigger, ReduceFunction)"
    )


def test_window_operators_take_their_description_from_it() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([(1, 2)], type_info=Types.TUPLE([Types.LONG(), Types.LONG()]))
    keyed = ds.key_by(lambda r: r[0], key_type=Types.LONG())
    windowed = keyed.window(TumblingEventTimeWindows.of(Time.seconds(5))).reduce(lambda a, b: a)
    assert (
        windowed._transformation.description
        == "Window(TumblingEventTimeWindows(5000, 0), EventTimeTrigger, ReduceFunction)"
    )
    all_windowed = ds.window_all(GlobalWindows.create()).trigger(CountTrigger.of(2)).reduce(lambda a, b: a)
    assert all_windowed._transformation.description.startswith("AllWindow(GlobalWindows")
    assert "CountTrigger" in all_windowed._transformation.description
    windowed.set_description("mine")
    assert windowed._transformation.description == "mine"

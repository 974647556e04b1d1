"""Window serializers: Flink's layouts, and each assigner hands out its windows' serializer."""

from __future__ import annotations

from io import BytesIO

import pytest

from weir.common.time import Time
from weir.datastream.window import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    CountWindow,
    CountWindowSerializer,
    EventTimeSessionWindows,
    GlobalWindow,
    GlobalWindows,
    GlobalWindowSerializer,
    SlidingEventTimeWindows,
    TimeWindow,
    TimeWindowSerializer,
    TumblingProcessingTimeWindows,
)
from weir.errors import UsageError


def _bytes(serializer: object, window: object) -> bytes:
    out = BytesIO()
    serializer.serialize(window, out)  # type: ignore[attr-defined]
    return out.getvalue()


def test_a_time_window_is_two_big_endian_longs() -> None:
    data = _bytes(TimeWindowSerializer(), TimeWindow(-2, 3))
    assert data == bytes.fromhex("fffffffffffffffe0000000000000003")
    assert TimeWindowSerializer().deserialize(BytesIO(data)) == TimeWindow(-2, 3)


def test_a_count_window_is_its_id() -> None:
    data = _bytes(CountWindowSerializer(), CountWindow(7))
    assert data == bytes.fromhex("0000000000000007")
    assert CountWindowSerializer().deserialize(BytesIO(data)) == CountWindow(7)


def test_the_global_window_is_one_zero_byte() -> None:
    data = _bytes(GlobalWindowSerializer(), GlobalWindow.get())
    assert data == b"\x00"
    assert GlobalWindowSerializer().deserialize(BytesIO(data)) == GlobalWindow.get()


def test_a_short_stream_is_named() -> None:
    with pytest.raises(UsageError, match="a serialized TimeWindow is 16 bytes; the stream had 3 left"):
        TimeWindowSerializer().deserialize(BytesIO(b"abc"))


@pytest.mark.parametrize(
    ("assigner", "serializer"),
    [
        (TumblingProcessingTimeWindows.of(Time.milliseconds(5)), TimeWindowSerializer),
        (SlidingEventTimeWindows.of(Time.milliseconds(5), Time.milliseconds(1)), TimeWindowSerializer),
        (EventTimeSessionWindows.with_gap(Time.milliseconds(5)), TimeWindowSerializer),
        (EventTimeSessionWindows.with_dynamic_gap(lambda e: 5), TimeWindowSerializer),
        (CountTumblingWindowAssigner.of(3), CountWindowSerializer),
        (CountSlidingWindowAssigner.of(3, 1), CountWindowSerializer),
        (GlobalWindows.create(), GlobalWindowSerializer),
    ],
)
def test_each_assigner_gives_its_windows_serializer(assigner: object, serializer: type) -> None:
    assert isinstance(assigner.get_window_serializer(), serializer)  # type: ignore[attr-defined]

"""Operator test harnesses: timers, keyed state, side outputs, and snapshot → restore at another parallelism."""

from __future__ import annotations

import random
from typing import Any

import pytest

from weir.common import Time, Types
from weir.datastream import KeyedProcessFunction, OutputTag, ProcessFunction, StreamExecutionEnvironment
from weir.datastream.state import ListStateDescriptor, ValueStateDescriptor
from weir.datastream.window import TumblingEventTimeWindows
from weir.errors import UsageError
from weir.testing import (
    KeyedOneInputStreamOperatorTestHarness,
    OneInputStreamOperatorTestHarness,
    ProcessFunctionTestHarnesses,
    RegisteredTimer,
    StreamRecord,
    Watermark,
    assert_output,
    harness_for,
)

GAP_MS = 50
REPORT_EVERY_MS = 1_000
COUNT = ValueStateDescriptor("count", Types.LONG())
SEEN = ListStateDescriptor("seen", Types.LONG())
TOO_LARGE = OutputTag("too-large", Types.LONG())


class SessionCounter(KeyedProcessFunction):
    """Per key: counts readings and emits the count when the key has been quiet for GAP_MS of
    event time (an event-time timer moved on every reading); a processing-time timer reports
    running counts once a second; readings above 1000 also go to a side output."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(COUNT)
        self.seen = runtime_context.get_list_state(SEEN)

    def process_element(self, value: tuple[str, int], ctx: Any) -> Any:
        _, reading = value
        timers = ctx.timer_service()
        count = self.count.value() or 0
        if count == 0:
            timers.register_processing_time_timer(timers.current_processing_time() + REPORT_EVERY_MS)
        else:
            timers.delete_event_time_timer(self._deadline)
        self.count.update(count + 1)
        self.seen.add(ctx.timestamp())
        timers.register_event_time_timer(ctx.timestamp() + GAP_MS)
        if reading > 1_000:
            ctx.output(TOO_LARGE, reading)
        return []

    @property
    def _deadline(self) -> int:
        return max(self.seen.get()) + GAP_MS

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        key = ctx.get_current_key()
        count = self.count.value()
        if count is None:
            return
        if ctx.time_domain() == "PROCESSING_TIME":
            yield ("running", key, count, timestamp)
            ctx.timer_service().register_processing_time_timer(timestamp + REPORT_EVERY_MS)
            return
        if timestamp == self._deadline:
            yield ("session", key, count, timestamp)
            self.count.clear()
            self.seen.clear()


def script(seed: int = 5) -> list[tuple[str, Any]]:
    """Readings of 12 keys with bursts and gaps, watermarks and clock ticks in between."""
    rng = random.Random(seed)
    steps: list[tuple[str, Any]] = []
    now = 0
    for tick in range(40):
        for _ in range(rng.randrange(0, 6)):
            key = f"k{rng.randrange(12)}"
            steps.append(("element", ((key, rng.randrange(1_200)), tick * 20 + rng.randrange(20))))
        steps.append(("watermark", tick * 20 - 1))
        now += rng.choice([0, 300, 700])
        steps.append(("time", now))
    steps.append(("watermark", 10_000))
    return steps


def new_harness(parallelism: int = 1, subtask_index: int = 0) -> KeyedOneInputStreamOperatorTestHarness:
    return KeyedOneInputStreamOperatorTestHarness(
        SessionCounter(), lambda r: r[0], parallelism=parallelism, subtask_index=subtask_index
    )


def run(harnesses: list[KeyedOneInputStreamOperatorTestHarness], steps: list[tuple[str, Any]]) -> None:
    """Feed steps as a job would: each record to the subtask owning its key, time to every subtask."""
    for kind, arg in steps:
        if kind == "element":
            value, ts = arg
            (owner,) = [h for h in harnesses if h.owns_key(value[0])]
            owner.process_element(value, ts)
        elif kind == "watermark":
            for h in harnesses:
                if arg > h.current_watermark:
                    h.process_watermark(arg)
        else:
            for h in harnesses:
                h.set_processing_time(arg)


def outputs(harnesses: list[KeyedOneInputStreamOperatorTestHarness]) -> list[Any]:
    return [v for h in harnesses for v in h.extract_output_values()]


def side_outputs(harnesses: list[KeyedOneInputStreamOperatorTestHarness]) -> list[Any]:
    return [v for h in harnesses for v in h.get_side_output_values(TOO_LARGE)]


@pytest.mark.parametrize(("before", "after"), [(1, 3), (3, 2), (2, 4)])
def test_restoring_at_another_parallelism_in_the_middle_gives_the_same_output(
    before: int, after: int
) -> None:
    steps = script()
    reference = new_harness().open()
    run([reference], steps)
    expected = reference.extract_output_values()
    assert any(o[0] == "session" for o in expected) and any(o[0] == "running" for o in expected)

    half = len(steps) // 2
    first = [new_harness(before, i).open() for i in range(before)]
    run(first, steps[:half])
    snapshots = [h.snapshot() for h in first]
    assert sum(h.num_event_time_timers() for h in first) > 0  # timers really travel in the snapshot
    second = [new_harness(after, i).restore(*snapshots).open() for i in range(after)]
    for h in second:
        h.set_processing_time(first[0].get_processing_time())
    run(second, steps[half:])

    assert_output(outputs(first) + outputs(second), expected)
    assert_output(side_outputs(first) + side_outputs(second), reference.get_side_output_values(TOO_LARGE))
    # each key lives in one subtask, so its own outputs keep their order
    for key in {o[1] for o in expected}:
        assert [o for o in outputs(first) + outputs(second) if o[1] == key] == [
            o for o in expected if o[1] == key
        ]


def test_timers_and_keyed_state_are_visible_for_assertions() -> None:
    h = ProcessFunctionTestHarnesses.for_keyed_process_function(SessionCounter(), lambda r: r[0])
    h.set_processing_time(100)
    h.process_element(("a", 1), 10)
    h.process_element(("a", 2), 30)
    h.process_element(("b", 5000), 20)
    assert h.event_time_timers() == [RegisteredTimer(70, "b"), RegisteredTimer(80, "a")]
    assert h.processing_time_timers() == [RegisteredTimer(1_100, "a"), RegisteredTimer(1_100, "b")]
    assert h.get_keyed_state(COUNT, "a") == 2 and h.get_keyed_state(SEEN, "a") == [10, 30]
    assert sorted(h.keys(COUNT)) == ["a", "b"]
    assert h.get_side_output(TOO_LARGE) == [StreamRecord(5000, 20)]

    h.process_watermark(75)
    assert h.extract_output() == [StreamRecord(("session", "b", 1, 70), 70), Watermark(75)]
    assert h.get_keyed_state(COUNT, "b") is None and h.num_event_time_timers() == 1
    h.set_processing_time(1_100)
    assert h.extract_output_values()[-1] == ("running", "a", 2, 1_100)
    h.close()


def test_lmdb_state_backend_snapshots_restore_into_the_heap_one() -> None:
    lmdb = KeyedOneInputStreamOperatorTestHarness(SessionCounter(), lambda r: r[0], state_backend="lmdb")
    with lmdb:
        lmdb.process_element(("a", 1), 10)
        snapshot = lmdb.snapshot()
    heap = new_harness().restore(snapshot).open()
    assert heap.get_keyed_state(COUNT, "a") == 1
    heap.process_watermark(100)
    assert heap.extract_output_values() == [("session", "a", 1, 60)]


class Split(ProcessFunction):
    def process_element(self, value: int, ctx: Any) -> Any:
        if value > 1_000:
            ctx.output(TOO_LARGE, value)
        else:
            yield value * 2


def test_a_process_function_with_a_side_output() -> None:
    with OneInputStreamOperatorTestHarness(Split()) as h:
        h.process_element(3, 7)
        h.process_element(5000, 8)
        h.process_watermark(9)
    assert h.extract_output() == [StreamRecord(6, 7), Watermark(9)]
    assert h.get_side_output(TOO_LARGE) == [StreamRecord(5000, 8)]


def test_harness_for_wraps_a_window_built_with_the_datastream_api() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    late = OutputTag("late")
    windows = (
        env.from_collection([("a", 1)])
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
        .side_output_late_data(late)
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )
    h = harness_for(windows)
    assert isinstance(h, KeyedOneInputStreamOperatorTestHarness)
    h.open()
    h.process_element(("a", 1), 1)
    h.process_element(("a", 2), 5)
    h.process_element(("b", 7), 12)
    assert [(t.timestamp, t.key) for t in h.event_time_timers()] == [(9, "a"), (19, "b")]
    h.process_watermark(9)
    h.process_element(("a", 100), 3)  # late: its window already fired
    h.process_watermark(20)
    assert h.extract_output_records() == [StreamRecord(("a", 3), 9), StreamRecord(("b", 7), 19)]
    assert h.get_side_output_values(late) == [("a", 100)]


def test_mistakes_get_clear_errors() -> None:
    h = new_harness(parallelism=2, subtask_index=0)
    with pytest.raises(UsageError, match="not open"):
        h.process_element(("a", 1), 1)
    h.open()
    foreign = next(f"k{i}" for i in range(100) if not h.owns_key(f"k{i}"))
    with pytest.raises(UsageError, match=r"owned by subtask 1 of 2; this harness is subtask 0"):
        h.process_element((foreign, 1), 1)
    with pytest.raises(UsageError, match="before open"):
        h.restore(h.snapshot())
    with pytest.raises(UsageError, match="max_parallelism"):
        KeyedOneInputStreamOperatorTestHarness(SessionCounter(), lambda r: r[0], max_parallelism=64).restore(
            h.snapshot()
        )
    with pytest.raises(UsageError, match="KeyedOneInputStreamOperatorTestHarness"):
        OneInputStreamOperatorTestHarness(SessionCounter())
    with pytest.raises(UsageError, match="subtask_index"):
        new_harness(parallelism=2, subtask_index=2)
    with pytest.raises(UsageError, match="processing time never goes back"):
        h.set_processing_time(5)
        h.set_processing_time(4)

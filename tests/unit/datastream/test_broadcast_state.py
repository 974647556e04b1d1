"""Broadcast state: ``stream.connect(other.broadcast(descriptor)).process(...)``, keyed and not."""

from __future__ import annotations

from typing import Any

import pytest

from weir.common import Types
from weir.datastream import (
    BroadcastConnectedStream,
    BroadcastProcessFunction,
    BroadcastStream,
    KeyedBroadcastProcessFunction,
    StreamExecutionEnvironment,
)
from weir.datastream.state import MapStateDescriptor, ValueStateDescriptor
from weir.errors import UsageError
from weir.keys import KeyGroupRange
from weir.operators.broadcast import BroadcastProcessOperator, KeyedBroadcastProcessOperator
from weir.state.operator_state import BROADCAST, OperatorStateSnapshot, repartition_operator_state
from weir.state.serde import encode_value

from ..operators.operator_harness import Harness

RULES = MapStateDescriptor("rules", Types.STRING(), Types.INT())
COUNT = ValueStateDescriptor("count", Types.INT())


class Threshold(BroadcastProcessFunction):
    """Passes values at or above the current threshold (a broadcast rule)."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        limit = ctx.get_broadcast_state(RULES).get("min")
        if limit is not None and value >= limit:
            yield value

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(RULES).put("min", value)


class CountAndReset(KeyedBroadcastProcessFunction):
    """Counts per key; a broadcast 'reset' sets every key's count to 0 (apply_to_keyed_state);
    a key's count is emitted by a timer at the element's timestamp + 10."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(COUNT)

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        factor = ctx.get_broadcast_state(RULES).get("factor") or 1
        yield ("seen", ctx.get_current_key(), self.count.value() * factor)

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        if value == "reset":
            ctx.apply_to_keyed_state(COUNT, lambda key, state: state.update(0))
        else:
            ctx.get_broadcast_state(RULES).put("factor", value)
        return []

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ("timer", ctx.get_current_key(), timestamp, self.count.value())


def test_the_non_broadcast_side_sees_the_rules_the_broadcast_side_wrote() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(3)
    rules = env.from_collection([10]).broadcast(RULES)
    assert isinstance(rules, BroadcastStream)
    connected = env.from_collection(list(range(20))).connect(rules)
    assert isinstance(connected, BroadcastConnectedStream)
    out = connected.process(Threshold(), Types.INT())
    # the order between the two inputs is not defined (as in Flink): what passed is at or above 10
    with out.execute_and_collect() as results:
        assert all(v >= 10 for v in results)


def test_keyed_broadcast_runs_timers_keyed_state_and_apply_to_keyed_state() -> None:
    h = Harness(KeyedBroadcastProcessOperator("kb", _selector(), CountAndReset(), [RULES]))
    op = h.operator
    op.process_batch1(_batch([("a", 0), ("b", 0), ("a", 1)]))
    op.process_batch2(_batch([(3, 0)]))
    op.process_batch1(_batch([("b", 2)]))
    op.process_batch2(_batch([("reset", 0)]))
    op.process_batch1(_batch([("a", 3)]))
    op.process_watermark(100)
    assert h.values() == [
        ("seen", "a", 1),
        ("seen", "b", 1),
        ("seen", "a", 2),
        ("seen", "b", 6),  # count 2, factor 3 from the broadcast side
        ("seen", "a", 3),  # reset to 0, then 1, times 3
        ("timer", "a", 10, 1),
        ("timer", "b", 10, 0),
        ("timer", "a", 11, 1),
        ("timer", "b", 12, 0),
        ("timer", "a", 13, 1),
    ]


def test_broadcast_state_is_read_only_on_the_element_side() -> None:
    class Writes(BroadcastProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> None:
            ctx.get_broadcast_state(RULES).put("x", 1)

        def process_broadcast_element(self, value: Any, ctx: Any) -> None:
            pass

    h = Harness(BroadcastProcessOperator("b", Writes(), [RULES]))
    with pytest.raises(UsageError, match="read-only in process_element"):
        h.operator.process_batch1(_batch([(1, 0)]))


def test_an_undeclared_descriptor_is_a_clear_error() -> None:
    other = MapStateDescriptor("other", Types.STRING(), Types.INT())

    class Reads(BroadcastProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> None:
            ctx.get_broadcast_state(other)

        def process_broadcast_element(self, value: Any, ctx: Any) -> None:
            pass

    h = Harness(BroadcastProcessOperator("b", Reads(), [RULES]))
    with pytest.raises(UsageError, match=r"'other'.*declared: 'rules'"):
        h.operator.process_batch1(_batch([(1, 0)]))


def test_the_function_must_match_the_stream() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    rules = env.from_collection([1]).broadcast(RULES)
    with pytest.raises(UsageError, match="KeyedBroadcastProcessFunction"):
        env.from_collection([1]).key_by(lambda v: v).connect(rules).process(Threshold())
    with pytest.raises(UsageError, match="needs key_by"):
        env.from_collection([1]).connect(rules).process(CountAndReset())
    with pytest.raises(UsageError, match="MapStateDescriptor"):
        env.from_collection([1]).broadcast(COUNT)  # type: ignore[arg-type]


@pytest.mark.parametrize(("old", "new"), [(2, 3), (3, 1), (2, 2)])
def test_every_subtask_restores_one_copy_of_the_broadcast_state(old: int, new: int) -> None:
    """Each old subtask snapshots the same map; each new subtask, at any parallelism, gets it once."""
    snapshots = []
    for _ in range(old):
        h = Harness(BroadcastProcessOperator("b", Threshold(), [RULES]))
        h.operator.process_batch2(_batch([(7, 0)]))
        h.operator.snapshot_state(1)
        snap = h.operator.context.operator_state().snapshot()
        assert snap.get("broadcast-state:rules") == (BROADCAST, (encode_value(("min", 7)),))
        snapshots.append(snap)
    parts = repartition_operator_state(snapshots, new)
    for part in parts:

        def prepare(op: Any, part: OperatorStateSnapshot = part) -> None:
            op.context.operator_state().restore([part])
            op.context.is_restored = True

        h = Harness(BroadcastProcessOperator("b", Threshold(), [RULES]), prepare=prepare)
        h.operator.process_batch1(_batch([(6, 0), (7, 0), (9, 0)]))
        assert h.values() == [7, 9]


def test_keyed_broadcast_restores_keyed_state_timers_and_broadcast_state() -> None:
    h = Harness(KeyedBroadcastProcessOperator("kb", _selector(), CountAndReset(), [RULES]))
    op = h.operator
    op.process_batch2(_batch([(2, 0)]))
    op.process_batch1(_batch([("a", 0)]))
    op.snapshot_state(1)
    keyed, timers = op.backend.snapshot(), op.timers.internal.snapshot()
    operator_state = op.context.operator_state().snapshot()

    def prepare(new: Any) -> None:
        new.context.keyed_state_backend().restore([keyed])
        new.timers.internal.restore([timers], KeyGroupRange(0, 127))
        new.context.operator_state().restore(repartition_operator_state([operator_state], 1))
        new.context.is_restored = True

    h2 = Harness(KeyedBroadcastProcessOperator("kb", _selector(), CountAndReset(), [RULES]), prepare=prepare)
    h2.operator.process_batch1(_batch([("a", 5)]))
    h2.operator.process_watermark(100)
    assert h2.values() == [("seen", "a", 4), ("timer", "a", 10, 2), ("timer", "a", 15, 2)]


def test_a_job_with_keyed_broadcast_state_runs_end_to_end() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    rules = env.from_collection([5]).broadcast(RULES)

    class Scale(KeyedBroadcastProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield (ctx.get_current_key(), value[1])

        def process_broadcast_element(self, value: Any, ctx: Any) -> None:
            ctx.get_broadcast_state(RULES).put("factor", value)

    out = (
        env.from_collection([("a", 1), ("b", 2), ("a", 3)])
        .key_by(lambda r: r[0])
        .connect(rules)
        .process(Scale())
        .execute_and_collect()
    )
    with out:
        assert sorted(out) == [("a", 1), ("a", 3), ("b", 2)]


def _selector() -> Any:
    from weir.core.functions import wrap_key_selector

    return wrap_key_selector(lambda r: r[0])


def _batch(pairs: list[tuple[Any, int]]) -> Any:
    import numpy as np

    from weir.codec.batch import Batch

    return Batch([v for v, _ in pairs], np.array([t for _, t in pairs], dtype=np.int64))


def keyed_broadcast_job() -> Any:
    """A keyed stream connected to the broadcast rules, processed by ``CountAndReset``."""
    env = StreamExecutionEnvironment.get_execution_environment()
    rules = env.from_collection([1]).broadcast(RULES)
    return env.from_collection([("a", 1)]).key_by(lambda r: r[0]).connect(rules).process(CountAndReset())


def test_harness_for_a_keyed_broadcast_function() -> None:
    from weir.testing import harness_for

    out = keyed_broadcast_job()
    harness = harness_for(out)
    harness.open()
    harness.process_element2(4, 0)
    harness.process_element1(("a", 1), 5)
    harness.process_watermark1(100)
    harness.process_watermark2(100)
    assert harness.extract_output_values() == [("seen", "a", 4), ("timer", "a", 15, 1)]
    harness.close()


def test_a_harness_restores_one_snapshot_per_old_subtask() -> None:
    from weir.testing import harness_for

    out = keyed_broadcast_job()
    harness = harness_for(out)
    harness.open()
    harness.process_element2(4, 0)
    snapshot = harness.snapshot()
    restored = harness_for(out).restore(snapshot)
    restored.open()
    restored.process_element1(("a", 1), 5)
    assert restored.extract_output_values() == [("seen", "a", 4)]
    with pytest.raises(UsageError, match="two snapshots of subtask 0"):
        harness_for(out).restore(snapshot, snapshot).open()

"""The per-record WindowOperator's fast mode against its general mode.

Fast mode (incremental reduce/aggregate, tumbling or sliding, default trigger, no
lateness) keeps accumulators in per-window dicts instead of state objects and timers.
Both modes get the same batches and watermarks and must emit the same records in the
same order; checkpoints taken in one mode restore into the other, on either backend;
on LMDB the accumulators spill to the backend when too many are held.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

from weir.common import Time
from weir.core.functions import wrap_key_selector, wrap_reduce
from weir.datastream import AggregateFunction, OutputTag, ProcessWindowFunction
from weir.datastream.state import ValueStateDescriptor
from weir.datastream.window import (
    CountTrigger,
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
)
from weir.errors import UsageError
from weir.keys import KeyGroupRange
from weir.operators.window import WindowOperator
from weir.operators.window import fast as window_module
from weir.state import create_keyed_backend

from .test_vector_window import MAX_WM, Run, disordered, play, steps_of

TUMBLING = TumblingEventTimeWindows.of(Time.seconds(5))
SLIDING = SlidingEventTimeWindows.of(Time.seconds(6), Time.seconds(2))


class Average(AggregateFunction):
    def create_accumulator(self) -> Any:
        return (0.0, 0)

    def add(self, value: Any, accumulator: Any) -> Any:
        return (accumulator[0] + value[1], accumulator[1] + 1)

    def get_result(self, accumulator: Any) -> Any:
        return accumulator[0] / accumulator[1]

    def merge(self, a: Any, b: Any) -> Any:
        return (a[0] + b[0], a[1] + b[1])


class Describe(ProcessWindowFunction):
    """Emits the window and how often it fired for this key (per-window state, cleared with the window)."""

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        fired = context.window_state().get_state(ValueStateDescriptor("fired", None))
        fired.update((fired.value() or 0) + 1)
        yield (key, context.window().start, list(elements), fired.value())


def make_op(
    kind: str, assigner: Any = TUMBLING, window_function: Any = None, late: Any = None, **kw: Any
) -> Any:
    function = wrap_reduce("r", lambda a, b: (a[0], a[1] + b[1])) if kind == "reduce" else Average()
    return WindowOperator(
        "w",
        wrap_key_selector(lambda r: r[0]),
        assigner,
        kw.get("trigger") or assigner.get_default_trigger(),
        kw.get("lateness", 0),
        late,
        kind,
        function,
        window_function,
        None,
    )


def general(op: WindowOperator) -> WindowOperator:
    op.fast = False
    return op


@pytest.mark.parametrize(
    ("op", "fast"),
    [
        (make_op("reduce"), True),
        (make_op("aggregate", SLIDING, Describe()), True),
        (make_op("reduce", SlidingProcessingTimeWindows.of(Time.seconds(2), Time.seconds(1))), True),
        (make_op("reduce", lateness=10), False),
        (make_op("reduce", trigger=CountTrigger.of(2)), False),
        (make_op("reduce", EventTimeSessionWindows.with_gap(Time.seconds(1))), False),
    ],
)
def test_which_windows_run_in_fast_mode(op: WindowOperator, fast: bool) -> None:
    assert op.fast is fast


@pytest.mark.parametrize("kind", ["reduce", "aggregate"])
@pytest.mark.parametrize("assigner", [TUMBLING, SLIDING], ids=["tumbling", "sliding"])
@pytest.mark.parametrize("window_function", [None, Describe()], ids=["plain", "process-function"])
def test_fast_mode_emits_what_the_general_mode_emits(kind: str, assigner: Any, window_function: Any) -> None:
    tag = OutputTag("late")
    events = disordered(1_500, 21, lambda r: (f"k{r.randrange(6)}", r.randrange(100)))
    steps = steps_of(events, 22)
    slow = Run(general(make_op(kind, assigner, window_function, tag)))
    fast = Run(make_op(kind, assigner, window_function, tag))
    assert fast.op.fast
    play([slow, fast], steps)
    assert len(slow.records()) > 20
    assert fast.records() == slow.records()
    assert fast.output.side == slow.output.side


def test_a_record_without_a_timestamp_and_an_unhashable_key_are_clear_errors() -> None:
    run = Run(make_op("reduce"))
    with pytest.raises(UsageError, match="without a timestamp"):
        from weir.codec.batch import Batch

        run.op.process_batch(Batch([("a", 1)]))
    with pytest.raises(UsageError, match="not hashable"):
        run.batch([((["a"], 1), 5)])


@pytest.mark.parametrize(("before", "after"), [("fast", "general"), ("general", "fast"), ("fast", "fast")])
@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
def test_checkpoints_restore_across_modes(before: str, after: str, backend: str, tmp_path: Path) -> None:
    events = disordered(1_200, 23, lambda r: (r.randrange(8), r.randrange(100)))
    steps = steps_of(events, 24)
    cut = len(steps) // 2

    def op(mode: str) -> WindowOperator:
        made = make_op("aggregate", SLIDING)
        return general(made) if mode == "general" else made

    def store(name: str) -> Any:
        return create_keyed_backend(backend, "op", 128, KeyGroupRange(0, 127), path=tmp_path / name)

    whole = Run(op("general"))
    play([whole], steps)
    first = Run(op(before), store("a"))
    play([first], steps[:cut], end=False)
    snapshot = first.checkpoint()
    second = Run(op(after), store("b"), restore=[snapshot])
    play([second], steps[cut:])
    assert first.records() + second.records() == whole.records()
    assert first.records() and second.records()


def test_lmdb_accumulators_spill_and_come_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(window_module, "SPILL_PANES", 8)
    events = disordered(2_000, 25, lambda r: (r.randrange(40), r.randrange(100)), disorder_ms=500)
    steps = steps_of(events, 26)
    slow = Run(general(make_op("reduce", SLIDING)))
    lmdb = create_keyed_backend("lmdb", "op", 128, KeyGroupRange(0, 127), path=tmp_path / "lmdb")
    fast = Run(make_op("reduce", SLIDING), lmdb)
    play([slow, fast], steps[: len(steps) // 2], end=False)
    assert lmdb.number_of_keys() > 8  # written out
    assert fast.op._in_memory <= 8 + 60 * 3  # at most one batch's new panes above the bound
    play([slow, fast], steps[len(steps) // 2 :])
    assert fast.records() == slow.records()
    assert lmdb.number_of_keys() == 0  # fired panes leave nothing behind


def test_lmdb_spills_when_its_panes_outgrow_the_memory_budget(tmp_path: Path) -> None:
    """The window's memory budget on LMDB bounds the panes held, by their measured size."""
    events = disordered(2_000, 28, lambda r: (r.randrange(400), r.randrange(100)), disorder_ms=500)
    steps = steps_of(events, 29)
    slow = Run(general(make_op("reduce", SLIDING)))
    lmdb = create_keyed_backend("lmdb", "op", 128, KeyGroupRange(0, 127), path=tmp_path / "lmdb")
    pane = 48 + sys.getsizeof(1) + sys.getsizeof((1, 1)) + 2 * sys.getsizeof(1)
    lmdb.window_pane_memory_bytes = 100 * pane  # about 100 panes of (int, int) accumulators
    fast = Run(make_op("reduce", SLIDING), lmdb)
    play([slow, fast], steps[: len(steps) // 2], end=False)
    assert lmdb.number_of_keys() > 100  # written out
    assert fast.op._in_memory <= 100 + 60 * 3  # at most one batch's new panes above the budget
    play([slow, fast], steps[len(steps) // 2 :])
    assert fast.records() == slow.records()
    assert lmdb.number_of_keys() == 0


def test_a_second_checkpoint_keeps_only_live_panes() -> None:
    run = Run(make_op("reduce"))
    run.batch([(("a", 1), 1_000), (("b", 1), 6_000)])
    run.checkpoint()
    assert run.backend.number_of_keys() == 2 and len(run.op.timers.snapshot()) == 2
    run.watermark(5_000)
    assert run.backend.number_of_keys() == 1  # the fired pane was cleared
    run.checkpoint()
    assert len(run.op.timers.snapshot()) == 1
    run.watermark(MAX_WM)
    assert [v for v, _ in run.records()] == [("a", 1), ("b", 1)]


def test_fast_mode_folds_in_arrival_order() -> None:
    """A reduce that is not commutative sees records in the order they came."""
    op = WindowOperator(
        "w",
        wrap_key_selector(lambda r: r[0]),
        TUMBLING,
        TUMBLING.get_default_trigger(),
        0,
        None,
        "reduce",
        wrap_reduce("r", lambda a, b: (a[0], a[1] + b[1])),
        None,
        None,
    )
    run = Run(op)
    rng = random.Random(27)
    letters = [chr(97 + rng.randrange(26)) for _ in range(200)]
    run.batch([((k % 3, letter), 100 + k) for k, letter in enumerate(letters)])
    run.watermark(MAX_WM)
    assert sorted(v for v, _ in run.records()) == [(k, "".join(letters[k::3])) for k in range(3)]


def test_processing_time_fast_mode_fires_on_the_clock_like_the_general_mode() -> None:
    assigner = SlidingProcessingTimeWindows.of(Time.seconds(2), Time.seconds(1))
    slow = Run(general(make_op("aggregate", assigner)))
    fast = Run(make_op("aggregate", assigner))
    rng = random.Random(28)
    for now in range(0, 8_000, 250):
        batch = [((rng.randrange(4), rng.randrange(10)), 0) for _ in range(rng.randrange(5))]
        for run in (slow, fast):
            run.now_ms = now
            run.batch(batch)
        assert fast.op.next_processing_time_deadline() == slow.op.next_processing_time_deadline()
        for run in (slow, fast):
            run.op.on_processing_time(now)
    assert fast.records() == slow.records() and len(fast.records()) > 10

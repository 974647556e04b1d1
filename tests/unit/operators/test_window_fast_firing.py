"""Fast mode fires a window's panes in one loop in C until a user function reaches for keyed
state; from then on every call runs with its pane's key set. Window functions that reach for
state at different moments (in ``open``, in the middle of a window, through the runtime
context, the global state or the per-window state) must see exactly what the general mode
shows them: the general mode, which sets the key before every call, is the reference.
"""

from __future__ import annotations

from typing import Any

import pytest

from weir.datastream import ProcessWindowFunction, WindowFunction
from weir.datastream.state import ValueStateDescriptor
from weir.errors import OperatorFailure, UsageError

from .test_vector_window import Run, disordered, play, steps_of
from .test_window_perf_fast_mode import SLIDING, TUMBLING, general, make_op

SEEN = ValueStateDescriptor("seen", None)


class StateFrom(ProcessWindowFunction):
    """Emits (key, window start, result) for the first ``plain`` calls, then also reaches for
    a per-key counter through ``how``: 'open' (runtime context, state taken in ``open``),
    'runtime' (runtime context, state taken in that call), 'global' or 'window' (context)."""

    def __init__(self, how: str, plain: int) -> None:
        self.how = how
        self.plain = plain
        self.calls = 0
        self.state: Any = None

    def open(self, runtime_context: Any) -> None:
        self.runtime_context = runtime_context
        if self.how == "open":
            self.state = runtime_context.get_state(SEEN)

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        self.calls += 1
        (result,) = elements
        if self.calls <= self.plain:
            return [(key, context.window().start, result)]
        if self.how == "open":
            state = self.state
        elif self.how == "runtime":
            state = self.runtime_context.get_state(SEEN)
        elif self.how == "global":
            state = context.global_state().get_state(SEEN)
        else:
            state = context.window_state().get_state(SEEN)
        seen = (state.value() or 0) + 1
        state.update(seen)
        return (x for x in [(key, context.window().start, result, seen)])


def runs(kind: str, assigner: Any, function: Any, other: Any) -> tuple[Run, Run]:
    slow = Run(general(make_op(kind, assigner, function)))
    fast = Run(make_op(kind, assigner, other))
    assert fast.op.fast and not slow.op.fast
    return slow, fast


@pytest.mark.parametrize("how", ["open", "runtime", "global", "window"])
@pytest.mark.parametrize("plain", [0, 1, 57, 10_000])
@pytest.mark.parametrize("assigner", [TUMBLING, SLIDING], ids=["tumbling", "sliding"])
@pytest.mark.parametrize("kind", ["reduce", "aggregate"])
def test_a_window_function_reaching_for_state_sees_its_panes_key(
    kind: str, assigner: Any, how: str, plain: int
) -> None:
    events = disordered(3_000, 5, lambda r: (f"k{r.randrange(40)}", r.randrange(100)))
    slow, fast = runs(kind, assigner, StateFrom(how, plain), StateFrom(how, plain))
    play([slow, fast], steps_of(events, 6))
    assert len(slow.records()) > 400
    assert fast.records() == slow.records()
    if how == "window":  # per-window state goes with its window, in both modes
        for run in (slow, fast):
            assert not list(run.backend.keys_and_namespaces("seen"))


class Pairs(WindowFunction):
    """A WindowFunction returning a list, an empty list or None, by key."""

    def apply(self, key: Any, window: Any, inputs: Any) -> Any:
        if key == "k0":
            return None
        if key == "k1":
            return []
        return [(key, window.start, r) for r in inputs] * 2


@pytest.mark.parametrize("kind", ["reduce", "aggregate"])
def test_window_function_results_of_every_shape_come_out_in_order(kind: str) -> None:
    events = disordered(3_000, 7, lambda r: (f"k{r.randrange(8)}", r.randrange(100)))
    slow, fast = runs(kind, TUMBLING, Pairs(), Pairs())
    play([slow, fast], steps_of(events, 8))
    assert len(slow.records()) > 50
    assert fast.records() == slow.records()


class FailsAt(ProcessWindowFunction):
    def __init__(self, at: int) -> None:
        self.at = at
        self.calls = 0

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        self.calls += 1
        if self.calls == self.at:
            raise UsageError(f"pane {self.calls} of key {key}")
        yield key


def test_a_failing_window_function_leaves_the_operator_ready_for_the_next_attempt() -> None:
    events = disordered(300, 9, lambda r: (f"k{r.randrange(5)}", r.randrange(100)))
    slow, fast = runs("reduce", TUMBLING, FailsAt(3), FailsAt(3))
    for run in (slow, fast):
        with pytest.raises((UsageError, OperatorFailure), match="pane 3 of key"):
            play([run], steps_of(events, 10))
    assert fast.op._running is None  # no loop left behind for the state hook to cut

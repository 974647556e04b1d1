"""Broadcast state: a stream connected with a broadcast stream (``stream.connect(ds.broadcast(descriptor))``).

Theory of operation. Input 2 (the broadcast stream) reaches every subtask whole: its
partitioner is BROADCAST. Each subtask keeps the broadcast states (one map per
``MapStateDescriptor`` given to ``broadcast``) and changes them only in
``process_broadcast_element``, where the function sees them read-write; since every
subtask gets the same broadcast elements and the function must change the state from
them alone, every subtask holds the same maps (Flink's contract: weir does not check it).
``process_element`` (input 1) sees them read only.

Two operators:

- ``BroadcastProcessOperator`` (a non-keyed input 1, ``BroadcastProcessFunction``);
- ``KeyedBroadcastProcessOperator`` (a keyed input 1, ``KeyedBroadcastProcessFunction``):
  input 1 has keyed state and timers (``on_timer``), as a KeyedCoProcessOperator; a
  broadcast element has no key, and ``ctx.apply_to_keyed_state(descriptor, f)`` calls
  ``f(key, state)`` for every key of this subtask that has that state.

Checkpoints: each broadcast state goes into operator state as list state in BROADCAST
mode (its entries as ``(key, value)`` pairs), written by every subtask. On restore (also
at another parallelism) every new subtask takes the copy of one old subtask
(``weir.state.operator_state``), as Flink does.
"""

from __future__ import annotations

from typing import Any

from weir.codec.batch import Batch
from weir.core import functions as fn
from weir.core.state import BroadcastState, ListStateDescriptor, MapStateDescriptor, ReadOnlyBroadcastState
from weir.errors import UsageError
from weir.operators.base import SideOutputs
from weir.operators.co import KeyedCoProcessOperator, TwoInputStreamOperator
from weir.operators.keyed import _KeyedContext
from weir.operators.stateless import process_batch_with

#: operator state names of broadcast states: this prefix and the descriptor's name
STATE_PREFIX = "broadcast-state:"


class _BroadcastStates:
    """The broadcast states of one subtask: name -> entries, and their checkpoints."""

    def __init__(self, operator_name: str, descriptors: list[MapStateDescriptor]) -> None:
        self.operator_name = operator_name
        self.descriptors = {d.name: d for d in descriptors}
        self.entries: dict[str, dict[Any, Any]] = {name: {} for name in self.descriptors}

    def _entries(self, descriptor: Any) -> dict[Any, Any]:
        name = getattr(descriptor, "name", None)
        if not isinstance(descriptor, MapStateDescriptor) or name not in self.entries:
            declared = ", ".join(repr(n) for n in sorted(self.entries)) or "none"
            raise UsageError(
                f"operator '{self.operator_name}': get_broadcast_state({descriptor!r}) names no broadcast "
                f"state of this stream; it needs one of the MapStateDescriptors given to broadcast(...) "
                f"(declared: {declared})"
            )
        return self.entries[name]

    def read_write(self, descriptor: Any) -> BroadcastState:
        return BroadcastState(descriptor.name, self._entries(descriptor))

    def read_only(self, descriptor: Any) -> ReadOnlyBroadcastState:
        return ReadOnlyBroadcastState(descriptor.name, self._entries(descriptor))

    @staticmethod
    def _list_descriptor(name: str) -> ListStateDescriptor:
        return ListStateDescriptor(STATE_PREFIX + name)

    def snapshot(self, store: Any) -> None:
        for name, entries in self.entries.items():
            store.get_broadcast_list_state(self._list_descriptor(name)).update(list(entries.items()))

    def restore(self, store: Any) -> None:
        present = set(store.state_names())
        for name, entries in self.entries.items():
            if STATE_PREFIX + name in present:
                state = store.get_broadcast_list_state(self._list_descriptor(name))
                entries.clear()
                entries.update((k, v) for k, v in state.get())


class _BroadcastContext(
    fn.KeyedBroadcastProcessFunction.Context, fn.KeyedBroadcastProcessFunction.ReadOnlyContext
):
    """The context of either side of a (keyed) broadcast process function (one object per
    side, updated per record): ``read_write`` on the broadcast side."""

    def __init__(self, operator: Any, states: _BroadcastStates, read_write: bool) -> None:
        self._operator = operator
        self._states = states
        self._read_write = read_write
        self._timestamp: int | None = None
        self.side = SideOutputs()

    def timestamp(self) -> int | None:
        return self._timestamp

    def current_processing_time(self) -> int:
        return int(self._operator.context.processing_time_ms())

    def current_watermark(self) -> int:
        return int(self._operator.current_watermark)

    def output(self, output_tag: Any, value: Any) -> None:
        self.side.add(output_tag, value, self._timestamp)

    def get_broadcast_state(self, state_descriptor: Any) -> Any:
        if self._read_write:
            return self._states.read_write(state_descriptor)
        return self._states.read_only(state_descriptor)

    def timer_service(self) -> Any:
        timers = getattr(self._operator, "timers", None)
        if timers is None or self._read_write:
            raise UsageError(
                f"operator '{self._operator.name}': timers belong to a key; they are available in "
                f"process_element and on_timer of a KeyedBroadcastProcessFunction"
            )
        return timers

    def get_current_key(self) -> Any:
        if self._read_write:
            raise UsageError(
                f"operator '{self._operator.name}': a broadcast element has no key; use "
                f"ctx.apply_to_keyed_state(descriptor, function) to reach the keyed state"
            )
        return self._operator.current_key

    def apply_to_keyed_state(self, state_descriptor: Any, function: Any) -> None:
        operator = self._operator
        backend = getattr(operator, "backend", None)
        if backend is None:
            raise UsageError(
                f"operator '{operator.name}': apply_to_keyed_state needs a keyed stream connected with "
                f"the broadcast stream (KeyedBroadcastProcessFunction)"
            )
        backend.apply_to_all_keys(None, state_descriptor, function)


class BroadcastProcessOperator(TwoInputStreamOperator):
    """A BroadcastProcessFunction: input 1 read-only broadcast state, input 2 read-write."""

    def __init__(self, name: str, function: Any, descriptors: list[MapStateDescriptor]) -> None:
        super().__init__(name)
        self.function = function
        self.states = _BroadcastStates(name, descriptors)

    def initialize_state(self) -> None:
        if self.context.is_restored:
            self.states.restore(self.context.operator_state())

    def snapshot_state(self, checkpoint_id: int) -> None:
        self.states.snapshot(self.context.operator_state())

    def open(self) -> None:
        self.function.open(self.context.runtime_context())
        self._read_only = _BroadcastContext(self, self.states, False)
        self._read_write = _BroadcastContext(self, self.states, True)

    def _run(self, f: Any, ctx: _BroadcastContext, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        self._emit(process_batch_with(f, ctx, batch))
        ctx.side.flush(self.chain_output)

    def process_batch1(self, batch: Batch) -> None:
        self._run(self.function.process_element, self._read_only, batch)

    def process_batch2(self, batch: Batch) -> None:
        self._run(self.function.process_broadcast_element, self._read_write, batch)

    def close(self) -> None:
        self.function.close()


class _KeyedReadOnlyContext(_KeyedContext, _BroadcastContext):
    """process_element and on_timer of a KeyedBroadcastProcessFunction: the key's timers,
    read-only broadcast state."""

    def __init__(self, operator: KeyedBroadcastProcessOperator) -> None:
        _KeyedContext.__init__(self, operator)
        self._states = operator.states
        self._read_write = False

    def timer_service(self) -> Any:
        return self._operator.timers

    def get_current_key(self) -> Any:
        return self._operator.current_key

    def output(self, output_tag: Any, value: Any) -> None:
        self.side.add(output_tag, value, self._timestamp)


class KeyedBroadcastProcessOperator(KeyedCoProcessOperator):
    """A KeyedBroadcastProcessFunction: input 1 keyed (state, timers), input 2 broadcast."""

    broadcast_input2 = True

    def __init__(
        self, name: str, key_selector: Any, function: Any, descriptors: list[MapStateDescriptor]
    ) -> None:
        super().__init__(name, key_selector, None, function)
        self.states = _BroadcastStates(name, descriptors)

    def initialize_state(self) -> None:
        if self.context.is_restored:
            self.states.restore(self.context.operator_state())

    def snapshot_state(self, checkpoint_id: int) -> None:
        self.states.snapshot(self.context.operator_state())

    def open(self) -> None:
        super().open()
        self._ctx = _KeyedReadOnlyContext(self)
        self._read_write = _BroadcastContext(self, self.states, True)

    def _bind_function(self) -> None:
        self._process1 = self.function.process_element

    def process_batch1(self, batch: Batch) -> None:
        self._process_keyed(self._key_of, self._process1, batch)

    def process_batch2(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        ctx = self._read_write
        self._emit(process_batch_with(self.function.process_broadcast_element, ctx, batch))
        ctx.side.flush(self.chain_output)

"""Operator (non-keyed) state: list state per subtask, and how it is redistributed on rescaling.

Each subtask holds named lists. On restore at the same parallelism every subtask gets its
own split-distribute lists back, as in Flink: a region failover restores some subtasks
while the others run on with what they hold, so lists dealt anew would hand a restarted
source subtask another one's splits and leave its own to a subtask that never reads them
again. On restore at a different parallelism:

- split-distribute state (``get_list_state``): the elements of all old
  subtasks are concatenated (in subtask order) and cut into contiguous,
  near-equal chunks, one per new subtask -- Flink's
  ``RoundRobinOperatorStateRepartitioner`` for ``SPLIT_DISTRIBUTE``;
- union state (``get_union_list_state``): every new subtask gets all elements
  of all old subtasks (a source then picks what it owns);
- broadcast state (``get_broadcast_list_state``, the entries of a broadcast state):
  every old subtask holds the same elements, so new subtask ``i`` takes those of old
  subtask ``i mod old_parallelism`` -- Flink's ``BROADCAST`` mode.

Snapshots hold encoded elements (``serde.encode_value``), so they are immutable plain data. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from weir.core.state import ListState, ListStateDescriptor
from weir.errors import UsageError
from weir.state.serde import decode_value, encode_value

__all__ = [
    "BROADCAST",
    "SPLIT_DISTRIBUTE",
    "UNION",
    "OperatorListState",
    "OperatorStateBackend",
    "OperatorStateSnapshot",
    "repartition_operator_state",
]

SPLIT_DISTRIBUTE = "split_distribute"
UNION = "union"
BROADCAST = "broadcast"


@dataclass(frozen=True, slots=True)
class OperatorStateSnapshot:
    """The operator state of one subtask: ``states`` is a sorted tuple of (name, mode, encoded elements)."""

    operator_id: str
    states: tuple[tuple[str, str, tuple[bytes, ...]], ...]

    def get(self, name: str) -> tuple[str, tuple[bytes, ...]] | None:
        for n, mode, elements in self.states:
            if n == name:
                return mode, elements
        return None


class OperatorListState(ListState):
    """A plain list owned by one subtask (not keyed)."""

    def __init__(self, name: str, mode: str, elements: list[Any] | None = None) -> None:
        self.name = name
        self.mode = mode
        self._elements: list[Any] = elements or []

    def get(self) -> list[Any]:
        return list(self._elements)

    def add(self, value: Any) -> None:
        if value is None:
            raise UsageError(f"operator list state '{self.name}': None cannot be added to a ListState")
        self._elements.append(value)

    def add_all(self, values: Iterable[Any]) -> None:
        for v in values:
            self.add(v)

    def update(self, values: Iterable[Any] | None) -> None:
        self._elements = []
        if values is not None:
            self.add_all(values)

    def clear(self) -> None:
        self._elements = []

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._elements))


class OperatorStateBackend:
    """The operator state of one subtask."""

    def __init__(self, operator_id: str) -> None:
        self.operator_id = operator_id
        self._states: dict[str, OperatorListState] = {}
        self._restored: dict[str, tuple[str, list[Any]]] = {}

    def _get(self, descriptor: ListStateDescriptor, mode: str) -> OperatorListState:
        if not isinstance(descriptor, ListStateDescriptor):
            raise UsageError(
                f"operator state of '{self.operator_id}' is list state: it needs a ListStateDescriptor, "
                f"got {descriptor!r}"
            )
        name = descriptor.name
        state = self._states.get(name)
        if state is None:
            restored = self._restored.pop(name, None)
            if restored is not None and restored[0] != mode:
                raise UsageError(
                    f"operator state '{name}' of '{self.operator_id}' was restored as {restored[0]} state; "
                    f"it cannot be registered as {mode} state"
                )
            state = self._states[name] = OperatorListState(name, mode, restored[1] if restored else None)
        elif state.mode != mode:
            raise UsageError(
                f"operator state '{name}' of '{self.operator_id}' is registered as {state.mode} state; "
                f"it cannot be registered again as {mode} state"
            )
        return state

    def get_list_state(self, descriptor: ListStateDescriptor) -> OperatorListState:
        """List state that is split across subtasks when parallelism changes."""
        return self._get(descriptor, SPLIT_DISTRIBUTE)

    def get_union_list_state(self, descriptor: ListStateDescriptor) -> OperatorListState:
        """List state of which every subtask gets the union on restore."""
        return self._get(descriptor, UNION)

    def get_broadcast_list_state(self, descriptor: ListStateDescriptor) -> OperatorListState:
        """List state equal in every subtask: on restore each subtask takes one old copy."""
        return self._get(descriptor, BROADCAST)

    def snapshot(self) -> OperatorStateSnapshot:
        states = [(n, s.mode, tuple(encode_value(e) for e in s._elements)) for n, s in self._states.items()]
        states += [
            (n, mode, tuple(encode_value(e) for e in els)) for n, (mode, els) in self._restored.items()
        ]
        return OperatorStateSnapshot(self.operator_id, tuple(sorted(states)))

    def restore(self, snapshots: Iterable[OperatorStateSnapshot]) -> None:
        """Load already-repartitioned snapshots (usually one, from ``repartition_operator_state``)."""
        for snap in snapshots:
            for name, mode, elements in snap.states:
                values = [decode_value(e) for e in elements]
                state = self._states.get(name)
                if state is not None:
                    state._elements.extend(values)
                else:
                    old = self._restored.setdefault(name, (mode, []))
                    old[1].extend(values)

    def state_names(self) -> list[str]:
        return sorted(set(self._states) | set(self._restored))


def repartition_operator_state(
    snapshots: Sequence[OperatorStateSnapshot | None], new_parallelism: int
) -> list[OperatorStateSnapshot]:
    """The snapshot each of ``new_parallelism`` subtasks restores from the old subtasks'
    ``snapshots``: old subtask ``i``'s at index ``i``, None where it had no operator state
    (so ``len(snapshots)`` is the old parallelism)."""
    if new_parallelism < 1:
        raise UsageError(f"new_parallelism must be at least 1, got {new_parallelism}")
    present = [snap for snap in snapshots if snap is not None]
    operator_id = present[0].operator_id if present else ""
    same_parallelism = len(snapshots) == new_parallelism
    merged: dict[str, tuple[str, list[bytes]]] = {}
    copies: dict[str, list[tuple[bytes, ...]]] = {}  # broadcast state: each old subtask's copy
    for snap in present:
        for name, mode, elements in snap.states:
            entry = merged.setdefault(name, (mode, []))
            if entry[0] != mode:
                raise UsageError(
                    f"operator state '{name}' is {entry[0]} in one subtask and {mode} in another"
                )
            entry[1].extend(elements)
            if mode == BROADCAST:
                copies.setdefault(name, []).append(elements)
    per_subtask: list[list[tuple[str, str, tuple[bytes, ...]]]] = [[] for _ in range(new_parallelism)]
    for name in sorted(merged):
        mode, all_elements = merged[name]
        if mode == BROADCAST:
            old = copies[name]
            for i, states in enumerate(per_subtask):
                states.append((name, mode, old[i % len(old)]))
            continue
        if mode == UNION:
            for states in per_subtask:
                states.append((name, mode, tuple(all_elements)))
            continue
        if same_parallelism:  # each subtask keeps its own list
            for states, old_snap in zip(per_subtask, snapshots, strict=True):
                own = None if old_snap is None else old_snap.get(name)
                states.append((name, mode, () if own is None else own[1]))
            continue
        base, extra = divmod(len(all_elements), new_parallelism)
        start = 0
        for i, states in enumerate(per_subtask):
            size = base + (1 if i < extra else 0)
            states.append((name, mode, tuple(all_elements[start : start + size])))
            start += size
    return [OperatorStateSnapshot(operator_id, tuple(states)) for states in per_subtask]

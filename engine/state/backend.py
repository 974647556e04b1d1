"""The keyed state backend protocol that operators use, and the snapshot format every backend shares.

Theory of operation
-------------------
A keyed state backend belongs to one subtask of one operator and holds the
keyed state of the key groups in its ``key_group_range``. The operator calls
``set_current_key(key)`` before it handles a record; every state object from
``get_state(descriptor)`` then reads and writes the entry of that key, in the
namespace set on the state object (``set_current_namespace``; the default is
``VOID_NAMESPACE`` = None, window operators use the window). A key whose key
group is outside the range is a routing bug upstream: ``ProtocolViolation``.

``snapshot(key_group_range)`` returns a ``KeyedStateSnapshot``: an immutable,
plain-data, in-memory value in one canonical format for every backend, so a
heap snapshot restores into LMDB and back, and a snapshot of a range restores
into any set of backends whose ranges split it (each takes only its own key
groups) -- that is how rescaling works.

Snapshot format
---------------
``KeyedStateSnapshot.key_groups`` is a tuple of ``(key_group, entries)`` sorted
by key group, holding only non-empty key groups; ``entries`` is a sorted tuple
of ``(state_name, key_bytes, namespace_bytes, user_key_bytes, value_bytes)``:

- ``key_bytes``/``namespace_bytes``: ``serde.encode_key`` of the key and namespace;
- ``user_key_bytes``: ``b""`` for value/reducing/aggregating state; for list
  state the element's position as 8 bytes big endian (one entry per element);
  for map state ``serde.encode_key`` of the map key (one entry per map entry);
- ``value_bytes``: ``serde.encode_value`` (weir's data encoding) of the stored value -- for
  a state with TTL the stored value is ``(last_access_ms, value)``; reducing
  and aggregating state store the accumulator.

``states`` lists every state in the snapshot (name, kind, whether it has TTL).
The same backend contents always give the same snapshot.

Checkpoints split a snapshot in two (``snapshot_async``): the synchronous phase at the
barrier returns a ``PendingKeyedStateSnapshot`` at a cost that does not grow with the
state (heap: copy-on-write key groups; LMDB: a pinned read transaction), and its
``result()`` -- called in the asynchronous phase, on the worker thread that writes
the files -- is the ``KeyedStateSnapshot`` of the state as it was at the barrier,
whatever was written since. ``snapshot()`` is the same thing in one call.

What it does not do: incremental snapshots, writing snapshots to storage
(``weir.checkpoint`` does that).
"""

from __future__ import annotations

import bisect
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from weir.core.state import (
    AggregatingStateDescriptor,
    ReducingStateDescriptor,
    State,
    StateDescriptor,
    StateTtlConfig,
)
from weir.errors import ProtocolViolation, UsageError
from weir.keys.reference import KeyGroupRange, java_hash, murmur_hash

__all__ = [
    "VOID_NAMESPACE",
    "KeyedStateBackend",
    "KeyedStateBackendStatistics",
    "KeyedStateSnapshot",
    "PendingKeyedStateSnapshot",
    "RuntimeStateProvider",
    "SnapshotEntry",
    "StateMetaInfo",
    "wall_clock_ms",
]

#: The namespace of state that is not scoped to a window (Flink's ``VoidNamespace``).
VOID_NAMESPACE: None = None

#: ``(state_name, key_bytes, namespace_bytes, user_key_bytes, value_bytes)``.
SnapshotEntry = tuple[str, bytes, bytes, bytes, bytes]

#: Bound of the key -> key group cache (computing a key group costs ~1-2 µs in Python).
KEY_CACHE_ENTRIES = 1 << 16

_KINDS = ("value", "list", "map", "reducing", "aggregating")


def wall_clock_ms() -> int:
    """Processing time in ms; the default clock for TTL when none is injected."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class StateMetaInfo:
    """What a snapshot records about one state: its name, kind and whether values carry a TTL timestamp."""

    name: str
    kind: str
    ttl: bool


@dataclass(frozen=True)
class KeyedStateSnapshot:
    """An immutable, backend-independent snapshot of keyed state (format in the module docstring)."""

    operator_id: str
    max_parallelism: int
    key_group_range: KeyGroupRange
    states: tuple[StateMetaInfo, ...]
    key_groups: tuple[tuple[int, tuple[SnapshotEntry, ...]], ...]
    _index: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", tuple(kg for kg, _ in self.key_groups))

    def entries(self, key_group: int) -> tuple[SnapshotEntry, ...]:
        """The entries of one key group (empty when it holds nothing)."""
        i = bisect.bisect_left(self._index, key_group)
        if i < len(self._index) and self._index[i] == key_group:
            return self.key_groups[i][1]
        return ()

    def number_of_entries(self) -> int:
        return sum(len(entries) for _, entries in self.key_groups)

    def size_bytes(self) -> int:
        """Bytes of keys, namespaces and values held (an estimate of the checkpoint size)."""
        return sum(
            len(e[0]) + len(e[1]) + len(e[2]) + len(e[3]) + len(e[4])
            for _, entries in self.key_groups
            for e in entries
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            KeyedStateSnapshot,
            (self.operator_id, self.max_parallelism, self.key_group_range, self.states, self.key_groups),
        )


class PendingKeyedStateSnapshot(ABC):
    """The synchronous phase's part of a snapshot; ``result()`` (asynchronous phase, any
    thread, once or more) is the ``KeyedStateSnapshot`` of the state at the barrier."""

    @abstractmethod
    def result(self) -> KeyedStateSnapshot: ...


class _DoneSnapshot(PendingKeyedStateSnapshot):
    def __init__(self, snapshot: KeyedStateSnapshot) -> None:
        self._snapshot = snapshot

    def result(self) -> KeyedStateSnapshot:
        return self._snapshot


@dataclass(frozen=True)
class PackedKeyedStateSnapshot:
    """A ``KeyedStateSnapshot`` already in its state-file form (``weir.state.state_file``):
    ``names`` the state names in order of first use, ``groups`` how many key groups hold
    entries, ``packed`` the entries. Written exactly as the snapshot it stands for and read
    back as one; only the asynchronous phase of a checkpoint makes it, for the frozen
    panes of a window (``weir.state.panes``) without building an entry tuple per pane."""

    operator_id: str
    max_parallelism: int
    key_group_range: KeyGroupRange
    states: tuple[StateMetaInfo, ...]
    names: tuple[str, ...]
    groups: int
    packed: bytes


@dataclass(frozen=True, slots=True)
class KeyedStateBackendStatistics:
    backend: str
    operator_id: str
    key_group_range: KeyGroupRange
    number_of_states: int
    number_of_entries: int
    extra: dict[str, Any]


class InternalKvState(State):
    """What the backend's state objects add to the user-facing interface."""

    @abstractmethod
    def set_current_namespace(self, namespace: Any) -> None: ...

    @abstractmethod
    def get_internal(self) -> Any:
        """The raw content under the current key and namespace: value, accumulator, or list of elements."""

    @abstractmethod
    def update_internal(self, value: Any) -> None:
        """Replace the raw content (``get_internal``'s shape); None clears it."""


class ReducingStateLogic:
    """``ReducingState`` on top of a backend's single-value storage (get/update_internal)."""

    _reduce: Callable[[Any, Any], Any]

    def get(self) -> Any:
        return self.get_internal()  # type: ignore[attr-defined]

    def add(self, value: Any) -> None:
        if value is None:
            self.clear()  # type: ignore[attr-defined]
            return
        current = self.get_internal()  # type: ignore[attr-defined]
        self.update_internal(value if current is None else self._reduce(current, value))  # type: ignore[attr-defined]


class AggregatingStateLogic:
    """``AggregatingState`` on top of a backend's single-value storage: keeps the accumulator."""

    _agg: Any

    def get(self) -> Any:
        acc = self.get_internal()  # type: ignore[attr-defined]
        return None if acc is None else self._agg.get_result(acc)

    def add(self, value: Any) -> None:
        acc = self.get_internal()  # type: ignore[attr-defined]
        if acc is None:
            acc = self._agg.create_accumulator()
        self.update_internal(self._agg.add(value, acc))  # type: ignore[attr-defined]


class KeyedStateBackend(ABC):
    """Keyed state of one operator subtask: the key groups of ``key_group_range``.

    ``time_ms`` is the processing-time clock that TTL uses (a test injects its own).
    """

    backend_name = "abstract"

    def __init__(
        self,
        operator_id: str,
        max_parallelism: int,
        key_group_range: KeyGroupRange,
        time_ms: Callable[[], int] | None = None,
    ) -> None:
        if not isinstance(max_parallelism, int) or not 1 <= max_parallelism <= 32768:
            raise UsageError(
                f"state backend of '{operator_id}': max_parallelism must be in 1..32768, got {max_parallelism!r}"
            )
        if not isinstance(key_group_range, KeyGroupRange):
            raise UsageError(
                f"state backend of '{operator_id}': key_group_range must be a KeyGroupRange, got {key_group_range!r}"
            )
        if len(key_group_range) and key_group_range.end_key_group >= max_parallelism:
            raise UsageError(
                f"state backend of '{operator_id}': key group range {key_group_range} exceeds "
                f"max_parallelism {max_parallelism}"
            )
        self.operator_id = operator_id
        self.max_parallelism = max_parallelism
        self.key_group_range = key_group_range
        self.time_ms: Callable[[], int] = time_ms or wall_clock_ms
        self._start_kg = key_group_range.start_key_group
        self._end_kg = key_group_range.end_key_group
        self._current_key: Any = None
        self._current_key_type: type | None = None
        self._current_key_group = -1
        #: index of the current key group inside the range; None until a key is set
        self._kg_index: int | None = None
        #: what a serializing backend prefixes the current key's entries with
        self._key_prefix: bytes | None = None
        #: key -> (key group, prefix) for int and str keys; cleared when it reaches KEY_CACHE_ENTRIES
        self._key_cache: dict[Any, tuple[int, bytes | None]] = {}
        self._states: dict[str, InternalKvState] = {}
        self._descriptors: dict[str, StateDescriptor] = {}
        self._metas: dict[str, StateMetaInfo] = {}
        self._closed = False

    # ------------------------------------------------------------------ current key

    def set_current_key(self, key: Any) -> None:
        """Make ``key`` the key that every state object reads and writes."""
        t = type(key)
        if t is self._current_key_type and key == self._current_key:
            return
        if t is int or t is str:
            # int and str keys never compare equal to each other, so one dict serves both
            cached = self._key_cache.get(key)
            if cached is None:
                cached = self._key_context(key)
                if len(self._key_cache) >= KEY_CACHE_ENTRIES:
                    self._key_cache.clear()
                self._key_cache[key] = cached
        else:
            cached = self._key_context(key)
        self._current_key = key
        self._current_key_type = t
        self._current_key_group = kg = cached[0]
        self._kg_index = kg - self._start_kg
        self._key_prefix = cached[1]

    def _key_context(self, key: Any) -> tuple[int, bytes | None]:
        """The key group of ``key`` (checked against the range) and, for serializing backends, its prefix."""
        kg = murmur_hash(java_hash(key)) % self.max_parallelism
        if not self._start_kg <= kg <= self._end_kg:
            raise ProtocolViolation(
                f"state backend of '{self.operator_id}': key {key!r} belongs to key group {kg}, "
                f"outside this subtask's key group range {self.key_group_range} "
                f"(max_parallelism {self.max_parallelism})"
            )
        return kg, self._key_bytes(key, kg)

    def _key_bytes(self, key: Any, key_group: int) -> bytes | None:
        """Hook for backends that serialize keys (LMDB: key group + encoded key)."""
        return None

    @property
    def current_key(self) -> Any:
        return self._current_key

    @property
    def current_key_group(self) -> int:
        return self._current_key_group

    def _no_current_key(self, state_name: str) -> UsageError:
        return UsageError(
            f"state '{state_name}' of '{self.operator_id}' was accessed with no current key: "
            "keyed state is only available while a keyed record (or timer) is processed"
        )

    # ------------------------------------------------------------------ states

    def get_state(self, descriptor: StateDescriptor) -> Any:
        """The state object for ``descriptor``, bound to the current key; one object per state name."""
        if not isinstance(descriptor, StateDescriptor):
            raise UsageError(
                f"get_state needs a state descriptor such as ValueStateDescriptor('count', Types.LONG()), "
                f"got {descriptor!r}"
            )
        self._check_open()
        name = descriptor.name
        state = self._states.get(name)
        if state is not None:
            known = self._descriptors[name]
            if known is not descriptor and known.signature() != descriptor.signature():
                raise UsageError(
                    f"state '{name}' of '{self.operator_id}' is already registered as {known!r} "
                    f"(kind {known.kind}); it cannot be registered again as {descriptor!r} (kind {descriptor.kind})"
                )
            return state
        meta = self._metas.get(name)
        ttl = descriptor.ttl_config is not None
        if meta is not None and (meta.kind != descriptor.kind or meta.ttl != ttl):
            raise UsageError(
                f"state '{name}' of '{self.operator_id}' was restored as {meta.kind} state"
                f"{' with TTL' if meta.ttl else ''}; it cannot be registered as {descriptor.kind} state"
                f"{' with TTL' if ttl else ''}"
            )
        self._metas[name] = StateMetaInfo(name, descriptor.kind, ttl)
        state = self._create_state(descriptor)
        self._states[name] = state
        self._descriptors[name] = descriptor
        return state

    @abstractmethod
    def _create_state(self, descriptor: StateDescriptor) -> InternalKvState: ...

    def registered_state_names(self) -> list[str]:
        return sorted(self._metas)

    @abstractmethod
    def keys(self, state_name: str, namespace: Any = VOID_NAMESPACE) -> Iterator[Any]:
        """Every key that has an entry of ``state_name`` in ``namespace`` (a materialized list's iterator)."""

    def apply_to_all_keys(
        self, namespace: Any, descriptor: StateDescriptor, fn: Callable[[Any, Any], None]
    ) -> None:
        """Call ``fn(key, state)`` with the current key set to each key that has this state in ``namespace``.

        ``fn`` may modify or clear the state; the current key is restored afterwards.
        """
        state = self.get_state(descriptor)
        previous_key, had_key = self._current_key, self._kg_index is not None
        state.set_current_namespace(namespace)
        try:
            for key in self.keys(descriptor.name, namespace):
                self.set_current_key(key)
                fn(key, state)
        finally:
            if had_key:
                self.set_current_key(previous_key)

    def merge_namespaces(self, descriptor: StateDescriptor, target: Any, sources: Iterable[Any]) -> None:
        """Move the contents of ``sources`` into ``target`` for the current key (session window merging).

        List state concatenates, reducing state reduces, aggregating state merges
        accumulators (``AggregateFunction.merge``). The sources are left empty.
        """
        if descriptor.kind not in ("list", "reducing", "aggregating"):
            raise UsageError(
                f"merge_namespaces works on list, reducing and aggregating state; "
                f"state '{descriptor.name}' is {descriptor.kind} state"
            )
        state = self.get_state(descriptor)
        merge: Callable[[Any, Any], Any]
        if isinstance(descriptor, ReducingStateDescriptor):
            merge = descriptor.reduce
        elif isinstance(descriptor, AggregatingStateDescriptor):
            agg_merge = getattr(descriptor.agg_function, "merge", None)
            if not callable(agg_merge):
                raise UsageError(
                    f"state '{descriptor.name}': merging needs an AggregateFunction with merge()"
                )
            merge = agg_merge
        else:

            def merge(a: Any, b: Any) -> Any:
                return a + b

        merged: Any = None
        for source in sources:
            if source == target:
                continue
            state.set_current_namespace(source)
            content = state.get_internal()
            if content is None or (descriptor.kind == "list" and not content):
                continue
            state.clear()
            merged = content if merged is None else merge(merged, content)
        state.set_current_namespace(target)
        if merged is None:
            return
        if descriptor.kind == "list":
            state.add_all(merged)
            return
        current = state.get_internal()
        state.update_internal(merged if current is None else merge(current, merged))

    # ------------------------------------------------------------------ snapshots

    @abstractmethod
    def snapshot(self, key_group_range: KeyGroupRange | None = None) -> KeyedStateSnapshot:
        """A snapshot of the key groups in ``key_group_range`` (default: all of this backend's)."""

    def snapshot_async(self, key_group_range: KeyGroupRange | None = None) -> PendingKeyedStateSnapshot:
        """The synchronous phase of ``snapshot``; the snapshot itself is ``result()`` of what it returns.
        Backends that can defer the work override this; the default snapshots at once."""
        return _DoneSnapshot(self.snapshot(key_group_range))

    def restore(self, snapshots: Iterable[KeyedStateSnapshot]) -> None:
        """Load the key groups of ``snapshots`` that fall inside this backend's range; ignore the rest."""
        self._check_open()
        for snap in snapshots:
            if not isinstance(snap, KeyedStateSnapshot):
                raise UsageError(f"restore needs KeyedStateSnapshot values, got {snap!r}")
            if snap.max_parallelism != self.max_parallelism:
                raise UsageError(
                    f"snapshot of '{snap.operator_id}' was taken with max_parallelism {snap.max_parallelism}; "
                    f"'{self.operator_id}' has max_parallelism {self.max_parallelism}, and key groups "
                    "cannot be reassigned across a different max_parallelism"
                )
            metas = {m.name: m for m in snap.states}
            for meta in snap.states:
                known = self._metas.get(meta.name)
                if known is not None and known != meta:
                    raise UsageError(
                        f"state '{meta.name}' of '{self.operator_id}' is {known.kind} state"
                        f"{' with TTL' if known.ttl else ''}; the snapshot holds it as {meta.kind} state"
                        f"{' with TTL' if meta.ttl else ''}"
                    )
                if meta.kind not in _KINDS:
                    raise UsageError(f"snapshot state '{meta.name}' has unknown kind {meta.kind!r}")
                self._metas[meta.name] = meta
            for kg, entries in snap.key_groups:
                if self._start_kg <= kg <= self._end_kg:
                    self._restore_key_group(kg, entries, metas)
        self._after_restore()

    @abstractmethod
    def _restore_key_group(
        self, key_group: int, entries: tuple[SnapshotEntry, ...], metas: dict[str, StateMetaInfo]
    ) -> None: ...

    def _after_restore(self) -> None:  # noqa: B027 - an optional hook
        """Called once after ``restore`` loaded every key group."""

    def _snapshot_range(self, key_group_range: KeyGroupRange | None) -> KeyGroupRange:
        if key_group_range is None:
            return self.key_group_range
        return self.key_group_range.intersection(key_group_range)

    def _ttl_cleanup(self) -> dict[str, tuple[int, int]]:
        """State name -> (ttl_ms, now_ms) for states whose expired entries a full snapshot drops."""
        out: dict[str, tuple[int, int]] = {}
        now: int | None = None
        for name, desc in self._descriptors.items():
            ttl = desc.ttl_config
            if ttl is not None and ttl.cleanup_in_full_snapshot:
                if now is None:
                    now = self.time_ms()
                out[name] = (ttl.ttl_ms, now)
        return out

    def _make_snapshot(
        self, key_group_range: KeyGroupRange, key_groups: list[tuple[int, tuple[SnapshotEntry, ...]]]
    ) -> KeyedStateSnapshot:
        states = tuple(self._metas[name] for name in sorted(self._metas))
        return KeyedStateSnapshot(
            self.operator_id, self.max_parallelism, key_group_range, states, tuple(key_groups)
        )

    # ------------------------------------------------------------------ lifecycle and numbers

    @abstractmethod
    def number_of_keys(self) -> int:
        """Entries held: one per value/reducing/aggregating value, list element and map entry."""

    @abstractmethod
    def statistics(self) -> KeyedStateBackendStatistics: ...

    def close(self) -> None:
        """Release resources; the state stays where it is (LMDB files remain)."""
        self._closed = True

    def dispose(self) -> None:
        """Release resources and delete the state."""
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"state backend of '{self.operator_id}' is closed")

    def __enter__(self) -> KeyedStateBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dispose()


def ttl_of(descriptor: StateDescriptor) -> StateTtlConfig | None:
    return descriptor.ttl_config


class RuntimeStateProvider:
    """Adapter for ``RuntimeContext(state_provider=...)``: ``get_state(kind, descriptor)``.

    Checks that the getter matches the descriptor (``get_list_state`` needs a
    ``ListStateDescriptor``) and returns the backend's state object.
    """

    _GETTERS: ClassVar[dict[str, str]] = {
        "value": "get_state",
        "list": "get_list_state",
        "map": "get_map_state",
        "reducing": "get_reducing_state",
        "aggregating": "get_aggregating_state",
    }

    def __init__(self, backend: KeyedStateBackend) -> None:
        self.backend = backend
        #: called before a state object is handed out (an operator that sets the current key
        #: only once its function uses state hooks in here)
        self.on_access: Callable[[], None] | None = None

    def get_state(self, kind: str, descriptor: Any) -> Any:
        if not isinstance(descriptor, StateDescriptor):
            raise UsageError(f"{self._GETTERS.get(kind, kind)} needs a state descriptor, got {descriptor!r}")
        if descriptor.kind != kind:
            raise UsageError(
                f"{self._GETTERS.get(kind, kind)} got {descriptor!r}, a {descriptor.kind} state descriptor; "
                f"use {self._GETTERS[descriptor.kind]} for it"
            )
        if self.on_access is not None:
            self.on_access()
        return self.backend.get_state(descriptor)

"""``HeapKeyedStateBackend``: keyed state as Python objects in dicts (Flink's HashMapStateBackend).

Layout: state name -> one dict per key group of the range (a list indexed by
``key_group - start``) -> ``(key, namespace)`` -> stored value. A snapshot of a
key-group range touches only the dicts of those key groups.

Stored values: the value (value state), the accumulator (reducing and
aggregating state), a list of elements (list state), a dict (map state). With
TTL every value, element and map value is stored as ``(last_access_ms, value)``.
Values are live objects, not copies (as in Flink's heap backend): a value
object that is mutated after ``update`` changes the state. Snapshots serialize,
so a snapshot never changes afterwards.

Copy-on-write snapshots (``snapshot_async``, Flink's ``CopyOnWriteStateMap`` idea at the
granularity of a key group): the synchronous phase only records, per key group of the
range, which dicts hold entries -- O(key groups x states), nothing per entry -- and
marks those key groups pending. A pending key group is encoded into the canonical
entries exactly once, by whichever comes first: the asynchronous phase (the worker
thread that writes the checkpoint's files, ``PendingHeapSnapshot.result``, one key
group at a time so the job's thread gets the GIL between them) or the job's thread
when a state access is about to touch that key group (every access path checks the
pending set before it reads or writes a dict, so a write after the barrier never
reaches a dict before its snapshot bytes exist). Writes after the barrier therefore
cost nothing extra unless they hit a pending key group, and then they pay for that
key group only. The one thing the snapshot cannot see through is an object handed
out before the barrier and mutated afterwards without going through a state
object; an operator that keeps such references (the window operator's fast mode)
declares it with ``shares_state_objects`` and gets the synchronous ``snapshot()``.

Keys are compared as Python compares them: ``1``, ``True`` and ``1.0`` are
one dict key, so if two such keys ever share a key group they share state here
(LMDB keeps them apart). Use one key type per stream, as Flink requires.

Cost per access: a dict lookup with a ``(key, namespace)`` tuple, plus the
key group computation when the current key changes.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Iterable, Iterator
from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np

from weir.core.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    MapState,
    ReducingState,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueState,
)
from weir.errors import UsageError
from weir.keys.reference import KeyGroupRange
from weir.state.backend import (
    VOID_NAMESPACE,
    AggregatingStateLogic,
    InternalKvState,
    KeyedStateBackend,
    KeyedStateBackendStatistics,
    KeyedStateSnapshot,
    PackedKeyedStateSnapshot,
    PendingKeyedStateSnapshot,
    ReducingStateLogic,
    SnapshotEntry,
    StateMetaInfo,
)
from weir.state.serde import (
    INT_ROWS_CHUNK,
    IntRows,
    decode_key,
    decode_value,
    encode_key,
    encode_many,
    encode_value,
)

__all__ = ["HeapKeyedStateBackend", "PendingHeapSnapshot"]

_POS = struct.Struct(">Q")
_VOID_BYTES = encode_key(VOID_NAMESPACE)
_MISSING = object()

Table = list[dict[tuple[Any, Any], Any]]


class _HeapState(InternalKvState):
    __slots__ = (
        "_b",
        "_clock",
        "_name",
        "_ns",
        "_return_expired",
        "_table",
        "_ttl",
        "_ttl_ms",
        "_update_on_read",
    )

    def __init__(self, backend: HeapKeyedStateBackend, table: Table, descriptor: StateDescriptor) -> None:
        self._b = backend
        self._table = table
        self._name = descriptor.name
        self._ns: Any = VOID_NAMESPACE
        ttl = descriptor.ttl_config
        self._ttl = ttl
        self._ttl_ms = ttl.ttl_ms if ttl else 0
        self._return_expired = ttl.return_expired if ttl else False
        self._update_on_read = ttl.update_on_read if ttl else False
        self._clock = backend.time_ms

    def set_current_namespace(self, namespace: Any) -> None:
        self._ns = namespace

    def _map(self) -> dict[tuple[Any, Any], Any]:
        b = self._b
        i = b._kg_index
        if i is None:
            raise b._no_current_key(self._name)
        if b._cow_todo and i in b._cow_todo:
            b._touch(i)
        return self._table[i]

    def _k(self) -> tuple[Any, Any]:
        return (self._b._current_key, self._ns)

    def clear(self) -> None:
        self._map().pop((self._b._current_key, self._ns), None)


class _HeapSingle(_HeapState):
    """One stored object per key and namespace: value, reducing and aggregating state."""

    def get_internal(self) -> Any:
        b = self._b
        i = b._kg_index
        if i is None:
            raise b._no_current_key(self._name)
        if b._cow_todo and i in b._cow_todo:
            b._touch(i)
        m = self._table[i]
        k = (self._b._current_key, self._ns)
        if self._ttl is None:
            return m.get(k)
        entry = m.get(k)
        if entry is None:
            return None
        now = self._clock()
        if entry[0] + self._ttl_ms <= now:
            del m[k]
            return entry[1] if self._return_expired else None
        if self._update_on_read:
            m[k] = (now, entry[1])
        return entry[1]

    def update_internal(self, value: Any) -> None:
        b = self._b
        i = b._kg_index
        if i is None:
            raise b._no_current_key(self._name)
        if b._cow_todo and i in b._cow_todo:
            b._touch(i)
        k = (b._current_key, self._ns)
        if value is None:
            self._table[i].pop(k, None)
        elif self._ttl is None:
            self._table[i][k] = value
        else:
            self._table[i][k] = (self._clock(), value)


class HeapValueState(_HeapSingle, ValueState):
    value = _HeapSingle.get_internal
    update = _HeapSingle.update_internal


class HeapReducingState(ReducingStateLogic, _HeapSingle, ReducingState):
    def __init__(
        self, backend: HeapKeyedStateBackend, table: Table, descriptor: ReducingStateDescriptor
    ) -> None:
        super().__init__(backend, table, descriptor)
        self._reduce = descriptor.reduce


class HeapAggregatingState(AggregatingStateLogic, _HeapSingle, AggregatingState):
    def __init__(
        self, backend: HeapKeyedStateBackend, table: Table, descriptor: AggregatingStateDescriptor
    ) -> None:
        super().__init__(backend, table, descriptor)
        self._agg = descriptor.agg_function


def _no_none(name: str, values: list[Any]) -> list[Any]:
    for v in values:
        if v is None:
            raise UsageError(f"list state '{name}': None cannot be added to a ListState")
    return values


class HeapListState(_HeapState, ListState):
    def get_internal(self) -> list[Any] | None:
        m = self._map()
        k = (self._b._current_key, self._ns)
        stored = m.get(k)
        if not stored:
            return None
        if self._ttl is None:
            return list(stored)
        now = self._clock()
        limit = now - self._ttl_ms
        live = [e for e in stored if e[0] > limit]
        out = [e[1] for e in (stored if self._return_expired else live)]
        if len(live) != len(stored) or self._update_on_read:
            if not live:
                del m[k]
            else:
                m[k] = [(now, e[1]) for e in live] if self._update_on_read else live
        return out or None

    def get(self) -> list[Any]:
        return self.get_internal() or []

    def add(self, value: Any) -> None:
        if value is None:
            raise UsageError(f"list state '{self._name}': None cannot be added to a ListState")
        m = self._map()
        k = (self._b._current_key, self._ns)
        if self._ttl is not None:
            value = (self._clock(), value)
        stored = m.get(k)
        if stored is None:
            m[k] = [value]
        else:
            stored.append(value)

    def add_all(self, values: Iterable[Any]) -> None:
        new = _no_none(self._name, list(values))
        if not new:
            return
        m = self._map()
        k = (self._b._current_key, self._ns)
        if self._ttl is not None:
            now = self._clock()
            new = [(now, v) for v in new]
        stored = m.get(k)
        if stored is None:
            m[k] = new
        else:
            stored.extend(new)

    def update(self, values: Iterable[Any] | None) -> None:
        new = [] if values is None else _no_none(self._name, list(values))
        m = self._map()
        k = (self._b._current_key, self._ns)
        if not new:
            m.pop(k, None)
        elif self._ttl is None:
            m[k] = new
        else:
            now = self._clock()
            m[k] = [(now, v) for v in new]

    def update_internal(self, value: Any) -> None:
        self.update(value)


class HeapMapState(_HeapState, MapState):
    def _live(self, create: bool = False) -> dict[Any, Any] | None:
        m = self._map()
        k = (self._b._current_key, self._ns)
        d = m.get(k)
        if d is None and create:
            d = m[k] = {}
        return d

    def _read(self, d: dict[Any, Any], user_key: Any, now: int) -> Any:
        """The value of one entry with the TTL check (``_MISSING`` when absent or hidden)."""
        entry = d.get(user_key, _MISSING)
        if entry is _MISSING or self._ttl is None:
            return entry
        if entry[0] + self._ttl_ms <= now:
            del d[user_key]
            return entry[1] if self._return_expired else _MISSING
        if self._update_on_read:
            d[user_key] = (now, entry[1])
        return entry[1]

    def _drop_if_empty(self, d: dict[Any, Any]) -> None:
        if not d:
            self._map().pop((self._b._current_key, self._ns), None)

    def get(self, key: Any) -> Any:
        d = self._live()
        if d is None:
            return None
        value = self._read(d, key, self._clock() if self._ttl else 0)
        self._drop_if_empty(d)
        return None if value is _MISSING else value

    def contains(self, key: Any) -> bool:
        d = self._live()
        if d is None:
            return False
        value = self._read(d, key, self._clock() if self._ttl else 0)
        self._drop_if_empty(d)
        return value is not _MISSING

    def put(self, key: Any, value: Any) -> None:
        d = self._live(create=True)
        assert d is not None
        d[key] = value if self._ttl is None else (self._clock(), value)

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        if not dict_value:
            return
        d = self._live(create=True)
        assert d is not None
        if self._ttl is None:
            d.update(dict_value)
        else:
            now = self._clock()
            d.update((k, (now, v)) for k, v in dict_value.items())

    def remove(self, key: Any) -> None:
        d = self._live()
        if d is not None:
            d.pop(key, None)
            self._drop_if_empty(d)

    def items(self) -> list[tuple[Any, Any]]:
        d = self._live()
        if not d:
            return []
        if self._ttl is None:
            return list(d.items())
        now = self._clock()
        out = []
        for k in list(d):
            v = self._read(d, k, now)
            if v is not _MISSING:
                out.append((k, v))
        self._drop_if_empty(d)
        return out

    def keys(self) -> list[Any]:
        return [k for k, _ in self.items()]

    def values(self) -> list[Any]:
        return [v for _, v in self.items()]

    def is_empty(self) -> bool:
        return not self.items()

    def get_internal(self) -> dict[Any, Any] | None:
        items = self.items()
        return dict(items) if items else None

    def update_internal(self, value: Any) -> None:
        self.clear()
        if value:
            self.put_all(value)


_STATE_CLASSES: dict[str, Any] = {
    "value": HeapValueState,
    "list": HeapListState,
    "map": HeapMapState,
    "reducing": HeapReducingState,
    "aggregating": HeapAggregatingState,
}


class HeapKeyedStateBackend(KeyedStateBackend):
    """Keyed state on the Python heap: fastest per access, bounded by memory."""

    backend_name = "hashmap"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tables: dict[str, Table] = {}
        #: copy-on-write snapshots not yet fully encoded, and the union of their pending key group indices
        self._cow_lock = threading.Lock()
        self._cow_snapshots: list[PendingHeapSnapshot] = []
        self._cow_todo: set[int] = set()

    def _table_for(self, name: str) -> Table:
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = [{} for _ in range(len(self.key_group_range))]
        return table

    def _create_state(self, descriptor: StateDescriptor) -> InternalKvState:
        cls = _STATE_CLASSES[descriptor.kind]
        state: InternalKvState = cls(self, self._table_for(descriptor.name), descriptor)
        return state

    def keys(self, state_name: str, namespace: Any = VOID_NAMESPACE) -> Iterator[Any]:
        table = self._tables.get(state_name)
        if table is None:
            return iter(())
        return iter([k for m in table for (k, ns) in m if ns == namespace])

    def keys_and_namespaces(self, state_name: str) -> Iterator[tuple[Any, Any]]:
        """Every (key, namespace) that holds ``state_name``."""
        table = self._tables.get(state_name)
        return iter([kn for m in table for kn in m] if table else [])

    # ------------------------------------------------------------------ snapshots

    def snapshot(self, key_group_range: KeyGroupRange | None = None) -> KeyedStateSnapshot:
        return self.snapshot_async(key_group_range).result()

    def snapshot_async(self, key_group_range: KeyGroupRange | None = None) -> PendingHeapSnapshot:
        """The synchronous phase of a copy-on-write snapshot (module docstring): O(key groups x states)."""
        self._check_open()
        rng = self._snapshot_range(key_group_range)
        cleanup = self._ttl_cleanup()
        names = sorted(self._tables)
        kinds = {name: self._metas[name].kind for name in names}
        limits = {name: ttl_now[1] - ttl_now[0] for name, ttl_now in cleanup.items()}
        parts: dict[int, list[tuple[str, dict[tuple[Any, Any], Any]]]] = {}
        for kg in rng:
            idx = kg - self._start_kg
            held = [(name, self._tables[name][idx]) for name in names if self._tables[name][idx]]
            if held:
                parts[idx] = held
        pending = PendingHeapSnapshot(self, rng, parts, kinds, limits, self._make_snapshot(rng, []))
        if parts:
            with self._cow_lock:
                self._cow_snapshots.append(pending)
                self._cow_todo = self._cow_todo | parts.keys()
        return pending

    def _touch(self, idx: int) -> None:
        """A state access is about to touch key group ``idx``: pending snapshots encode it first."""
        with self._cow_lock:
            for pending in self._cow_snapshots:
                pending._encode_locked(idx)
            self._cow_prune_locked()

    def _cow_prune_locked(self) -> None:
        snapshots = [p for p in self._cow_snapshots if p._todo]
        todo: set[int] = set()
        for p in snapshots:
            todo |= p._todo
        self._cow_snapshots = snapshots
        self._cow_todo = todo

    def _restore_key_group(
        self, key_group: int, entries: tuple[SnapshotEntry, ...], metas: dict[str, StateMetaInfo]
    ) -> None:
        idx = key_group - self._start_kg
        if self._cow_todo and idx in self._cow_todo:
            self._touch(idx)
        for name, kb, nb, ub, vb in entries:
            kind = metas[name].kind
            m = self._table_for(name)[idx]
            k = (decode_key(kb), decode_key(nb))
            v = decode_value(vb)
            if kind == "list":
                m.setdefault(k, []).append(v)
            elif kind == "map":
                m.setdefault(k, {})[decode_key(ub)] = v
            else:
                m[k] = v

    # ------------------------------------------------------------------ numbers and lifecycle

    def number_of_keys(self) -> int:
        total = 0
        for name, table in self._tables.items():
            if self._metas[name].kind in ("list", "map"):
                total += sum(len(v) for m in table for v in m.values())
            else:
                total += sum(len(m) for m in table)
        return total

    def statistics(self) -> KeyedStateBackendStatistics:
        return KeyedStateBackendStatistics(
            backend=self.backend_name,
            operator_id=self.operator_id,
            key_group_range=self.key_group_range,
            number_of_states=len(self._metas),
            number_of_entries=self.number_of_keys(),
            extra={},
        )

    def dispose(self) -> None:
        # drop the dicts rather than clearing them: a pending snapshot may still read them
        self._tables = {}
        super().dispose()


def _encode_key_group(
    parts: list[tuple[str, dict[tuple[Any, Any], Any]]], kinds: dict[str, str], limits: dict[str, int]
) -> tuple[SnapshotEntry, ...]:
    """The canonical, sorted entries of one key group's dicts (``parts``: state name, dict)."""
    entries: list[SnapshotEntry] = []
    for name, m in parts:
        kind = kinds[name]
        limit = limits.get(name)
        if limit is None and kind != "list" and kind != "map":
            # one value per (key, namespace): keys and values encoded a batch at a time
            kns = list(m)
            key_bytes = encode_many([kn[0] for kn in kns])
            if all(kn[1] is None for kn in kns):
                ns_bytes: Iterable[bytes] = repeat(_VOID_BYTES)
            else:
                ns_bytes = [encode_key(kn[1]) for kn in kns]
            entries.extend(zip(repeat(name), key_bytes, ns_bytes, repeat(b""), encode_many(list(m.values()))))
            continue
        for (key, ns), stored in m.items():
            kb = encode_key(key)
            nb = encode_key(ns)
            if kind == "list":
                pos = 0
                for element in stored:
                    if limit is not None and element[0] <= limit:
                        continue
                    entries.append((name, kb, nb, _POS.pack(pos), encode_value(element)))
                    pos += 1
            elif kind == "map":
                for uk, v in stored.items():
                    if limit is not None and v[0] <= limit:
                        continue
                    entries.append((name, kb, nb, encode_key(uk), encode_value(v)))
            else:
                if limit is not None and stored[0] <= limit:
                    continue
                entries.append((name, kb, nb, b"", encode_value(stored)))
    entries.sort()
    return tuple(entries)


class PendingHeapSnapshot(PendingKeyedStateSnapshot):
    """A heap snapshot taken at a barrier whose key groups are encoded later (module docstring).

    ``result`` runs in the asynchronous phase (any thread); the backend encodes a key
    group itself, under the same lock, when the job's thread is about to touch it."""

    def __init__(
        self,
        backend: HeapKeyedStateBackend,
        key_group_range: KeyGroupRange,
        parts: dict[int, list[tuple[str, dict[tuple[Any, Any], Any]]]],
        kinds: dict[str, str],
        limits: dict[str, int],
        empty: KeyedStateSnapshot,
    ) -> None:
        self._backend = backend
        self._start_kg = backend._start_kg
        self._parts = parts
        self._todo = set(parts)
        self._kinds = kinds
        self._limits = limits
        self._encoded: dict[int, tuple[SnapshotEntry, ...]] = {}
        self._empty = empty  # operator, range and states as of the barrier
        self._result: KeyedStateSnapshot | None = None
        self._pid = os.getpid()  # a forked child (another pid) is alone with the dicts

    def _encode_locked(self, idx: int) -> None:
        if idx in self._todo:
            self._todo.discard(idx)
            entries = _encode_key_group(self._parts.pop(idx), self._kinds, self._limits)
            if entries:
                self._encoded[idx] = entries

    def __len__(self) -> int:
        """Entries still to encode (an estimate of the asynchronous phase's work)."""
        return sum(len(table) for held in list(self._parts.values()) for _, table in held)

    def release(self) -> None:
        """Stop copying on write for this snapshot: a forked child encodes it from its own
        copy of the process (``weir.task.forked``); ``result`` is no longer valid here."""
        backend = self._backend
        with backend._cow_lock:
            self._todo.clear()
            self._parts.clear()
            backend._cow_prune_locked()

    def for_file(self) -> KeyedStateSnapshot | PackedKeyedStateSnapshot:
        """What the state file holds: ``result()``, or, in a forked child (where nothing else
        touches the dicts), the same packed from columns when every entry is one value of a
        single-value state without TTL, without a namespace, with keys and values of one width
        each (ints, tuples of ints): the rolling aggregations of a million keys."""
        if self._result is None and not self._encoded and os.getpid() != self._pid:
            packed = self._packed()
            if packed is not None:
                return packed
        return self.result()

    def _packed(self) -> PackedKeyedStateSnapshot | None:
        from weir.state.state_file import pack_uniform_entries

        names = {state for held in self._parts.values() for state, table in held if table}
        if len(names) != 1:
            return None
        (name,) = names
        if self._kinds[name] in ("list", "map") or self._limits.get(name) is not None:
            return None
        tables = [(idx, table) for idx, held in self._parts.items() for _, table in held if table]
        n = sum(len(table) for _, table in tables)
        (first_key, _), first_value = next(iter(tables[0][1].items()))
        keys, values = IntRows(n, first_key), IntRows(n, first_value)
        step = INT_ROWS_CHUNK  # a chunk's objects are read by every check while in the cache
        for _, table in tables:
            kns, stored = list(table), list(table.values())
            for at in range(0, len(kns), step):
                chunk = kns[at : at + step]
                if set(map(itemgetter(1), chunk)) != {None}:
                    return None
                if not keys.add(list(map(itemgetter(0), chunk))) or not values.add(stored[at : at + step]):
                    return None
        key_rows, value_rows = keys.rows(), values.rows()
        if key_rows is None or value_rows is None:
            return None
        groups = np.repeat(
            np.array([idx + self._start_kg for idx, _ in tables], np.int32), [len(t) for _, t in tables]
        )
        void = np.frombuffer(_VOID_BYTES, dtype=np.uint8).reshape(1, -1)
        number_of_groups, packed = pack_uniform_entries(groups, key_rows, void, None, np.zeros(1), value_rows)
        e = self._empty
        return PackedKeyedStateSnapshot(
            e.operator_id, e.max_parallelism, e.key_group_range, e.states, (name,), number_of_groups, packed
        )

    def result(self) -> KeyedStateSnapshot:
        if self._result is not None:
            return self._result
        backend = self._backend
        with backend._cow_lock:
            order = sorted(self._todo)
        for i, idx in enumerate(order):
            with backend._cow_lock:
                self._encode_locked(idx)
            if i % 4 == 3:
                time.sleep(0)  # let the job's thread take the GIL between batches of key groups
        with backend._cow_lock:
            backend._cow_prune_locked()
        e = self._empty
        key_groups = tuple((idx + self._start_kg, self._encoded[idx]) for idx in sorted(self._encoded))
        self._result = KeyedStateSnapshot(
            e.operator_id, e.max_parallelism, e.key_group_range, e.states, key_groups
        )
        return self._result

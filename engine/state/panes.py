"""Pane snapshots: keyed state an operator holds in dicts outside its backend, merged into
the backend's snapshot in the asynchronous phase of a checkpoint.

The per-record window operator's fast mode keeps one insertion-ordered dict ``key ->
accumulator`` per open window (``weir.operators.window.fast``). A checkpoint holds those
panes in the general mode's canonical form: one entry of a reducing or aggregating state
(``window-contents``) per (key, window) and one timer per pane at the window's
deadline. ``PaneSnapshot`` is that form taken without stopping the job:

- the synchronous phase (the operator, at the barrier) freezes each open window's dict
  with ``dict.copy()`` (a C-level copy, no Python code per pane) and the ordered keys of
  the panes it keeps in the backend (spilled or restored ones);
- the asynchronous phase (``result()`` of what ``keyed`` and ``timers`` return, on the
  worker thread that writes the checkpoint's files) computes the key groups with the
  ``weir.keys`` kernels, encodes keys and accumulators a batch at a time (``encode_many``)
  and merges the entries into the backend's snapshot of the barrier (an in-memory pane
  replaces the backend's entry of the same key and window, which is older) and the
  timers into the timer snapshot, so the files hold exactly what writing the panes into
  the backend and the timer service at the barrier would have given. An incremental
  LMDB run takes them too (``merge_run``, raw LMDB keys); the backend then counts their
  keys (``raw_keys``) as changed for its next snapshot, which re-reads them.

This is sound only while the frozen accumulators cannot change after the barrier: an
accumulator is read by value, never copied. The operator decides which accumulators
qualify (immutable ones: numbers, strings, bytes, None, tuples of those), and the
asynchronous phase checks every frozen accumulator again: a mutable one fails the
checkpoint (it is declined, never written wrong) and ``on_mutable`` tells the operator
to take its later snapshots the synchronous way.

``ColumnPaneSnapshot`` is the same for the vectorized window operators, whose panes are
rows of numpy arrays: the synchronous phase takes copies of the columns (window starts,
pane keys or key slots with the slot -> key list, whatever the accumulators are built
from, fired flags), the asynchronous phase builds the keys, the canonical accumulators
(fresh Python values, so nothing to check) and the timers of the general mode's rules.

Native and canonical pane sections. The canonical form costs a sort, an encoded entry and
a timer per pane in every checkpoint, and millions of panes held back (a window whose
watermark waits for a slower input) are written again by every checkpoint. So a
checkpoint (and a savepoint in the native format) of a vectorized window operator's pane
log holds its panes as the log holds them instead: ``NativePanes``, the live panes in
creation order, each column of the log's rows narrowed to the smallest unsigned integer
that holds it (the barrier packs them so), written as they are (no sort, no encoding, no
timers), beside the backend's own snapshot (``KeyedWithPanes``). This is the split of
Flink's native and canonical snapshot formats. Reading a state file turns a native
section into the canonical entries and timers at once (``canonical_payload``), before
anything else looks at the state: restoring, rescaling, a restore into the per-record
operator all see what a canonical file holds. A canonical savepoint and an incremental
run (which takes the panes into the run, above) stay canonical.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain, repeat
from typing import Any

import numpy as np

from weir.core.window import TimeWindow
from weir.errors import UsageError
from weir.keys.kernels import java_hash_array, key_groups_for_hashes
from weir.state import serde
from weir.state.backend import (
    KeyedStateSnapshot,
    PackedKeyedStateSnapshot,
    PendingKeyedStateSnapshot,
    SnapshotEntry,
)
from weir.state.incremental import run_entry_bytes, run_entry_head
from weir.state.serde import encode_key, encode_many, encode_rows, int64_rows, register_type, split_rows
from weir.state.state_file import pack_uniform_entries, uniform_rows
from weir.time.timers import PendingTimerSnapshot, Timer, TimerColumns, TimerSnapshot

__all__ = ["IMMUTABLE_TYPES", "ColumnPaneSnapshot", "KeyedWithPanes", "MutableAccumulatorError", "NativePanes",
           "PaneSnapshot", "canonical_payload", "encoded_accumulator_rows", "is_immutable", "narrowest", "native_table"]  # fmt: skip

#: Types whose instances cannot change after the barrier (a tuple qualifies when its items do).
IMMUTABLE_TYPES = frozenset({int, float, str, bytes, bool, complex, type(None)})
#: Panes encoded per batch in the asynchronous phase (the job's thread gets the GIL between batches).
BATCH = 1 << 15
_SCALARS = IMMUTABLE_TYPES


#: ``uniform_rows``' columns: key groups, keys, namespace table, each entry's row in it, the
#: table's byte order, values
_Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _namespace_table(encoded: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Encoded namespaces of one width as a table of rows, and each row's rank in byte order."""
    rank = {ns: i for i, ns in enumerate(sorted(set(encoded)))}
    table = np.frombuffer(b"".join(encoded), dtype=np.uint8).reshape(len(encoded), -1)
    return table, np.array([rank[ns] for ns in encoded], dtype=np.int64)


class MutableAccumulatorError(UsageError):
    """A frozen accumulator is of a mutable type: the deferred pane snapshot cannot vouch for it."""


def is_immutable(value: Any) -> bool:
    """Whether ``value`` can never change: an immutable scalar, or a tuple of immutable values."""
    t = type(value)
    if t in _SCALARS:
        return True
    return t is tuple and all(map(is_immutable, value))


def _all_immutable(values: list[Any]) -> bool:
    """``all(map(is_immutable, values))``, by the types present (C-level set builds)."""
    types = set(map(type, values))
    if types <= _SCALARS:
        return True
    if not types <= _SCALARS | {tuple}:
        return False
    tuples = [v for v in values if type(v) is tuple] if len(types) > 1 else values
    items = list(chain.from_iterable(tuples))
    return _all_immutable(items) if items else True


class PaneSnapshot:
    """The panes of one operator at a barrier (module docstring).

    ``windows``: per namespace in firing order, ``(namespace, deadline, in_memory, backed)``
    where ``in_memory`` is the frozen dict ``key -> accumulator`` and ``backed`` the ordered
    keys (a dict ``key -> None``) of the panes whose accumulator is in the backend only or
    there too, older (they fire first); ``state_name`` the state the entries belong to;
    ``event_time`` the domain of the timers."""

    def __init__(
        self,
        state_name: str,
        windows: Sequence[tuple[Hashable, int, dict[Any, Any], dict[Any, None] | None]],
        event_time: bool,
        max_parallelism: int,
        on_mutable: Callable[[], None] | None = None,
    ) -> None:
        self.state_name = state_name
        self.windows = windows
        self.event_time = event_time
        self.max_parallelism = max_parallelism
        self._on_mutable = on_mutable
        self._lock = threading.RLock()
        self._checked = False
        #: per namespace: (keys in firing order, their key groups) -- built once, by whichever result() is first
        self._ordered: list[tuple[list[Any], np.ndarray]] | None = None
        self._raw_keys: list[tuple[dict[Any, Any], list[Any], list[bytes]]] | None = None

    def sample_keys(self) -> list[Any]:
        """A key of the panes, if any (to warm up the hash kernels for their type)."""
        for _, _, in_memory, backed in self.windows:
            for keys in (in_memory, backed or {}):
                for key in keys:
                    return [key]
        return []

    def warm_up(self) -> None:
        """Compile (or load) the hash kernels for the panes' key type in this process, so that
        a forked child inherits them instead of loading them itself."""
        sample = self.sample_keys()
        if sample:
            self._key_groups(sample)

    def __len__(self) -> int:
        """How many panes were frozen (what the asynchronous phase will encode)."""
        return sum(len(in_memory) + len(backed or ()) for _, _, in_memory, backed in self.windows)

    # -- the asynchronous phase ------------------------------------------------------------------
    def _frozen(self) -> Sequence[tuple[Hashable, int, dict[Any, Any], dict[Any, None] | None]]:
        """The frozen windows (a subclass may build them here, in the asynchronous phase)."""
        return self.windows

    def _key_groups(self, keys: list[Any]) -> np.ndarray:
        if not keys:
            return np.empty(0, np.int32)
        parts = [
            key_groups_for_hashes(java_hash_array(keys[i : i + BATCH]), self.max_parallelism)
            for i in range(0, len(keys), BATCH)
        ]
        return np.concatenate(parts)

    def _check(self) -> None:
        """Every frozen accumulator is immutable, else ``MutableAccumulatorError`` (checked once)."""
        with self._lock:
            if self._checked:
                return
            for _, _, in_memory, _ in self._frozen():
                values = list(in_memory.values())
                for i in range(0, len(values), BATCH):
                    if not _all_immutable(values[i : i + BATCH]):
                        if self._on_mutable is not None:
                            self._on_mutable()
                        raise MutableAccumulatorError(
                            f"state '{self.state_name}': an accumulator of a mutable type was held at "
                            "the barrier, so this checkpoint cannot vouch for its value; later "
                            "checkpoints of this operator write their panes synchronously"
                        )
                    time.sleep(0)
            self._checked = True

    def _order(self) -> list[tuple[list[Any], np.ndarray]]:
        """Per namespace the keys in firing order (backed ones first) and their key groups."""
        with self._lock:
            if self._ordered is not None:
                return self._ordered
            ordered = []
            for _, _, in_memory, backed in self._frozen():
                if backed:
                    keys = list(backed) + [k for k in in_memory if k not in backed]
                else:
                    keys = list(in_memory)
                ordered.append((keys, self._key_groups(keys)))
                time.sleep(0)
            self._ordered = ordered
            return ordered

    def _in_memory(self) -> Iterator[tuple[Hashable, dict[Any, Any], list[Any], np.ndarray]]:
        """Per namespace: its in-memory panes, their keys and their key groups."""
        for (namespace, _, in_memory, backed), (keys, groups) in zip(self._frozen(), self._order()):
            if backed and in_memory:  # the in-memory panes' key groups, by position
                where = {k: i for i, k in enumerate(keys)}
                mine = list(in_memory)
                yield namespace, in_memory, mine, groups[[where[k] for k in mine]]
            elif in_memory:
                yield namespace, in_memory, keys, groups

    def _raw(self) -> list[tuple[dict[Any, Any], list[Any], list[bytes]]]:
        """Per namespace with in-memory panes: the panes, their keys and their raw LMDB keys
        (key group, key, namespace), built once."""
        with self._lock:
            if self._raw_keys is None:
                raw = []
                for namespace, in_memory, keys, groups in self._in_memory():
                    ns = encode_key(namespace)
                    prefixes = groups.astype(">u2").tobytes()
                    raws: list[bytes] = []
                    for i in range(0, len(keys), BATCH):
                        kbs = encode_many(keys[i : i + BATCH])
                        heads = [prefixes[2 * j : 2 * j + 2] for j in range(i, i + len(kbs))]
                        raws.extend(map(b"".join, zip(heads, kbs, repeat(ns))))
                        time.sleep(0)
                    raw.append((in_memory, keys, raws))
                self._raw_keys = raw
            return self._raw_keys

    def raw_keys(self) -> set[bytes]:
        """The raw LMDB keys of the in-memory panes (no accumulator check)."""
        return {k for _, _, raws in self._raw() for k in raws}

    def _encode_values(self, values: list[Any]) -> list[bytes]:
        """The canonical bytes of accumulators (a subclass may hold them encoded already)."""
        return encode_many(values)

    def merge_run(
        self, entries: list[tuple[int, bytes, bytes | None]], index: int
    ) -> list[tuple[int, bytes, bytes | None]]:
        """An incremental run's ``entries`` (sorted by key group, state index, raw key) with the
        in-memory panes' entries of state ``index`` in, replacing the backend's older ones."""
        self._check()
        run: list[tuple[int, bytes, bytes | None]] = []
        for in_memory, keys, raws in self._raw():
            values = list(map(in_memory.__getitem__, keys))
            for i in range(0, len(keys), BATCH):
                run.extend(
                    zip(repeat(index), raws[i : i + BATCH], self._encode_values(values[i : i + BATCH]))
                )
                time.sleep(0)
        if not run:
            return entries
        run.sort(key=_raw_key)
        mine = set(map(_raw_key, run))
        kept = [e for e in entries if e[0] != index or e[1] not in mine]
        return list(heapq.merge(kept, run, key=_run_order))

    def packed_run_groups(
        self, entries: list[tuple[int, bytes, bytes | None]], index: int
    ) -> list[tuple[int, int, bytes]] | None:
        """``merge_run(entries, index)`` as a run's encoded key groups (``encode_run_groups``),
        built from columns, when the backend's entries hold none of state ``index`` (so no pane
        replaces one) and every pane's key, window and accumulator encode to bytes of one
        width (ints, tuples of ints); else None."""
        if any(e[0] == index for e in entries):
            return None
        columns = self._uniform_columns()
        if columns is None:
            return None
        key_groups, keys, namespaces, namespace_of, rank, values = columns
        head = run_entry_head(index, 2 + keys.shape[1] + namespaces.shape[1], values.shape[1])
        groups, bounds, rows = uniform_rows(
            key_groups, keys, namespaces, namespace_of, rank, values, head, key_group_prefix=True
        )
        theirs: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        for entry in entries:  # the backend's other states, sorted by key group, state, key
            theirs.setdefault((entry[1][0] << 8) | entry[1][1], []).append(entry)
        mine = {kg: (start, end) for kg, start, end in zip(groups, bounds, bounds[1:])}
        out = []
        for kg in sorted(theirs.keys() | mine.keys()):
            other = theirs.get(kg, [])
            before = run_entry_bytes(e for e in other if e[0] < index)
            after = run_entry_bytes(e for e in other if e[0] > index)
            start, end = mine.get(kg, (0, 0))
            out.append((kg, len(other) + end - start, b"".join((before, rows[start:end].tobytes(), after))))
            time.sleep(0)
        return out

    def _uniform_columns(self) -> _Columns | None:
        """The in-memory panes as columns of rows of bytes (``uniform_rows``' key groups, keys,
        namespace table, each pane's namespace in it, the table's byte order, accumulators),
        when no pane is in the backend and each column has one width; else None."""
        windows = self._frozen()
        if any(backed for _, _, _, backed in windows):
            return None
        key_parts: list[np.ndarray] = []
        value_parts: list[np.ndarray] = []
        group_parts: list[np.ndarray] = []
        encoded_namespaces: list[bytes] = []
        counts: list[int] = []
        for (namespace, _, in_memory, _), (keys, key_groups) in zip(windows, self._order()):
            if not keys:
                continue
            key_rows = encode_rows(keys)
            value_rows = self._value_rows(list(map(in_memory.__getitem__, keys)))
            if key_rows is None or value_rows is None:
                return None
            key_parts.append(key_rows)
            value_parts.append(value_rows)
            group_parts.append(key_groups)
            encoded_namespaces.append(encode_key(namespace))
            counts.append(len(keys))
            time.sleep(0)
        if not counts:
            return None
        if len({r.shape[1] for r in key_parts}) > 1 or len({r.shape[1] for r in value_parts}) > 1:
            return None
        if len(set(map(len, encoded_namespaces))) > 1:
            return None
        window_of = np.repeat(np.arange(len(counts)), np.array(counts, dtype=np.int64))
        table, rank = _namespace_table(encoded_namespaces)
        return (
            np.concatenate(group_parts),
            np.concatenate(key_parts),
            table,
            window_of,
            rank,
            np.concatenate(value_parts),
        )

    def _entries(self) -> dict[int, list[SnapshotEntry]]:
        """The in-memory panes' canonical entries per key group (unsorted)."""
        self._check()
        by_group: dict[int, list[SnapshotEntry]] = {}
        name = self.state_name
        for namespace, in_memory, mine, mine_groups in self._in_memory():
            ns = encode_key(namespace)
            values = list(map(in_memory.__getitem__, mine))
            for i in range(0, len(mine), BATCH):
                batch = mine[i : i + BATCH]
                entries = list(
                    zip(
                        repeat(name),
                        encode_many(batch),
                        repeat(ns),
                        repeat(b""),
                        self._encode_values(values[i : i + BATCH]),
                    )
                )
                batch_groups = mine_groups[i : i + BATCH]
                order = np.argsort(batch_groups, kind="stable")
                sorted_groups = batch_groups[order]
                firsts = np.flatnonzero(np.diff(sorted_groups, prepend=-1))
                positions = order.tolist()
                bounds = [*firsts.tolist(), len(positions)]
                for j, kg in enumerate(sorted_groups[firsts].tolist()):
                    part = map(entries.__getitem__, positions[bounds[j] : bounds[j + 1]])
                    by_group.setdefault(kg, []).extend(part)
                time.sleep(0)
        return by_group

    def _value_rows(self, values: list[Any]) -> np.ndarray | None:
        """The accumulators' canonical bytes as rows of one width, if they have one."""
        return encode_rows(values)

    def packed_keyed(self, snapshot: KeyedStateSnapshot) -> PackedKeyedStateSnapshot | None:
        """``merge_keyed(snapshot)`` in its state-file form, built from columns, when the
        backend held none of its entries and every pane's key, window and accumulator
        encodes to bytes of one width (ints, tuples of ints); else None."""
        if snapshot.key_groups or self.state_name not in {m.name for m in snapshot.states}:
            return None
        columns = self._uniform_columns()
        if columns is None:
            return None
        number_of_groups, packed = pack_uniform_entries(*columns)
        return PackedKeyedStateSnapshot(
            snapshot.operator_id,
            snapshot.max_parallelism,
            snapshot.key_group_range,
            snapshot.states,
            (self.state_name,),
            number_of_groups,
            packed,
        )

    def merge_keyed(self, snapshot: KeyedStateSnapshot) -> KeyedStateSnapshot:
        """``snapshot`` with the in-memory panes' entries in (replacing the backend's older ones)."""
        overlay = self._entries()
        if not overlay:
            return snapshot
        theirs = dict(snapshot.key_groups)
        key_groups = []
        for n, kg in enumerate(sorted(theirs.keys() | overlay.keys())):
            mine = overlay.get(kg)
            held = theirs.get(kg, ())
            if mine is None:
                key_groups.append((kg, held))
                continue
            if held:
                own = {e[:4] for e in mine}
                mine = [e for e in held if e[:4] not in own] + mine
            mine.sort()
            key_groups.append((kg, tuple(mine)))
            if n % 4 == 3:
                time.sleep(0)
        return KeyedStateSnapshot(
            snapshot.operator_id,
            snapshot.max_parallelism,
            snapshot.key_group_range,
            snapshot.states,
            tuple(key_groups),
        )

    def timers(self) -> Iterator[Timer]:
        """One timer per pane at its namespace's deadline, in firing order."""
        for (namespace, deadline, _, _), (keys, groups) in zip(self._frozen(), self._order()):
            yield from map(Timer, repeat(deadline), keys, repeat(namespace), groups.tolist())

    def timer_columns(self) -> Sequence[Timer]:
        """``timers()`` as ``TimerColumns`` (no ``Timer`` objects: the state file packs the columns)."""
        namespaces: list[Hashable] = []
        deadlines: list[int] = []
        counts: list[int] = []
        keys: list[Any] = []
        groups: list[np.ndarray] = []
        for (namespace, deadline, _, _), (window_keys, window_groups) in zip(self._frozen(), self._order()):
            if window_keys:
                namespaces.append(namespace)
                deadlines.append(deadline)
                counts.append(len(window_keys))
                keys.extend(window_keys)
                groups.append(window_groups)
        repeat_of = np.array(counts, dtype=np.int64)
        return TimerColumns(
            np.repeat(np.array(deadlines, dtype=np.int64), repeat_of),
            keys,
            tuple(namespaces),
            np.repeat(np.arange(len(namespaces), dtype=np.uint32), repeat_of),
            np.concatenate(groups) if groups else np.empty(0, np.int32),
        )

    def merge_timers(self, snapshot: TimerSnapshot | None) -> TimerSnapshot:
        """``snapshot`` (the operator's own timers, if any) with the panes' timers after them."""
        panes = self.timer_columns()
        if snapshot is None:
            own_event: Sequence[Timer] = ()
            own_processing: Sequence[Timer] = ()
            rng = None
        else:
            own_event, own_processing, rng = (
                snapshot.event_time,
                snapshot.processing_time,
                snapshot.key_group_range,
            )
        if self.event_time:
            event = tuple(sorted((*own_event, *panes), key=_timestamp)) if own_event else panes
            return TimerSnapshot(rng, event, own_processing)
        processing = tuple(sorted((*own_processing, *panes), key=_timestamp)) if own_processing else panes
        return TimerSnapshot(rng, own_event, processing)

    # -- what the task hands to the asynchronous phase -------------------------------------------
    def keyed(self, pending: Any) -> PendingKeyedStateSnapshot:
        """The backend's pending snapshot with these panes merged in when it is built."""
        return _MergedKeyedSnapshot(pending, self)

    def pending_timers(self, pending: Any) -> PendingTimerSnapshot:
        """The operator's pending (or taken) timer snapshot with these panes' timers added."""
        return _MergedTimerSnapshot(pending, self)

    #: What builds these panes' native section (module docstring), or None: canonical only.
    native: Callable[[], NativePanes] | None = None

    def native_keyed(self, pending: Any) -> PendingKeyedStateSnapshot:
        """The backend's pending snapshot with these panes beside it in their native section;
        their timers are in the section too (not in the operator's timer snapshot)."""
        return _NativeKeyedSnapshot(pending, self)


class ColumnPaneSnapshot(PaneSnapshot):
    """The panes of a vectorized window operator at a barrier, as copied columns.

    ``starts``: every pane's window start in firing order (windows by start, each window's
    panes in creation order); ``pane_keys`` the panes' keys (int64), or their key slots
    when ``slot_keys`` (the slot -> key list) is given; ``accumulators()`` builds the
    canonical accumulator of every pane, in that order, from copies the operator took at
    the barrier -- their canonical bytes (``encode_value``) if ``encoded``. Timers are the general mode's, registered pane by pane in firing order:
    the trigger's at the window's ``max_timestamp`` unless ``fired`` says the window fired
    already, and with ``lateness`` the cleanup timer at ``max_timestamp + lateness``; the
    snapshot holds them by time, ties in that order, as ``InternalTimerService`` does.

    Everything here is read only in the asynchronous phase: the arrays and lists must be
    copies the operator never writes again.

    ``deferred`` builds one whose columns come from ``load()`` (``(starts, pane_keys,
    fired)``), called once in the asynchronous phase: the operator then copies only what
    ``load`` reads at the barrier (the pane log's live rows, one sequential pass) and the
    sorting into firing order runs in the asynchronous phase too."""

    def __init__(
        self,
        state_name: str,
        starts: np.ndarray,
        size: int,
        pane_keys: np.ndarray,
        slot_keys: list[Any] | None,
        accumulators: Callable[[], Sequence[Any] | np.ndarray],
        fired: np.ndarray | None,
        lateness: int,
        event_time: bool,
        max_parallelism: int,
        encoded: bool = False,
    ) -> None:
        super().__init__(state_name, (), event_time, max_parallelism)
        self._encoded = encoded
        self._columns: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = (starts, pane_keys, fired)
        self._load: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray | None]] | None = None
        self._count = len(starts)
        self._sample: list[Any] = []
        self._size = size
        self._slot_keys = slot_keys
        self._accumulators = accumulators
        self._lateness = lateness
        self._windows: list[tuple[Hashable, int, dict[Any, Any], dict[Any, None] | None]] | None = None
        self._values: Sequence[Any] | np.ndarray | None = None
        self._groups: np.ndarray | None = None

    @classmethod
    def deferred(
        cls,
        state_name: str,
        load: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray | None]],
        count: int,
        sample_keys: list[Any],
        size: int,
        slot_keys: list[Any] | None,
        accumulators: Callable[[], Sequence[Any] | np.ndarray],
        lateness: int,
        event_time: bool,
        max_parallelism: int,
        encoded: bool = False,
        native: Callable[[], NativePanes] | None = None,
    ) -> ColumnPaneSnapshot:
        """The snapshot of ``count`` panes whose columns ``load()`` builds in the asynchronous
        phase (class docstring); ``sample_keys`` are keys of some of them (``warm_up``);
        ``native`` builds their native section (module docstring), if they have one."""
        empty = np.empty(0, np.int64)
        snapshot = cls(
            state_name, empty, size, empty, slot_keys, accumulators, None, lateness, event_time,
            max_parallelism, encoded,
        )  # fmt: skip
        snapshot._columns, snapshot._load = None, load
        snapshot._count, snapshot._sample = count, sample_keys
        snapshot.native = native
        return snapshot

    def _loaded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        with self._lock:
            if self._columns is None:
                assert self._load is not None
                self._columns, self._load = self._load(), None
            return self._columns

    @property
    def _starts(self) -> np.ndarray:
        return self._loaded()[0]

    @property
    def _pane_keys(self) -> np.ndarray:
        return self._loaded()[1]

    @property
    def _fired(self) -> np.ndarray | None:
        return self._loaded()[2]

    def __len__(self) -> int:
        return self._count

    def sample_keys(self) -> list[Any]:
        if self._columns is None:  # not loaded: never in the synchronous phase
            return self._sample
        if not len(self._pane_keys):
            return []
        if self._slot_keys is None:
            keys: list[Any] = self._pane_keys[:1].tolist()
            return keys
        return [self._slot_keys[int(self._pane_keys[0])]]

    def _frozen(self) -> Sequence[tuple[Hashable, int, dict[Any, Any], dict[Any, None] | None]]:
        """Per window in firing order ``(TimeWindow, max_timestamp, key -> accumulator, None)``,
        built once from the columns."""
        with self._lock:
            if self._windows is None:
                self._windows = self._build_windows()
            return self._windows

    def _keys(self, panes: np.ndarray | None = None) -> list[Any]:
        """The keys of every pane (of ``panes``, positions, if given), in that order."""
        picked = self._pane_keys if panes is None else self._pane_keys[panes]
        if self._slot_keys is None:
            keys: list[Any] = picked.tolist()
            return keys
        return list(map(self._slot_keys.__getitem__, picked.tolist()))

    def _accumulator_values(self) -> Sequence[Any] | np.ndarray:
        """``accumulators()``, built once: a list, or (encoded) rows of bytes."""
        with self._lock:
            if self._values is None:
                self._values = self._accumulators()
            return self._values

    def _pane_groups(self) -> np.ndarray:
        """Every pane's key group, hashed once per key slot when the keys are slots."""
        with self._lock:
            if self._groups is None:
                if self._slot_keys is None:
                    self._groups = key_groups_for_hashes(
                        java_hash_array(self._pane_keys), self.max_parallelism
                    )
                else:
                    self._groups = self._key_groups(self._slot_keys)[self._pane_keys]
            return self._groups

    def _window_bounds(self) -> tuple[list[TimeWindow], list[int]]:
        """The windows in firing order, and where each one's panes start (one more at the end:
        the number of panes)."""
        starts = self._starts
        firsts = np.flatnonzero(np.diff(starts, prepend=starts[0] - 1))
        windows = [TimeWindow(start, start + self._size) for start in starts[firsts].tolist()]
        return windows, [*firsts.tolist(), len(starts)]

    def _window_columns(self) -> tuple[list[TimeWindow], np.ndarray]:
        """The windows in firing order, and every pane's position among them."""
        windows, bounds = self._window_bounds()
        return windows, np.repeat(np.arange(len(windows)), np.diff(bounds))

    def _build_windows(self) -> list[tuple[Hashable, int, dict[Any, Any], dict[Any, None] | None]]:
        if not len(self._starts):
            return []
        keys = self._keys()
        values = self._accumulator_values()
        if isinstance(values, np.ndarray):
            values = split_rows(values)
        built: list[tuple[Hashable, int, dict[Any, Any], dict[Any, None] | None]] = []
        windows, bounds = self._window_bounds()
        for j, window in enumerate(windows):
            a, b = bounds[j], bounds[j + 1]
            built.append((window, window.max_timestamp(), dict(zip(keys[a:b], values[a:b])), None))
            if j % 64 == 63:
                time.sleep(0)
        return built

    def _order(self) -> list[tuple[list[Any], np.ndarray]]:
        """The base class's per-window keys and key groups, from ``_pane_groups`` (hashed once,
        for the timers and the entries alike)."""
        with self._lock:
            if self._ordered is None:
                groups = self._pane_groups()
                _, bounds = self._window_bounds() if len(self._starts) else ([], [0])
                frozen = self._frozen()
                self._ordered = [
                    (list(in_memory), groups[a:b])
                    for (_, _, in_memory, _), a, b in zip(frozen, bounds, bounds[1:])
                ]
            return self._ordered

    def _uniform_columns(self) -> _Columns | None:
        """The base class's columns, built from the copied columns without a dict per window."""
        n = len(self._starts)
        if not n:
            return None
        if self._slot_keys is None:
            key_rows: np.ndarray | None = int64_rows(self._pane_keys)
        else:
            slot_rows = encode_rows(self._slot_keys)
            key_rows = None if slot_rows is None else slot_rows[self._pane_keys]
        values = self._accumulator_values()
        value_rows = values if isinstance(values, np.ndarray) else self._value_rows(list(values))
        if key_rows is None or value_rows is None:
            return None
        windows, window_of = self._window_columns()
        encoded = [encode_key(window) for window in windows]
        if len(set(map(len, encoded))) > 1:
            return None
        table, rank = _namespace_table(encoded)
        return self._pane_groups(), key_rows, table, window_of, rank, value_rows

    def _value_rows(self, values: list[Any]) -> np.ndarray | None:
        if not self._encoded:
            return encode_rows(values)
        width = len(values[0]) if values else 0
        if not width or any(len(v) != width for v in values):
            return None
        return np.frombuffer(b"".join(values), dtype=np.uint8).reshape(len(values), width)

    def _check(self) -> None:
        """Nothing to check: the accumulators are built here, from copies."""

    def _encode_values(self, values: list[Any]) -> list[bytes]:
        return values if self._encoded else encode_many(values)

    def timer_columns(self) -> TimerColumns:
        """The panes' timers (the class docstring's rules) by time, ties in registration order,
        as columns; the windows listed in order of first use, as ``TimerSnapshot`` packs them."""
        n = len(self._starts)
        if not n:
            return TimerColumns(np.empty(0, np.int64), [], (), np.empty(0, np.uint32), np.empty(0, np.int32))
        deadlines = self._starts + (self._size - 1)
        trigger = np.ones(n, np.bool_) if self._fired is None else ~self._fired
        if self._lateness:  # registered per pane: the trigger's timer, then the cleanup timer
            stamps = np.stack([deadlines, deadlines + self._lateness], axis=1).ravel()
            wanted = np.stack([trigger, np.ones(n, np.bool_)], axis=1).ravel()
            panes = np.repeat(np.arange(n), 2)
        else:
            stamps, wanted, panes = deadlines, trigger, np.arange(n)
        stamps, panes = stamps[wanted], panes[wanted]
        by_time = np.argsort(stamps, kind="stable")
        stamps, panes = stamps[by_time], panes[by_time]
        windows, window_of = self._window_columns()
        used = window_of[panes]
        distinct, first = np.unique(used, return_index=True)
        in_order = distinct[np.argsort(first, kind="stable")]
        slot = np.empty(len(windows), np.uint32)
        slot[in_order] = np.arange(len(in_order), dtype=np.uint32)
        return TimerColumns(
            stamps.astype(np.int64),
            self._keys(panes),
            tuple(windows[i] for i in in_order.tolist()),
            slot[used],
            self._pane_groups()[panes],
        )

    def timers(self) -> Iterator[Timer]:
        """The panes' timers (the class docstring's rules), by time, ties in registration order."""
        return iter(self.timer_columns())


def _timestamp(timer: Timer) -> int:
    return timer.timestamp


def _raw_key(entry: tuple[int, bytes, bytes | None]) -> bytes:
    return entry[1]


def _run_order(entry: tuple[int, bytes, bytes | None]) -> tuple[bytes, int, bytes]:
    """A run's order: key group (the raw key's first two bytes), state index, raw key."""
    return entry[1][:2], entry[0], entry[1]


class _MergedKeyedSnapshot(PendingKeyedStateSnapshot):
    def __init__(self, pending: Any, panes: PaneSnapshot) -> None:
        self._pending = pending
        self._panes = panes
        self._result: KeyedStateSnapshot | None = None

    def _base(self) -> KeyedStateSnapshot:
        if isinstance(self._pending, PendingKeyedStateSnapshot):
            return self._pending.result()
        base: KeyedStateSnapshot = self._pending
        return base

    def result(self) -> KeyedStateSnapshot:
        if self._result is None:
            self._result = self._panes.merge_keyed(self._base())
        return self._result

    def for_file(self) -> KeyedStateSnapshot | PackedKeyedStateSnapshot:
        """What the state file holds: ``result()``, or the same already packed (``packed_keyed``)."""
        if self._result is None:
            packed = self._panes.packed_keyed(self._base())
            if packed is not None:
                return packed
        return self.result()


class _MergedTimerSnapshot(PendingTimerSnapshot):
    def __init__(self, pending: Any, panes: PaneSnapshot) -> None:
        super().__init__(None, {}, {})
        self._pending = pending
        self._panes = panes

    def result(self) -> TimerSnapshot:
        if self._result is None:
            own = self._pending.result() if isinstance(self._pending, PendingTimerSnapshot) else self._pending
            self._result = self._panes.merge_timers(own)
        return self._result


class _NativeKeyedSnapshot(_MergedKeyedSnapshot):
    """``result()`` as ``_MergedKeyedSnapshot``'s; the state file holds the backend's own
    snapshot and the panes' native section beside it (``KeyedWithPanes``)."""

    def for_file(self) -> KeyedWithPanes:  # type: ignore[override]
        own = self._pending.for_file() if hasattr(self._pending, "for_file") else self._base()
        assert self._panes.native is not None
        return KeyedWithPanes(own, self._panes.native())


# ----------------------------------------------------------------------------- native sections

#: The columns of a native pane table (a vectorized window operator's pane log rows): the
#: window start, the key (or key slot), the creation sequence, the count, the fired flag
#: (0 or 1), then one slot per aggregate, those of int aggregates first, then the floats'
#: (their float64 bits).
NATIVE_START, NATIVE_KEY, NATIVE_SEQ, NATIVE_COUNT, NATIVE_FIRED, NATIVE_SLOTS = range(6)


@dataclass(frozen=True, eq=False)
class NativePanes:
    """The panes of one vectorized window operator subtask as its pane log holds them
    (module docstring), ``rows`` panes in creation order, as ``columns``: for the table
    columns ``NATIVE_START``, ``NATIVE_KEY``, ``NATIVE_COUNT``, ``NATIVE_FIRED`` and then one
    slot per aggregate (int aggregates' first, then the floats' bits), ``(base, step,
    values)`` with ``column == base + step * values`` in wrapping int64 arithmetic, ``values``
    unsigned integers of the narrowest width that holds them. ``floats`` says per aggregate
    whether its accumulator is a float; ``slot_keys`` the slot -> key list when the keys are
    slots. The rest as ``ColumnPaneSnapshot``'s arguments of the same names. ``of_table``
    makes one from the table of int64 rows."""

    state_name: str
    size: int
    lateness: int
    event_time: bool
    max_parallelism: int
    floats: tuple[bool, ...]
    slot_keys: tuple[Any, ...] | None
    rows: int
    columns: tuple[tuple[int, int, np.ndarray], ...]

    def __post_init__(self) -> None:
        fields = (self.state_name, self.size, self.lateness, self.event_time, self.max_parallelism, self.rows)
        if (
            [type(f) for f in fields] != [str, int, int, bool, int, int]
            or not (self.slot_keys is None or type(self.slot_keys) is tuple)
            or type(self.floats) is not tuple
            or not all(type(f) is bool for f in self.floats)
        ):
            raise UsageError(
                "native panes: expected (state name, window size, lateness, event time, max parallelism, "
                "float flags, key slots or None, rows, columns), found "
                f"{(*fields[:5], self.floats, type(self.slot_keys).__name__, self.rows)}"
            )
        if self.size < 1 or self.lateness < 0 or self.rows < 0:
            raise UsageError(
                f"native panes of state '{self.state_name}': window size {self.size}, lateness "
                f"{self.lateness}, {self.rows} rows"
            )
        _check_columns(self.rows, self.columns, len(self.floats))
        if self.slot_keys is not None and self.rows:
            base, step, values = self.columns[1]  # the keys' column
            low, high = base + step * int(values.min()), base + step * int(values.max())
            if not 0 <= low <= high < len(self.slot_keys):
                raise UsageError(
                    f"native panes of state '{self.state_name}': a key slot past the {len(self.slot_keys)} keys"
                )

    @classmethod
    def of_table(
        cls, state_name: str, size: int, lateness: int, event_time: bool, max_parallelism: int,
        floats: tuple[bool, ...], slot_keys: tuple[Any, ...] | None, table: np.ndarray,
    ) -> NativePanes:  # fmt: skip
        """The panes of ``table``, one int64 row of ``NATIVE_SLOTS + len(floats)`` columns per
        pane (the sequence column is not read), each column narrowed (``_narrowed``), window
        starts in steps of the window size where they are."""
        width = NATIVE_SLOTS + len(floats)
        if (
            not isinstance(table, np.ndarray)
            or table.dtype != np.int64
            or table.ndim != 2
            or table.shape[1] != width
        ):
            shape = (getattr(table, "dtype", type(table).__name__), getattr(table, "shape", None))
            raise UsageError(
                f"native panes of state '{state_name}': expected an int64 table of {width} columns "
                f"({NATIVE_SLOTS} + one per aggregate), found {shape}"
            )
        columns = tuple(
            _narrowed(table[:, j], size if j == NATIVE_START else 1)
            for j in (*_STORED, *range(NATIVE_SLOTS, width))
        )
        return cls(
            state_name, size, lateness, event_time, max_parallelism, floats, slot_keys, len(table), columns
        )

    def table(self) -> np.ndarray:
        """The panes as a table of int64 rows (the sequence column: the rows' order)."""
        return native_table(self.rows, self.columns, len(self.floats))

    def snapshot(self) -> ColumnPaneSnapshot:
        """These panes as the ``ColumnPaneSnapshot`` whose canonical entries and timers they stand for."""
        t = self.table()
        order = np.argsort(t[:, NATIVE_START], kind="stable")  # firing order: windows by start, then creation
        rows = t[order]
        ints = [j for j, f in enumerate(self.floats) if not f]
        slots = rows[:, NATIVE_SLOTS:]
        iaccs = slots[:, : len(ints)]
        faccs = slots[:, len(ints) :].view(np.float64)
        counts = rows[:, NATIVE_COUNT]
        return ColumnPaneSnapshot(
            self.state_name, rows[:, NATIVE_START].copy(), self.size, rows[:, NATIVE_KEY].copy(),
            None if self.slot_keys is None else list(self.slot_keys),
            partial(encoded_accumulator_rows, self.floats, counts, iaccs, faccs),
            rows[:, NATIVE_FIRED] != 0, self.lateness, self.event_time, self.max_parallelism, encoded=True,
        )  # fmt: skip


@dataclass(frozen=True, eq=False)
class KeyedWithPanes:
    """A state file's keyed state: the backend's snapshot and a window's panes beside it."""

    keyed: Any  # KeyedStateSnapshot (or packed)
    panes: NativePanes


def canonical_payload(payload: dict[str, Any]) -> None:
    """Turn a decoded state payload's native pane section into canonical keyed entries and
    timers, in place (module docstring)."""
    keyed = payload.get("keyed")
    if isinstance(keyed, KeyedWithPanes):
        panes = keyed.panes.snapshot()
        payload["keyed"] = panes.merge_keyed(keyed.keyed)
        payload["timers"] = panes.merge_timers(payload.get("timers"))


def encoded_accumulator_rows(
    floats: Sequence[bool], counts: np.ndarray, iaccs: Any, faccs: Any
) -> np.ndarray:
    """``encode_value`` of every pane's canonical accumulator ``[n, a_1, ..., a_m]`` (``floats``
    says which ``a_j`` are floats, taken in order from ``faccs``, the others from ``iaccs``),
    byte for byte, as one uint8 row per pane built by numpy: a list tag and length, then per
    item the int64 (``02`` + biased big-endian) or float64 (``04`` + big-endian) cell, so every
    row has the same width."""
    n, width = len(counts), 1 + len(floats)
    rows = np.empty((n, 5 + 9 * width), np.uint8)
    rows[:, 0] = 9
    rows[:, 1:5] = np.frombuffer(serde._L.pack(width), np.uint8)
    cells = rows[:, 5:].reshape(n, width, 9)

    def put(j: int, column: Any, is_float: bool) -> None:
        if is_float:
            raw = np.ascontiguousarray(column, np.float64).astype(">f8")
        else:
            raw = (np.ascontiguousarray(column, np.int64).view(np.uint64) ^ np.uint64(serde._OFFSET)).astype(
                ">u8"
            )
        cells[:, j, 0] = 4 if is_float else 2
        cells[:, j, 1:] = raw.view(np.uint8).reshape(n, 8)

    put(0, counts, False)
    ji = jf = 0
    for j, is_float in enumerate(floats, 1):
        put(j, faccs[:, jf] if is_float else iaccs[:, ji], is_float)
        jf, ji = jf + is_float, ji + (not is_float)
    return rows


#: The columns a native section's file form holds, in order (then the aggregates' slots):
#: the creation sequence is the rows' order, so it is not written.
_STORED = (NATIVE_START, NATIVE_KEY, NATIVE_COUNT, NATIVE_FIRED)
_NARROW = (np.uint8, np.uint16, np.uint32, np.uint64)
_MASK = (1 << 64) - 1


def _narrowed(column: np.ndarray, step: int) -> tuple[int, int, np.ndarray]:
    """``(base, step, values)`` with ``column == base + step * values`` (int64 arithmetic,
    wrapping), ``values`` in the narrowest unsigned dtype that holds them; ``step`` is kept
    only if every value is ``base`` plus a multiple of it (a window start and the slide)."""
    if not len(column):
        return 0, 1, np.empty(0, np.uint8)
    lo, hi = int(column.min()), int(column.max())
    offsets = column.view(np.uint64) - np.uint64(lo & _MASK)
    if step > 1 and (offsets % np.uint64(step)).any():
        step = 1
    if step > 1:
        offsets //= np.uint64(step)
    return lo, step, offsets.astype(narrowest((hi - lo) // step))


def _check_columns(rows: int, columns: Any, slots: int) -> None:
    """``columns`` are a native section's (``NativePanes``) for ``rows`` panes and ``slots``
    aggregates, else a ``UsageError`` naming what is wrong."""
    if type(columns) is not tuple or len(columns) != len(_STORED) + slots:
        raise UsageError(
            f"native panes: {len(columns) if type(columns) is tuple else columns!r} columns, "
            f"for {slots} aggregates ({len(_STORED) + slots} expected) over {rows} rows"
        )
    for j, item in enumerate(columns):
        base, step, values = item if type(item) is tuple and len(item) == 3 else (None, None, None)
        if (
            type(base) is not int or type(step) is not int or step < 1 or not isinstance(values, np.ndarray)
            or values.dtype.type not in _NARROW or values.shape != (rows,)
        ):  # fmt: skip
            raise UsageError(
                f"native panes: column {j} is not (base, step >= 1, an unsigned integer for each of the {rows} rows): "
                f"{(type(base).__name__, step, getattr(values, 'dtype', None), getattr(values, 'shape', None))}"
            )


def native_table(rows: int, columns: tuple[tuple[int, int, np.ndarray], ...], slots: int) -> np.ndarray:
    """The int64 table of ``rows`` panes given as a native section's columns (``NativePanes``)
    for ``slots`` aggregates; the sequence column is the rows' order."""
    _check_columns(rows, columns, slots)
    table = np.empty((rows, NATIVE_SLOTS + slots), np.int64)
    table[:, NATIVE_SEQ] = np.arange(rows)
    for j, (base, step, values) in zip((*_STORED, *range(NATIVE_SLOTS, NATIVE_SLOTS + slots)), columns):
        wide = values.astype(np.uint64) * np.uint64(step) + np.uint64(base & _MASK)
        table[:, j] = wide.view(np.int64)
    return table


def narrowest(span: int) -> Any:
    """The narrowest unsigned dtype that holds ``0..span``."""
    return next(d for d in _NARROW if span <= np.iinfo(d).max)


register_type(NativePanes, "weir.NativePanes")
register_type(KeyedWithPanes, "weir.KeyedWithPanes")

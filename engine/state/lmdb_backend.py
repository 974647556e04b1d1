"""``LmdbKeyedStateBackend``: keyed state serialized into an embedded LMDB environment (weir's RocksDB).

Layout: one LMDB environment per backend instance (one operator subtask) in
its own directory; one named database per state. The LMDB key of an entry is

    key group (2 bytes, big endian) + encode_key(key) + encode_key(namespace) + user key

so one key group is one contiguous key range (snapshots and rescaling read a
range, never the whole database), and all entries of one key and namespace are
contiguous too. The user key is empty for value/reducing/aggregating state,
the element position (8 bytes big endian) for list state, and
``encode_key(map_key)`` for map state. Values are ``encode_value`` (data encoding)
of the stored value, which is ``(last_access_ms, value)`` for states with TTL
-- exactly the bytes of the canonical snapshot format (``weir.state.backend``).

Writes are batched: one write transaction stays open and is committed every
``commit_every_ops`` writes, on ``snapshot()`` and on ``close()``. Reads use the
same transaction, so they see uncommitted writes. Durability trade-off: the
environment is opened without fsync (``sync=False, metasync=False``) and an
uncommitted batch is lost if the process dies -- which is fine, because local
state is working space, never a recovery source: recovery restores a
checkpoint's snapshot into a fresh backend (the directory is wiped on open), as
Flink's RocksDB backend does with its WAL disabled.

The memory map grows on demand: when a write hits ``MapFullError`` the
transaction is aborted, the map size doubled, and the writes of the aborted
batch are replayed from a log that holds at most one batch. Values live in the
page cache, not on the Python heap, so state larger than memory works.

``snapshot()`` commits the pending batch and reads through a read-only
transaction: LMDB's MVCC gives a consistent view of the committed state. It is
the full, canonical snapshot (savepoints, heap-compatible restores).
``snapshot_async`` and ``snapshot_incremental`` pin that transaction as a
``PinnedView`` and leave the reading to whoever writes the checkpoint: a
snapshot thread of this process, or a forked child that opens the environment
itself (``PinnedView`` says how the child gets exactly the barrier's state).

The backend must be closed on the thread that wrote to it (the task's does, in
``dispose``): its open write transaction holds LMDB's writer lock, a robust
mutex owned by that thread, and an environment closed from another thread
leaves that thread's list of held robust mutexes pointing into unmapped memory.
So a backend dropped without ``close`` (a test's, found by the garbage collector
on any thread) keeps its environment open for the rest of the process.

Incremental checkpoints (``enable_incremental_checkpointing``; the design is in
``weir.state.incremental`` and docs/incremental-checkpoints.md): every
write and delete also records its raw LMDB key in a per-state set of changed
keys. ``snapshot_incremental(checkpoint_id, is_complete)`` is the synchronous
part: it commits the batch, swaps the changed-key sets out, asks the
``SnapshotHistory`` for a plan and pins a read transaction; a snapshot thread of
the backend, or the forked child, reads the planned entries (changed keys for a
delta, everything for a full run) from that view while the task goes on writing.
The asynchronous part (``PendingIncrementalSnapshot.write``, in the task's
worker thread or the child) turns the entries into one run file in ``shared/``.
A pinned transaction is invalidated by growing the map, so a map resize first
gives unread views to snapshot threads and waits for their reads to finish
(they run on the backend's own threads, never on the Trio thread, so the wait
cannot deadlock), and ``close`` stops them first.

``restore`` takes canonical snapshots and chains (``ChainRestore``): a chain's
runs are written raw, base first, only the key groups of this backend; when
the backend restores exactly one chain of its own key group range, the next
incremental snapshot continues that chain instead of starting a new base.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import shutil
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import lmdb
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
from weir.core.state_backend import (
    DEFAULT_COMMIT_EVERY_OPS,
    DEFAULT_MAP_SIZE_BYTES,
    DEFAULT_WINDOW_PANE_MEMORY_BYTES,
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
from weir.state.serde import decode_key, decode_key_from, decode_value, encode_key, encode_value, skip_key

__all__ = [
    "DEFAULT_COMMIT_EVERY_OPS",
    "DEFAULT_MAP_SIZE_BYTES",
    "LmdbKeyedStateBackend",
    "PendingLmdbSnapshot",
]

_MAX_DBS = 1024
_POS = struct.Struct(">Q")
_KG = struct.Struct(">H")
_INT_TAG = 0x02  # an encoded 64-bit int key: the tag and 8 bytes
_PAST_ANY_SUFFIX = b"\xff" * 9  # sorts after every list position of a prefix
_MISSING = object()


def _dumps(value: Any) -> bytes:
    return encode_value(value)


#: entries read between checks whether the backend is closing (a snapshot read stops early then)
_READ_CHECK_EVERY = 4096
_SNAPSHOT_THREADS = 2
#: a delta reads its changed keys by one pass over the state when they are at least 1/this of its entries
_SCAN_WHEN_CHANGED = 4
_executor: ThreadPoolExecutor | None = None
_executor_pid = 0
_executor_lock = threading.Lock()


def _snapshot_executor() -> ThreadPoolExecutor:
    """The threads that read pinned LMDB views for incremental snapshots (shared by all backends of a process)."""
    global _executor, _executor_pid
    with _executor_lock:
        if _executor is None or _executor_pid != os.getpid():
            _executor = ThreadPoolExecutor(_SNAPSHOT_THREADS, thread_name_prefix="weir-lmdb-snapshot")
            _executor_pid = os.getpid()
        return _executor


class _BackendClosing(Exception):
    """A snapshot read stopped because its backend is closing (its task finished or was
    cancelled): the checkpoint is declined without counting as a failed one."""

    task_closing = True


_envid: Any
try:  # py-lmdb's guard against opening one environment twice in a process (``PinnedView.pin_in_child``)
    import lmdb._envid as _envid

    _CHILD_CAN_REOPEN = callable(getattr(_envid, "env_keys", None))
except ImportError:  # pragma: no cover - an older py-lmdb: views are read by threads
    _envid = None
    _CHILD_CAN_REOPEN = False

#: Environments of backends dropped without ``close`` (``LmdbKeyedStateBackend.__del__``).
_NEVER_CLOSED: list[tuple[Any, Any]] = []

#: How a view stands: no reader yet, a snapshot thread of this process, a forked child that is
#: pinning it, handed over (the child pinned it, failed, or the backend closed).
_OPEN, _THREAD, _CHILD, _HANDED_OVER = "open", "thread", "child", "handed over"
#: Seconds a commit that must happen waits for a child to pin its view (it takes milliseconds).
HAND_OVER_WAIT_S = 5.0


class ViewMovedError(UsageError):
    """A forked child found a later commit than its snapshot's barrier: it reads nothing."""

    task_closing = False


class PinnedView:
    """The committed state at a barrier, for one reader: a snapshot thread of this process,
    or a forked child (``weir.task.forked``) that opens the environment itself.

    The synchronous phase commits the batch and pins a read transaction (``rtxn``, LMDB's MVCC
    view). A thread reads through it. A child cannot (LMDB forbids using an environment, or
    its transactions, across ``fork``): it opens the environment anew and begins its own read
    transaction, which sees the latest commit -- the barrier's exactly when nothing was
    committed since. So from the barrier until a reader has the view, the backend does not
    commit a full batch (the batch grows instead; reads see it all the same), a commit that must
    happen first waits for the child (``_settle_views``), and the child compares its
    transaction's id with the barrier's (``txn_id``) and fails the checkpoint if they differ
    rather than write a later state. Once the child holds its own transaction (its reader slot
    in the environment's lock file keeps the barrier's pages from reuse), this process releases
    its own and commits as before (``_hand_over``).
    """

    def __init__(
        self, backend: LmdbKeyedStateBackend, rtxn: Any, dbs: dict[str, Any], reader: Callable[..., Any]
    ) -> None:
        self._backend = backend
        self.rtxn = rtxn
        self.txn_id: int = rtxn.id()
        self.dbs = dbs
        self.reader = reader  # reader(txn, dbs, closing) -> what the snapshot holds
        self.path = str(backend.path)
        self.map_size: int = backend._map_size
        self.owner = os.getpid()
        self.state = _OPEN
        self.future: Future[Any] | None = None
        self.handed_over = threading.Event()
        self._child: tuple[Any, Any, dict[str, Any]] | None = None  # env, txn, dbs in the child

    def result(self) -> Any:
        """The reader's result: read by the child when this is the child, else by a snapshot thread."""
        if os.getpid() != self.owner:
            if self._child is None:
                raise UsageError(
                    f"LMDB snapshot view of '{self._backend.operator_id}' was not pinned in this child"
                )
            _, txn, dbs = self._child
            return self.reader(txn, dbs, _never_closing)
        return self._backend._start_thread_read(self).result()

    def claim_for_child(self) -> bool:
        """On the task's thread, right before the fork (``LmdbKeyedStateBackend._claim_for_child``)."""
        return self._backend._claim_for_child(self)

    def can_go_to_child(self) -> bool:
        return self.state is _OPEN and _CHILD_CAN_REOPEN

    def hand_over(self) -> None:
        """In this process once the child answered its pin (or ended): ``_hand_over``."""
        self._backend._hand_over(self)

    def backend_closing(self) -> bool:
        """Whether the backend closed meanwhile (a child's failure is then the task's closing)."""
        return self._backend._closing

    def after_child_died(self) -> None:
        """A child killed while it held the view leaves a reader slot behind: clear it."""
        with contextlib.suppress(lmdb.Error):
            self._backend._env.reader_check()

    def pin_in_child(self) -> None:
        """In the forked child: open the environment and pin the barrier's state (class docstring)."""
        assert _envid is not None and os.getpid() != self.owner
        # py-lmdb refuses to open files an environment of this process has open. The child
        # has none: it inherited the parent's environment as memory only, closed its
        # descriptors, holds none of its locks and never touches it.
        _envid.env_keys = _no_keys
        env = lmdb.open(
            self.path, readonly=True, create=False, lock=True, readahead=False,
            map_size=self.map_size, max_dbs=_MAX_DBS,
        )  # fmt: skip
        txn = env.begin(write=False)
        if txn.id() != self.txn_id:
            raise ViewMovedError(
                f"LMDB state of '{self._backend.operator_id}' was committed (transaction {txn.id()}) after "
                f"the barrier's (transaction {self.txn_id}) before the checkpoint's child could pin it"
            )
        dbs = {
            name: env.open_db(b"state:" + name.encode("utf-8"), txn=txn, create=False) for name in self.dbs
        }
        self._child = (env, txn, dbs)

    def close_in_child(self) -> None:
        """Release the child's transaction and environment (its reader slot) before it exits."""
        if self._child is not None:
            env, txn, _ = self._child
            self._child = None
            txn.abort()
            env.close()


def _no_keys(path: Any, subdir: Any) -> tuple[()]:
    return ()


def _never_closing() -> bool:
    return False


class PendingLmdbSnapshot(PendingKeyedStateSnapshot):
    """A full snapshot whose entries are read from a pinned view (``PinnedView``)."""

    def __init__(
        self,
        view: PinnedView,
        entries: int = 0,
        packed: Callable[..., PackedKeyedStateSnapshot | None] | None = None,
    ) -> None:
        self._view = view
        self._entries = entries
        self._packed = packed  # packed(txn, dbs): the state file's form from columns, or None

    def for_file(self) -> KeyedStateSnapshot | PackedKeyedStateSnapshot:
        """What the state file holds: ``result()``, or, in the forked child that pinned the
        view, the same packed from columns when ``_read_packed`` can (one single-value state,
        int keys, entries of one width)."""
        child = self._view._child
        if self._packed is not None and child is not None and os.getpid() != self._view.owner:
            _, txn, dbs = child
            packed = self._packed(txn, dbs)
            if packed is not None:
                return packed
        return self.result()

    def __len__(self) -> int:
        """Entries in the backend at the barrier (an estimate of the asynchronous phase's work)."""
        return self._entries

    def result(self) -> KeyedStateSnapshot:
        result: KeyedStateSnapshot = self._view.result()
        return result

    def child_views(self) -> list[PinnedView]:
        return [self._view]


class _ViewEntries:
    """An incremental run's entries, read from a pinned view; callable as ``entries()``."""

    def __init__(self, view: PinnedView) -> None:
        self._view = view

    def __call__(self) -> list[Any]:
        result: list[Any] = self._view.result()
        return result

    def child_views(self) -> list[PinnedView]:
        return [self._view]


def _read_full(
    rtxn: Any,
    dbs: dict[str, Any],
    closing: Callable[[], bool],
    *,
    rng: KeyGroupRange,
    kinds: dict[str, str],
    limits: dict[str, int],
    empty: KeyedStateSnapshot,
) -> KeyedStateSnapshot:
    """The canonical snapshot of ``rng`` in the pinned view ``rtxn`` (a snapshot thread's or a
    child's). An LMDB key is split into key, namespace and user key by the encoding's lengths
    (``skip_key``), nothing decoded: the user key of a single-value state is empty, a list
    element's is its 8-byte position, a map entry's the encoded map key."""
    key_groups: list[tuple[int, tuple[SnapshotEntry, ...]]] = []
    cursors = {name: rtxn.cursor(db=db) for name, db in sorted(dbs.items())}
    for kg in rng:
        closing()
        lo = _KG.pack(kg)
        entries: list[SnapshotEntry] = []
        append = entries.append
        for name, cursor in cursors.items():
            if not cursor.set_range(lo):
                continue
            kind = kinds[name]
            limit = limits.get(name)
            last_kn = b""
            pos = 0
            for k, v in cursor:
                if k[:2] != lo:
                    break
                if limit is not None and decode_value(v)[0] <= limit:
                    continue
                key_end = 11 if k[2] == _INT_TAG else skip_key(k, 2)
                if kind == "map":
                    ns_end = skip_key(k, key_end)
                    append((name, k[2:key_end], k[key_end:ns_end], k[ns_end:], v))
                elif kind == "list":
                    kn = k[:-8]
                    pos = pos + 1 if kn == last_kn else 0
                    last_kn = kn
                    append((name, k[2:key_end], k[key_end:-8], _POS.pack(pos), v))
                else:
                    append((name, k[2:key_end], k[key_end:], b"", v))
        if entries:
            key_groups.append((kg, tuple(entries)))
    return KeyedStateSnapshot(
        empty.operator_id, empty.max_parallelism, empty.key_group_range, empty.states, tuple(key_groups)
    )


def _read_packed(
    rtxn: Any,
    dbs: dict[str, Any],
    *,
    rng: KeyGroupRange,
    kinds: dict[str, str],
    limits: dict[str, int],
    empty: KeyedStateSnapshot,
) -> PackedKeyedStateSnapshot | None:
    """``_read_full``'s snapshot in its state-file form, built from columns, when exactly one
    state holds entries, it is a single-value state without TTL, every key is an encoded int64
    and every LMDB key and value has one length: an LMDB key is the key group, the key and the
    namespace, in the order a state file lists them, so its bytes after the key group are the
    entry's. Else None (``_read_full`` then reads entry by entry)."""
    from weir.state.state_file import pack_uniform_entries

    held = [name for name, db in dbs.items() if rtxn.stat(db)["entries"]]
    if len(held) != 1:
        return None
    (name,) = held
    if kinds[name] in ("list", "map") or name in limits:
        return None
    cursor = rtxn.cursor(db=dbs[name])
    keys = list(cursor.iternext(keys=True, values=False))
    values = list(cursor.iternext(keys=False, values=True))
    n = len(keys)
    if n != len(values) or len(set(map(len, keys))) != 1 or len(set(map(len, values))) != 1:
        return None
    width = len(keys[0])
    if width < 2 + 9:
        return None
    raw = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(n, width)
    if not (raw[:, 2] == _INT_TAG).all():
        return None
    groups = raw[:, :2].copy().view(">u2").ravel().astype(np.int32)
    if groups[0] < rng.start_key_group or groups[-1] > rng.end_key_group:
        return None  # keys outside the snapshot's range: entry by entry, which skips them
    namespaces = raw[:, 11:]
    if (namespaces == namespaces[0]).all():
        table, namespace_of = namespaces[:1], None
    else:  # the distinct namespaces in byte order (fixed-width byte strings compare as memcmp here)
        distinct, namespace_of = np.unique(
            np.ascontiguousarray(namespaces).view(f"S{width - 11}").ravel(), return_inverse=True
        )
        table = np.frombuffer(distinct.tobytes(), dtype=np.uint8).reshape(len(distinct), width - 11)
    value_rows = np.frombuffer(b"".join(values), dtype=np.uint8).reshape(n, -1)
    number_of_groups, packed = pack_uniform_entries(
        groups, raw[:, 2:11], table, namespace_of, np.arange(len(table)), value_rows
    )
    return PackedKeyedStateSnapshot(
        empty.operator_id,
        empty.max_parallelism,
        empty.key_group_range,
        empty.states,
        (name,),
        number_of_groups,
        packed,
    )


def _read_run(
    rtxn: Any, dbs: dict[str, Any], closing: Callable[[], bool], *, plan: Any, key_group_range: KeyGroupRange
) -> list[tuple[int, bytes, bytes | None]]:
    """Read ``plan``'s entries from the pinned ``rtxn``, sorted as a run wants."""
    index = {meta.name: i for i, meta in enumerate(plan.states)}
    if plan.keys is None:  # a full run: every entry, key group by key group
        out: list[tuple[int, bytes, bytes | None]] = []
        names = sorted(n for n in dbs if n in index)
        cursors = {name: rtxn.cursor(db=dbs[name]) for name in names}
        for kg in key_group_range:
            lo = _KG.pack(kg)
            for name in names:
                cursor = cursors[name]
                if not cursor.set_range(lo):
                    continue
                i = index[name]
                for k, v in cursor:
                    if k[:2] != lo:
                        break
                    out.append((i, k, v))
                    if len(out) % _READ_CHECK_EVERY == 0:
                        closing()
        return out
    per_state: list[list[tuple[int, bytes, bytes | None]]] = []
    for name in sorted(plan.keys, key=index.__getitem__):
        keys, db, i = plan.keys[name], dbs[name], index[name]
        if len(keys) * _SCAN_WHEN_CHANGED >= rtxn.stat(db)["entries"]:
            per_state.append(_changed_by_scan(rtxn, db, i, keys, closing))
        else:
            per_state.append(_changed_by_lookup(rtxn, db, i, keys, closing))
    if len(per_state) == 1:
        return per_state[0]
    # each list is sorted by raw key (key group first) and holds one state index
    return list(heapq.merge(*per_state, key=lambda e: (e[1][:2], e[0], e[1])))


def _changed_by_lookup(
    rtxn: Any, db: Any, i: int, keys: AbstractSet[bytes], closing: Callable[[], bool] = _never_closing
) -> list[tuple[int, bytes, bytes | None]]:
    """The changed ``keys`` of one state, looked up one by one (few keys changed), in key order."""
    get = rtxn.get
    out = []
    for n, k in enumerate(sorted(keys)):
        out.append((i, k, get(k, db=db)))
        if n % _READ_CHECK_EVERY == 0:
            closing()
    return out


def _changed_by_scan(
    rtxn: Any, db: Any, i: int, keys: AbstractSet[bytes], closing: Callable[[], bool] = _never_closing
) -> list[tuple[int, bytes, bytes | None]]:
    """The changed ``keys`` of one state, read by one pass over it (most keys changed): a scan
    costs what a full run's does, so a delta is never slower than a full snapshot."""
    present = []
    for n, (k, v) in enumerate(rtxn.cursor(db=db)):
        if k in keys:
            present.append((i, k, v))
        if n % _READ_CHECK_EVERY == 0:
            closing()
    if len(present) == len(keys):
        return present
    found = {e[1] for e in present}
    tombstones = [(i, k, None) for k in sorted(k for k in keys if k not in found)]
    return list(heapq.merge(present, tombstones, key=lambda e: e[1]))


class _LmdbState(InternalKvState):
    def __init__(self, backend: LmdbKeyedStateBackend, db: Any, descriptor: StateDescriptor) -> None:
        self._b = backend
        self._db = db
        self._name = descriptor.name
        self._ns: Any = VOID_NAMESPACE
        self._ns_bytes = encode_key(VOID_NAMESPACE)
        ttl = descriptor.ttl_config
        self._ttl = ttl
        self._ttl_ms = ttl.ttl_ms if ttl else 0
        self._return_expired = ttl.return_expired if ttl else False
        self._update_on_read = ttl.update_on_read if ttl else False
        self._clock = backend.time_ms

    def set_current_namespace(self, namespace: Any) -> None:
        if namespace is not self._ns:
            self._ns = namespace
            self._ns_bytes = encode_key(namespace)

    def _prefix(self) -> bytes:
        prefix = self._b._key_prefix
        if prefix is None:
            raise self._b._no_current_key(self._name)
        return prefix + self._ns_bytes

    def _range_keys(self, prefix: bytes) -> list[bytes]:
        cursor = self._b._txn.cursor(db=self._db)
        out = []
        if cursor.set_range(prefix):
            for k in cursor.iternext(keys=True, values=False):
                if not k.startswith(prefix):
                    break
                out.append(k)
        return out

    def _range_items(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        cursor = self._b._txn.cursor(db=self._db)
        out = []
        if cursor.set_range(prefix):
            for k, v in cursor:
                if not k.startswith(prefix):
                    break
                out.append((k, v))
        return out

    def clear(self) -> None:
        self._b._delete_range(self._db, self._prefix())


class _LmdbSingle(_LmdbState):
    def get_internal(self) -> Any:
        prefix = self._b._key_prefix
        if prefix is None:
            raise self._b._no_current_key(self._name)
        k = prefix + self._ns_bytes
        raw = self._b._txn.get(k, db=self._db)
        if raw is None:
            return None
        if self._ttl is None:
            return decode_value(raw)
        ts, value = decode_value(raw)
        now = self._clock()
        if ts + self._ttl_ms <= now:
            self._b._write(self._db, k, None)
            return value if self._return_expired else None
        if self._update_on_read:
            self._b._write(self._db, k, _dumps((now, value)))
        return value

    def update_internal(self, value: Any) -> None:
        prefix = self._b._key_prefix
        if prefix is None:
            raise self._b._no_current_key(self._name)
        k = prefix + self._ns_bytes
        if value is None:
            self._b._write(self._db, k, None)
        elif self._ttl is None:
            self._b._write(self._db, k, _dumps(value))
        else:
            self._b._write(self._db, k, _dumps((self._clock(), value)))

    def clear(self) -> None:
        self._b._write(self._db, self._prefix(), None)


class LmdbValueState(_LmdbSingle, ValueState):
    value = _LmdbSingle.get_internal
    update = _LmdbSingle.update_internal


class LmdbReducingState(ReducingStateLogic, _LmdbSingle, ReducingState):
    def __init__(self, backend: LmdbKeyedStateBackend, db: Any, descriptor: ReducingStateDescriptor) -> None:
        super().__init__(backend, db, descriptor)
        self._reduce = descriptor.reduce


class LmdbAggregatingState(AggregatingStateLogic, _LmdbSingle, AggregatingState):
    def __init__(
        self, backend: LmdbKeyedStateBackend, db: Any, descriptor: AggregatingStateDescriptor
    ) -> None:
        super().__init__(backend, db, descriptor)
        self._agg = descriptor.agg_function


class LmdbListState(_LmdbState, ListState):
    """One LMDB entry per element: ``prefix + position``; ``add`` never rewrites the list."""

    def _next_position(self, prefix: bytes) -> int:
        cursor = self._b._txn.cursor(db=self._db)
        found = cursor.prev() if cursor.set_range(prefix + _PAST_ANY_SUFFIX) else cursor.last()
        if found:
            k = cursor.key()
            if len(k) == len(prefix) + 8 and k.startswith(prefix):
                return int(_POS.unpack_from(k, len(prefix))[0]) + 1
        return 0

    def get_internal(self) -> list[Any] | None:
        prefix = self._prefix()
        items = self._range_items(prefix)
        if not items:
            return None
        if self._ttl is None:
            return [decode_value(v) for _, v in items]
        now = self._clock()
        limit = now - self._ttl_ms
        out = []
        for k, raw in items:
            ts, value = decode_value(raw)
            if ts <= limit:
                self._b._write(self._db, k, None)
                if not self._return_expired:
                    continue
            elif self._update_on_read:
                self._b._write(self._db, k, _dumps((now, value)))
            out.append(value)
        return out or None

    def get(self) -> list[Any]:
        return self.get_internal() or []

    def add(self, value: Any) -> None:
        if value is None:
            raise UsageError(f"list state '{self._name}': None cannot be added to a ListState")
        prefix = self._prefix()
        pos = self._next_position(prefix)
        stored = value if self._ttl is None else (self._clock(), value)
        self._b._write(self._db, prefix + _POS.pack(pos), _dumps(stored))

    def add_all(self, values: Iterable[Any]) -> None:
        new = list(values)
        for v in new:
            if v is None:
                raise UsageError(f"list state '{self._name}': None cannot be added to a ListState")
        if not new:
            return
        prefix = self._prefix()
        self._append(prefix, self._next_position(prefix), new)

    def _append(self, prefix: bytes, pos: int, values: list[Any]) -> None:
        now = self._clock() if self._ttl is not None else 0
        for v in values:
            stored = v if self._ttl is None else (now, v)
            self._b._write(self._db, prefix + _POS.pack(pos), _dumps(stored))
            pos += 1

    def update(self, values: Iterable[Any] | None) -> None:
        new = [] if values is None else list(values)
        for v in new:
            if v is None:
                raise UsageError(f"list state '{self._name}': None cannot be added to a ListState")
        prefix = self._prefix()
        self._b._delete_range(self._db, prefix)
        self._append(prefix, 0, new)

    def update_internal(self, value: Any) -> None:
        self.update(value)


class LmdbMapState(_LmdbState, MapState):
    """One LMDB entry per map entry: ``prefix + encode_key(map_key)``."""

    def _read(self, k: bytes, raw: bytes, now: int) -> Any:
        if self._ttl is None:
            return decode_value(raw)
        ts, value = decode_value(raw)
        if ts + self._ttl_ms <= now:
            self._b._write(self._db, k, None)
            return value if self._return_expired else _MISSING
        if self._update_on_read:
            self._b._write(self._db, k, _dumps((now, value)))
        return value

    def _get(self, key: Any) -> Any:
        k = self._prefix() + encode_key(key)
        raw = self._b._txn.get(k, db=self._db)
        if raw is None:
            return _MISSING
        return self._read(k, raw, self._clock() if self._ttl else 0)

    def get(self, key: Any) -> Any:
        value = self._get(key)
        return None if value is _MISSING else value

    def contains(self, key: Any) -> bool:
        return self._get(key) is not _MISSING

    def put(self, key: Any, value: Any) -> None:
        stored = value if self._ttl is None else (self._clock(), value)
        self._b._write(self._db, self._prefix() + encode_key(key), _dumps(stored))

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        if not dict_value:
            return
        prefix = self._prefix()
        now = self._clock() if self._ttl is not None else 0
        for key, value in dict_value.items():
            stored = value if self._ttl is None else (now, value)
            self._b._write(self._db, prefix + encode_key(key), _dumps(stored))

    def remove(self, key: Any) -> None:
        self._b._write(self._db, self._prefix() + encode_key(key), None)

    def items(self) -> list[tuple[Any, Any]]:
        prefix = self._prefix()
        n = len(prefix)
        now = self._clock() if self._ttl else 0
        out = []
        for k, raw in self._range_items(prefix):
            value = self._read(k, raw, now)
            if value is not _MISSING:
                out.append((decode_key(k[n:]), value))
        return out

    def keys(self) -> list[Any]:
        if self._ttl is None:
            prefix = self._prefix()
            n = len(prefix)
            return [decode_key(k[n:]) for k in self._range_keys(prefix)]
        return [k for k, _ in self.items()]

    def values(self) -> list[Any]:
        return [v for _, v in self.items()]

    def is_empty(self) -> bool:
        if self._ttl is None:
            prefix = self._prefix()
            cursor = self._b._txn.cursor(db=self._db)
            return not (cursor.set_range(prefix) and cursor.key().startswith(prefix))
        return not self.items()

    def get_internal(self) -> dict[Any, Any] | None:
        items = self.items()
        return dict(items) if items else None

    def update_internal(self, value: Any) -> None:
        self.clear()
        if value:
            self.put_all(value)


_STATE_CLASSES: dict[str, Any] = {
    "value": LmdbValueState,
    "list": LmdbListState,
    "map": LmdbMapState,
    "reducing": LmdbReducingState,
    "aggregating": LmdbAggregatingState,
}


class LmdbKeyedStateBackend(KeyedStateBackend):
    """Keyed state in LMDB: serialized on every access, bounded by disk rather than memory."""

    backend_name = "lmdb"
    #: ``restore`` takes incremental chains (``ChainRestore``) as they are
    supports_incremental_restore = True

    def __init__(
        self,
        operator_id: str,
        max_parallelism: int,
        key_group_range: KeyGroupRange,
        time_ms: Any = None,
        *,
        path: Path | str,
        map_size_bytes: int = DEFAULT_MAP_SIZE_BYTES,
        commit_every_ops: int = DEFAULT_COMMIT_EVERY_OPS,
        incremental: bool = False,
        max_chain_length: int | None = None,
    ) -> None:
        super().__init__(operator_id, max_parallelism, key_group_range, time_ms)
        if map_size_bytes <= 0:
            raise UsageError(f"LMDB state backend: map_size_bytes must be positive, got {map_size_bytes}")
        if commit_every_ops <= 0:
            raise UsageError(f"LMDB state backend: commit_every_ops must be positive, got {commit_every_ops}")
        self.path = Path(path)
        if self.path.exists():
            shutil.rmtree(self.path)  # working space only: never a recovery source
        self.path.mkdir(parents=True)
        self._map_size = map_size_bytes
        self._env = lmdb.open(
            str(self.path),
            map_size=map_size_bytes,
            max_dbs=_MAX_DBS,
            sync=False,
            metasync=False,
            readahead=False,
            lock=True,
        )
        self._commit_every = commit_every_ops
        #: memory a window operator's fast mode keeps live accumulators in before writing them here
        self.window_pane_memory_bytes = DEFAULT_WINDOW_PANE_MEMORY_BYTES
        self._dbs: dict[str, Any] = {}
        self._txn: Any = self._env.begin(write=True)
        self._log: list[tuple[Any, bytes, bytes | None]] = []
        self._commits = 0
        self._resizes = 0
        self._db_names: dict[Any, str] = {}
        #: db handle -> raw keys written or deleted since the last incremental snapshot; None: not tracking
        self._changes: dict[Any, set[bytes]] | None = None
        self._history: Any = None  # weir.state.incremental.SnapshotHistory when incremental
        self._pin_cond = threading.Condition()
        self._pinned = 0  # read transactions pinned for snapshots and not yet released
        self._reads: list[tuple[Future[Any], Any]] = []
        #: snapshot views no thread or child has yet (``PinnedView``); while any, full batches wait
        self._views: list[PinnedView] = []
        self._holding = 0
        self._closing = False
        #: the pane snapshot merged into the latest incremental run, whose keys the next delta
        #: reads again (the backend's value, or a tombstone)
        self._revisit: Any = None
        if incremental:
            self.enable_incremental_checkpointing(max_chain_length)

    # ------------------------------------------------------------------ key and writes

    def _key_bytes(self, key: Any, key_group: int) -> bytes | None:
        return _KG.pack(key_group) + encode_key(key)

    def _write(self, db: Any, key: bytes, value: bytes | None) -> None:
        """Put (or delete, when ``value`` is None) in the open batch; commit when the batch is full."""
        try:
            if value is None:
                self._txn.delete(key, db=db)
            else:
                self._txn.put(key, value, db=db)
        except lmdb.MapFullError:
            self._grow_and_replay()
            self._write(db, key, value)
            return
        changes = self._changes
        if changes is not None:
            changes[db].add(key)
        self._log.append((db, key, value))
        if len(self._log) >= self._commit_every and not self._holding:
            self.commit()  # held while a snapshot's view waits for its reader (``PinnedView``)

    def _delete_range(self, db: Any, prefix: bytes) -> None:
        cursor = self._txn.cursor(db=db)
        doomed = []
        if cursor.set_range(prefix):
            for k in cursor.iternext(keys=True, values=False):
                if not k.startswith(prefix):
                    break
                doomed.append(k)
        for k in doomed:
            self._write(db, k, None)

    def commit(self) -> None:
        """Commit the open batch of writes and start a new one."""
        if self._holding:
            self._settle_views()
        while True:
            try:
                self._txn.commit()
                break
            except lmdb.MapFullError:
                self._grow_and_replay()
        self._commits += 1
        self._log.clear()
        self._txn = self._env.begin(write=True)

    def _grow_and_replay(self) -> None:
        """The map is full: abort the batch, double the map, replay the batch's writes.

        Growing the map invalidates every open transaction, so it first waits for
        the read transactions pinned by incremental snapshots to be released."""
        self._wait_for_pinned_reads()
        while True:
            self._txn.abort()
            self._map_size *= 2
            self._resizes += 1
            self._env.set_mapsize(self._map_size)
            self._txn = self._env.begin(write=True)
            try:
                for db, key, value in self._log:
                    if value is None:
                        self._txn.delete(key, db=db)
                    else:
                        self._txn.put(key, value, db=db)
            except lmdb.MapFullError:
                continue
            return

    def _db(self, name: str) -> Any:
        db = self._dbs.get(name)
        if db is None:
            if len(self._dbs) >= _MAX_DBS - 1:
                raise UsageError(
                    f"LMDB state backend of '{self.operator_id}': more than {_MAX_DBS - 1} states"
                )
            db = self._open_db(b"state:" + name.encode("utf-8"))
            self._dbs[name] = db
            self._db_names[db] = name
            if self._changes is not None:
                self._changes[db] = set()
        return db

    def _open_db(self, key: bytes) -> Any:
        """Create (or open) a named database in a transaction of its own.

        A new handle must come from a committed transaction, and ``_grow_and_replay``
        cannot replay a database's creation: so when that commit finds the map full (more
        likely while a snapshot pins an old view, whose pages LMDB cannot reuse), the map
        grows and the database is opened again in a fresh transaction."""
        self.commit()  # the batch is empty from here: nothing to replay
        while True:
            try:
                db = self._env.open_db(key, txn=self._txn, create=True)
                self._txn.commit()
            except lmdb.MapFullError:
                self._wait_for_pinned_reads()
                with contextlib.suppress(lmdb.Error):  # a failed commit already ended it
                    self._txn.abort()
                self._map_size *= 2
                self._resizes += 1
                self._env.set_mapsize(self._map_size)
                self._txn = self._env.begin(write=True)
                continue
            self._commits += 1
            self._txn = self._env.begin(write=True)
            return db

    def _create_state(self, descriptor: StateDescriptor) -> InternalKvState:
        state: InternalKvState = _STATE_CLASSES[descriptor.kind](self, self._db(descriptor.name), descriptor)
        return state

    # ------------------------------------------------------------------ iteration

    def keys(self, state_name: str, namespace: Any = VOID_NAMESPACE) -> Iterator[Any]:
        db = self._dbs.get(state_name)
        if db is None:
            return iter(())
        ns_bytes = encode_key(namespace)
        out: list[Any] = []
        last: bytes | None = None
        for k in self._txn.cursor(db=db).iternext(keys=True, values=False):
            key, end = decode_key_from(k, 2)
            if not k.startswith(ns_bytes, end):
                continue
            key_bytes = k[:end]
            if key_bytes != last:
                out.append(key)
                last = key_bytes
        return iter(out)

    def keys_and_namespaces(self, state_name: str) -> Iterator[tuple[Any, Any]]:
        db = self._dbs.get(state_name)
        if db is None:
            return iter(())
        out: list[tuple[Any, Any]] = []
        seen: set[bytes] = set()
        for k in self._txn.cursor(db=db).iternext(keys=True, values=False):
            key, end = decode_key_from(k, 2)
            ns, end = decode_key_from(k, end)
            if k[:end] not in seen:
                seen.add(k[:end])
                out.append((key, ns))
        return iter(out)

    # ------------------------------------------------------------------ snapshots

    def snapshot(self, key_group_range: KeyGroupRange | None = None) -> KeyedStateSnapshot:
        return self.snapshot_async(key_group_range).result()

    def snapshot_async(self, key_group_range: KeyGroupRange | None = None) -> PendingLmdbSnapshot:
        """The synchronous phase of a full snapshot: commit the open batch (at most
        ``commit_every_ops`` writes) and pin a read transaction; a snapshot thread, or a forked
        child, reads the entries from that view while the task goes on writing."""
        self._check_open()
        rng = self._snapshot_range(key_group_range)
        self.commit()
        cleanup = self._ttl_cleanup()
        names = sorted(self._dbs)
        kinds = {name: self._metas[name].kind for name in names}
        limits = {name: ttl_now[1] - ttl_now[0] for name, ttl_now in cleanup.items()}
        empty = self._make_snapshot(rng, [])
        view = self._pin_view(names, partial(_read_full, rng=rng, kinds=kinds, limits=limits, empty=empty))
        packed = partial(_read_packed, rng=rng, kinds=kinds, limits=limits, empty=empty)
        return PendingLmdbSnapshot(view, self.number_of_keys(), packed)  # O(states): LMDB keeps the counts

    def _pin_view(self, names: Iterable[str], reader: Callable[..., Any]) -> PinnedView:
        """Pin a read transaction of the committed state for ``reader`` (``PinnedView``).
        Until a thread or a child has it, batches are not committed when full."""
        with self._pin_cond:
            rtxn = self._env.begin(write=False)
            self._pinned += 1
            view = PinnedView(self, rtxn, {name: self._dbs[name] for name in names}, reader)
            self._views.append(view)
            self._holding += 1
        return view

    def _start_thread_read(self, view: PinnedView) -> Future[Any]:
        """Give an unclaimed ``view`` to a snapshot thread (any thread); its read, once started."""
        with self._pin_cond:
            if view.state is _OPEN:
                view.state = _THREAD
                self._views.remove(view)
                self._holding -= 1
                view.future = _snapshot_executor().submit(self._run_pinned, view)
                self._reads = [(f, t) for f, t in self._reads if not f.done()]
                self._reads.append((view.future, view.rtxn))
            future = view.future
        if future is None and self._closing:
            raise _BackendClosing(self.operator_id)  # released by close() before anyone read it
        if future is None:
            raise UsageError(
                f"LMDB state backend of '{self.operator_id}': the snapshot's view went to a forked child, "
                "so this process cannot read it"
            )
        return future

    def _run_pinned(self, view: PinnedView) -> Any:
        try:
            return view.reader(view.rtxn, view.dbs, self._is_closing)
        finally:
            self._release_pinned(view.rtxn)

    def _is_closing(self) -> bool:
        if self._closing:
            raise _BackendClosing(self.operator_id)
        return False

    def _claim_for_child(self, view: PinnedView) -> bool:
        """On the task's thread, right before the fork: ``view`` goes to the child, if no
        thread has it and the child can open the environment."""
        with self._pin_cond:
            if view.state is not _OPEN or not _CHILD_CAN_REOPEN:
                return False
            view.state = _CHILD
            return True

    def _hand_over(self, view: PinnedView) -> None:
        """The child has pinned ``view`` itself, or never will (it failed, or it was too slow):
        release this process's transaction and commit full batches again."""
        with self._pin_cond:
            if view.state is not _CHILD:
                return
            view.state = _HANDED_OVER
            view.rtxn.abort()
            self._pinned -= 1
            self._views.remove(view)
            self._holding -= 1
            self._pin_cond.notify_all()
        view.handed_over.set()

    def _settle_views(self) -> None:
        """Before a commit the batch size did not ask for (a checkpoint's, a new state's, a map
        resize's, the close's): unclaimed views go to a snapshot thread, and a view a child is
        pinning is waited for (``HAND_OVER_WAIT_S`` at most; then the child finds the view moved
        and fails the checkpoint rather than write a later state)."""
        with self._pin_cond:
            views = list(self._views)
        for view in views:
            if view.state is _OPEN:
                self._start_thread_read(view)
            elif view.state is _CHILD and not view.handed_over.wait(HAND_OVER_WAIT_S):
                self._hand_over(view)

    # ------------------------------------------------------------------ incremental snapshots

    def enable_incremental_checkpointing(self, max_chain_length: int | None = None) -> None:
        """Track changed keys from now on, so checkpoints can be incremental (``snapshot_incremental``)."""
        from weir.state.incremental import (
            DEFAULT_MAX_CHAIN_LENGTH,
            SnapshotHistory,
            check_max_chain_length,
        )

        self._check_open()
        if self._history is None:
            self._history = SnapshotHistory(
                DEFAULT_MAX_CHAIN_LENGTH if max_chain_length is None else max_chain_length
            )
            self._changes = {db: set() for db in self._dbs.values()}
        elif max_chain_length is not None:
            self._history.max_chain_length = check_max_chain_length(max_chain_length)

    @property
    def incremental_checkpointing(self) -> bool:
        """Whether checkpoints of this backend are incremental."""
        return self._history is not None

    @property
    def snapshot_history(self) -> Any:
        """The ``SnapshotHistory`` of incremental snapshots (None when they are off)."""
        return self._history

    def snapshot_incremental(
        self, checkpoint_id: int, is_complete: Callable[[int], bool], panes: Any = None
    ) -> Any:
        """The synchronous part of an incremental checkpoint; returns a ``PendingIncrementalSnapshot``.

        ``is_complete(checkpoint_id)`` says whether a checkpoint's ``_metadata``
        exists (``CheckpointStorage.is_complete``): only complete checkpoints are
        built on. The entries are read on a snapshot thread from a read
        transaction pinned here; processing may go on writing meanwhile.

        ``panes`` (a ``weir.state.panes.PaneSnapshot``): entries an operator holds outside
        the backend, merged into the run in the asynchronous part. The run is then never
        UNCHANGED, and the next snapshot reads their keys again from the backend (its value
        or a tombstone), so a chain never keeps a pane the backend does not hold: the next
        synchronous part adds the pane snapshot to the changed keys of their state
        (``ChangedKeys``: their raw keys are encoded where that run is read, not here).
        """
        from weir.state.incremental import UNCHANGED, ChangedKeys, PendingIncrementalSnapshot

        self._check_open()
        history = self._history
        if history is None or self._changes is None:
            raise UsageError(
                f"LMDB state backend of '{self.operator_id}': incremental checkpointing is off; "
                "enable it with LmdbStateBackend(enable_incremental_checkpointing=True) or "
                "execution.checkpointing.incremental: true"
            )
        self.commit()
        earlier, self._revisit = self._revisit, panes
        changes: dict[str, Any] = {self._db_names[db]: keys for db, keys in self._changes.items() if keys}
        self._changes = {db: set() for db in self._dbs.values()}
        if earlier is not None and len(earlier):  # panes the previous run held: read them again
            written = changes.get(earlier.state_name)
            changes[earlier.state_name] = ChangedKeys((earlier,) if written is None else (written, earlier))
        states = tuple(self._metas[name] for name in sorted(self._metas))
        plan = history.plan(
            checkpoint_id,
            changes,
            states,
            is_complete,
            force_run=panes is not None,
            entries=self.number_of_keys(),
        )
        if plan.kind == UNCHANGED:
            entries: Callable[[], list[Any]] = list
        else:
            reader = partial(_read_run, plan=plan, key_group_range=self.key_group_range)
            entries = _ViewEntries(
                self._pin_view([m.name for m in plan.states if m.name in self._dbs], reader)
            )
        if panes is not None:
            index = [m.name for m in plan.states].index(panes.state_name)
            entries = _PaneMergedEntries(entries, panes, index)
        return PendingIncrementalSnapshot(
            plan, self.operator_id, self.max_parallelism, self.key_group_range, entries, history
        )

    def _release_pinned(self, rtxn: Any) -> None:
        with self._pin_cond:
            rtxn.abort()
            self._pinned -= 1
            self._pin_cond.notify_all()

    def _wait_for_pinned_reads(self) -> None:
        self._settle_views()
        with self._pin_cond:
            while self._pinned:
                self._pin_cond.wait()

    # ------------------------------------------------------------------ restore

    def restore(self, snapshots: Iterable[Any]) -> None:
        """Load canonical snapshots and incremental chains (``ChainRestore``); only this backend's key groups.

        Restoring exactly one chain of this backend's own key group range lets
        the next incremental snapshot continue it; anything else starts a new base.
        """
        from weir.state.incremental import ChainRestore

        self._check_open()
        items = list(snapshots)
        chains = [s for s in items if isinstance(s, ChainRestore)]
        canonical = [s for s in items if not isinstance(s, ChainRestore)]
        changes, self._changes = self._changes, None  # restored entries are not changes
        self._revisit = None  # the next snapshot starts a new base
        try:
            if canonical:
                super().restore(canonical)
            for chain in chains:
                self._restore_chain(chain)
            self.commit()
        finally:
            if changes is not None:
                self._changes = {db: set() for db in self._dbs.values()}
        if self._history is not None:
            h = chains[0].handle if len(chains) == 1 and not canonical else None
            if (
                h is not None
                and h.key_group_range == self.key_group_range
                and h.operator_id == self.operator_id
                and h.max_parallelism == self.max_parallelism
            ):
                states = tuple(self._metas[name] for name in sorted(self._metas))
                self._history.adopt(h.checkpoint_id, h.chain, states)
            else:
                self._history.reset()

    def _restore_chain(self, chain: Any) -> None:
        h = chain.handle
        if h.max_parallelism != self.max_parallelism:
            raise UsageError(
                f"incremental state of '{h.operator_id}' was taken with max_parallelism {h.max_parallelism}; "
                f"'{self.operator_id}' has max_parallelism {self.max_parallelism}, and key groups "
                "cannot be reassigned across a different max_parallelism"
            )
        rng = self.key_group_range
        if not len(h.key_group_range.intersection(rng)):
            return  # another subtask's key groups: nothing of it is ours
        for run in chain.runs():
            for meta in run.header.states:
                known = self._metas.get(meta.name)
                if known is not None and known != meta:
                    raise UsageError(
                        f"state '{meta.name}' of '{self.operator_id}' is {known.kind} state"
                        f"{' with TTL' if known.ttl else ''}; the checkpoint holds it as {meta.kind} state"
                        f"{' with TTL' if meta.ttl else ''}"
                    )
                self._metas[meta.name] = meta
            current = ""
            db: Any = None
            for name, key, value in run.entries(rng):
                if name != current:
                    db = self._db(name)
                    current = name
                self._write(db, key, value)

    def _restore_key_group(
        self, key_group: int, entries: tuple[SnapshotEntry, ...], metas: dict[str, StateMetaInfo]
    ) -> None:
        lo = _KG.pack(key_group)
        current = ""
        db: Any = None
        for name, kb, nb, ub, vb in entries:
            if name != current:
                db = self._db(name)
                current = name
            self._write(db, lo + kb + nb + ub, vb)

    def _after_restore(self) -> None:
        self.commit()

    # ------------------------------------------------------------------ numbers and lifecycle

    def number_of_keys(self) -> int:
        return sum(self._txn.stat(db)["entries"] for db in self._dbs.values())

    def file_size_bytes(self) -> int:
        """Bytes the LMDB data file occupies on disk (allocated blocks)."""
        data = self.path / "data.mdb"
        return os.stat(data).st_blocks * 512 if data.exists() else 0

    def statistics(self) -> KeyedStateBackendStatistics:
        info = self._env.info()
        return KeyedStateBackendStatistics(
            backend=self.backend_name,
            operator_id=self.operator_id,
            key_group_range=self.key_group_range,
            number_of_states=len(self._metas),
            number_of_entries=self.number_of_keys() if not self._closed else 0,
            extra={
                "map_size_bytes": info["map_size"],
                "file_size_bytes": self.file_size_bytes(),
                "pending_writes": len(self._log),
                "commits": self._commits,
                "map_resizes": self._resizes,
            },
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closing = True  # pinned snapshot reads stop at their next check
        with self._pin_cond:
            for view in self._views:
                if view.state is _OPEN:  # never read: nobody will
                    view.state = _HANDED_OVER
                    view.rtxn.abort()
                    self._pinned -= 1
                    self._holding -= 1
            self._views = [v for v in self._views if v.state is _CHILD]
            for future, rtxn in self._reads:
                if future.cancel():  # never started: release its transaction here
                    rtxn.abort()
                    self._pinned -= 1
            self._reads = []
        self._wait_for_pinned_reads()
        self.commit()
        self._txn.abort()
        self._env.close()
        super().close()

    def dispose(self) -> None:
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)

    def __del__(self) -> None:
        # A backend nobody closed, dropped by the garbage collector on whatever thread it
        # runs on: closing the environment there would release LMDB's writer lock from a
        # thread that does not own it and unmap it while it is still on its owner's list of
        # held robust mutexes (the owner's next lock crashes). Keep it open instead.
        if not getattr(self, "_closed", True) and getattr(self, "_env", None) is not None:
            _NEVER_CLOSED.append((self._env, self._txn))


class _PaneMergedEntries:
    """An incremental run's entries: read from the pinned view, with frozen panes merged in
    (the next snapshot reads the panes' keys again, ``snapshot_incremental``)."""

    def __init__(self, read: Callable[[], list[Any]], panes: Any, index: int) -> None:
        self._read = read
        self.panes = panes
        self._index = index
        self._rows: list[Any] | None = None

    def _read_once(self) -> list[Any]:
        if self._rows is None:
            self._rows = self._read()
        return self._rows

    def __call__(self) -> list[Any]:
        merged: list[Any] = self.panes.merge_run(self._read_once(), self._index)
        return merged

    def packed_groups(self) -> list[tuple[int, int, bytes]] | None:
        """The merged entries as the run's encoded key groups, built from columns, or None
        (then call this object for them)."""
        groups: list[tuple[int, int, bytes]] | None = self.panes.packed_run_groups(
            self._read_once(), self._index
        )
        return groups

    def read_here(self) -> _PaneMergedEntries:
        """Do now, in this process, the read of a view a thread has; what is left -- the
        merge -- may run in a forked child."""
        self._read_once()
        return self

    def child_views(self) -> list[PinnedView]:
        if self._rows is not None:  # read here already: a child has no view to pin
            return []
        views: list[PinnedView] = getattr(self._read, "child_views", list)()
        return views

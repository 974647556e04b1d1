"""``LmdbKeyedStateBackend``: keyed state serialized into an embedded LMDB environment (weir's RocksDB).

Layout: one LMDB environment per backend instance (one operator subtask) in
its own directory; one named database per state. The LMDB key of an entry is

    key group (2 bytes, big endian) + encode_key(key) + encode_key(namespace) + user key

so one key group is one contiguous key range (snapshots and rescaling read a
range, never the whole database), and all entries of one key and namespace are
contiguous too. The user key is empty for value/reducing/aggregating state,
the element position (8 bytes big endian) for list state, and
``encode_key(map_key)`` for map state. Values are ``encode_value`` (pickle 5)
of the stored value, which is ``(last_access_ms, value)`` for states with TTL
-- exactly the bytes of the canonical snapshot format (``engine.state.backend``).

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
transaction: LMDB's MVCC gives a consistent view of the committed state.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import lmdb

from engine.datastream.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    MapState,
    ReducingState,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueState,
)
from engine.errors import UsageError
from engine.keys.reference import KeyGroupRange
from engine.state.backend import (
    VOID_NAMESPACE,
    AggregatingStateLogic,
    InternalKvState,
    KeyedStateBackend,
    KeyedStateBackendStatistics,
    KeyedStateSnapshot,
    ReducingStateLogic,
    SnapshotEntry,
    StateMetaInfo,
)
from engine.state.serde import decode_key, decode_key_from, decode_value, encode_key, encode_value

__all__ = ["DEFAULT_COMMIT_EVERY_OPS", "DEFAULT_MAP_SIZE_BYTES", "LmdbKeyedStateBackend"]

DEFAULT_MAP_SIZE_BYTES = 64 << 20
DEFAULT_COMMIT_EVERY_OPS = 20_000
_MAX_DBS = 1024
_POS = struct.Struct(">Q")
_KG = struct.Struct(">H")
_PAST_ANY_SUFFIX = b"\xff" * 9  # sorts after every list position of a prefix
_MISSING = object()


def _dumps(value: Any) -> bytes:
    return encode_value(value)


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
        self._dbs: dict[str, Any] = {}
        self._txn: Any = self._env.begin(write=True)
        self._log: list[tuple[Any, bytes, bytes | None]] = []
        self._commits = 0
        self._resizes = 0

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
        self._log.append((db, key, value))
        if len(self._log) >= self._commit_every:
            self.commit()

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
        """The map is full: abort the batch, double the map, replay the batch's writes."""
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
            self.commit()  # a new database handle must come from a committed transaction
            db = self._env.open_db(b"state:" + name.encode("utf-8"), txn=self._txn, create=True)
            self.commit()
            self._dbs[name] = db
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
        self._check_open()
        rng = self._snapshot_range(key_group_range)
        self.commit()
        cleanup = self._ttl_cleanup()
        names = sorted(self._dbs)
        key_groups: list[tuple[int, tuple[SnapshotEntry, ...]]] = []
        with self._env.begin(write=False) as rtxn:
            cursors = {name: rtxn.cursor(db=self._dbs[name]) for name in names}
            for kg in rng:
                lo = _KG.pack(kg)
                entries: list[SnapshotEntry] = []
                for name in names:
                    cursor = cursors[name]
                    if not cursor.set_range(lo):
                        continue
                    is_list = self._metas[name].kind == "list"
                    ttl_now = cleanup.get(name)
                    limit = ttl_now[1] - ttl_now[0] if ttl_now else None
                    last_kn = b""
                    pos = 0
                    for k, v in cursor:
                        if k[:2] != lo:
                            break
                        if limit is not None and decode_value(v)[0] <= limit:
                            continue
                        _, key_end = decode_key_from(k, 2)
                        _, ns_end = decode_key_from(k, key_end)
                        user_key = k[ns_end:]
                        if is_list:
                            kn = k[:ns_end]
                            pos = pos + 1 if kn == last_kn else 0
                            last_kn = kn
                            user_key = _POS.pack(pos)
                        entries.append((name, k[2:key_end], k[key_end:ns_end], user_key, v))
                if entries:
                    key_groups.append((kg, tuple(entries)))
        return self._make_snapshot(rng, key_groups)

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
        self.commit()
        self._txn.abort()
        self._env.close()
        super().close()

    def dispose(self) -> None:
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)

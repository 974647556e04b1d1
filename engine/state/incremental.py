"""Incremental checkpoints of keyed state: immutable sorted runs in ``shared/``, chained per subtask.

No trio, no LMDB, no clock: the only I/O is ``PendingIncrementalSnapshot.write`` through the
``CheckpointStorage`` it is handed.

Theory of operation
-------------------
The LMDB backend (``weir.state.lmdb_backend``) remembers which raw LMDB keys
each state wrote or deleted since its last snapshot attempt. At a checkpoint
it asks a ``SnapshotHistory`` for a plan, and the plan's run of entries is
written as one immutable file into the checkpoint storage's ``shared/``
directory. A subtask's keyed state in a checkpoint is then a *chain*: one
*full* run (every entry of the backend, the base) followed by zero or more
*delta* runs (the entries whose keys changed since the run before; a deleted
key is a tombstone). ``IncrementalKeyedStateHandle`` names the chain, base
first; the checkpoint's metadata lists the same files as the state handle's
``shared_files``, so the shared state registry counts them.

Which runs a new checkpoint builds on (``SnapshotHistory.plan``):

- the *base* is the newest earlier attempt whose run was written and whose
  checkpoint is complete -- its ``_metadata`` exists, the commit point, which
  the task checks in the storage rather than waiting for
  ``notify_checkpoint_complete`` (notifications may arrive after the next
  barrier); aborted or declined attempts never become a base, so the
  job master never has to keep their files;
- the new run covers the keys changed by every attempt after the base plus the
  keys changed since the last attempt: the changes of an aborted or failed
  attempt are never lost, they are written again by the next one;
- the run is *full* (a new base: the chain restarts) when there is no base yet,
  when the base's chain already has ``max_chain_length`` files, or when its
  deltas together outweigh its base (this bounds restore time), or when the
  keys to read again are at least as many as the backend holds: when every key
  changed, a full run is no larger than the delta and never slower to build;
- when nothing changed (no key, no new state) the checkpoint reuses the base's
  chain and uploads nothing.

Run file format, version 1 (all integers big endian)::

    magic       6 bytes  b"WKVRUN"
    version     u16      1
    kind        u8       0 = full, 1 = delta
    header_len  u32
    header      JSON: {"operator_id", "max_parallelism", "key_group_range": [s, e],
                       "checkpoint_id", "states": [[name, kind, ttl], ...] sorted by name}
    entries     sorted by (key group, state index, raw key); each is
                u16 state index, u32 key length, u32 value length (0xFFFFFFFF: tombstone),
                key bytes (the raw LMDB key: 2-byte key group + key + namespace + user key),
                value bytes
    index       u32 number of key groups, then per key group: u16 key group, u64 offset, u32 entries
    trailer     u64 index offset, u64 number of entries, u32 CRC-32 of every byte before it, b"WKVRUN"

A file checks itself (CRC-32, magic, sizes) besides the SHA-256 the metadata
records, and names itself in every error. Restoring a chain applies its runs in
order -- last write wins, a tombstone deletes -- and keeps only the key groups
the restoring backend owns (the per-key-group index skips the others), so a
restore may take chains of several old subtasks at another parallelism.

What it does not do: read LMDB (the backend fills the runs), write or delete
files (``CheckpointStorage`` and the ``SharedStateRegistry``), decide retention.
"""

from __future__ import annotations

import json
import re
import secrets
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from weir.checkpoint.metadata import FileHandle
from weir.checkpoint.storage import CorruptCheckpointError
from weir.errors import UsageError
from weir.keys.reference import KeyGroupRange
from weir.state.backend import KeyedStateSnapshot, SnapshotEntry, StateMetaInfo
from weir.state.serde import decode_key_from

__all__ = [
    "DEFAULT_MAX_CHAIN_LENGTH",
    "DELTA",
    "FULL",
    "UNCHANGED",
    "ChainRestore",
    "ChangedKeys",
    "IncrementalKeyedStateHandle",
    "IncrementalSnapshotResult",
    "PendingIncrementalSnapshot",
    "Run",
    "RunHeader",
    "SnapshotHistory",
    "SnapshotPlan",
    "canonical_entries",
    "chain_to_keyed_snapshot",
    "check_max_chain_length",
    "decode_run",
    "encode_run",
    "encode_run_groups",
    "fold_chain",
    "load_for_restore",
    "restorable_for",
    "run_file_name",
]

FULL = "full"
DELTA = "delta"
#: a checkpoint in which nothing changed: it reuses its base's chain, no file is written
UNCHANGED = "unchanged"

#: files in a chain (base included) before the next checkpoint materializes a new base
DEFAULT_MAX_CHAIN_LENGTH = 10

RUN_FORMAT_VERSION = 1
_MAGIC = b"WKVRUN"
_PREAMBLE = struct.Struct(">6sHBI")  # magic, version, kind, header length
_ENTRY = struct.Struct(">HII")  # state index, key length, value length
_INDEX_COUNT = struct.Struct(">I")
_INDEX_ENTRY = struct.Struct(">HQI")  # key group, offset, entries
_TRAILER = struct.Struct(">QQI6s")  # index offset, entries, crc32, magic
_TOMBSTONE = 0xFFFFFFFF
_KINDS = {FULL: 0, DELTA: 1}
_KIND_NAMES = {v: k for k, v in _KINDS.items()}

#: (state index into the header's states, raw LMDB key, value bytes or None for a tombstone)
RunEntry = tuple[int, bytes, bytes | None]


# ---------------------------------------------------------------------------------- run files


@dataclass(frozen=True)
class RunHeader:
    """What a run file says about itself: whose state it holds, and which states exist."""

    kind: str
    operator_id: str
    max_parallelism: int
    key_group_range: KeyGroupRange
    checkpoint_id: int
    states: tuple[StateMetaInfo, ...]

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise UsageError(f"run kind must be {FULL!r} or {DELTA!r}, got {self.kind!r}")
        names = [s.name for s in self.states]
        if names != sorted(set(names)):
            raise UsageError(f"run states must be sorted by name without duplicates, got {names}")

    def to_json(self) -> dict[str, Any]:
        kgr = self.key_group_range
        return {
            "operator_id": self.operator_id,
            "max_parallelism": self.max_parallelism,
            "key_group_range": [kgr.start_key_group, kgr.end_key_group],
            "checkpoint_id": self.checkpoint_id,
            "states": [[s.name, s.kind, s.ttl] for s in self.states],
        }


def encode_run(header: RunHeader, entries: Iterable[RunEntry]) -> bytes:
    """The bytes of a run file. ``entries`` must be sorted by (key group, state index, key), keys unique."""
    parts = _run_head(header)
    offset = sum(map(len, parts))
    index: list[tuple[int, int, int]] = []
    n_states = len(header.states)
    pack = _ENTRY.pack
    append = parts.append
    last: tuple[int, int, bytes] = (-1, -1, b"")
    current_kg = -1
    group_start = offset
    group_count = 0
    count = 0
    for state_index, key, value in entries:
        if len(key) < 2:
            raise UsageError(f"run entry key {key!r} is shorter than its 2-byte key group prefix")
        kg = (key[0] << 8) | key[1]
        order = (kg, state_index, key)
        if order <= last:
            raise UsageError(
                f"run entries must be sorted by (key group, state, key) without duplicates: "
                f"{order[:2]} {key!r} came after {last[:2]} {last[2]!r}"
            )
        if not 0 <= state_index < n_states:
            raise UsageError(f"run entry names state {state_index}, but the run has {n_states} states")
        last = order
        if kg != current_kg:
            if group_count:
                index.append((current_kg, group_start, group_count))
            current_kg, group_start, group_count = kg, offset, 0
        if value is None:
            append(pack(state_index, len(key), _TOMBSTONE))
            append(key)
            offset += _ENTRY.size + len(key)
        else:
            append(pack(state_index, len(key), len(value)))
            append(key)
            append(value)
            offset += _ENTRY.size + len(key) + len(value)
        group_count += 1
        count += 1
    if group_count:
        index.append((current_kg, group_start, group_count))
    return _finish_run(parts, index, offset, count)


def encode_run_groups(header: RunHeader, groups: Iterable[tuple[int, int, bytes]]) -> bytes:
    """``encode_run`` for entries already in the run's entry format, one chunk per key group:
    ``(key group, entries, their bytes)``, key groups rising, each chunk's entries sorted by
    (state index, key) without duplicates (the caller's promise: they are not checked)."""
    parts = _run_head(header)
    offset = sum(map(len, parts))
    index: list[tuple[int, int, int]] = []
    count = 0
    last = -1
    for kg, entries, chunk in groups:
        if kg <= last:
            raise UsageError(f"run key groups must rise: {kg} came after {last}")
        last = kg
        index.append((kg, offset, entries))
        parts.append(chunk)
        offset += len(chunk)
        count += entries
    return _finish_run(parts, index, offset, count)


def run_entry_bytes(entries: Iterable[RunEntry]) -> bytes:
    """Entries in the run's entry format (state index, key length, value length or tombstone, key, value)."""
    parts: list[bytes] = []
    for state_index, key, value in entries:
        if value is None:
            parts += (_ENTRY.pack(state_index, len(key), _TOMBSTONE), key)
        else:
            parts += (_ENTRY.pack(state_index, len(key), len(value)), key, value)
    return b"".join(parts)


def run_entry_head(state_index: int, key_length: int, value_length: int) -> bytes:
    """The head of one run entry (``run_entry_bytes``), for entries built as rows."""
    return _ENTRY.pack(state_index, key_length, value_length)


def _run_head(header: RunHeader) -> list[bytes]:
    head = json.dumps(header.to_json(), sort_keys=True, separators=(",", ":")).encode("utf-8")
    return [_PREAMBLE.pack(_MAGIC, RUN_FORMAT_VERSION, _KINDS[header.kind], len(head)), head]


def _finish_run(
    parts: list[bytes], index: list[tuple[int, int, int]], index_offset: int, count: int
) -> bytes:
    """The run's body (``parts``, ending where its index starts), its key-group index and trailer."""
    parts.append(_INDEX_COUNT.pack(len(index)))
    parts.extend(_INDEX_ENTRY.pack(*item) for item in index)
    body = b"".join(parts)
    crc = zlib.crc32(body)
    return body + _TRAILER.pack(index_offset, count, crc, _MAGIC)


@dataclass(frozen=True)
class Run:
    """A decoded run file: its header and an index of its key groups; entries are decoded on demand."""

    header: RunHeader
    data: bytes = field(repr=False)
    index: tuple[tuple[int, int, int], ...]  # (key group, offset, entries), ascending
    number_of_entries: int
    where: str

    @property
    def kind(self) -> str:
        return self.header.kind

    def key_groups(self) -> list[int]:
        return [kg for kg, _, _ in self.index]

    def entries(
        self, key_group_range: KeyGroupRange | None = None
    ) -> Iterator[tuple[str, bytes, bytes | None]]:
        """``(state name, raw key, value or None)`` in file order, only key groups inside ``key_group_range``."""
        names = [s.name for s in self.header.states]
        data = self.data
        unpack = _ENTRY.unpack_from
        for kg, offset, count in self.index:
            if key_group_range is not None and kg not in key_group_range:
                continue
            pos = offset
            for _ in range(count):
                state_index, key_len, value_len = unpack(data, pos)
                pos += _ENTRY.size
                key = data[pos : pos + key_len]
                pos += key_len
                if value_len == _TOMBSTONE:
                    value = None
                else:
                    value = data[pos : pos + value_len]
                    pos += value_len
                yield names[state_index], key, value


def decode_run(data: bytes, where: str) -> Run:
    """The run in ``data`` (read from ``where``, named in errors); ``CorruptCheckpointError`` if damaged."""

    def corrupt(problem: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"incremental state file {where} {problem}")

    data = bytes(data)
    if len(data) < _PREAMBLE.size + _TRAILER.size + _INDEX_COUNT.size:
        raise corrupt(f"is truncated: {len(data)} bytes is shorter than the smallest run")
    magic, version, kind, head_len = _PREAMBLE.unpack_from(data, 0)
    if magic != _MAGIC:
        raise corrupt(f"is not a weir run file (magic {magic!r}, expected {_MAGIC!r})")
    if version != RUN_FORMAT_VERSION:
        raise corrupt(f"has run format version {version}; this weir reads version {RUN_FORMAT_VERSION}")
    index_offset, count, crc, end_magic = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
    if end_magic != _MAGIC:
        raise corrupt("is truncated or overwritten: its trailer is missing")
    body = data[: len(data) - _TRAILER.size]
    actual = zlib.crc32(body)
    if actual != crc:
        raise corrupt(f"is corrupt: CRC-32 {actual:08x} does not match the recorded {crc:08x}")
    if kind not in _KIND_NAMES:
        raise corrupt(f"has unknown run kind {kind}")
    try:
        doc = json.loads(data[_PREAMBLE.size : _PREAMBLE.size + head_len].decode("utf-8"))
        kgr = doc["key_group_range"]
        header = RunHeader(
            kind=_KIND_NAMES[kind],
            operator_id=str(doc["operator_id"]),
            max_parallelism=int(doc["max_parallelism"]),
            key_group_range=KeyGroupRange(int(kgr[0]), int(kgr[1])),
            checkpoint_id=int(doc["checkpoint_id"]),
            states=tuple(StateMetaInfo(str(n), str(k), bool(t)) for n, k, t in doc["states"]),
        )
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise corrupt(f"has an unreadable header: {e}") from e
    if not _PREAMBLE.size + head_len <= index_offset <= len(body) - _INDEX_COUNT.size:
        raise corrupt(f"has an index offset {index_offset} outside the file")
    (groups,) = _INDEX_COUNT.unpack_from(body, index_offset)
    if index_offset + _INDEX_COUNT.size + groups * _INDEX_ENTRY.size != len(body):
        raise corrupt(f"has an index of {groups} key groups that does not fit the file")
    index = tuple(
        _INDEX_ENTRY.unpack_from(body, index_offset + _INDEX_COUNT.size + i * _INDEX_ENTRY.size)
        for i in range(groups)
    )
    if sum(c for _, _, c in index) != count:
        raise corrupt(f"has an index listing {sum(c for _, _, c in index)} entries, the trailer says {count}")
    return Run(header, body, index, count, where)


# ---------------------------------------------------------------------------------- handles


@dataclass(frozen=True)
class IncrementalKeyedStateHandle:
    """One subtask's keyed state in an incremental checkpoint: a chain of run files, base first.

    Written into the subtask's private state file; the same files are the state
    handle's ``shared_files`` in the metadata (what the registry counts).
    """

    operator_id: str
    max_parallelism: int
    key_group_range: KeyGroupRange
    checkpoint_id: int
    chain: tuple[FileHandle, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "chain", tuple(self.chain))
        if not self.chain:
            raise UsageError(f"incremental state of '{self.operator_id}' needs at least its base file")
        for f in self.chain:
            if not isinstance(f, FileHandle):
                raise UsageError(
                    f"incremental state of '{self.operator_id}': chain files must be FileHandles"
                )

    @property
    def base(self) -> FileHandle:
        return self.chain[0]

    @property
    def deltas(self) -> tuple[FileHandle, ...]:
        return self.chain[1:]

    def size_bytes(self) -> int:
        """Bytes a restore reads: every file of the chain."""
        return sum(f.size_bytes for f in self.chain)


@dataclass(frozen=True)
class ChainRestore:
    """A chain with the verified bytes of its files, ready to restore (what the job master hands a task)."""

    handle: IncrementalKeyedStateHandle
    files: tuple[bytes, ...] = field(repr=False)

    def runs(self) -> list[Run]:
        """The decoded runs, base first, checked against each other and the handle."""
        h = self.handle
        if len(self.files) != len(h.chain):
            raise UsageError(
                f"incremental state of '{h.operator_id}' has {len(h.chain)} chain files but "
                f"{len(self.files)} were loaded"
            )
        runs = [decode_run(data, f.path) for f, data in zip(h.chain, self.files, strict=True)]
        for i, run in enumerate(runs):
            expected = FULL if i == 0 else DELTA
            hd = run.header
            if hd.kind != expected:
                raise CorruptCheckpointError(
                    f"incremental state file {run.where} is a {hd.kind} run at position {i} of the chain of "
                    f"checkpoint {h.checkpoint_id}; a chain is one full run followed by delta runs"
                )
            if (hd.operator_id, hd.max_parallelism, hd.key_group_range) != (
                h.operator_id,
                h.max_parallelism,
                h.key_group_range,
            ):
                raise CorruptCheckpointError(
                    f"incremental state file {run.where} holds state of '{hd.operator_id}' key groups "
                    f"{hd.key_group_range} (max parallelism {hd.max_parallelism}); the chain of checkpoint "
                    f"{h.checkpoint_id} is '{h.operator_id}' key groups {h.key_group_range} "
                    f"(max parallelism {h.max_parallelism})"
                )
        return runs


def load_for_restore(
    keyed: Any, shared_files: Sequence[FileHandle], read: Callable[[FileHandle], bytes]
) -> Any:
    """``keyed`` as a task can restore it: a chain gets its files' verified bytes; anything else is returned.

    ``shared_files`` are the state handle's files as the metadata lists them
    (in a savepoint their paths are relative to the savepoint), ``read`` reads
    and verifies one of them.
    """
    if not isinstance(keyed, IncrementalKeyedStateHandle):
        return keyed
    listed = {f.path: f for f in shared_files}
    missing = [f.path for f in keyed.chain if f.path not in listed]
    if missing:
        raise CorruptCheckpointError(
            f"incremental state of '{keyed.operator_id}' (checkpoint {keyed.checkpoint_id}) needs "
            f"{missing}, which its state handle does not list among its shared files"
        )
    return ChainRestore(keyed, tuple(read(listed[f.path]) for f in keyed.chain))


def restorable_for(backend: Any, items: Iterable[Any]) -> list[Any]:
    """``items`` (keyed payloads of old subtasks) in the form ``backend.restore`` takes.

    A backend that restores chains natively (``supports_incremental_restore``)
    gets them as they are; any other gets each chain folded into a canonical
    ``KeyedStateSnapshot`` of its own key groups.
    """
    out: list[Any] = []
    native = bool(getattr(backend, "supports_incremental_restore", False))
    for item in items:
        if isinstance(item, IncrementalKeyedStateHandle):
            raise UsageError(
                f"keyed state of '{item.operator_id}' (checkpoint {item.checkpoint_id}) is an incremental "
                "chain whose files were not loaded; load it with weir.state.incremental.load_for_restore"
            )
        if isinstance(item, ChainRestore) and not native:
            if len(item.handle.key_group_range.intersection(backend.key_group_range)):
                out.append(chain_to_keyed_snapshot(item, backend.key_group_range))
        else:
            out.append(item)
    return out


# ---------------------------------------------------------------------------------- folding


def fold_chain(
    chain: ChainRestore, key_group_range: KeyGroupRange | None = None
) -> tuple[dict[str, StateMetaInfo], dict[str, dict[bytes, bytes]]]:
    """The states and the final entries of ``chain`` (only ``key_group_range``): last write wins, tombstones delete."""
    metas: dict[str, StateMetaInfo] = {}
    contents: dict[str, dict[bytes, bytes]] = {}
    for run in chain.runs():
        for meta in run.header.states:
            metas[meta.name] = meta
        for name, key, value in run.entries(key_group_range):
            entries = contents.get(name)
            if entries is None:
                entries = contents[name] = {}
            if value is None:
                entries.pop(key, None)
            else:
                entries[key] = value
    return metas, contents


def canonical_entries(name: str, is_list: bool, items: Iterable[tuple[bytes, bytes]]) -> list[SnapshotEntry]:
    """Raw LMDB ``(key, value)`` pairs of one key group and state, in key order, as canonical snapshot entries.

    List elements are renumbered 0, 1, ... per key and namespace, as the
    canonical format (``weir.state.backend``) wants.
    """
    out: list[SnapshotEntry] = []
    last_kn = b""
    pos = 0
    for k, v in items:
        _, key_end = decode_key_from(k, 2)
        _, ns_end = decode_key_from(k, key_end)
        user_key = k[ns_end:]
        if is_list:
            kn = k[:ns_end]
            pos = pos + 1 if kn == last_kn else 0
            last_kn = kn
            user_key = pos.to_bytes(8, "big")
        out.append((name, k[2:key_end], k[key_end:ns_end], user_key, v))
    return out


def chain_to_keyed_snapshot(
    chain: ChainRestore, key_group_range: KeyGroupRange | None = None
) -> KeyedStateSnapshot:
    """The canonical snapshot of ``chain`` (restricted to ``key_group_range``), for any backend."""
    h = chain.handle
    rng = h.key_group_range if key_group_range is None else h.key_group_range.intersection(key_group_range)
    metas, contents = fold_chain(chain, rng)
    by_kg: dict[int, list[SnapshotEntry]] = {}
    for name in sorted(contents):
        items = contents[name]
        per_kg: dict[int, list[tuple[bytes, bytes]]] = {}
        for k in sorted(items):
            per_kg.setdefault((k[0] << 8) | k[1], []).append((k, items[k]))
        is_list = metas[name].kind == "list"
        for kg, kv in per_kg.items():
            by_kg.setdefault(kg, []).extend(canonical_entries(name, is_list, kv))
    key_groups = tuple((kg, tuple(by_kg[kg])) for kg in sorted(by_kg) if by_kg[kg])
    states = tuple(metas[n] for n in sorted(metas))
    return KeyedStateSnapshot(h.operator_id, h.max_parallelism, rng, states, key_groups)


# ---------------------------------------------------------------------------------- planning


def check_max_chain_length(value: object) -> int:
    """``value`` if it is a valid maximum chain length (an integer >= 1), else a ``UsageError``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UsageError(
            f"max chain length of incremental checkpoints must be an integer >= 1, got {value!r}"
        )
    return value


class ChangedKeys(AbstractSet[bytes]):
    """The changed raw keys of one state, as a union built where the run is read.

    Its parts are sets of raw keys written, and pane snapshots (``weir.state.panes.
    PaneSnapshot``) merged into an earlier run, whose keys the next delta must read again
    (the backend's value, or a tombstone): their raw keys are encoded only when the set is
    first read, by whoever writes the run (a snapshot thread or a forked child), never in a
    synchronous part. ``bool`` and ``size_hint`` cost nothing per key; the rest builds the
    union once."""

    def __init__(self, parts: Iterable[Any]) -> None:
        self.parts: tuple[Any, ...] = tuple(parts)
        self._keys: frozenset[bytes] | None = None

    def _union(self) -> frozenset[bytes]:
        keys = self._keys
        if keys is None:
            keys = frozenset().union(*(p.raw_keys() if hasattr(p, "raw_keys") else p for p in self.parts))
            self._keys = keys
        return keys

    def __bool__(self) -> bool:
        return any(len(p) for p in self.parts)

    def size_hint(self) -> int:
        """At least as many keys as the union holds (parts may share keys)."""
        return sum(len(p) for p in self.parts)

    def __len__(self) -> int:
        return len(self._union())

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._union())

    def __contains__(self, key: object) -> bool:
        return key in self._union()


def _size_hint(keys: AbstractSet[bytes]) -> int:
    hint = getattr(keys, "size_hint", None)
    return len(keys) if hint is None else int(hint())


@dataclass
class _Attempt:
    """One incremental snapshot of a backend: the keys it was the first to see change, and its chain once written."""

    checkpoint_id: int
    changes: Mapping[str, AbstractSet[bytes]]
    states: tuple[StateMetaInfo, ...]
    chain: tuple[FileHandle, ...] | None = None


@dataclass(frozen=True)
class SnapshotPlan:
    """What one incremental snapshot writes: a full run, a delta of ``keys``, or nothing new."""

    checkpoint_id: int
    kind: str  # FULL | DELTA | UNCHANGED
    base_chain: tuple[FileHandle, ...]  # the chain the new run extends (empty for FULL)
    keys: (
        Mapping[str, AbstractSet[bytes]] | None
    )  # DELTA: raw keys per state to write (never mutated); else None
    states: tuple[StateMetaInfo, ...]
    reason: str  # why this kind, for logs and tests
    attempt: _Attempt = field(repr=False, compare=False)

    def number_of_keys(self) -> int:
        """The keys a delta reads (an upper bound where pane snapshots' keys are not yet encoded)."""
        return 0 if self.keys is None else sum(map(_size_hint, self.keys.values()))


class SnapshotHistory:
    """What a backend remembers between incremental snapshots (the rules are in the module docstring).

    ``plan`` runs on the task's thread, ``on_written`` on the worker thread that
    wrote the run; they share only ``_Attempt.chain``, assigned once.
    """

    def __init__(self, max_chain_length: int = DEFAULT_MAX_CHAIN_LENGTH) -> None:
        self.max_chain_length = check_max_chain_length(max_chain_length)
        self._base: _Attempt | None = None
        self._attempts: list[_Attempt] = []  # after the base, oldest first
        self._adopted = False  # the base is a restored chain, not yet checked against the storage

    @property
    def base_checkpoint_id(self) -> int | None:
        return None if self._base is None else self._base.checkpoint_id

    @property
    def base_chain(self) -> tuple[FileHandle, ...]:
        return () if self._base is None or self._base.chain is None else self._base.chain

    def pending_checkpoint_ids(self) -> list[int]:
        """Attempts after the base whose changes the next snapshot still covers."""
        return [a.checkpoint_id for a in self._attempts]

    def reset(self) -> None:
        """Forget everything: the next snapshot is full (after a restore that cannot be continued)."""
        self._base = None
        self._attempts = []
        self._adopted = False

    def adopt(self, checkpoint_id: int, chain: Sequence[FileHandle], states: Sequence[StateMetaInfo]) -> None:
        """Continue the restored chain of ``checkpoint_id``: the next snapshot is a delta on top of it,
        provided the checkpoint is complete in the storage the next snapshot writes to (a restart
        of the same job; a savepoint of another job's directory is not, so it gets a new base)."""
        if not chain:
            raise UsageError(f"cannot continue the chain of checkpoint {checkpoint_id}: it has no files")
        self._base = _Attempt(checkpoint_id, {}, tuple(states), tuple(chain))
        self._attempts = []
        self._adopted = True

    def plan(
        self,
        checkpoint_id: int,
        changes: Mapping[str, AbstractSet[bytes]],
        states: Sequence[StateMetaInfo],
        is_complete: Callable[[int], bool],
        force_run: bool = False,
        entries: int | None = None,
    ) -> SnapshotPlan:
        """Plan the snapshot of ``checkpoint_id``; ``changes`` are the keys written since the previous plan.
        ``force_run``: entries from outside the backend join the run, so it is never UNCHANGED.
        ``entries``: how many the backend holds, if known; a delta that would read at least as
        many keys (every key changed) is a full run instead, which is no larger and never slower."""
        last = self._attempts[-1].checkpoint_id if self._attempts else self.base_checkpoint_id
        if last is not None and checkpoint_id <= last:
            raise UsageError(
                f"incremental snapshot of checkpoint {checkpoint_id} after checkpoint {last}: "
                "checkpoint ids must rise"
            )
        if self._adopted:
            self._adopted = False
            if self._base is not None and not is_complete(self._base.checkpoint_id):
                self._base = None
        self._advance_base(is_complete)
        states = tuple(states)
        attempt = _Attempt(checkpoint_id, {n: k for n, k in changes.items() if k}, states)
        covered: dict[str, AbstractSet[bytes]] = {}
        for a in (*self._attempts, attempt):
            for name, keys in a.changes.items():
                known = covered.get(name)
                # the synchronous phase: one attempt's set is used as it is (it is never
                # written again); a union of several is built where the run is read
                if known is None:
                    covered[name] = keys
                else:
                    parts = known.parts if isinstance(known, ChangedKeys) else (known,)
                    covered[name] = ChangedKeys((*parts, keys))
        self._attempts.append(attempt)
        base = self._base
        kind, reason = DELTA, "changes since the base"
        if base is None or base.chain is None:
            kind, reason = FULL, "no completed checkpoint to build on"
        elif len(base.chain) >= self.max_chain_length:
            kind, reason = FULL, f"the base chain has {len(base.chain)} files (max {self.max_chain_length})"
        elif sum(f.size_bytes for f in base.chain[1:]) > base.chain[0].size_bytes:
            kind, reason = FULL, "the deltas of the base chain outweigh its base"
        elif not covered and states == base.states and not force_run:
            kind, reason = UNCHANGED, "nothing changed since the base"
        elif entries is not None and covered and sum(map(_size_hint, covered.values())) >= entries:
            kind, reason = FULL, f"the delta would read as many keys as the backend holds ({entries})"
        if kind == FULL:
            return SnapshotPlan(checkpoint_id, FULL, (), None, states, reason, attempt)
        assert base is not None and base.chain is not None
        delta_keys = covered if kind == DELTA else None
        return SnapshotPlan(checkpoint_id, kind, base.chain, delta_keys, states, reason, attempt)

    def on_written(self, plan: SnapshotPlan, chain: tuple[FileHandle, ...]) -> None:
        """The run of ``plan`` is durable: its checkpoint's chain is ``chain``."""
        plan.attempt.chain = tuple(chain)

    def _advance_base(self, is_complete: Callable[[int], bool]) -> None:
        for i in range(len(self._attempts) - 1, -1, -1):
            a = self._attempts[i]
            if a.chain is not None and is_complete(a.checkpoint_id):
                a.changes = {}
                self._base = a
                self._attempts = self._attempts[i + 1 :]
                return


# ---------------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class IncrementalSnapshotResult:
    """What writing one incremental snapshot produced: the chain handle, and the file uploaded (if any)."""

    handle: IncrementalKeyedStateHandle
    uploaded: FileHandle | None

    @property
    def uploaded_bytes(self) -> int:
        return 0 if self.uploaded is None else self.uploaded.size_bytes


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def run_file_name(operator_id: str, key_group_range: KeyGroupRange, checkpoint_id: int, kind: str) -> str:
    """A fresh name for a run file in ``shared/`` (unique: a random suffix, never reused)."""
    op = _UNSAFE.sub("_", operator_id).lstrip(".") or "op"
    kgr = key_group_range
    return f"{op}-kg{kgr.start_key_group}-{kgr.end_key_group}-chk{checkpoint_id}-{kind}-{secrets.token_hex(4)}.kv"


class PendingIncrementalSnapshot:
    """The synchronous part's result: a plan, and a way to get its entries once they are read.

    ``entries()`` blocks until the backend has read the entries from its pinned
    view (LMDB: a read transaction, read on the backend's snapshot thread).
    ``write`` is the asynchronous part: it runs in a worker thread, writes the
    run into ``shared/`` and records the new chain in the backend's history.
    """

    def __init__(
        self,
        plan: SnapshotPlan,
        operator_id: str,
        max_parallelism: int,
        key_group_range: KeyGroupRange,
        entries: Callable[[], list[RunEntry]],
        history: SnapshotHistory,
    ) -> None:
        self.plan = plan
        self.operator_id = operator_id
        self.max_parallelism = max_parallelism
        self.key_group_range = key_group_range
        self._entries = entries
        self._history = history
        self._written = False

    @property
    def checkpoint_id(self) -> int:
        return self.plan.checkpoint_id

    @property
    def kind(self) -> str:
        return self.plan.kind

    def read_here(self) -> None:
        """Read from the backend now (its pinned view, in this process), so that ``write`` may
        run in a forked child (``weir.task.forked``), which must not use the backend."""
        entries = self._entries
        read_here = getattr(entries, "read_here", None)
        if read_here is not None:
            self._entries = read_here()
        else:
            rows = entries()
            self._entries = lambda: rows

    def child_views(self) -> list[Any]:
        """The pinned views a forked child reads the run from (``weir.state.lmdb_backend.PinnedView``)."""
        views = getattr(self._entries, "child_views", None)
        return [] if views is None else list(views())

    def record_written(self, chain: tuple[FileHandle, ...]) -> None:
        """What ``write`` records when it runs in this process, for a run a child wrote."""
        self._history.on_written(self.plan, chain)

    def entries_to_write(self) -> int:
        """An estimate of the work of ``write``: changed keys (a full run: unknown, -1) and panes."""
        panes = getattr(self._entries, "panes", None)
        known = (
            self.plan.number_of_keys() if self.plan.keys is not None or self.plan.kind == UNCHANGED else -1
        )
        return known if known < 0 else known + (len(panes) if panes is not None else 0)

    def write(self, storage: Any) -> IncrementalSnapshotResult:
        """Write the run (if the plan has one) through ``storage`` and return the chain handle."""
        if self._written:
            raise UsageError(f"incremental snapshot of checkpoint {self.checkpoint_id} was already written")
        self._written = True
        plan = self.plan
        uploaded: FileHandle | None = None
        if plan.kind == UNCHANGED:
            self._entries()  # nothing to read, but let the backend release its view
            chain = plan.base_chain
        else:
            header = RunHeader(
                plan.kind, self.operator_id, self.max_parallelism, self.key_group_range,
                plan.checkpoint_id, plan.states,
            )  # fmt: skip
            packed = getattr(self._entries, "packed_groups", None)
            groups = None if packed is None else packed()
            data = (
                encode_run(header, self._entries()) if groups is None else encode_run_groups(header, groups)
            )
            name = run_file_name(self.operator_id, self.key_group_range, plan.checkpoint_id, plan.kind)
            uploaded = storage.write_state_file(plan.checkpoint_id, name, data, shared=True)
            chain = (*plan.base_chain, uploaded)
        handle = IncrementalKeyedStateHandle(
            self.operator_id, self.max_parallelism, self.key_group_range, plan.checkpoint_id, chain
        )
        self._history.on_written(plan, chain)
        return IncrementalSnapshotResult(handle, uploaded)

"""The private state file of one operator subtask in a checkpoint or savepoint: data, never code. Pure.

Theory of operation
-------------------
A task's asynchronous snapshot part writes one file per chained operator holding its
keyed state (a ``KeyedStateSnapshot``, or the handle of an incremental chain), its
timers, its source position, its operator state and, for an unaligned checkpoint, the
in-flight buffers. The file is weir's tagged data encoding (``weir.state.serde``)
of that payload behind a magic and a version::

    magic    9 bytes   b"WEIRSTATE"
    version  u16       1
    payload  the encoded dict {"keyed", "timers", "source_position", "operator_state", "channel_state"}

The snapshot classes are named types with short stable names; keyed entries are
packed into one byte string per snapshot (``_pack_entries``), and timers into columns
(``_pack_timers``: timestamps and key groups as bytes, the keys, each namespace once;
files of the earlier form, one ``weir.Timer`` each, still read). Keys, namespaces and
state values inside are themselves in the data encoding, so typed state (numbers,
strings, tuples, Rows, windows, ...) is plain data throughout. Only a value of a type
weir cannot encode is *opaque* (pickled).

Reading (``decode_state_file``) never runs code from the file when ``trusted`` is
False: an opaque value or an unknown named type raises ``UntrustedStateError``.
``untrusted_content`` finds opaque values in what the envelope carries as bytes
(keyed entries, incremental runs, operator state), and in-flight buffers, whose
records an untyped stream pickles. The restore path passes ``trusted=True`` only when
the checkpoint's ``_metadata`` signature verifies (``weir.checkpoint.trust``) or the
user accepted the risk (``--allow-untrusted-pickle``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from weir.checkpoint.metadata import CheckpointMetadata, FileHandle
from weir.errors import UsageError
from weir.state.backend import KeyedStateSnapshot, PackedKeyedStateSnapshot, StateMetaInfo
from weir.state.incremental import ChainRestore, IncrementalKeyedStateHandle, load_for_restore
from weir.state.operator_state import OperatorStateSnapshot
from weir.state.serde import (
    UntrustedStateError,
    decode_key_from,
    encode_parts,
    find_opaque,
    register_type,
)
from weir.time.timers import Timer, TimerColumns, TimerSnapshot

__all__ = ["FORMAT_VERSION", "MAGIC", "UntrustedStateError", "decode_state_file", "encode_state_file",
           "load_payloads", "pack_uniform_entries", "state_file_parts", "untrusted_content", "untrusted_error"]  # fmt: skip

MAGIC = b"WEIRSTATE"
FORMAT_VERSION = 1
_VERSION = struct.Struct(">H")
_GROUP = struct.Struct(">HI")  # key group, entries
_ENTRY = struct.Struct(">HIIII")  # state index, key, namespace, user key, value lengths
_ENTRY_COLUMNS = np.dtype(
    [("index", ">u2"), ("key", ">u4"), ("namespace", ">u4"), ("user_key", ">u4"), ("value", ">u4")]
)  # _ENTRY as a numpy record
_PAYLOAD_FIELDS = ("keyed", "timers", "source_position", "operator_state", "channel_state")
_TIMESTAMP, _KEY, _NAMESPACE, _KEY_GROUP = (
    attrgetter(f) for f in ("timestamp", "key", "namespace", "key_group")
)


def _pack_entries(snapshot: KeyedStateSnapshot) -> tuple[Any, ...]:
    """A snapshot's fields with its entries packed into one byte string (one tuple per entry
    costs): per key group ``_GROUP``, then per entry ``_ENTRY`` and its four byte strings.
    The entries' headers are built by numpy, all at once, from their columns."""
    groups = snapshot.key_groups
    flat = list(chain.from_iterable(entries for _, entries in groups))
    if not flat:
        return (snapshot.operator_id, snapshot.max_parallelism, snapshot.key_group_range, snapshot.states,
                (), len(groups), b"".join(_GROUP.pack(kg, 0) for kg, _ in groups))  # fmt: skip
    names_of, keys, namespaces, user_keys, values = (list(map(itemgetter(i), flat)) for i in range(5))
    names = {name: i for i, name in enumerate(dict.fromkeys(names_of))}
    n = len(flat)
    heads = np.empty(n, dtype=_ENTRY_COLUMNS)
    heads["index"] = np.fromiter(map(names.__getitem__, names_of), dtype=np.int64, count=n)
    for field, column in (
        ("key", keys),
        ("namespace", namespaces),
        ("user_key", user_keys),
        ("value", values),
    ):
        heads[field] = np.fromiter(map(len, column), dtype=np.int64, count=n)
    raw = heads.tobytes()
    size = _ENTRY.size
    interleaved: list[bytes] = [b""] * (5 * n)
    interleaved[0::5] = [raw[i : i + size] for i in range(0, n * size, size)]
    interleaved[1::5] = keys
    interleaved[2::5] = namespaces
    interleaved[3::5] = user_keys
    interleaved[4::5] = values
    parts: list[bytes] = []
    start = 0
    for key_group, entries in groups:
        parts.append(_GROUP.pack(key_group, len(entries)))
        end = start + 5 * len(entries)
        parts.append(b"".join(interleaved[start:end]))
        start = end
    return (snapshot.operator_id, snapshot.max_parallelism, snapshot.key_group_range, snapshot.states,
            tuple(names), len(groups), b"".join(parts))  # fmt: skip


def _sortable(rows: np.ndarray) -> np.ndarray:
    """One sort key per row of bytes, in the rows' byte (memcmp) order: an encoded int64 (its
    tag and 8 big-endian bytes) as an unsigned int, anything else as a fixed-width byte string."""
    n, width = rows.shape
    if width == 9 and n and (rows[:, 0] == rows[0, 0]).all():
        return rows[:, 1:].copy().view(">u8").ravel().astype(np.uint64)
    return np.ascontiguousarray(rows).view(f"S{width}").ravel()


def _entry_order(key_groups: np.ndarray, keys: np.ndarray, rank: np.ndarray | None) -> np.ndarray:
    """The order of entries by key group, key (``_sortable``) and namespace rank (None: one
    namespace). Entries are distinct, so any sort will do; when the three fit in one uint64
    (int keys over a span below 2**64 / (groups x namespaces)) one argsort of that does."""
    if keys.dtype == np.uint64 and len(keys):
        low = keys.min()
        key_span = int(keys.max() - low) + 1
        rank_span = 1 if rank is None else int(rank.max()) + 1
        if (int(key_groups.max()) + 1) * key_span * rank_span < 1 << 64:
            combined = key_groups.astype(np.uint64) * np.uint64(key_span) + (keys - low)
            if rank is not None:
                combined = combined * np.uint64(rank_span) + rank.astype(np.uint64)
            order: np.ndarray = np.argsort(combined)
            return order
    return np.lexsort((keys, key_groups) if rank is None else (rank, keys, key_groups))


def uniform_rows(
    key_groups: np.ndarray,
    keys: np.ndarray,
    namespaces: np.ndarray,
    namespace_of: np.ndarray | None,
    namespace_rank: np.ndarray,
    values: np.ndarray,
    head: bytes,
    key_group_prefix: bool = False,
) -> tuple[list[int], list[int], np.ndarray]:
    """Entries of one width as rows of bytes, ``head`` + (the key group, 2 bytes big endian,
    if ``key_group_prefix``) + key + namespace + value, sorted by key group, key, namespace;
    returns the key groups, where each one's rows start (one more at the end: the number of
    rows) and the rows. Keys and values are ``(n, width)`` uint8 arrays; ``namespaces`` is a
    table of the distinct namespaces' bytes, ``namespace_of`` each entry's row in it (None:
    the table's only namespace) and ``namespace_rank`` orders the table's rows as their bytes do."""
    n = len(key_groups)
    k, ns, v = keys.shape[1], namespaces.shape[1], values.shape[1]
    one_namespace = namespace_of is None or not n or len(namespaces) == 1
    rank = None if one_namespace else namespace_rank[namespace_of]
    order = _entry_order(key_groups, _sortable(keys), rank)
    sorted_groups = key_groups[order]
    at = len(head)
    kg = 2 if key_group_prefix else 0
    rows = np.empty((n, at + kg + k + ns + v), dtype=np.uint8)
    rows[:, :at] = np.frombuffer(head, dtype=np.uint8)
    if kg:
        rows[:, at : at + 2] = sorted_groups.astype(">u2").view(np.uint8).reshape(n, 2)
    at += kg
    # rows gathered by fancy indexing of the 2-D arrays (numpy's fastest take of byte rows)
    rows[:, at : at + k] = keys[order]
    if one_namespace:
        rows[:, at + k : at + k + ns] = namespaces[:1]
    else:
        assert namespace_of is not None
        rows[:, at + k : at + k + ns] = namespaces[namespace_of[order]]
    rows[:, at + k + ns :] = values[order]
    starts = np.flatnonzero(np.diff(sorted_groups, prepend=sorted_groups[:1] - 1)) if n else order
    return sorted_groups[starts].tolist(), [*starts.tolist(), n], rows


def pack_uniform_entries(
    key_groups: np.ndarray,
    keys: np.ndarray,
    namespaces: np.ndarray,
    namespace_of: np.ndarray | None,
    namespace_rank: np.ndarray,
    values: np.ndarray,
) -> tuple[int, bytes]:
    """``(groups, packed)`` of ``_pack_entries`` for entries of one state (index 0) whose
    keys, namespaces and values are each of one width (``uniform_rows``). Empty user keys."""
    head = _ENTRY.pack(0, keys.shape[1], namespaces.shape[1], 0, values.shape[1])
    groups, bounds, rows = uniform_rows(
        key_groups, keys, namespaces, namespace_of, namespace_rank, values, head
    )
    parts = []
    for group, start, end in zip(groups, bounds, bounds[1:]):
        parts.append(_GROUP.pack(group, end - start))
        parts.append(rows[start:end].tobytes())
    return len(groups), b"".join(parts)


def _pack_timers(timers: Sequence[Timer]) -> tuple[Any, ...]:
    """Timers as columns: timestamps and key groups as bytes, the keys, and each namespace
    once with one index per timer (one named type per timer costs). ``TimerColumns`` are
    packed as they are held."""
    if isinstance(timers, TimerColumns):
        return (
            timers.timestamps.astype(">i8").tobytes(),
            timers.key_groups.astype(">i4").tobytes(),
            tuple(timers.keys),
            tuple(timers.namespaces),
            timers.slots.astype(">u4").tobytes(),
        )
    index: dict[Any, int] = {}
    at = index.setdefault
    slots = [at(ns, len(index)) for ns in map(_NAMESPACE, timers)]
    return (
        np.fromiter(map(_TIMESTAMP, timers), dtype=">i8", count=len(timers)).tobytes(),
        np.fromiter(map(_KEY_GROUP, timers), dtype=">i4", count=len(timers)).tobytes(),
        tuple(map(_KEY, timers)),
        tuple(index),
        np.array(slots, dtype=">u4").tobytes(),
    )


def _unpack_timers(packed: tuple[Any, ...]) -> tuple[Timer, ...]:
    timestamps, key_groups, keys, namespaces, slots = packed
    n = len(keys)
    columns = [
        np.frombuffer(timestamps, ">i8"),
        np.frombuffer(key_groups, ">i4"),
        np.frombuffer(slots, ">u4"),
    ]
    if any(len(c) != n for c in columns):
        raise UsageError(f"packed timers: {n} keys, but columns of {[len(c) for c in columns]} values")
    ts, kgs, idx = (c.tolist() for c in columns)
    if idx and max(idx) >= len(namespaces):
        raise UsageError(f"packed timers: a namespace index past the {len(namespaces)} namespaces")
    return tuple(map(Timer, ts, keys, map(namespaces.__getitem__, idx), kgs))


def _unpack_entries(
    operator_id: str, max_parallelism: int, key_group_range: Any, states: tuple[StateMetaInfo, ...],
    names: tuple[str, ...], groups: int, packed: bytes,
) -> KeyedStateSnapshot:  # fmt: skip
    key_groups = []
    view = memoryview(packed)
    pos = 0
    for _ in range(groups):
        key_group, count = _GROUP.unpack_from(view, pos)
        pos += _GROUP.size
        entries = []
        for _ in range(count):
            index, nk, nn, nu, nv = _ENTRY.unpack_from(view, pos)
            pos += _ENTRY.size
            a, b, c, d = pos + nk, pos + nk + nn, pos + nk + nn + nu, pos + nk + nn + nu + nv
            entries.append((names[index], packed[pos:a], packed[a:b], packed[b:c], packed[c:d]))
            pos = d
        key_groups.append((key_group, tuple(entries)))
    if pos != len(packed):
        raise UsageError(f"keyed state of '{operator_id}' has {len(packed) - pos} bytes after its entries")
    return KeyedStateSnapshot(operator_id, max_parallelism, key_group_range, tuple(states), tuple(key_groups))


register_type(KeyedStateSnapshot, "weir.KeyedStateSnapshot",
              fields=("operator_id", "max_parallelism", "key_group_range", "states", "names", "groups", "packed"),
              build=_unpack_entries, unpack=_pack_entries)  # fmt: skip
register_type(PackedKeyedStateSnapshot, "weir.KeyedStateSnapshot", encode_only=True,
              fields=("operator_id", "max_parallelism", "key_group_range", "states", "names", "groups", "packed"))  # fmt: skip
register_type(StateMetaInfo, "weir.StateMetaInfo")
register_type(Timer, "weir.Timer")
register_type(TimerSnapshot, "weir.TimerSnapshot")  # read as written before timers were packed
register_type(TimerSnapshot, "weir.PackedTimerSnapshot",
              fields=("key_group_range", "event_time", "processing_time"),
              build=lambda rng, event, processing: TimerSnapshot(rng, _unpack_timers(event), _unpack_timers(processing)),
              unpack=lambda s: (s.key_group_range, _pack_timers(s.event_time), _pack_timers(s.processing_time)))  # fmt: skip
register_type(OperatorStateSnapshot, "weir.OperatorStateSnapshot")
register_type(FileHandle, "weir.FileHandle")
register_type(IncrementalKeyedStateHandle, "weir.IncrementalKeyedStateHandle")


def state_file_parts(payload: dict[str, Any]) -> list[bytes | memoryview]:
    """The bytes of one operator subtask's state file in pieces, big arrays as views of
    themselves (``encode_parts``): the asynchronous phase writes them one after another
    instead of copying them together."""
    body = encode_parts({k: payload.get(k) for k in _PAYLOAD_FIELDS})
    return [MAGIC + _VERSION.pack(FORMAT_VERSION), *body]


def encode_state_file(payload: dict[str, Any]) -> bytes:
    """The bytes of one operator subtask's state file (``state_file_parts`` joined)."""
    return b"".join(state_file_parts(payload))


def decode_state_file(data: bytes, where: str, trusted: bool) -> dict[str, Any]:
    """The payload of a state file (``where`` names it in errors); opaque values only when ``trusted``."""
    if not data.startswith(MAGIC):
        raise UsageError(
            f"state file {where} is not in weir's state file format (it does not start with {MAGIC!r}); "
            "it was written by an older weir, whose state files were pickled, or it is not a state file"
        )
    head = len(MAGIC) + _VERSION.size
    (version,) = _VERSION.unpack_from(data, len(MAGIC))
    if version != FORMAT_VERSION:
        raise UsageError(f"state file {where} has format version {version}; this weir reads {FORMAT_VERSION}")
    try:
        payload, end = decode_key_from(data, head, trusted)
    except UntrustedStateError:
        raise
    except (UsageError, ValueError, TypeError, IndexError, KeyError, struct.error, UnicodeDecodeError) as exc:
        raise UsageError(f"state file {where} cannot be decoded: {type(exc).__name__}: {exc}") from None
    if end != len(data) or not isinstance(payload, dict) or set(payload) != set(_PAYLOAD_FIELDS):
        raise UsageError(f"state file {where} does not hold one state payload ({', '.join(_PAYLOAD_FIELDS)})")
    return payload


def _opaque_in_keyed(snapshot: KeyedStateSnapshot) -> str | None:
    kinds = {m.name: m.kind for m in snapshot.states}
    for _, entries in snapshot.key_groups:
        for name, key, namespace, user_key, value in entries:
            user = user_key if kinds.get(name) == "map" else b""
            found = find_opaque(key + namespace + user) or find_opaque(value)
            if found:
                return f"state '{name}' of operator '{snapshot.operator_id}': {found}"
    return None


def _opaque_in_chain(chain: ChainRestore) -> str | None:
    for run in chain.runs():
        kinds = {m.name: m.kind for m in run.header.states}
        for name, raw_key, value in run.entries():
            _, end = decode_key_from(raw_key, 2, trusted=False)  # the key
            _, end = decode_key_from(raw_key, end, trusted=False)  # the namespace
            found = (find_opaque(raw_key[end:]) if kinds.get(name) == "map" else None) or (
                find_opaque(value) if value is not None else None
            )
            if found:
                return f"state '{name}' in incremental state file {run.where}: {found}"
    return None


def untrusted_content(payload: dict[str, Any]) -> str | None:
    """What in a decoded payload (incremental chains loaded) only code would rebuild; None: it is all data."""
    try:
        keyed = payload.get("keyed")
        if isinstance(keyed, KeyedStateSnapshot) and (found := _opaque_in_keyed(keyed)):
            return found
        if isinstance(keyed, ChainRestore) and (found := _opaque_in_chain(keyed)):
            return found
    except UntrustedStateError as exc:
        return str(exc)
    op_state = payload.get("operator_state")
    if isinstance(op_state, OperatorStateSnapshot):
        for name, _, elements in op_state.states:
            for element in elements:
                if found := find_opaque(element):
                    return f"operator state '{name}': {found}"
    if payload.get("channel_state"):
        return (
            "in-flight records of an unaligned checkpoint, whose frames may hold pickled records "
            "(weir replays them only from checkpoints it can prove it wrote)"
        )
    return None


def untrusted_error(where: str, path: str, found: str) -> UntrustedStateError:
    """The one error for a state file that needs code to restore and whose origin is not proven."""
    from weir.checkpoint.trust import key_path

    return UntrustedStateError(
        f"{where}: state file {path} holds {found}. Its _metadata is not signed with your checkpoint "
        f"signing key ({key_path()}): it was made by another user or machine, or edited afterwards. "
        "Rebuilding that value would run code from the file, so nothing was restored. If you trust where "
        "it came from, restore with --allow-untrusted-pickle (configuration: "
        "weir.savepoint.allow-untrusted-pickle: true)"
    )


def load_payloads(
    metadata: CheckpointMetadata, read: Callable[[FileHandle], bytes], where: str, trusted: bool
) -> dict[str, list[dict[str, Any]]]:
    """Every operator's payloads of a checkpoint or savepoint, tagged with their subtask.

    ``read`` returns the verified bytes of one file; ``where`` names the checkpoint in errors.
    Incremental keyed state comes with the bytes of its chain; a window's native pane
    section is turned into canonical entries and timers (``weir.state.panes``). Unless ``trusted``, a file
    holding anything only code would rebuild fails with ``untrusted_error``."""
    from weir.state.panes import canonical_payload  # registers the native pane section's types

    state: dict[str, list[dict[str, Any]]] = {}
    for op in metadata.operators:
        for handle in op.state_handles:
            path = handle.file.path
            try:
                payload = decode_state_file(read(handle.file), f"{path} of {where}", trusted)
                canonical_payload(payload)  # a window's native pane section: entries and timers
                if payload["keyed"] is not None:
                    payload["keyed"] = load_for_restore(payload["keyed"], handle.shared_files, read)
                found = None if trusted else untrusted_content(payload)
            except UntrustedStateError as exc:
                found = str(exc)
            if found is not None:
                raise untrusted_error(where, path, found)
            payload["subtask"] = handle.subtask_index
            state.setdefault(op.operator_id, []).append(payload)
    return state

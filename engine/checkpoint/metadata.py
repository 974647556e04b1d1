"""The ``_metadata`` file of a completed checkpoint or savepoint: a versioned JSON format. Pure.

Theory of operation
-------------------
A checkpoint is a set of state files plus one ``_metadata`` file that lists
them. The storage layer writes every state file first and ``_metadata`` last,
atomically, so a checkpoint exists if and only if its ``_metadata`` parses
(Flink's ``Checkpoints.storeCheckpointMetadata``). This module defines what is
in that file and converts it to and from bytes; it does no I/O.

The format is JSON (UTF-8, keys sorted, so the same metadata always gives the
same bytes) -- never pickle: a metadata file must be readable by a later weir
and must not execute code when it is read.

Format, version 2::

    {
      "format": "weir-checkpoint-metadata",
      "format_version": 2,
      "checksum": "sha256:<64 hex>",                      # of the body (see Integrity)
      "signature": "hmac-sha256:<64 hex>" | null,
      "job_id": "<str>",
      "checkpoint_id": <int >= 0>,
      "timestamp_ms": <int >= 0>,
      "kind": "checkpoint" | "savepoint",
      "savepoint_format": null | "canonical" | "native",   # null iff kind == "checkpoint"
      "operators": [
        {
          "operator_id": "<str>",
          "parallelism": <int 1..max_parallelism>,
          "max_parallelism": <int 1..32768>,
          "state_handles": [
            {
              "subtask_index": <int 0..parallelism-1>,
              "state_kind": "keyed" | "operator" | "timers" | "channel",
              "key_group_range": [start, end] | null,       # required for keyed/timers, null otherwise
              "file": <file handle>,
              "shared_files": [<file handle>, ...]          # incremental state: files it reuses
            }, ...
          ],
          "source_positions": {"<subtask_index>": <any JSON>, ...}
        }, ...
      ]
    }

    <file handle> = {"path": "<posix path>", "shared": <bool>, "size_bytes": <int>, "sha256": "<64 hex>"}

File paths are relative, POSIX, without ``..``, and never start with ``.``
(temporary files do). For a checkpoint they are relative to the job's
checkpoint directory ``<root>/<job_id>``: a private file of checkpoint N is
``chk-N/<name>``, a shared file (incremental state, reused by later
checkpoints) is ``shared/<name>``. A savepoint is self-contained and
relocatable: its paths are relative to the savepoint directory and no file is
shared.

Integrity (version 2): ``checksum`` is ``"sha256:<hex>"`` of the *body* -- the document
without ``checksum`` and ``signature``, as compact JSON with sorted keys -- so an edit
or a damaged byte anywhere in the file is caught when it is read, even one that leaves
valid JSON. ``signature`` is ``"hmac-sha256:<hex>"`` of the checksum under a key only the
user who wrote the checkpoint holds (``weir.checkpoint.trust``), or null. The
state files' SHA-256s are inside the body, so a valid signature vouches for every
file of the checkpoint: only then may a restore unpickle the opaque values a state
file can hold (``weir.state.state_file``). Anyone can recompute a checksum;
nobody without the key can make a signature.

Compatibility: a reader accepts every ``format_version`` up to
``FORMAT_VERSION`` and rejects newer ones with a message that says which
versions it supports. Adding a field is a new version. Version 1 had no checksum
and no signature (its state files were pickled; they are listed, not restored).

What it does not do: read or write files (``weir.checkpoint.storage``),
decide which files a checkpoint needs (the coordinator and the backends).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from weir.errors import UsageError
from weir.keys.reference import UPPER_BOUND_MAX_PARALLELISM, KeyGroupRange

__all__ = [
    "CHECKPOINT",
    "FORMAT_MAGIC",
    "FORMAT_VERSION",
    "SAVEPOINT",
    "SAVEPOINT_FORMATS",
    "STATE_KINDS",
    "CheckpointMetadata",
    "FileHandle",
    "OperatorCheckpointState",
    "SubtaskStateHandle",
    "body_checksum",
    "parse",
    "serialize",
]

#: The version this weir writes; it reads 1..FORMAT_VERSION.
FORMAT_VERSION = 2
#: The value of the ``format`` field: what tells a metadata file from any other JSON file.
FORMAT_MAGIC = "weir-checkpoint-metadata"

CHECKPOINT = "checkpoint"
SAVEPOINT = "savepoint"
KINDS = (CHECKPOINT, SAVEPOINT)
#: canonical: backend-independent (``KeyedStateSnapshot``s); native: the backend's own files.
SAVEPOINT_FORMATS = ("canonical", "native")
STATE_KINDS = ("keyed", "operator", "timers", "channel")
#: state kinds that belong to key groups and so carry a key group range
KEYED_STATE_KINDS = ("keyed", "timers")

SHARED_DIR = "shared"

_SHA256 = re.compile(r"[0-9a-f]{64}")


def _check_int(what: str, value: object, minimum: int, maximum: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsageError(f"{what} must be an integer, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise UsageError(f"{what} must be {bound}, got {value}")


def check_relative_path(what: str, path: object) -> str:
    """``path`` if it is a safe relative POSIX path (no ``..``, not absolute, no hidden part)."""
    if not isinstance(path, str) or not path:
        raise UsageError(f"{what} must be a non-empty relative path, got {path!r}")
    parts = path.split("/")
    if (
        path.startswith("/")
        or "\\" in path
        or "\x00" in path
        or any(part in ("", ".", "..") or part.startswith(".") for part in parts)
    ):
        raise UsageError(
            f"{what} {path!r} is not a valid state file path: it must be relative, use '/', "
            "and have no empty, '.', '..' or hidden ('.'-prefixed) parts"
        )
    return path


@dataclass(frozen=True, slots=True)
class FileHandle:
    """One state file: where it is (relative, see the module docstring), its size and SHA-256."""

    path: str
    size_bytes: int
    sha256: str
    shared: bool = False

    def __post_init__(self) -> None:
        check_relative_path("state file path", self.path)
        _check_int(f"size_bytes of state file {self.path!r}", self.size_bytes, 0)
        if not isinstance(self.sha256, str) or not _SHA256.fullmatch(self.sha256):
            raise UsageError(
                f"sha256 of state file {self.path!r} must be 64 lowercase hex digits, got {self.sha256!r}"
            )
        if not isinstance(self.shared, bool):
            raise UsageError(
                f"'shared' of state file {self.path!r} must be true or false, got {self.shared!r}"
            )
        if self.shared and not self.path.startswith(SHARED_DIR + "/"):
            raise UsageError(f"shared state file {self.path!r} must be under '{SHARED_DIR}/'")

    @classmethod
    def of(cls, path: str, data: bytes | Sequence[bytes | memoryview], shared: bool = False) -> FileHandle:
        """The handle of ``data`` (or of its pieces one after another) stored at ``path`` (size
        and checksum computed here)."""
        if isinstance(data, bytes | bytearray | memoryview):
            return cls(path, len(data), hashlib.sha256(data).hexdigest(), shared)
        digest = hashlib.sha256()
        for part in data:
            digest.update(part)
        return cls(path, sum(memoryview(part).nbytes for part in data), digest.hexdigest(), shared)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "shared": self.shared,
            "size_bytes": self.size_bytes,
            "sha256": self.sha256,
        }


@dataclass(frozen=True, slots=True)
class SubtaskStateHandle:
    """One piece of one subtask's state: a file, what kind of state it holds, and what else it needs.

    ``shared_files`` are the files of incremental state that this piece reuses
    from earlier checkpoints (or uploaded for this one); they are counted by the
    shared state registry and deleted only when no retained checkpoint lists them.
    In a checkpoint they are shared files; in a (self-contained) native
    savepoint they are the savepoint's private copies.
    """

    subtask_index: int
    state_kind: str
    file: FileHandle
    key_group_range: KeyGroupRange | None = None
    shared_files: tuple[FileHandle, ...] = ()

    def __post_init__(self) -> None:
        _check_int("subtask_index", self.subtask_index, 0)
        if self.state_kind not in STATE_KINDS:
            raise UsageError(
                f"state handle of subtask {self.subtask_index}: state_kind must be one of "
                f"{', '.join(STATE_KINDS)}, got {self.state_kind!r}"
            )
        if not isinstance(self.file, FileHandle):
            raise UsageError(f"state handle of subtask {self.subtask_index}: file must be a FileHandle")
        if self.state_kind in KEYED_STATE_KINDS:
            if not isinstance(self.key_group_range, KeyGroupRange):
                raise UsageError(
                    f"{self.state_kind} state handle {self.file.path!r} of subtask {self.subtask_index} "
                    f"needs a key group range, got {self.key_group_range!r}"
                )
        elif self.key_group_range is not None:
            raise UsageError(
                f"{self.state_kind} state handle {self.file.path!r} of subtask {self.subtask_index} "
                f"has no key groups, but got key group range {self.key_group_range!r}"
            )
        object.__setattr__(self, "shared_files", tuple(self.shared_files))
        for f in self.shared_files:
            if not isinstance(f, FileHandle):
                raise UsageError(
                    f"state handle {self.file.path!r}: shared_files must be FileHandles, got {f!r}"
                )

    def files(self) -> tuple[FileHandle, ...]:
        return (self.file, *self.shared_files)

    def to_json(self) -> dict[str, Any]:
        kgr = self.key_group_range
        return {
            "subtask_index": self.subtask_index,
            "state_kind": self.state_kind,
            "key_group_range": None if kgr is None else [kgr.start_key_group, kgr.end_key_group],
            "file": self.file.to_json(),
            "shared_files": [f.to_json() for f in self.shared_files],
        }


@dataclass(frozen=True)
class OperatorCheckpointState:
    """What a checkpoint holds for one operator: its subtasks' state handles and source positions.

    ``source_positions`` maps a subtask index to an opaque JSON value (a
    source's split offsets); the storage layer does not look inside.
    """

    operator_id: str
    parallelism: int
    max_parallelism: int
    state_handles: tuple[SubtaskStateHandle, ...] = ()
    source_positions: Mapping[int, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.operator_id, str) or not self.operator_id:
            raise UsageError(f"operator_id must be a non-empty string, got {self.operator_id!r}")
        op = f"operator '{self.operator_id}'"
        _check_int(f"max_parallelism of {op}", self.max_parallelism, 1, UPPER_BOUND_MAX_PARALLELISM)
        _check_int(f"parallelism of {op}", self.parallelism, 1, self.max_parallelism)
        object.__setattr__(self, "state_handles", tuple(self.state_handles))
        for h in self.state_handles:
            if not isinstance(h, SubtaskStateHandle):
                raise UsageError(f"{op}: state_handles must be SubtaskStateHandles, got {h!r}")
            if h.subtask_index >= self.parallelism:
                raise UsageError(
                    f"{op}: state handle {h.file.path!r} belongs to subtask {h.subtask_index}, "
                    f"outside 0..{self.parallelism - 1} (parallelism {self.parallelism})"
                )
            kgr = h.key_group_range
            if kgr is not None and len(kgr) and kgr.end_key_group >= self.max_parallelism:
                raise UsageError(
                    f"{op}: state handle {h.file.path!r} has key group range {kgr}, "
                    f"beyond max_parallelism {self.max_parallelism}"
                )
        positions: dict[int, Any] = {}
        for index, position in dict(self.source_positions).items():
            _check_int(f"{op}: source position subtask index", index, 0, self.parallelism - 1)
            _check_json(f"{op}: source position of subtask {index}", position)
            positions[index] = position
        object.__setattr__(self, "source_positions", positions)

    def files(self) -> Iterator[FileHandle]:
        for h in self.state_handles:
            yield from h.files()

    def coverage_problem(self) -> str | None:
        """What is missing or doubled in the handles (None when whole): every subtask has its
        state once, and the keyed handles cover key groups ``0 .. max_parallelism - 1`` once."""
        op = f"operator '{self.operator_id}'"
        subtasks = {h.subtask_index for h in self.state_handles}
        if subtasks and subtasks != set(range(self.parallelism)):
            missing = sorted(set(range(self.parallelism)) - subtasks)
            return f"{op} has no state of subtask(s) {_ranges(missing)} at parallelism {self.parallelism}"
        keyed = sorted(
            (h.key_group_range for h in self.state_handles if h.state_kind == "keyed" and h.key_group_range),
            key=lambda r: r.start_key_group,
        )
        if not keyed:
            return None
        covered, expected = 0, 0
        for kgr in keyed:
            if kgr.start_key_group != expected:
                what = "missing" if kgr.start_key_group > expected else "held twice"
                lo, hi = sorted((expected, kgr.start_key_group))
                return f"{op}: key groups {lo}..{hi - 1} are {what} in its keyed state handles"
            expected = kgr.end_key_group + 1
            covered += len(kgr)
        if expected != self.max_parallelism:
            return (
                f"{op}: key groups {expected}..{self.max_parallelism - 1} are missing in its keyed state "
                f"handles (max parallelism {self.max_parallelism})"
            )
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "state_handles": [h.to_json() for h in self.state_handles],
            "source_positions": {str(i): p for i, p in sorted(self.source_positions.items())},
        }


@dataclass(frozen=True)
class CheckpointMetadata:
    """Everything needed to restore a job from a completed checkpoint or savepoint."""

    job_id: str
    checkpoint_id: int
    timestamp_ms: int
    operators: tuple[OperatorCheckpointState, ...] = ()
    kind: str = CHECKPOINT
    savepoint_format: str | None = None
    format_version: int = FORMAT_VERSION
    #: set by ``parse``: ``"sha256:..."`` of the body as read (None for version 1)
    checksum: str | None = field(default=None, compare=False)
    #: set by ``parse``: the signature as read, unverified (``weir.checkpoint.trust`` checks it)
    signature: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.job_id, str) or not self.job_id:
            raise UsageError(f"job_id must be a non-empty string, got {self.job_id!r}")
        _check_int("checkpoint_id", self.checkpoint_id, 0)
        _check_int("timestamp_ms", self.timestamp_ms, 0)
        _check_int("format_version", self.format_version, 1, FORMAT_VERSION)
        if self.kind not in KINDS:
            raise UsageError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.kind == SAVEPOINT and self.savepoint_format not in SAVEPOINT_FORMATS:
            raise UsageError(
                f"a savepoint needs savepoint_format {' or '.join(SAVEPOINT_FORMATS)}, got {self.savepoint_format!r}"
            )
        if self.kind == CHECKPOINT and self.savepoint_format is not None:
            raise UsageError(f"a checkpoint has no savepoint_format, got {self.savepoint_format!r}")
        object.__setattr__(self, "operators", tuple(self.operators))
        seen: set[str] = set()
        paths: dict[str, FileHandle] = {}
        private_prefix = f"chk-{self.checkpoint_id}/"
        for op in self.operators:
            if not isinstance(op, OperatorCheckpointState):
                raise UsageError(f"operators must be OperatorCheckpointStates, got {op!r}")
            if op.operator_id in seen:
                raise UsageError(
                    f"operator '{op.operator_id}' appears twice in checkpoint {self.checkpoint_id}"
                )
            seen.add(op.operator_id)
            for h in op.state_handles:
                for f in h.shared_files:
                    if self.kind == CHECKPOINT and not f.shared:
                        raise UsageError(
                            f"state handle {h.file.path!r} of checkpoint {self.checkpoint_id} lists "
                            f"{f.path!r} as incremental state, but it is not a shared file"
                        )
            for f in op.files():
                if self.kind == SAVEPOINT and f.shared:
                    raise UsageError(
                        f"savepoint {self.checkpoint_id} references shared file {f.path!r}: "
                        "a savepoint is self-contained and has no shared files"
                    )
                if self.kind == CHECKPOINT and not f.shared and not f.path.startswith(private_prefix):
                    raise UsageError(
                        f"private state file {f.path!r} of checkpoint {self.checkpoint_id} "
                        f"must be under '{private_prefix}'"
                    )
                other = paths.setdefault(f.path, f)
                if other != f:
                    raise UsageError(
                        f"state file {f.path!r} appears twice in checkpoint {self.checkpoint_id} "
                        f"with different size or checksum ({other.size_bytes} bytes {other.sha256[:12]}… "
                        f"vs {f.size_bytes} bytes {f.sha256[:12]}…)"
                    )

    # ------------------------------------------------------------------ queries

    def operator(self, operator_id: str) -> OperatorCheckpointState:
        for op in self.operators:
            if op.operator_id == operator_id:
                return op
        known = ", ".join(repr(op.operator_id) for op in self.operators) or "none"
        raise UsageError(f"checkpoint {self.checkpoint_id} has no operator {operator_id!r} (it has: {known})")

    def files(self) -> tuple[FileHandle, ...]:
        """Every distinct file the checkpoint needs, private and shared, sorted by path."""
        unique = {f.path: f for op in self.operators for f in op.files()}
        return tuple(unique[p] for p in sorted(unique))

    def private_files(self) -> tuple[FileHandle, ...]:
        return tuple(f for f in self.files() if not f.shared)

    def shared_files(self) -> tuple[FileHandle, ...]:
        return tuple(f for f in self.files() if f.shared)

    def size_bytes(self) -> int:
        """Bytes of state the checkpoint needs (shared files counted once)."""
        return sum(f.size_bytes for f in self.files())

    @property
    def is_savepoint(self) -> bool:
        return self.kind == SAVEPOINT

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT_MAGIC,
            "format_version": FORMAT_VERSION,
            "job_id": self.job_id,
            "checkpoint_id": self.checkpoint_id,
            "timestamp_ms": self.timestamp_ms,
            "kind": self.kind,
            "savepoint_format": self.savepoint_format,
            "operators": [op.to_json() for op in self.operators],
        }


def _ranges(indexes: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``"0-2, 5"``."""
    out: list[str] = []
    for i in sorted(set(indexes)):
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ", ".join(out) or "none"


def _check_json(what: str, value: Any) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise UsageError(
            f"{what} must be plain JSON (dict/list/str/int/float/bool/None), got {value!r}: {e}"
        ) from e


# ---------------------------------------------------------------------- bytes


_INTEGRITY_FIELDS = ("checksum", "signature")


def body_checksum(doc: Mapping[str, Any]) -> str:
    """``"sha256:<hex>"`` of ``doc`` without its integrity fields, as compact JSON with sorted keys."""
    body = {k: v for k, v in doc.items() if k not in _INTEGRITY_FIELDS}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def serialize(metadata: CheckpointMetadata, sign: Callable[[str], str] | None = None) -> bytes:
    """The bytes of ``metadata`` in the current format version (deterministic: keys sorted).

    ``sign`` turns the body's checksum into a signature (``weir.checkpoint.trust.sign``);
    without it the signature is null."""
    if not isinstance(metadata, CheckpointMetadata):
        raise UsageError(f"serialize needs a CheckpointMetadata, got {metadata!r}")
    doc = metadata.to_json()
    doc["checksum"] = body_checksum(doc)
    doc["signature"] = None if sign is None else sign(doc["checksum"])
    text = json.dumps(doc, sort_keys=True, indent=1, allow_nan=False, ensure_ascii=False)
    return (text + "\n").encode("utf-8")


class _Reader:
    """Reads fields of a decoded metadata document, naming the JSON path of what is wrong."""

    def __init__(self, where: str) -> None:
        self.where = where

    def error(self, path: str, problem: str) -> UsageError:
        return UsageError(
            f"checkpoint metadata {self.where}: {path}: {problem} "
            f"(this weir reads metadata format versions 1..{FORMAT_VERSION})"
        )

    def get(self, obj: Any, path: str, key: str, types: type | tuple[type, ...]) -> Any:
        if not isinstance(obj, dict):
            raise self.error(path, f"expected a JSON object, found {type(obj).__name__}")
        if key not in obj:
            raise self.error(f"{path}.{key}", "missing")
        value = obj[key]
        ok = isinstance(value, types) and not (isinstance(value, bool) and types in (int, (int,)))
        if not ok:
            expected = types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)
            raise self.error(f"{path}.{key}", f"expected {expected}, found {value!r}")
        return value


def parse(data: bytes, where: str) -> CheckpointMetadata:
    """The metadata in ``data`` (read from ``where``, named in errors).

    A truncated, malformed or newer-version file raises ``UsageError`` naming
    ``where``, the field that is wrong, and the versions this weir supports.
    """
    r = _Reader(where)
    if not data:
        raise r.error("file", "is empty (a checkpoint whose commit did not finish?)")
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise r.error(
            "file", f"is not UTF-8 text (byte {e.start}): not a weir metadata file, or corrupt"
        ) from e
    except json.JSONDecodeError as e:
        raise r.error(
            "file", f"is not valid JSON ({e.msg} at byte {e.pos} of {len(data)}): truncated or corrupt"
        ) from e
    if not isinstance(doc, dict):
        raise r.error("file", f"expected a JSON object, found {type(doc).__name__}")
    if doc.get("format") != FORMAT_MAGIC:
        raise r.error(
            "format", f"expected {FORMAT_MAGIC!r}, found {doc.get('format')!r}: not a weir metadata file"
        )
    version = r.get(doc, "$", "format_version", int)
    if version > FORMAT_VERSION:
        raise r.error(
            "format_version",
            f"{version} was written by a newer weir; upgrade weir to read it",
        )
    if version < 1:
        raise r.error("format_version", f"{version} is not a valid version")
    checksum = signature = None
    if version >= 2:
        checksum = r.get(doc, "$", "checksum", str)
        signature = r.get(doc, "$", "signature", (str, type(None)))
        actual = body_checksum(doc)
        if checksum != actual:
            raise r.error(
                "checksum",
                f"the file says {checksum}, its content hashes to {actual}: it was edited or damaged "
                "after it was written",
            )
    try:
        operators = []
        for i, op in enumerate(r.get(doc, "$", "operators", list)):
            operators.append(_parse_operator(r, op, f"operators[{i}]"))
        metadata = CheckpointMetadata(
            job_id=r.get(doc, "$", "job_id", str),
            checkpoint_id=r.get(doc, "$", "checkpoint_id", int),
            timestamp_ms=r.get(doc, "$", "timestamp_ms", int),
            operators=tuple(operators),
            kind=r.get(doc, "$", "kind", str),
            savepoint_format=r.get(doc, "$", "savepoint_format", (str, type(None))),
            format_version=version,
            checksum=checksum,
            signature=signature,
        )
    except UsageError as e:
        if str(e).startswith(f"checkpoint metadata {where}:"):
            raise
        raise r.error("$", str(e)) from e
    for op_state in metadata.operators:
        problem = op_state.coverage_problem()
        if problem is not None:
            raise r.error("operators", f"{problem}: the file is incomplete, restoring it would lose state")
    return metadata


def _parse_file(r: _Reader, obj: Any, path: str) -> FileHandle:
    try:
        return FileHandle(
            path=r.get(obj, path, "path", str),
            size_bytes=r.get(obj, path, "size_bytes", int),
            sha256=r.get(obj, path, "sha256", str),
            shared=r.get(obj, path, "shared", bool),
        )
    except UsageError as e:
        if str(e).startswith("checkpoint metadata"):
            raise
        raise r.error(path, str(e)) from e


def _parse_key_group_range(r: _Reader, value: Any, path: str) -> KeyGroupRange | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise r.error(path, f"expected [start, end] or null, found {value!r}")
    try:
        return KeyGroupRange(value[0], value[1])
    except UsageError as e:
        raise r.error(path, str(e)) from e


def _parse_handle(r: _Reader, obj: Any, path: str) -> SubtaskStateHandle:
    if not isinstance(obj, dict) or "key_group_range" not in obj:
        r.get(obj, path, "key_group_range", list)  # raises the right error
    shared = [
        _parse_file(r, f, f"{path}.shared_files[{j}]")
        for j, f in enumerate(r.get(obj, path, "shared_files", list))
    ]
    try:
        return SubtaskStateHandle(
            subtask_index=r.get(obj, path, "subtask_index", int),
            state_kind=r.get(obj, path, "state_kind", str),
            file=_parse_file(r, r.get(obj, path, "file", dict), f"{path}.file"),
            key_group_range=_parse_key_group_range(r, obj["key_group_range"], f"{path}.key_group_range"),
            shared_files=tuple(shared),
        )
    except UsageError as e:
        if str(e).startswith("checkpoint metadata"):
            raise
        raise r.error(path, str(e)) from e


def _parse_operator(r: _Reader, obj: Any, path: str) -> OperatorCheckpointState:
    handles = [
        _parse_handle(r, h, f"{path}.state_handles[{j}]")
        for j, h in enumerate(r.get(obj, path, "state_handles", list))
    ]
    positions: dict[int, Any] = {}
    for key, value in r.get(obj, path, "source_positions", dict).items():
        if not key.isdigit():
            raise r.error(f"{path}.source_positions", f"keys must be subtask indexes, found {key!r}")
        positions[int(key)] = value
    try:
        return OperatorCheckpointState(
            operator_id=r.get(obj, path, "operator_id", str),
            parallelism=r.get(obj, path, "parallelism", int),
            max_parallelism=r.get(obj, path, "max_parallelism", int),
            state_handles=tuple(handles),
            source_positions=positions,
        )
    except UsageError as e:
        if str(e).startswith("checkpoint metadata"):
            raise
        raise r.error(path, str(e)) from e

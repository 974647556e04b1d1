"""Checkpoint storage on a file system: Flink's directory layout, atomic commits, verified reads. I/O.

Layout (Flink's ``FsCheckpointStorageAccess``)::

    <root>/<job_id>/chk-<N>/_metadata     the commit point of checkpoint N
    <root>/<job_id>/chk-<N>/...           private files of checkpoint N
    <root>/<job_id>/shared/...            files of incremental state, shared by checkpoints
    <root>/<job_id>/taskowned/...         files owned by the tasks, never by a checkpoint

A savepoint is a self-contained directory chosen by the user (``_metadata``
plus every file it needs, paths relative to it); nothing here ever deletes one.

Durability and atomicity: every file is written to a temporary ``.``-prefixed
name in its final directory, fsynced, renamed into place, and the directory
fsynced. ``_metadata`` is written last, the same way, so **a checkpoint exists
if and only if its ``_metadata`` is complete**: a crash before the rename
leaves a directory with no (or only a temporary) ``_metadata``, which
``list_checkpoints`` reports as incomplete and ``latest_valid`` skips.
``discard`` removes ``_metadata`` first, so a crash in the middle of a discard
never leaves a valid-looking checkpoint with missing files.

``_metadata`` is signed with the user's key (``weir.checkpoint.trust``); recovery
(``load``, ``latest_valid``) takes only checkpoints whose signature verifies, so a
checkpoint somebody else wrote or edited is skipped like a damaged one.

Reads verify size and SHA-256 against the handle in the metadata; a missing
or damaged file raises ``CorruptCheckpointError`` naming the file, what was
expected and what was found, and ``latest_valid`` falls back to the previous
retained checkpoint, saying why.

Shared files are never deleted here directly: ``discard`` leaves ``shared/``
alone; the ``SharedStateRegistry`` decides when a shared file is unused and
calls ``delete_shared_file``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.checkpoint import trust
from weir.checkpoint.metadata import (
    CHECKPOINT,
    SAVEPOINT,
    SHARED_DIR,
    CheckpointMetadata,
    FileHandle,
    OperatorCheckpointState,
    SubtaskStateHandle,
    check_relative_path,
    parse,
    serialize,
)
from weir.checkpoint.registry import SharedStateRegistry
from weir.errors import UsageError

__all__ = [
    "METADATA_FILE_NAME",
    "CheckpointListing",
    "CheckpointStorage",
    "CorruptCheckpointError",
    "IncompleteCheckpoint",
    "LatestValid",
    "SkippedCheckpoint",
    "StateHandle",
    "describe",
    "load_savepoint",
    "read_savepoint_file",
    "write_savepoint",
]

METADATA_FILE_NAME = "_metadata"
TASK_OWNED_DIR = "taskowned"
CHECKPOINT_DIR_PREFIX = "chk-"
_CHECKPOINT_DIR = re.compile(r"chk-(\d+)")
_TEMP_SUFFIX = ".inprogress"

#: What ``write_state_file`` returns and ``read_state_file`` takes (the metadata's file handle).
StateHandle = FileHandle


class CorruptCheckpointError(UsageError):
    """A checkpoint or savepoint on disk is incomplete or damaged: a file is missing, truncated or altered."""


@dataclass(frozen=True, slots=True)
class IncompleteCheckpoint:
    """A ``chk-<N>`` directory without a usable ``_metadata``, and why."""

    checkpoint_id: int
    directory: Path
    reason: str


@dataclass(frozen=True, slots=True)
class CheckpointListing:
    """``completed``: checkpoints with a valid ``_metadata``, newest first; ``incomplete``: the others."""

    completed: tuple[CheckpointMetadata, ...]
    incomplete: tuple[IncompleteCheckpoint, ...]

    @property
    def checkpoint_ids(self) -> list[int]:
        return [m.checkpoint_id for m in self.completed]


@dataclass(frozen=True, slots=True)
class SkippedCheckpoint:
    checkpoint_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class LatestValid:
    """The newest checkpoint that is complete and intact (None if there is none), and the newer ones skipped."""

    metadata: CheckpointMetadata | None
    skipped: tuple[SkippedCheckpoint, ...]

    @property
    def reason(self) -> str | None:
        """Why newer checkpoints were not used (None when the newest one was)."""
        if not self.skipped:
            return None
        return "; ".join(f"checkpoint {s.checkpoint_id}: {s.reason}" for s in self.skipped)


# ---------------------------------------------------------------------- file primitives


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_dirs(directory: Path) -> None:
    """Create ``directory`` (and parents) durably: each new entry's parent is fsynced."""
    missing = []
    d = directory
    while not d.exists():
        missing.append(d)
        d = d.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            d.mkdir()
        _fsync_dir(d.parent)


def _atomic_write(path: Path, data: bytes | Sequence[bytes | memoryview]) -> None:
    """Write ``data`` (or its pieces, one after another) to ``path`` so that ``path`` is either
    absent/old or complete: temp, fsync, rename, fsync dir."""
    _make_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=_TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            for part in (data,) if isinstance(data, bytes) else data:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _check_file(base: Path, handle: FileHandle, checksum: bool) -> bytes | None:
    """Verify the file of ``handle`` under ``base``; its bytes when ``checksum`` (they were read anyway)."""
    path = base / handle.path
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise CorruptCheckpointError(
            f"state file {path} is missing: expected {handle.size_bytes} bytes with SHA-256 {handle.sha256}"
        ) from None
    except OSError as e:
        raise CorruptCheckpointError(f"state file {path} cannot be read: {e}") from e
    if size != handle.size_bytes:
        raise CorruptCheckpointError(
            f"state file {path} has the wrong size: expected {handle.size_bytes} bytes, found {size} "
            "(truncated or overwritten)"
        )
    if not checksum:
        return None
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CorruptCheckpointError(f"state file {path} cannot be read: {e}") from e
    digest = hashlib.sha256(data).hexdigest()
    if digest != handle.sha256:
        raise CorruptCheckpointError(
            f"state file {path} is corrupt: expected SHA-256 {handle.sha256}, found {digest} "
            f"({len(data)} bytes)"
        )
    return data


def _read_verified(base: Path, handle: FileHandle) -> bytes:
    data = _check_file(base, handle, checksum=True)
    assert data is not None
    return data


def _verify_all(base: Path, metadata: CheckpointMetadata, checksums: bool) -> None:
    for handle in metadata.files():
        _check_file(base, handle, checksums)


def _read_metadata(path: Path) -> CheckpointMetadata:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CorruptCheckpointError(f"{path} does not exist") from None
    except OSError as e:
        raise CorruptCheckpointError(f"{path} cannot be read: {e}") from e
    try:
        return parse(data, str(path))
    except CorruptCheckpointError:
        raise
    except UsageError as e:
        raise CorruptCheckpointError(str(e)) from e


def _check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not value or "/" in value or "\\" in value or value.startswith("."):
        raise UsageError(
            f"{what} must be a plain directory name (no '/', not starting with '.'), got {value!r}"
        )
    return value


def _check_checkpoint_id(checkpoint_id: object) -> int:
    if not isinstance(checkpoint_id, int) or isinstance(checkpoint_id, bool) or checkpoint_id < 0:
        raise UsageError(f"checkpoint_id must be an integer >= 0, got {checkpoint_id!r}")
    return checkpoint_id


# ---------------------------------------------------------------------- checkpoints


class CheckpointStorage:
    """The checkpoints of one job under ``<root>/<job_id>`` (layout in the module docstring)."""

    def __init__(self, root: Path | str, job_id: str) -> None:
        self.root = Path(root)
        self.job_id = _check_name("job_id", job_id)
        self.job_dir = self.root / job_id
        self.shared_dir = self.job_dir / SHARED_DIR
        self.taskowned_dir = self.job_dir / TASK_OWNED_DIR
        self._layout_made = False  # made by the first write: a job that never checkpoints costs no fsync

    def _ensure_layout(self) -> None:
        if not self._layout_made:
            _make_dirs(self.shared_dir)
            _make_dirs(self.taskowned_dir)
            self._layout_made = True

    def __repr__(self) -> str:
        return f"CheckpointStorage({str(self.job_dir)!r})"

    # ------------------------------------------------------------------ paths

    def checkpoint_dir(self, checkpoint_id: int) -> Path:
        return self.job_dir / f"{CHECKPOINT_DIR_PREFIX}{_check_checkpoint_id(checkpoint_id)}"

    def metadata_path(self, checkpoint_id: int) -> Path:
        return self.checkpoint_dir(checkpoint_id) / METADATA_FILE_NAME

    def is_complete(self, checkpoint_id: int) -> bool:
        """Whether ``checkpoint_id`` is committed and still retained: its ``_metadata`` exists (one stat).

        Incremental snapshots build only on complete checkpoints (``weir.state.incremental``).
        """
        return self.metadata_path(checkpoint_id).exists()

    def path_of(self, handle: FileHandle) -> Path:
        return self.job_dir / handle.path

    def _checkpoint_ids_on_disk(self) -> list[int]:
        """Ids of every ``chk-<N>`` directory, newest first."""
        if not self.job_dir.is_dir():
            return []
        ids = []
        for entry in self.job_dir.iterdir():
            m = _CHECKPOINT_DIR.fullmatch(entry.name)
            if m and entry.is_dir():
                ids.append(int(m.group(1)))
        return sorted(ids, reverse=True)

    # ------------------------------------------------------------------ state files

    def write_state_file(
        self, checkpoint_id: int, name: str, data: bytes | list[bytes | memoryview], shared: bool = False
    ) -> FileHandle:
        """Store ``data`` durably as a private file of ``checkpoint_id`` (or a shared file); its handle.
        ``data`` may be a list of pieces, written one after another (never copied together).

        A private file lands in ``chk-<checkpoint_id>/<name>``, a shared one in
        ``shared/<name>`` (``checkpoint_id`` only says who uploaded it; the
        registry tracks who uses it). A shared file is immutable: writing the
        same name again with the same bytes returns the existing handle, with
        other bytes is a ``UsageError``.
        """
        check_relative_path("state file name", name)
        if isinstance(data, list):
            if not all(isinstance(part, bytes | memoryview) for part in data):
                kinds = sorted({type(part).__name__ for part in data})
                raise UsageError(f"state file {name!r}: pieces must be bytes or memoryviews, got {kinds}")
        elif isinstance(data, bytes | bytearray | memoryview):
            data = bytes(data)
        else:
            raise UsageError(f"state file {name!r}: data must be bytes, got {type(data).__name__}")
        if shared:
            handle = FileHandle.of(f"{SHARED_DIR}/{name}", data, shared=True)
            path = self.path_of(handle)
            if path.exists():
                existing = hashlib.sha256(path.read_bytes()).hexdigest()
                if existing == handle.sha256:
                    return handle
                raise UsageError(
                    f"shared state file {path} already exists with other contents (SHA-256 {existing}, "
                    f"new {handle.sha256}): shared files are immutable, give new state a new name"
                )
        else:
            if name == METADATA_FILE_NAME:
                raise UsageError(f"state file name {name!r} is reserved for the checkpoint's metadata")
            if self.metadata_path(checkpoint_id).exists():
                raise UsageError(
                    f"checkpoint {checkpoint_id} of job {self.job_id} is already complete "
                    f"({self.metadata_path(checkpoint_id)} exists): its files cannot change"
                )
            handle = FileHandle.of(f"{CHECKPOINT_DIR_PREFIX}{checkpoint_id}/{name}", data)
            path = self.path_of(handle)
        self._ensure_layout()
        _atomic_write(path, data)
        return handle

    def read_state_file(self, handle: FileHandle) -> bytes:
        """The bytes of ``handle``'s file, after checking its size and SHA-256 (``CorruptCheckpointError``)."""
        return _read_verified(self.job_dir, handle)

    def list_shared_files(self) -> list[str]:
        """Every file under ``shared/`` as a handle path (``shared/<name>``), temporary files excluded."""
        if not self.shared_dir.is_dir():
            return []
        files = []
        for path in self.shared_dir.rglob("*"):
            rel = path.relative_to(self.shared_dir)
            if path.is_file() and not any(part.startswith(".") for part in rel.parts):
                files.append(f"{SHARED_DIR}/{rel.as_posix()}")
        return sorted(files)

    def delete_shared_file(self, path: str) -> None:
        """Delete one shared file (``shared/<name>``); the registry's delete callback. Missing is fine."""
        check_relative_path("shared file path", path)
        if not path.startswith(SHARED_DIR + "/"):
            raise UsageError(f"{path!r} is not a shared file: shared files are under '{SHARED_DIR}/'")
        with contextlib.suppress(FileNotFoundError):
            (self.job_dir / path).unlink()

    # ------------------------------------------------------------------ metadata: the commit point

    def write_metadata(self, checkpoint_id: int, metadata: CheckpointMetadata) -> Path:
        """Commit ``checkpoint_id``: write its ``_metadata`` atomically and durably; the path written.

        Refuses metadata of another job or checkpoint, a savepoint, a
        checkpoint that is already complete, and metadata that references a
        file that is missing or has the wrong size.
        """
        _check_checkpoint_id(checkpoint_id)
        if not isinstance(metadata, CheckpointMetadata):
            raise UsageError(f"write_metadata needs a CheckpointMetadata, got {metadata!r}")
        if metadata.kind != CHECKPOINT:
            raise UsageError(
                f"write_metadata writes checkpoints, got a {metadata.kind}; use write_savepoint for savepoints"
            )
        if metadata.job_id != self.job_id or metadata.checkpoint_id != checkpoint_id:
            raise UsageError(
                f"metadata of job {metadata.job_id} checkpoint {metadata.checkpoint_id} cannot be written as "
                f"job {self.job_id} checkpoint {checkpoint_id}"
            )
        path = self.metadata_path(checkpoint_id)
        if path.exists():
            raise UsageError(
                f"checkpoint {checkpoint_id} of job {self.job_id} is already complete: {path} exists"
            )
        try:
            _verify_all(self.job_dir, metadata, checksums=False)
        except CorruptCheckpointError as e:
            raise UsageError(
                f"refusing to commit checkpoint {checkpoint_id} of job {self.job_id}: {e}"
            ) from e
        self._ensure_layout()
        _atomic_write(path, serialize(metadata, sign=trust.sign))
        return path

    # ------------------------------------------------------------------ reading checkpoints

    def _load_unchecked_files(self, checkpoint_id: int) -> CheckpointMetadata:
        path = self.metadata_path(checkpoint_id)
        if not path.exists():
            temps = (
                list(path.parent.glob(f".{METADATA_FILE_NAME}.*{_TEMP_SUFFIX}"))
                if path.parent.is_dir()
                else []
            )
            if temps:
                raise CorruptCheckpointError(
                    f"checkpoint {checkpoint_id} of job {self.job_id} is incomplete: {path} was never "
                    f"committed (only the partial temporary file {temps[0].name} exists: a crash during the commit)"
                )
            raise CorruptCheckpointError(
                f"checkpoint {checkpoint_id} of job {self.job_id} is incomplete: {path} does not exist "
                "(the checkpoint was aborted, or the job stopped before it completed)"
            )
        metadata = _read_metadata(path)
        if (
            metadata.kind != CHECKPOINT
            or metadata.job_id != self.job_id
            or metadata.checkpoint_id != checkpoint_id
        ):
            raise CorruptCheckpointError(
                f"{path} describes {metadata.kind} {metadata.checkpoint_id} of job {metadata.job_id}, "
                f"expected checkpoint {checkpoint_id} of job {self.job_id}"
            )
        return metadata

    def load(
        self, checkpoint_id: int, verify_checksums: bool = False, require_signature: bool = True
    ) -> CheckpointMetadata:
        """The metadata of a completed checkpoint, after checking that its files exist with the right sizes.

        ``CorruptCheckpointError`` when the checkpoint is incomplete or damaged;
        ``UsageError`` when there is no such checkpoint directory.
        """
        directory = self.checkpoint_dir(checkpoint_id)
        if not directory.is_dir():
            known = self._checkpoint_ids_on_disk()
            raise UsageError(
                f"job {self.job_id} has no checkpoint {checkpoint_id} under {self.job_dir} (found: {known})"
            )
        metadata = self._load_unchecked_files(checkpoint_id)
        if require_signature and not trust.is_signed_by_this_user(metadata):
            raise CorruptCheckpointError(
                f"{self.metadata_path(checkpoint_id)} is not signed with your checkpoint signing key "
                f"({trust.key_path()}): it was written by another user or weir, or edited afterwards, so "
                "recovery does not use it (restore it explicitly with `weir run -s` if you trust it)"
            )
        _verify_all(self.job_dir, metadata, verify_checksums)
        return metadata

    def verify(self, metadata: CheckpointMetadata, checksums: bool = True) -> None:
        """Raise ``CorruptCheckpointError`` unless every file of ``metadata`` is present and intact."""
        _verify_all(self.job_dir, metadata, checksums)

    def list_checkpoints(self) -> CheckpointListing:
        """Completed checkpoints (valid ``_metadata``), newest first, and the incomplete ones with the reason."""
        completed = []
        incomplete = []
        for checkpoint_id in self._checkpoint_ids_on_disk():
            try:
                completed.append(self._load_unchecked_files(checkpoint_id))
            except CorruptCheckpointError as e:
                incomplete.append(
                    IncompleteCheckpoint(checkpoint_id, self.checkpoint_dir(checkpoint_id), str(e))
                )
        return CheckpointListing(tuple(completed), tuple(incomplete))

    def latest_valid(self, verify_checksums: bool = True, require_signature: bool = True) -> LatestValid:
        """The newest checkpoint whose metadata and files are intact; newer ones skipped, with the reason."""
        skipped = []
        for checkpoint_id in self._checkpoint_ids_on_disk():
            try:
                metadata = self.load(checkpoint_id, verify_checksums, require_signature)
            except CorruptCheckpointError as e:
                skipped.append(SkippedCheckpoint(checkpoint_id, str(e)))
                continue
            return LatestValid(metadata, tuple(skipped))
        return LatestValid(None, tuple(skipped))

    # ------------------------------------------------------------------ cleanup

    def discard(self, checkpoint_id: int, missing_ok: bool = False) -> None:
        """Remove a checkpoint's ``_metadata`` (first) and private files; shared files stay (see the registry)."""
        directory = self.checkpoint_dir(checkpoint_id)
        if not directory.is_dir():
            if missing_ok:
                return
            raise UsageError(
                f"job {self.job_id} has no checkpoint {checkpoint_id} to discard "
                f"(found: {self._checkpoint_ids_on_disk()})"
            )
        metadata = directory / METADATA_FILE_NAME
        if metadata.exists():
            metadata.unlink()
            _fsync_dir(directory)
        shutil.rmtree(directory)
        _fsync_dir(self.job_dir)

    def shared_state_registry(self) -> SharedStateRegistry:
        """A registry holding every completed checkpoint's shared files, deleting through this storage.

        What a restarted job manager builds on recovery; ``unused_files(list_shared_files())``
        then names the orphans.
        """
        registry = SharedStateRegistry(delete=self.delete_shared_file)
        for metadata in self.list_checkpoints().completed:
            registry.register(metadata.checkpoint_id, [f.path for f in metadata.shared_files()])
        return registry

    # ------------------------------------------------------------------ savepoints

    def _check_outside(self, target_dir: Path) -> None:
        target = Path(target_dir).resolve()
        job_dir = self.job_dir.resolve()
        if target == job_dir or job_dir in target.parents:
            raise UsageError(
                f"savepoint directory {target_dir} is inside the checkpoint directory {self.job_dir}; "
                "savepoints are never cleaned up automatically, so they must live outside it"
            )

    def write_savepoint(
        self, target_dir: Path | str, metadata: CheckpointMetadata, files: Mapping[str, bytes]
    ) -> Path:
        """Write a self-contained savepoint to ``target_dir`` (see ``write_savepoint``)."""
        self._check_outside(Path(target_dir))
        if metadata.job_id != self.job_id:
            raise UsageError(
                f"savepoint of job {metadata.job_id} cannot be written by the storage of job {self.job_id}"
            )
        return write_savepoint(target_dir, metadata, files)

    def savepoint_from_checkpoint(
        self, checkpoint_id: int, target_dir: Path | str, timestamp_ms: int
    ) -> Path:
        """Copy a completed checkpoint into a self-contained native savepoint (files verified while copied)."""
        return self.savepoint_from_metadata(self.load(checkpoint_id), target_dir, timestamp_ms, "native")

    def savepoint_from_metadata(
        self, source: CheckpointMetadata, target_dir: Path | str, timestamp_ms: int, savepoint_format: str
    ) -> Path:
        """Copy the files ``source`` (checkpoint metadata, written or not) references into a
        self-contained savepoint at ``target_dir``; files are verified while copied."""
        self._check_outside(Path(target_dir))
        checkpoint_id = source.checkpoint_id
        private_prefix = f"{CHECKPOINT_DIR_PREFIX}{checkpoint_id}/"
        renamed: dict[str, FileHandle] = {}
        files: dict[str, bytes] = {}
        for handle in source.files():
            path = handle.path.removeprefix(private_prefix) if not handle.shared else handle.path
            if path in files:
                raise UsageError(f"savepoint of checkpoint {checkpoint_id}: two files map to {path!r}")
            files[path] = self.read_state_file(handle)
            renamed[handle.path] = FileHandle(path, handle.size_bytes, handle.sha256, shared=False)

        def move(h: SubtaskStateHandle) -> SubtaskStateHandle:
            return SubtaskStateHandle(
                h.subtask_index,
                h.state_kind,
                renamed[h.file.path],
                h.key_group_range,
                tuple(renamed[f.path] for f in h.shared_files),
            )

        operators = tuple(
            OperatorCheckpointState(
                op.operator_id,
                op.parallelism,
                op.max_parallelism,
                tuple(move(h) for h in op.state_handles),
                op.source_positions,
            )
            for op in source.operators
        )
        metadata = CheckpointMetadata(
            job_id=self.job_id,
            checkpoint_id=checkpoint_id,
            timestamp_ms=timestamp_ms,
            operators=operators,
            kind=SAVEPOINT,
            savepoint_format=savepoint_format,
        )
        return write_savepoint(target_dir, metadata, files)

    def load_savepoint(self, path: Path | str) -> CheckpointMetadata:
        return load_savepoint(path)


# ---------------------------------------------------------------------- savepoints


def write_savepoint(target_dir: Path | str, metadata: CheckpointMetadata, files: Mapping[str, bytes]) -> Path:
    """Write a savepoint: every file of ``files`` (path relative to ``target_dir`` -> bytes), then ``_metadata``.

    ``files`` must hold exactly the files ``metadata`` references, with the
    sizes and checksums it records. ``target_dir`` must not already hold a
    savepoint. The result is relocatable: it can be moved or copied as a whole.
    """
    target = Path(target_dir)
    if not isinstance(metadata, CheckpointMetadata) or metadata.kind != SAVEPOINT:
        raise UsageError(f"write_savepoint needs savepoint metadata (kind 'savepoint'), got {metadata!r}")
    if (target / METADATA_FILE_NAME).exists():
        raise UsageError(f"{target} already holds a savepoint; a savepoint is never overwritten")
    handles = {h.path: h for h in metadata.files()}
    missing = sorted(set(handles) - set(files))
    extra = sorted(set(files) - set(handles))
    if missing or extra:
        raise UsageError(
            f"savepoint {target}: the files given do not match the metadata "
            f"(referenced but not given: {missing}; given but not referenced: {extra})"
        )
    for path, data in files.items():
        handle = FileHandle.of(path, bytes(data))
        expected = handles[path]
        if (handle.size_bytes, handle.sha256) != (expected.size_bytes, expected.sha256):
            raise UsageError(
                f"savepoint {target}: file {path!r} does not match its handle: expected {expected.size_bytes} "
                f"bytes SHA-256 {expected.sha256}, given {handle.size_bytes} bytes SHA-256 {handle.sha256}"
            )
    for path, data in sorted(files.items()):
        _atomic_write(target / path, bytes(data))
    _atomic_write(target / METADATA_FILE_NAME, serialize(metadata, sign=trust.sign))
    return target


def _savepoint_dir(path: Path | str) -> Path:
    p = Path(path)
    return p.parent if p.name == METADATA_FILE_NAME else p


def load_savepoint(path: Path | str, verify_checksums: bool = False) -> CheckpointMetadata:
    """The metadata of the savepoint at ``path`` (its directory or its ``_metadata``), files checked."""
    directory = _savepoint_dir(path)
    if not directory.is_dir():
        raise UsageError(
            f"savepoint {directory} does not exist (expected a directory holding {METADATA_FILE_NAME})"
        )
    metadata = _read_metadata(directory / METADATA_FILE_NAME)
    if metadata.kind != SAVEPOINT:
        raise UsageError(
            f"{directory} holds checkpoint {metadata.checkpoint_id} of job {metadata.job_id}, not a savepoint; "
            "a job resumes from it with `weir run -s` (execution.savepoint.path) as from a savepoint"
        )
    _verify_all(directory, metadata, verify_checksums)
    return metadata


def read_savepoint_file(path: Path | str, handle: FileHandle) -> bytes:
    """The verified bytes of one file of the savepoint at ``path``."""
    return _read_verified(_savepoint_dir(path), handle)


# ---------------------------------------------------------------------- listing


def _dir_usage(directory: Path) -> tuple[int, int]:
    size = files = 0
    for p in directory.rglob("*"):
        if p.is_file():
            files += 1
            size += p.stat().st_size
    return size, files


def _describe_one(metadata_dir: Path, job_hint: str | None, verify_checksums: bool) -> dict[str, Any]:
    m = _CHECKPOINT_DIR.fullmatch(metadata_dir.name)
    entry: dict[str, Any] = {
        "path": str(metadata_dir),
        "job_id": job_hint,
        "id": int(m.group(1)) if m else None,
        "kind": CHECKPOINT if m else SAVEPOINT,
        "format": None,
        "timestamp_ms": None,
        "size_bytes": 0,
        "files": 0,
        "status": "valid",
        "reason": None,
    }
    metadata_path = metadata_dir / METADATA_FILE_NAME
    if not metadata_path.exists():
        entry["size_bytes"], entry["files"] = _dir_usage(metadata_dir)
        entry["status"] = "incomplete"
        entry["reason"] = f"no {METADATA_FILE_NAME}: the checkpoint never completed"
        return entry
    try:
        metadata = _read_metadata(metadata_path)
    except CorruptCheckpointError as e:
        entry["size_bytes"], entry["files"] = _dir_usage(metadata_dir)
        entry["status"] = "corrupt"
        entry["reason"] = str(e)
        return entry
    entry.update(
        job_id=metadata.job_id,
        id=metadata.checkpoint_id,
        kind=metadata.kind,
        format=metadata.savepoint_format,
        timestamp_ms=metadata.timestamp_ms,
        size_bytes=metadata.size_bytes(),
        files=len(metadata.files()),
    )
    base = metadata_dir.parent if metadata.kind == CHECKPOINT else metadata_dir
    try:
        _verify_all(base, metadata, verify_checksums)
    except CorruptCheckpointError as e:
        entry["status"] = "corrupt"
        entry["reason"] = str(e)
    return entry


def describe(root: Path | str, verify_checksums: bool = False) -> list[dict[str, Any]]:
    """One dict per checkpoint or savepoint found under ``root`` (for ``weir checkpoints DIR``).

    ``root`` may be a checkpoint root (``<root>/<job_id>/chk-<N>``), one job's
    directory, a savepoint directory, or a directory of savepoints. Keys:
    ``path, job_id, id, kind, format, timestamp_ms, size_bytes, files,
    status`` ("valid" | "corrupt" | "incomplete") and ``reason``. Sorted by
    job, then newest first. Sizes are checked always, checksums on request.
    """
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory of checkpoints or savepoints")
    entries: list[dict[str, Any]] = []

    def visit(directory: Path, depth: int) -> None:
        if (directory / METADATA_FILE_NAME).exists() and not _CHECKPOINT_DIR.fullmatch(directory.name):
            entries.append(_describe_one(directory, None, verify_checksums))
            return
        children = sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
        checkpoints = [p for p in children if _CHECKPOINT_DIR.fullmatch(p.name)]
        for p in checkpoints:
            entries.append(_describe_one(p, directory.name, verify_checksums))
        if checkpoints or depth >= 2:
            return
        for p in children:
            if p.name not in (SHARED_DIR, TASK_OWNED_DIR):
                visit(p, depth + 1)

    visit(root, 0)
    entries.sort(key=lambda e: (e["job_id"] or "", -(e["id"] if e["id"] is not None else -1), e["path"]))
    return entries

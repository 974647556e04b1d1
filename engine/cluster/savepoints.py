"""Savepoints in the runtime: where they go, and how a job starts from one.

Theory of operation
-------------------
A savepoint is a checkpoint the user asked for: the coordinator triggers it like any
other (always aligned), the tasks write their files into the checkpoint storage as
usual, and when every task has acknowledged, the driver copies the files into a
self-contained directory ``savepoint-<job id prefix>-<random>`` under the target
directory, writes ``_metadata`` there last (kind ``savepoint``) and removes the
temporary checkpoint files. A savepoint belongs to the user: weir never deletes it.

Formats: ``canonical`` holds keyed state in weir's backend-independent snapshot form
(``KeyedStateSnapshot``), so a heap savepoint restores on LMDB and back. ``native`` keeps
each backend's own checkpoint form: for LMDB with incremental checkpoints that is its
chain of immutable run files (copied into the savepoint, so it is self-contained);
backends without a native form write the canonical one. A native chain still restores
on any backend at any parallelism: it is folded into key groups on restore.

Restoring (``execution.savepoint.path``, ``weir run --from-savepoint``/``-s``; a retained
checkpoint restores the same way, ``open_restore_point``): the savepoint's files are read (checksums verified) into one payload per old subtask, tagged with the
old subtask index. Each new task then takes what is its own: the key groups of its
range, its share of the operator list state, its splits of the sources (the task does
that, ``Task._restore``), so any new parallelism works while max parallelism stays.
State of an operator the new job does not have fails the restore, naming the operator,
unless ``allow_non_restored_state`` is set; operators without state are ignored.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.checkpoint.metadata import CheckpointMetadata, FileHandle
from weir.checkpoint.storage import (
    METADATA_FILE_NAME,
    CheckpointStorage,
    load_savepoint,
    read_savepoint_file,
)
from weir.checkpoint.trust import is_signed_by_this_user
from weir.errors import UsageError
from weir.graph.job_graph import JobGraph
from weir.state.state_file import load_payloads

_CHECKPOINT_DIR_NAME = re.compile(r"chk-(\d+)")

__all__ = [
    "SavepointRestoreSettings",
    "check_savepoint_matches_job",
    "load_savepoint_restore_state",
    "new_savepoint_dir",
    "open_restore_point",
    "resume_paths",
]


@dataclass(frozen=True)
class SavepointRestoreSettings:
    """Where a job starts from (Flink's SavepointRestoreSettings)."""

    path: str
    allow_non_restored_state: bool = False
    #: unpickle opaque values even when the savepoint's signature does not verify (a named risk)
    allow_untrusted_pickle: bool = False

    @classmethod
    def from_configuration(cls, conf: Any) -> SavepointRestoreSettings | None:
        from weir.common import config_options as o

        path = conf.get_option(o.SAVEPOINT_PATH)
        if not path:
            return None
        return cls(
            str(path),
            bool(conf.get_option(o.SAVEPOINT_IGNORE_UNCLAIMED_STATE)),
            bool(conf.get_option(o.SAVEPOINT_ALLOW_UNTRUSTED_PICKLE)),
        )


def new_savepoint_dir(root: Path | str, job_id: str) -> Path:
    """A fresh directory name for a savepoint of ``job_id`` under ``root`` (Flink's naming)."""
    return Path(root) / f"savepoint-{job_id[:6]}-{secrets.token_hex(6)}"


def _has_state(payload: dict[str, Any]) -> bool:
    return any(payload.get(k) is not None for k in ("keyed", "timers", "operator_state", "source_position"))


def check_savepoint_matches_job(
    path: str, metadata: CheckpointMetadata, payloads: dict[str, list[dict[str, Any]]], job_graph: JobGraph,
    allow_non_restored_state: bool,
) -> None:  # fmt: skip
    """Fail with one clear error when the job cannot take the savepoint's state."""
    operators = {op.id: op for v in job_graph.vertices for op in v.operators}
    unclaimed = []
    for op_state in metadata.operators:
        if not any(_has_state(p) for p in payloads.get(op_state.operator_id, [])):
            continue
        op = operators.get(op_state.operator_id)
        if op is None:
            unclaimed.append(op_state.operator_id)
            continue
        keyed = any(p.get("keyed") is not None or p.get("timers") is not None
                    for p in payloads[op_state.operator_id])  # fmt: skip
        if keyed and op.max_parallelism != op_state.max_parallelism:
            raise UsageError(
                f"savepoint {path}: operator '{op.name}' ({op.id}) has keyed state for max parallelism "
                f"{op_state.max_parallelism}, but the job gives it max parallelism {op.max_parallelism}; "
                "key groups cannot be reassigned across max parallelism: set "
                f".set_max_parallelism({op_state.max_parallelism}) on it"
            )
    if unclaimed and not allow_non_restored_state:
        ids = ", ".join(unclaimed)
        raise UsageError(
            f"savepoint {path} holds state of operator(s) {ids} that the job does not have (a uid changed "
            "or an operator was removed); give the operators their old uid(), or skip that state with "
            "allow_non_restored_state (weir run --allow-non-restored-state, "
            "execution.savepoint.ignore-unclaimed-state: true)"
        )


def open_restore_point(path: str | Path) -> tuple[CheckpointMetadata, Callable[[FileHandle], bytes]]:
    """The metadata of what ``path`` names and a reader of its files (checksums verified):

    - a savepoint (its directory or its ``_metadata``);
    - a retained checkpoint, ``<root>/<job id>/chk-<N>`` (or its ``_metadata``): Flink's
      ``-s`` takes it as it takes a savepoint; its files stay where they are, the job only reads
      them (the restored job writes its own checkpoints under its own job id);
    - a job's checkpoint directory, ``<root>/<job id>``: its newest complete and intact checkpoint.
    """
    given = Path(path)
    directory = given.parent if given.name == METADATA_FILE_NAME else given
    if not directory.is_dir():
        raise UsageError(
            f"{path} does not exist; give a savepoint directory, a retained checkpoint "
            "(<checkpoint dir>/<job id>/chk-<N>) or a job's checkpoint directory (<checkpoint dir>/<job id>)"
        )
    match = _CHECKPOINT_DIR_NAME.fullmatch(directory.name)
    if match is not None:
        storage = CheckpointStorage(directory.parent.parent, directory.parent.name)
        return storage.load(int(match.group(1)), require_signature=False), storage.read_state_file
    if (directory / METADATA_FILE_NAME).exists():
        return load_savepoint(directory), lambda handle: read_savepoint_file(directory, handle)
    storage = CheckpointStorage(directory.parent, directory.name)
    latest = storage.latest_valid(require_signature=False)
    if latest.metadata is None:
        why = f" ({latest.reason})" if latest.reason else ""
        raise UsageError(
            f"{path} holds no savepoint and no complete checkpoint{why}; give a savepoint directory, "
            "a retained checkpoint (<checkpoint dir>/<job id>/chk-<N>) or a job's checkpoint directory"
        )
    return latest.metadata, storage.read_state_file


def resume_paths(entries: list[dict[str, Any]]) -> dict[str, str]:
    """Job id -> the path of its newest valid checkpoint (``describe`` lists newest first)."""
    resume: dict[str, str] = {}
    for e in entries:
        if e["kind"] == "checkpoint" and e["status"] == "valid" and e["job_id"]:
            resume.setdefault(e["job_id"], e["path"])
    return resume


def _check_channel_state(
    path: str, metadata: CheckpointMetadata, payloads: dict[str, list[dict[str, Any]]], job_graph: JobGraph
) -> None:
    """In-flight data of an unaligned checkpoint restores only at the parallelism it was taken at."""
    parallelism = {op.id: v.parallelism for v in job_graph.vertices for op in v.operators}
    for op_state in metadata.operators:
        has_channel_state = any(
            p.get("channel_state") is not None for p in payloads.get(op_state.operator_id, [])
        )
        new = parallelism.get(op_state.operator_id)
        if has_channel_state and new is not None and new != op_state.parallelism:
            raise UsageError(
                f"{path} is an unaligned checkpoint with in-flight data of operator {op_state.operator_id} "
                f"at parallelism {op_state.parallelism}; it restores only at that parallelism, not {new} "
                "(take a savepoint to rescale)"
            )


def load_savepoint_restore_state(
    path: str,
    job_graph: JobGraph,
    allow_non_restored_state: bool = False,
    allow_untrusted_pickle: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """Every operator's payloads from the savepoint or retained checkpoint at ``path``
    (``open_restore_point``), checked against ``job_graph``. Runs in a worker thread (it reads files).

    Opaque (pickled) values are rebuilt only when the savepoint is signed by this user's
    weir or ``allow_untrusted_pickle`` accepts the risk; otherwise a state file that holds
    one fails the restore with an error naming it, before anything is unpickled."""
    metadata, read = open_restore_point(path)
    trusted = allow_untrusted_pickle or is_signed_by_this_user(metadata)
    payloads = load_payloads(metadata, read, f"savepoint {path}", trusted)
    check_savepoint_matches_job(path, metadata, payloads, job_graph, allow_non_restored_state)
    _check_channel_state(path, metadata, payloads, job_graph)
    known = {op.id for v in job_graph.vertices for op in v.operators}
    return {op_id: items for op_id, items in payloads.items() if op_id in known}

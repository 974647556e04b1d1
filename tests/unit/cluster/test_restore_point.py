"""What `weir run -s PATH` restores: a savepoint, a retained checkpoint, or a job's latest one."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.checkpoint.metadata import CheckpointMetadata, OperatorCheckpointState, SubtaskStateHandle
from weir.checkpoint.storage import CheckpointStorage, CorruptCheckpointError
from weir.cluster.savepoints import open_restore_point, resume_paths
from weir.errors import UsageError


def checkpoint(storage: CheckpointStorage, checkpoint_id: int, data: bytes) -> None:
    handle = storage.write_state_file(checkpoint_id, "op-0.state", data)
    operator = OperatorCheckpointState("op", 1, 128, (SubtaskStateHandle(0, "operator", handle),), {})
    metadata = CheckpointMetadata(
        job_id=storage.job_id, checkpoint_id=checkpoint_id, timestamp_ms=0, operators=(operator,)
    )
    storage.write_metadata(checkpoint_id, metadata)


def read_all(path: Path | str) -> tuple[int, list[bytes]]:
    metadata, read = open_restore_point(path)
    return metadata.checkpoint_id, [read(h.file) for op in metadata.operators for h in op.state_handles]


def test_a_retained_checkpoint_is_restored_by_its_directory_its_metadata_or_its_job(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, "job")
    checkpoint(storage, 1, b"one")
    checkpoint(storage, 2, b"two")
    storage.checkpoint_dir(3).mkdir()  # the process died before checkpoint 3 completed
    assert read_all(storage.checkpoint_dir(1)) == (1, [b"one"])
    assert read_all(storage.metadata_path(2)) == (2, [b"two"])
    assert read_all(storage.job_dir) == (2, [b"two"])  # the newest complete one
    (storage.checkpoint_dir(2) / "op-0.state").write_bytes(b"tw0")  # damaged: the job dir falls back
    assert read_all(storage.job_dir) == (1, [b"one"])
    with pytest.raises(CorruptCheckpointError, match="is corrupt"):
        read_all(storage.checkpoint_dir(2))
    with pytest.raises(CorruptCheckpointError, match="incomplete"):
        open_restore_point(storage.checkpoint_dir(3))


def test_paths_that_hold_nothing_to_restore_get_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist; give a savepoint directory, a retained checkpoint"):
        open_restore_point(tmp_path / "nowhere")
    (tmp_path / "job" / "chk-1").mkdir(parents=True)
    with pytest.raises(UsageError, match="holds no savepoint and no complete checkpoint"):
        open_restore_point(tmp_path / "job")


def test_resume_paths_name_each_jobs_newest_valid_checkpoint() -> None:
    entries = [
        {"job_id": "a", "kind": "checkpoint", "status": "corrupt", "path": "a/chk-3"},
        {"job_id": "a", "kind": "checkpoint", "status": "valid", "path": "a/chk-2"},
        {"job_id": "a", "kind": "checkpoint", "status": "valid", "path": "a/chk-1"},
        {"job_id": None, "kind": "savepoint", "status": "valid", "path": "sp"},
    ]
    assert resume_paths(entries) == {"a": "a/chk-2"}

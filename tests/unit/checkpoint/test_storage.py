"""Checkpoint storage on real files: layout, atomic commit, verified reads, fallback, savepoints, listing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from weir.checkpoint.metadata import (
    CheckpointMetadata,
    FileHandle,
    OperatorCheckpointState,
    SubtaskStateHandle,
    serialize,
)
from weir.checkpoint.storage import (
    CheckpointStorage,
    CorruptCheckpointError,
    describe,
    load_savepoint,
    read_savepoint_file,
    write_savepoint,
)
from weir.datastream.state import ValueStateDescriptor
from weir.errors import UsageError
from weir.keys.reference import KeyGroupRange
from weir.state import HeapKeyedStateBackend
from weir.state.state_file import decode_state_file, encode_state_file

JOB = "job-1"


def _take_checkpoint(
    storage: CheckpointStorage,
    checkpoint_id: int,
    payload: bytes | None = None,
    shared: tuple[str, ...] = (),
    commit: bool = True,
) -> CheckpointMetadata:
    """Write one keyed and one operator state file (plus shared files) and, if ``commit``, the metadata."""
    keyed = storage.write_state_file(
        checkpoint_id, "op-0-keyed", payload or f"state {checkpoint_id}".encode()
    )
    op_state = storage.write_state_file(checkpoint_id, "src-0-operator", b"offsets")
    shared_handles = tuple(
        storage.write_state_file(checkpoint_id, s, s.encode(), shared=True) for s in shared
    )
    metadata = CheckpointMetadata(
        job_id=JOB,
        checkpoint_id=checkpoint_id,
        timestamp_ms=1000 + checkpoint_id,
        operators=(
            OperatorCheckpointState(
                "op", 1, 128, (SubtaskStateHandle(0, "keyed", keyed, KeyGroupRange(0, 127), shared_handles),)
            ),
            OperatorCheckpointState(
                "src", 1, 128, (SubtaskStateHandle(0, "operator", op_state),), {0: {"offset": checkpoint_id}}
            ),
        ),
    )
    if commit:
        storage.write_metadata(checkpoint_id, metadata)
    return metadata


def test_layout_follows_flink(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    _take_checkpoint(storage, 1, shared=("000001.sst",))
    job = tmp_path / JOB
    assert (job / "chk-1" / "_metadata").is_file()
    assert (job / "chk-1" / "op-0-keyed").is_file()
    assert (job / "shared" / "000001.sst").is_file()
    assert (job / "taskowned").is_dir()
    leftovers = [p for p in job.rglob(".*")]
    assert leftovers == []  # no temporary files stay behind


def test_state_file_round_trip_with_a_keyed_snapshot(tmp_path: Path) -> None:
    backend = HeapKeyedStateBackend("op", 128, KeyGroupRange(0, 127))
    state = backend.get_state(ValueStateDescriptor("count"))
    for key in ("a", "b", "c"):
        backend.set_current_key(key)
        state.update(len(key) * 10)
    snapshot = backend.snapshot()
    storage = CheckpointStorage(tmp_path, JOB)
    data = encode_state_file({"keyed": snapshot})
    handle = storage.write_state_file(4, "op-0-keyed", data)
    assert handle.path == "chk-4/op-0-keyed" and handle.size_bytes == len(data) and not handle.shared
    restored = HeapKeyedStateBackend("op", 128, KeyGroupRange(0, 127))
    restored.restore(
        [decode_state_file(storage.read_state_file(handle), handle.path, trusted=False)["keyed"]]
    )
    restored.set_current_key("b")
    assert restored.get_state(ValueStateDescriptor("count")).value() == 10


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    written = _take_checkpoint(storage, 1, shared=("a.sst", "b.sst"))
    loaded = storage.load(1, verify_checksums=True)
    assert loaded == written
    assert [storage.read_state_file(f) for f in loaded.shared_files()] == [b"a.sst", b"b.sst"]
    assert loaded.operator("src").source_positions == {0: {"offset": 1}}
    listing = storage.list_checkpoints()
    assert listing.checkpoint_ids == [1] and listing.incomplete == ()


def test_list_is_newest_first_and_reports_incomplete(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    for i in (1, 2, 10):
        _take_checkpoint(storage, i)
    _take_checkpoint(storage, 11, commit=False)  # crashed between state files and metadata
    listing = storage.list_checkpoints()
    assert listing.checkpoint_ids == [10, 2, 1]
    assert [c.checkpoint_id for c in listing.incomplete] == [11]
    assert "_metadata does not exist" in listing.incomplete[0].reason


def test_crash_before_metadata_leaves_no_checkpoint_and_falls_back(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    _take_checkpoint(storage, 1)
    _take_checkpoint(storage, 2, commit=False)
    latest = storage.latest_valid()
    assert latest.metadata is not None and latest.metadata.checkpoint_id == 1
    assert latest.reason is not None and "checkpoint 2" in latest.reason and "incomplete" in latest.reason
    with pytest.raises(CorruptCheckpointError, match="incomplete"):
        storage.load(2)


def test_crash_during_metadata_write_leaves_no_checkpoint(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    _take_checkpoint(storage, 1)
    metadata = _take_checkpoint(storage, 2, commit=False)
    # the process died while writing the temporary file: it holds a prefix of the metadata
    partial = serialize(metadata)[:57]
    (storage.checkpoint_dir(2) / "._metadata.abc123.inprogress").write_bytes(partial)
    latest = storage.latest_valid()
    assert latest.metadata is not None and latest.metadata.checkpoint_id == 1
    assert "partial temporary file" in (latest.reason or "")
    assert storage.list_checkpoints().checkpoint_ids == [1]


def test_truncated_metadata_is_corrupt_and_falls_back(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    _take_checkpoint(storage, 1)
    _take_checkpoint(storage, 2)
    path = storage.metadata_path(2)
    path.write_bytes(path.read_bytes()[:40])
    latest = storage.latest_valid()
    assert latest.metadata is not None and latest.metadata.checkpoint_id == 1
    assert str(path) in (latest.reason or "") and "not valid JSON" in (latest.reason or "")
    assert [c.checkpoint_id for c in storage.list_checkpoints().incomplete] == [2]


def test_altered_state_file_is_detected_by_checksum(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    _take_checkpoint(storage, 1)
    m2 = _take_checkpoint(storage, 2, payload=b"hello world")
    handle = m2.operator("op").state_handles[0].file
    storage.path_of(handle).write_bytes(b"HELLO WORLD")  # same size, other bytes
    with pytest.raises(CorruptCheckpointError) as e:
        storage.read_state_file(handle)
    msg = str(e.value)
    assert str(storage.path_of(handle)) in msg and handle.sha256 in msg and "found" in msg
    latest = storage.latest_valid()
    assert latest.metadata is not None and latest.metadata.checkpoint_id == 1
    assert "SHA-256" in (latest.reason or "")
    # without checksums only sizes are checked: the damage goes unseen, as documented
    unverified = storage.latest_valid(verify_checksums=False).metadata
    assert unverified is not None and unverified.checkpoint_id == 2


def test_truncated_and_deleted_state_files_are_detected(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    _take_checkpoint(storage, 1, shared=("s1",))
    m2 = _take_checkpoint(storage, 2, payload=b"0123456789", shared=("s1", "s2"))
    m3 = _take_checkpoint(storage, 3, shared=("s1", "s2"))
    keyed2 = m2.operator("op").state_handles[0].file
    storage.path_of(keyed2).write_bytes(b"01234")
    with pytest.raises(CorruptCheckpointError, match=r"wrong size: expected 10 bytes, found 5"):
        storage.read_state_file(keyed2)
    (storage.shared_dir / "s2").unlink()
    with pytest.raises(CorruptCheckpointError, match=r"shared/s2 is missing: expected 2 bytes"):
        storage.read_state_file(m3.shared_files()[1])
    latest = storage.latest_valid()
    assert latest.metadata is not None and latest.metadata.checkpoint_id == 1
    assert [s.checkpoint_id for s in latest.skipped] == [3, 2]


def test_no_valid_checkpoint(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    assert storage.latest_valid().metadata is None
    _take_checkpoint(storage, 1, commit=False)
    latest = storage.latest_valid()
    assert latest.metadata is None and len(latest.skipped) == 1


def test_write_metadata_refuses_bad_commits(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    metadata = _take_checkpoint(storage, 1, commit=False)
    with pytest.raises(UsageError, match="cannot be written as job job-1 checkpoint 2"):
        storage.write_metadata(2, metadata)
    os.remove(storage.checkpoint_dir(1) / "op-0-keyed")
    with pytest.raises(UsageError, match=r"refusing to commit checkpoint 1.*missing"):
        storage.write_metadata(1, metadata)
    assert not storage.metadata_path(1).exists()
    storage.write_state_file(1, "op-0-keyed", b"state 1")
    storage.write_metadata(1, metadata)
    with pytest.raises(UsageError, match="already complete"):
        storage.write_metadata(1, metadata)
    with pytest.raises(UsageError, match="already complete"):
        storage.write_state_file(1, "late", b"x")


def test_shared_files_are_immutable_and_deduplicated(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    h1 = storage.write_state_file(1, "x.sst", b"data", shared=True)
    assert h1.path == "shared/x.sst" and h1.shared
    assert storage.write_state_file(2, "x.sst", b"data", shared=True) == h1
    with pytest.raises(UsageError, match="immutable"):
        storage.write_state_file(2, "x.sst", b"other", shared=True)


@pytest.mark.parametrize("name", ["../escape", "/abs", ".hidden", "a//b", "_metadata"])
def test_bad_state_file_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(UsageError):
        CheckpointStorage(tmp_path, JOB).write_state_file(1, name, b"")


def test_discard_keeps_shared_files(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    _take_checkpoint(storage, 1, shared=("s1",))
    _take_checkpoint(storage, 2, shared=("s1",))
    storage.discard(1)
    assert not storage.checkpoint_dir(1).exists()
    assert storage.list_shared_files() == ["shared/s1"]
    assert storage.load(2, verify_checksums=True).checkpoint_id == 2
    with pytest.raises(UsageError, match="no checkpoint 1"):
        storage.discard(1)
    storage.discard(1, missing_ok=True)
    _take_checkpoint(storage, 3, commit=False)
    storage.discard(3)  # an incomplete checkpoint can be discarded too
    assert storage.list_checkpoints().incomplete == ()


def test_registry_from_storage_deletes_unused_shared_files(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    _take_checkpoint(storage, 1, shared=("s1", "s2"))
    _take_checkpoint(storage, 2, shared=("s2", "s3"))
    storage.write_state_file(3, "orphan", b"o", shared=True)  # checkpoint 3 was aborted
    registry = storage.shared_state_registry()
    assert registry.unused_files(storage.list_shared_files()) == ["shared/orphan"]
    assert registry.release(1) == ["shared/s1"]
    storage.discard(1)
    assert storage.list_shared_files() == ["shared/orphan", "shared/s2", "shared/s3"]
    assert storage.latest_valid().metadata is not None


def test_load_unknown_checkpoint(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    _take_checkpoint(storage, 1)
    with pytest.raises(UsageError, match=r"no checkpoint 5 .*found: \[1\]"):
        storage.load(5)


def test_metadata_of_another_checkpoint_is_corrupt(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    _take_checkpoint(storage, 1)
    storage.checkpoint_dir(2).mkdir()
    storage.metadata_path(2).write_bytes(storage.metadata_path(1).read_bytes())
    with pytest.raises(CorruptCheckpointError, match="expected checkpoint 2 of job job-1"):
        storage.load(2)


# ---------------------------------------------------------------------- savepoints


def _savepoint_metadata(files: dict[str, bytes], fmt: str = "canonical") -> CheckpointMetadata:
    p = len(files)
    handles = tuple(
        SubtaskStateHandle(
            i, "keyed", FileHandle.of(path, data), KeyGroupRange(i * 128 // p, (i + 1) * 128 // p - 1)
        )
        for i, (path, data) in enumerate(sorted(files.items()))
    )
    return CheckpointMetadata(
        job_id=JOB,
        checkpoint_id=9,
        timestamp_ms=5,
        operators=(OperatorCheckpointState("op", p, 128, handles),),
        kind="savepoint",
        savepoint_format=fmt,
    )


def test_savepoint_is_self_contained_and_relocatable(tmp_path: Path) -> None:
    files = {"op/0": b"zero", "op/1": b"one"}
    metadata = _savepoint_metadata(files)
    storage = CheckpointStorage(tmp_path / "ckpts", JOB)
    target = storage.write_savepoint(tmp_path / "savepoints" / "sp-1", metadata, files)
    moved = tmp_path / "elsewhere"
    target.rename(moved)
    assert load_savepoint(moved, verify_checksums=True) == metadata
    assert load_savepoint(moved / "_metadata") == metadata
    assert [read_savepoint_file(moved, f) for f in metadata.files()] == [b"zero", b"one"]


def test_savepoint_checks(tmp_path: Path) -> None:
    files = {"a": b"1"}
    metadata = _savepoint_metadata(files)
    storage = CheckpointStorage(tmp_path, JOB)
    with pytest.raises(UsageError, match="inside the checkpoint directory"):
        storage.write_savepoint(tmp_path / JOB / "sp", metadata, files)
    with pytest.raises(UsageError, match="referenced but not given"):
        write_savepoint(tmp_path / "sp", metadata, {"b": b"1"})
    with pytest.raises(UsageError, match="does not match its handle"):
        write_savepoint(tmp_path / "sp", metadata, {"a": b"2"})
    write_savepoint(tmp_path / "sp", metadata, files)
    with pytest.raises(UsageError, match="never overwritten"):
        write_savepoint(tmp_path / "sp", metadata, files)
    (tmp_path / "sp" / "a").write_bytes(b"X")
    with pytest.raises(CorruptCheckpointError, match="SHA-256"):
        load_savepoint(tmp_path / "sp", verify_checksums=True)
    checkpoint = _take_checkpoint(storage, 1)
    with pytest.raises(UsageError, match="not a savepoint"):
        load_savepoint(storage.checkpoint_dir(1))
    assert checkpoint.kind == "checkpoint"


def test_native_savepoint_from_incremental_checkpoint(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path / "ckpts", JOB)
    _take_checkpoint(storage, 1, shared=("s1",))
    source = _take_checkpoint(storage, 2, shared=("s1", "s2"))
    sp = storage.savepoint_from_checkpoint(2, tmp_path / "sp", timestamp_ms=77)
    # the checkpoints can go away: the savepoint holds copies of everything
    registry = storage.shared_state_registry()
    for cid in (1, 2):
        for f in registry.release(cid):
            storage.delete_shared_file(f)
        storage.discard(cid)
    assert storage.list_shared_files() == []
    metadata = load_savepoint(sp, verify_checksums=True)
    assert metadata.savepoint_format == "native" and metadata.shared_files() == ()
    assert metadata.size_bytes() == source.size_bytes()
    keyed = metadata.operator("op").state_handles[0]
    assert read_savepoint_file(sp, keyed.file) == b"state 2"
    assert [read_savepoint_file(sp, f) for f in keyed.shared_files] == [b"s1", b"s2"]


# ---------------------------------------------------------------------- describe


def test_describe_lists_checkpoints_and_savepoints(tmp_path: Path) -> None:
    root = tmp_path / "ckpts"
    storage = CheckpointStorage(root, JOB)
    good = _take_checkpoint(storage, 1, shared=("s1",))
    _take_checkpoint(storage, 2, payload=b"ok")
    _take_checkpoint(storage, 3, commit=False)
    (storage.checkpoint_dir(2) / "op-0-keyed").write_bytes(b"okay")  # wrong size
    entries = describe(root)
    assert [(e["id"], e["status"]) for e in entries] == [(3, "incomplete"), (2, "corrupt"), (1, "valid")]
    valid = entries[2]
    assert valid["kind"] == "checkpoint" and valid["job_id"] == JOB and valid["timestamp_ms"] == 1001
    assert valid["size_bytes"] == good.size_bytes() and valid["files"] == 3
    assert "wrong size" in entries[1]["reason"]
    assert describe(root / JOB) == entries
    files = {"a": b"1"}
    write_savepoint(tmp_path / "sps" / "sp-9", _savepoint_metadata(files, "native"), files)
    (sp,) = describe(tmp_path / "sps")
    assert (sp["kind"], sp["format"], sp["id"], sp["status"], sp["files"]) == (
        "savepoint",
        "native",
        9,
        "valid",
        1,
    )
    assert describe(tmp_path / "sps" / "sp-9") == [sp]
    with pytest.raises(UsageError, match="not a directory"):
        describe(tmp_path / "missing")


def test_crash_at_the_rename_of_metadata_leaves_no_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    _take_checkpoint(storage, 1)
    metadata = _take_checkpoint(storage, 2, commit=False)

    def crash(src: object, dst: object) -> None:
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr("weir.checkpoint.storage.os.replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        storage.write_metadata(2, metadata)
    monkeypatch.undo()
    assert not storage.metadata_path(2).exists()
    assert [p.name for p in storage.checkpoint_dir(2).iterdir() if p.name.startswith(".")] == []
    latest = storage.latest_valid()
    assert latest.metadata is not None and latest.metadata.checkpoint_id == 1
    storage.write_metadata(2, metadata)  # the retry commits
    latest = storage.latest_valid()
    assert latest.metadata == metadata and latest.reason is None


def test_a_directory_in_place_of_a_state_file_is_corrupt(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, JOB)
    m = _take_checkpoint(storage, 1)
    handle = m.operator("src").state_handles[0].file
    storage.path_of(handle).unlink()
    storage.path_of(handle).mkdir()
    handle_size = handle.size_bytes
    with pytest.raises(CorruptCheckpointError, match="src-0-operator"):
        storage.read_state_file(handle)
    assert handle_size == len(b"offsets")

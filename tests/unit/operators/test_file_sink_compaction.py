"""FileSink compaction (``enable_compact``): held part files stay hidden until the strategy
fires, then one compacted file is committed and its inputs deleted, exactly once across
restores and at the end of input."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.common import Types
from weir.datastream.connectors.file_system import (
    BucketAssigner,
    Encoder,
    FileCompactor,
    FileCompactStrategy,
    FileSink,
    RollingPolicy,
)
from weir.datastream.formats.parquet import ParquetBulkWriters
from weir.errors import UsageError, WeirError
from weir.operators.file_sink import commit_end_of_input

from .test_file_sink import Subtask, hidden, restore, visible


def compacting_sink(
    base: Path, strategy: FileCompactStrategy, compactor: FileCompactor | None = None
) -> FileSink:
    return (
        FileSink.for_row_format(str(base), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
        .enable_compact(strategy, compactor or FileCompactor.concat_file_compactor())
        .build()
    )


def every(n: int) -> FileCompactStrategy:
    return FileCompactStrategy.builder().enable_compaction_on_checkpoint(n).build()


def finished(base: Path) -> list[str]:
    return sorted(p.name for p in base.iterdir() if not p.name.startswith("."))


def test_files_wait_hidden_until_the_nth_checkpoint_then_one_file_is_committed(tmp_path: Path) -> None:
    s = Subtask(compacting_sink(tmp_path, every(3)))
    for checkpoint, value in enumerate(["a", "b", "c"], start=1):
        s.write(value)
        s.checkpoint(checkpoint)
        s.op.notify_checkpoint_complete(checkpoint)
        if checkpoint < 3:
            assert visible(tmp_path) == []  # held for compaction, not committed
    assert finished(tmp_path) == ["part-0-3"]  # one compacted file; its three inputs are gone
    assert (tmp_path / "part-0-3").read_text() == "a\nb\nc\n"
    assert hidden(tmp_path) == []


def test_the_size_threshold_fires_when_the_held_files_are_big_enough(tmp_path: Path) -> None:
    strategy = FileCompactStrategy.builder().set_size_threshold(6).build()
    s = Subtask(compacting_sink(tmp_path, strategy))
    s.write("aa")  # 3 bytes
    s.checkpoint(1)
    s.op.notify_checkpoint_complete(1)
    assert visible(tmp_path) == []
    s.write("bb")  # 6 bytes held: fires
    s.checkpoint(2)
    s.op.notify_checkpoint_complete(2)
    assert visible(tmp_path) == ["aa", "bb"] and len(finished(tmp_path)) == 1


def test_a_delimiter_goes_between_neighbouring_files(tmp_path: Path) -> None:
    s = Subtask(compacting_sink(tmp_path, every(2), FileCompactor.concat_file_compactor(b"--\n")))
    s.write("a")
    s.checkpoint(1)
    s.write("b")
    s.checkpoint(2)
    s.op.notify_checkpoint_complete(2)
    (name,) = finished(tmp_path)
    assert (tmp_path / name).read_text() == "a\n--\nb\n"


def test_held_files_survive_a_restore_and_are_compacted_by_their_owner(tmp_path: Path) -> None:
    sink = compacting_sink(tmp_path, every(2))
    s = Subtask(sink)
    s.write("a")
    snapshot = s.checkpoint(1)  # "a" is held
    s.write("lost")
    s.op.close()
    (again,) = restore(sink, [snapshot], 1)
    assert visible(tmp_path) == [] and len(hidden(tmp_path)) == 1  # the held file, kept
    again.write("lost", "b")
    again.checkpoint(2)
    again.op.notify_checkpoint_complete(2)
    assert visible(tmp_path) == ["a", "b", "lost"] and hidden(tmp_path) == []


def test_a_restore_commits_the_compacted_file_and_deletes_its_inputs(tmp_path: Path) -> None:
    sink = compacting_sink(tmp_path, every(1))
    s = Subtask(sink)
    s.write("a", "b")
    snapshot = s.checkpoint(1)  # compacted and pre-committed; the notification never arrives
    s.op.close()
    assert visible(tmp_path) == []
    restore(sink, [snapshot], 2)  # at another parallelism: the owner commits, once
    assert visible(tmp_path) == ["a", "b"] and hidden(tmp_path) == []


def test_end_of_input_compacts_every_bucket_and_the_job_commit_deletes_the_inputs(tmp_path: Path) -> None:
    sink = compacting_sink(tmp_path, every(10))
    s = Subtask(sink)
    s.write("a")
    s.checkpoint(1)
    s.op.notify_checkpoint_complete(1)
    s.write("b")
    s.op.finish()
    assert visible(tmp_path) == []
    commit_end_of_input(sink)
    assert visible(tmp_path) == ["a", "b"] and len(finished(tmp_path)) == 1
    assert hidden(tmp_path) == []


def test_a_restore_behind_a_committed_compaction_is_refused(tmp_path: Path) -> None:
    sink = compacting_sink(tmp_path, every(2))
    s = Subtask(sink)
    s.write("a")
    old = s.checkpoint(1)
    s.write("b")
    s.checkpoint(2)
    s.op.notify_checkpoint_complete(2)  # compacted, committed, inputs deleted
    s.op.close()
    with pytest.raises(WeirError, match="waiting for compaction at the restored checkpoint"):
        restore(sink, [old], 1)


def test_the_identical_compactor_copies_a_single_file(tmp_path: Path) -> None:
    s = Subtask(compacting_sink(tmp_path, every(1), FileCompactor.identical_file_compactor()))
    s.write("a")
    s.checkpoint(1)
    s.op.notify_checkpoint_complete(1)
    assert visible(tmp_path) == ["a"]
    s.write("b")
    s.op.finish()
    commit_end_of_input(s.op.sink)
    assert visible(tmp_path) == ["a", "b"] and hidden(tmp_path) == []
    s2 = Subtask(compacting_sink(tmp_path / "two", every(2), FileCompactor.identical_file_compactor()))
    s2.write("a")
    s2.checkpoint(1)
    s2.write("b")
    with pytest.raises(UsageError, match="copies one file, but 2"):
        s2.checkpoint(2)


def test_strategy_and_builder_check_like_flinks(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="at least one trigger condition"):
        FileCompactStrategy.builder().build()
    with pytest.raises(UsageError, match="more than 0"):
        FileCompactStrategy.builder().enable_compaction_on_checkpoint(0)
    with pytest.raises(UsageError, match="cannot be concatenated"):
        FileSink.for_bulk_format(
            str(tmp_path), ParquetBulkWriters.for_row_type(Types.TUPLE([Types.LONG()]))
        ).enable_compact(every(1), FileCompactor.concat_file_compactor())
    sink = (
        FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
        .enable_compact(every(1), FileCompactor.concat_file_compactor())
        .disable_compact()
        .build()
    )
    assert sink.compact_strategy is None

"""The exactly-once FileSink operator without a cluster: two-phase commit, recovery, rescaling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weir.codec.batch import Batch
from weir.datastream.connectors.file_system import (
    BucketAssigner,
    DefaultRollingPolicy,
    Encoder,
    FileSink,
    OnCheckpointRollingPolicy,
    OutputFileConfig,
    RollingPolicy,
    java_date_format_to_strftime,
)
from weir.errors import UsageError, WeirError
from weir.operators.base import OperatorContext, Output
from weir.operators.file_sink import (
    FileSinkOperator,
    PartFileNames,
    commit_end_of_input,
    commit_part,
)
from weir.state.operator_state import (
    OperatorStateBackend,
    OperatorStateSnapshot,
    repartition_operator_state,
)


class _NoOutput(Output):
    def emit(self, batch: Batch) -> None:  # pragma: no cover - a sink emits nothing
        raise AssertionError("a sink emits nothing")


def make_sink(base: Path, policy: RollingPolicy | None = None, **kwargs: Any) -> FileSink:
    builder = (
        FileSink.for_row_format(str(base), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .with_rolling_policy(policy or RollingPolicy.on_checkpoint_rolling_policy())
    )
    if "config" in kwargs:
        builder = builder.with_output_file_config(kwargs["config"])
    return builder.build()


class Subtask:
    """One sink subtask with a clock; ``restore`` builds it from operator state snapshots."""

    def __init__(
        self,
        sink: FileSink,
        index: int = 0,
        parallelism: int = 1,
        restored: OperatorStateSnapshot | None = None,
        attempt: int = 0,
    ) -> None:
        self.now_ms = 0
        backend = OperatorStateBackend("sink")
        if restored is not None:
            backend.restore([restored])
        self.op = FileSinkOperator("FileSink", sink)
        self.op.setup(
            OperatorContext(
                task_name="sink", operator_name="FileSink", operator_id="sink", subtask_index=index,
                parallelism=parallelism, max_parallelism=128, attempt_number=attempt, batch_mode=False,
                processing_time_ms=lambda: self.now_ms, operator_state_backend=backend,
                is_restored=restored is not None,
            ),
            _NoOutput(),
        )  # fmt: skip
        self.op.initialize_state()
        self.op.open()

    def write(self, *values: Any) -> None:
        self.op.process_batch(Batch(list(values), np.zeros(len(values), dtype=np.int64)))

    def checkpoint(self, checkpoint_id: int) -> OperatorStateSnapshot:
        self.op.snapshot_state(checkpoint_id)
        snapshot: OperatorStateSnapshot = self.op.context.operator_state().snapshot()
        return snapshot


def visible(base: Path) -> list[str]:
    """The lines of every finished file, sorted."""
    lines: list[str] = []
    for path in base.rglob("*"):
        if path.is_file() and not path.name.startswith("."):
            lines += path.read_text().splitlines()
    return sorted(lines)


def hidden(base: Path) -> list[str]:
    """Hidden files but the first attempt's start marker, which stays until the job's end."""
    return sorted(p.name for p in base.rglob(".*") if not p.name.endswith(".first-part"))


def restore(sink: FileSink, snapshots: list[OperatorStateSnapshot], parallelism: int) -> list[Subtask]:
    parts = repartition_operator_state(snapshots, parallelism)
    return [Subtask(sink, i, parallelism, parts[i], attempt=1) for i in range(parallelism)]


def test_files_become_visible_only_when_their_checkpoint_completes(tmp_path: Path) -> None:
    s = Subtask(make_sink(tmp_path))
    s.write("a", "b")
    assert visible(tmp_path) == []
    s.checkpoint(1)  # pre-commit: closed, fsynced, still hidden
    assert visible(tmp_path) == [] and len(hidden(tmp_path)) == 1
    s.write("c")
    s.op.notify_checkpoint_complete(1)
    assert visible(tmp_path) == ["a", "b"]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["part-0-0"]


def test_files_of_an_aborted_checkpoint_are_committed_with_the_next_one(tmp_path: Path) -> None:
    s = Subtask(make_sink(tmp_path))
    s.write("a")
    s.checkpoint(1)
    s.op.notify_checkpoint_aborted(1)
    s.write("b")
    s.checkpoint(2)
    assert visible(tmp_path) == []
    s.op.notify_checkpoint_complete(2)
    assert visible(tmp_path) == ["a", "b"]


def test_recovery_commits_the_precommitted_and_discards_the_rest(tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    s = Subtask(sink)
    s.write("a")
    snapshot = s.checkpoint(1)  # completes, but the notification never arrives
    s.write("lost-1")
    s.checkpoint(2)  # never completes
    s.write("lost-2")
    s.op.close()  # the failure
    (again,) = restore(sink, [snapshot], 1)
    assert visible(tmp_path) == ["a"]  # checkpoint 1 was complete: its file is committed on restore
    assert hidden(tmp_path) == []  # what came after checkpoint 1 is gone; the sources replay it
    again.write("lost-1", "lost-2", "c")
    again.checkpoint(3)
    again.op.notify_checkpoint_complete(3)
    assert visible(tmp_path) == ["a", "c", "lost-1", "lost-2"]
    names = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".first-part"))
    assert names == ["part-0-0", "part-0-1"]  # the counter came back with the state: no name reused


def test_committing_twice_is_harmless_and_a_lost_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / ".x.inprogress").write_text("data\n")
    assert commit_part(tmp_path, ".x.inprogress", "x") is True
    assert commit_part(tmp_path, ".x.inprogress", "x") is False  # already committed
    with pytest.raises(WeirError, match="missing and its final name"):
        commit_part(tmp_path, ".y.inprogress", "y")
    (tmp_path / ".z.inprogress").write_text("1\n")
    (tmp_path / "z").write_text("2\n")
    with pytest.raises(WeirError, match="already exists"):
        commit_part(tmp_path, ".z.inprogress", "z")


def test_a_restore_after_the_commit_commits_nothing_twice(tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    s = Subtask(sink)
    s.write("a")
    snapshot = s.checkpoint(1)
    s.op.notify_checkpoint_complete(1)  # committed, and then the job fails before checkpoint 2
    s.op.close()
    restore(sink, [snapshot], 1)
    assert visible(tmp_path) == ["a"]


def test_in_progress_files_are_truncated_to_the_checkpoint_and_resumed(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, RollingPolicy.default_rolling_policy(part_size=1 << 20))
    s = Subtask(sink)
    s.write("a", "b")
    snapshot = s.checkpoint(1)  # does not roll: the file is flushed and its length recorded
    s.op.notify_checkpoint_complete(1)
    assert visible(tmp_path) == [] and len(hidden(tmp_path)) == 1
    s.write("after-the-checkpoint")
    s.op.close()
    (again,) = restore(sink, [snapshot], 1)
    (path,) = tmp_path.glob(".part-0-0.inprogress.*")
    assert path.read_text() == "a\nb\n"  # truncated back
    again.write("c")
    again.op.finish()
    assert visible(tmp_path) == []  # end of input: committed when the job finishes, not before
    assert commit_end_of_input(sink) == ["part-0-0"]
    assert (tmp_path / "part-0-0").read_text() == "a\nb\nc\n"
    assert hidden(tmp_path) == [] and commit_end_of_input(sink) == []


@pytest.mark.parametrize(("old", "new"), [(2, 1), (2, 3), (4, 2), (3, 4)])
def test_rescaling_commits_every_checkpointed_file_once_and_deletes_the_rest(
    tmp_path: Path, old: int, new: int
) -> None:
    sink = make_sink(tmp_path, RollingPolicy.default_rolling_policy(part_size=8))
    subtasks = [Subtask(sink, i, old) for i in range(old)]
    expected = []
    for i, s in enumerate(subtasks):
        values = [f"s{i}-{n}" for n in range(5)]  # several rolled files plus an open one each
        s.write(*values)
        expected += values
    snapshots = [s.checkpoint(1) for s in subtasks]
    for i, s in enumerate(subtasks):
        s.write(f"after-{i}")
        s.checkpoint(2)
        s.write(f"later-{i}")
        s.op.close()
    restored = restore(sink, snapshots, new)
    # each old subtask's open file is resumed by the new subtask of the same index (if any) and
    # committed by its owner otherwise: nobody else touches it
    assert len([n for n in hidden(tmp_path) if ".inprogress." in n]) == min(old, new)
    for s in restored:
        s.op.finish()
    commit_end_of_input(sink)
    assert visible(tmp_path) == sorted(expected)
    assert hidden(tmp_path) == []


def test_a_failed_attempts_end_of_input_manifest_is_discarded(tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    s = Subtask(sink)
    s.write("a")
    snapshot = s.checkpoint(1)
    s.write("b")
    s.op.finish()  # end of input, but another task fails before the job finishes
    assert [n for n in hidden(tmp_path) if n.endswith(".end-of-input")] == [".part-0.end-of-input"]
    s.op.close()
    restore(sink, [snapshot], 1)
    assert hidden(tmp_path) == []
    assert commit_end_of_input(sink) == []
    assert visible(tmp_path) == ["a"]


def test_a_restart_without_a_checkpoint_deletes_the_first_attempts_files(tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    s = Subtask(sink)
    s.write("a")
    s.checkpoint(1)  # never completes
    s.op.close()
    Subtask(sink, attempt=1)  # not restored, but a restart
    assert hidden(tmp_path) == [] and visible(tmp_path) == []


def test_a_fresh_job_never_overwrites_finished_files(tmp_path: Path) -> None:
    (tmp_path / "part-0-0").write_text("from an earlier run\n")
    sink = make_sink(tmp_path)
    s = Subtask(sink)
    s.write("new")
    s.checkpoint(1)
    s.op.notify_checkpoint_complete(1)
    assert (tmp_path / "part-0-0").read_text() == "from an earlier run\n"
    assert (tmp_path / "part-0-1").read_text() == "new\n"


def test_size_rolling_keeps_files_near_the_part_size(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, RollingPolicy.default_rolling_policy(part_size=10))
    s = Subtask(sink)
    s.write(*[f"{n:04d}" for n in range(20)])  # 5 bytes a line
    s.op.finish()
    commit_end_of_input(sink)
    sizes = sorted(p.stat().st_size for p in tmp_path.iterdir())
    assert all(size <= 15 for size in sizes) and len(sizes) == 7  # > 10 bytes rolls before the next line
    assert visible(tmp_path) == [f"{n:04d}" for n in range(20)]


def test_time_rolling_on_processing_time(tmp_path: Path) -> None:
    policy = RollingPolicy.default_rolling_policy(rollover_interval=1_000, inactivity_interval=300)
    sink = (
        FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .with_rolling_policy(policy)
        .with_bucket_check_interval(100)
        .build()
    )
    s = Subtask(sink)
    s.write("a")
    assert s.op.next_processing_time_deadline() == 100
    s.now_ms = 350
    s.op.on_processing_time(350)  # inactive for 350 ms >= 300: rolls to pending
    assert s.op.next_processing_time_deadline() is None  # nothing open
    s.write("b")
    s.checkpoint(1)
    s.op.notify_checkpoint_complete(1)
    assert visible(tmp_path) == ["a"]  # "b" is in the open file, which does not roll on a checkpoint


def test_part_names_and_ownership() -> None:
    names = PartFileNames("part", ".txt")
    assert names.final(3, 7) == "part-3-7.txt"
    assert names.in_progress_writer(names.in_progress(3, 7, "ab12")) == 3
    assert names.in_progress_writer("part-3-7.txt") is None
    assert names.in_progress_writer(".other-3-7.txt.inprogress.ab12") is None
    assert names.manifest_writer(names.manifest(5)) == 5
    assert [w for w in range(6) if PartFileNames.owns(1, 2, w)] == [1, 3, 5]


def test_rolling_policies_decide_on_size_and_time() -> None:
    default = RollingPolicy.default_rolling_policy(
        part_size=100, rollover_interval=1_000, inactivity_interval=500
    )
    assert isinstance(default, DefaultRollingPolicy)
    assert not default.should_roll_on_event(100) and default.should_roll_on_event(101)
    assert not default.should_roll_on_checkpoint(100) and default.should_roll_on_checkpoint(101)
    assert not default.should_roll_on_processing_time(created_ms=0, last_write_ms=600, now_ms=999)
    assert default.should_roll_on_processing_time(created_ms=0, last_write_ms=600, now_ms=1_000)
    assert default.should_roll_on_processing_time(created_ms=500, last_write_ms=500, now_ms=1_000)
    on_checkpoint = RollingPolicy.on_checkpoint_rolling_policy()
    assert isinstance(on_checkpoint, OnCheckpointRollingPolicy)
    assert on_checkpoint.should_roll_on_checkpoint(0) and not on_checkpoint.should_roll_on_event(10**9)


def test_date_time_buckets_follow_the_java_pattern() -> None:
    assert java_date_format_to_strftime("yyyy-MM-dd--HH") == "%Y-%m-%d--%H"
    assert java_date_format_to_strftime("'day='yyyyMMdd") == "day=%Y%m%d"
    utc = BucketAssigner.date_time_bucket_assigner("yyyy-MM-dd--HH", "UTC")
    assert utc.bucket_id(0) == "1970-01-01--00"
    assert utc.bucket_id(36 * 3_600_000 + 1) == "1970-01-02--12"
    assert BucketAssigner.date_time_bucket_assigner("HH", "GMT-08:00").bucket_id(0) == "16"
    assert BucketAssigner.base_path_bucket_assigner().bucket_id(123) == ""
    with pytest.raises(UsageError, match="does not support the field 'EEE'"):
        BucketAssigner.date_time_bucket_assigner("EEE")
    with pytest.raises(UsageError, match="unknown timezone_id"):
        BucketAssigner.date_time_bucket_assigner("yyyy", "Nowhere/Never")


def test_bad_sink_settings_get_clear_errors(tmp_path: Path) -> None:
    builder = FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
    with pytest.raises(UsageError, match="part_size must be a positive int"):
        RollingPolicy.default_rolling_policy(part_size=0)
    with pytest.raises(UsageError, match="with_rolling_policy needs"):
        builder.with_rolling_policy("daily")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="with_bucket_check_interval"):
        builder.with_bucket_check_interval(0)
    with pytest.raises(UsageError, match=r"starts with '\.'"):
        OutputFileConfig.builder().with_part_prefix(".hidden").build()
    with pytest.raises(UsageError, match="without '/'"):
        OutputFileConfig("a/b")
    with pytest.raises(UsageError, match="unknown charset"):
        Encoder.simple_string_encoder("no-such-charset")
    with pytest.raises(UsageError, match="non-empty string"):
        FileSink.for_row_format("", Encoder.simple_string_encoder())
    assert FileSink.RowFormatBuilder is type(builder)  # type: ignore[attr-defined]  # PyFlink's name
    assert isinstance(builder.build().bucket_assigner, BucketAssigner)  # date-time by default, as in Flink
    assert builder.build().bucket_assigner.kind == "date_time"


def test_a_restore_behind_committed_files_moves_them_aside_and_replays_exactly(tmp_path: Path) -> None:
    """Checkpoint 2 completed and its file was committed, then recovery fell back to checkpoint 1
    (checkpoint 2 was damaged): the file of checkpoint 2 must not stay visible next to its replay."""
    sink = make_sink(tmp_path)
    s = Subtask(sink)
    s.write("a")
    first = s.checkpoint(1)
    s.op.notify_checkpoint_complete(1)
    s.write("b", "c")
    s.checkpoint(2)
    s.op.notify_checkpoint_complete(2)  # part-0-1 is visible now
    s.write("d")
    s.op.close()
    (again,) = restore(sink, [first], 1)
    assert visible(tmp_path) == ["a"]  # checkpoint 2's file is out of sight, not deleted
    (aside,) = [n for n in hidden(tmp_path) if ".superseded." in n]
    assert aside.startswith(".part-0-1.superseded.")
    assert again.op.superseded == [("part-0-1", aside)]
    notes = again.op.recovery_notes()
    assert len(notes) == 1 and "part-0-1" in notes[0] and aside in notes[0]
    again.write("b", "c", "d")  # the sources replay everything after checkpoint 1
    again.checkpoint(3)
    again.op.notify_checkpoint_complete(3)
    assert visible(tmp_path) == ["a", "b", "c", "d"]


def test_a_resumed_file_committed_later_is_cut_back_to_the_checkpoint(tmp_path: Path) -> None:
    """An in-progress file of checkpoint 1 was committed at the job's end with more lines; a
    restore of checkpoint 1 (a retained checkpoint of the finished job) resumes its prefix."""
    sink = make_sink(tmp_path, RollingPolicy.default_rolling_policy(part_size=1 << 20))
    s = Subtask(sink)
    s.write("a", "b")
    first = s.checkpoint(1)
    s.op.notify_checkpoint_complete(1)
    s.write("c")
    s.op.finish()
    assert commit_end_of_input(sink) == ["part-0-0"]
    s.op.close()
    (again,) = restore(sink, [first], 1)
    assert visible(tmp_path) == []  # the committed file went aside; its first 4 bytes are resumed
    (aside,) = [n for n in hidden(tmp_path) if ".superseded." in n]
    assert (tmp_path / aside).read_text() == "a\nb\nc\n"
    again.write("c")
    again.op.finish()
    assert commit_end_of_input(sink) == ["part-0-0"]
    assert (tmp_path / "part-0-0").read_text() == "a\nb\nc\n"


def test_a_fresh_start_counts_past_every_finished_file_of_the_subtask(tmp_path: Path) -> None:
    """Files of an earlier run in another bucket stay below the new run's counter, so a restore
    of the new run never takes them for its own later output."""
    (tmp_path / "other-bucket").mkdir()
    (tmp_path / "other-bucket" / "part-0-4").write_text("from an earlier run\n")
    sink = make_sink(tmp_path)
    s = Subtask(sink)
    s.write("new")
    first = s.checkpoint(1)
    s.op.notify_checkpoint_complete(1)
    s.op.close()
    assert (tmp_path / "part-0-5").read_text() == "new\n"
    (again,) = restore(sink, [first], 1)
    assert again.op.superseded == []
    assert visible(tmp_path) == ["from an earlier run", "new"]


def test_a_restart_from_the_beginning_moves_aside_what_the_first_attempt_committed(tmp_path: Path) -> None:
    """No valid checkpoint is left (the only retained one was damaged): the job starts over and
    the sources replay everything, so what the first attempt committed must go out of sight."""
    (tmp_path / "part-0-0").write_text("from an earlier run\n")
    sink = make_sink(tmp_path)
    s = Subtask(sink)
    s.write("a")
    s.checkpoint(1)
    s.op.notify_checkpoint_complete(1)  # part-0-1 is visible
    s.write("b")
    s.op.close()
    again = Subtask(sink, attempt=1)  # not restored: from the beginning
    assert visible(tmp_path) == ["from an earlier run"]
    assert [final for final, _ in again.op.superseded] == ["part-0-1"]
    again.write("a", "b")
    again.checkpoint(2)
    again.op.notify_checkpoint_complete(2)
    again.op.finish()
    commit_end_of_input(sink)
    assert visible(tmp_path) == ["a", "b", "from an earlier run"]
    assert [n for n in hidden(tmp_path) if ".superseded." not in n] == []  # the marker went with the job

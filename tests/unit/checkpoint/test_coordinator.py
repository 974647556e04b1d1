"""The checkpoint coordinator's bookkeeping, event by event."""

from __future__ import annotations

import pytest

from weir.checkpoint.coordinator import (
    CheckpointCoordinator,
    CheckpointCoordinatorConfig,
    CheckpointStatus,
    DiscardCheckpoint,
    FailJob,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    ScheduleNextTrigger,
    SubsumeCheckpoints,
    TriggerCheckpoint,
    WriteMetadata,
)
from weir.common.configuration import Configuration
from weir.errors import ProtocolViolation, UsageError

SOURCES = ["src-0", "src-1"]
ALL = ["src-0", "src-1", "map-0", "sink-0"]


def coordinator(**overrides: object) -> CheckpointCoordinator:
    params: dict = {"interval_ms": 1000, **overrides}
    return CheckpointCoordinator("job", SOURCES, ALL, CheckpointCoordinatorConfig(**params))


def ack_all(c: CheckpointCoordinator, checkpoint_id: int, now_ms: int | None = None) -> list:
    actions: list = []
    for task in ALL:
        actions += c.on_acknowledge(
            task, checkpoint_id, f"h-{task}-{checkpoint_id}", {"state_size_bytes": 10}, now_ms=now_ms
        )
    return actions


def complete(c: CheckpointCoordinator, now_ms: int, is_savepoint: bool = False) -> int:
    [trigger] = c.trigger_checkpoint(now_ms, is_savepoint=is_savepoint)
    assert isinstance(trigger, TriggerCheckpoint)
    ack_all(c, trigger.checkpoint_id)
    c.on_metadata_written(trigger.checkpoint_id, now_ms=now_ms + 5)
    return trigger.checkpoint_id


def test_one_checkpoint_step_by_step() -> None:
    c = coordinator()
    actions = c.on_timer(0)
    assert actions == [TriggerCheckpoint(1, 0, False, False, 0, tuple(SOURCES)), ScheduleNextTrigger(1000)]
    assert c.on_acknowledge("src-0", 1, "h0", {"state_size_bytes": 3}, now_ms=5) == []
    assert c.pending_checkpoints()[0].not_yet_acknowledged == ("src-1", "map-0", "sink-0")
    assert c.on_acknowledge("src-1", 1, "h1") == []
    assert c.on_acknowledge("map-0", 1, "h2") == []
    [write] = c.on_acknowledge("sink-0", 1, "h3", {"state_size_bytes": 4}, now_ms=20)
    assert isinstance(write, WriteMetadata) and write.checkpoint_id == 1
    assert dict(write.pending.state_handles) == {"src-0": "h0", "src-1": "h1", "map-0": "h2", "sink-0": "h3"}
    assert write.pending.is_fully_acknowledged
    # Not complete before the metadata is durable.
    assert c.latest_completed() is None
    assert c.statistics().checkpoints[0].status is CheckpointStatus.WRITING
    assert c.on_metadata_written(1, now_ms=30) == [NotifyCheckpointComplete(1, tuple(ALL))]
    latest = c.latest_completed()
    assert latest is not None and latest.checkpoint_id == 1
    [stats] = c.statistics().checkpoints
    assert stats.status is CheckpointStatus.COMPLETED
    assert stats.duration_ms == 30
    assert stats.state_size_bytes == 7
    assert stats.num_acknowledged == 4


def test_ids_rise_by_one_and_continue_after_restore() -> None:
    c = coordinator()
    assert [c.trigger_checkpoint(t)[0].checkpoint_id for t in (0, 1, 2)] == [1, 2, 3]  # type: ignore[union-attr]
    c.restore_from(41)
    [trigger] = c.trigger_checkpoint(3)
    assert isinstance(trigger, TriggerCheckpoint) and trigger.checkpoint_id == 42
    c.restore_from(10)  # never goes back
    [trigger] = c.trigger_checkpoint(4)
    assert isinstance(trigger, TriggerCheckpoint) and trigger.checkpoint_id == 43
    with pytest.raises(UsageError):
        c.restore_from(-1)


def test_timer_honours_max_concurrent_and_reschedules_when_one_ends() -> None:
    c = coordinator(max_concurrent=1)
    c.on_timer(0)
    assert c.on_timer(1000) == []  # one in flight
    ack_all(c, 1)
    assert c.on_timer(1500) == []  # still writing metadata: still in flight
    actions = c.on_metadata_written(1, now_ms=1600)
    assert actions[-1] == ScheduleNextTrigger(1600)
    assert isinstance(c.on_timer(1600)[0], TriggerCheckpoint)


def test_timer_with_two_concurrent() -> None:
    c = coordinator(max_concurrent=2)
    assert isinstance(c.on_timer(0)[0], TriggerCheckpoint)
    assert isinstance(c.on_timer(1000)[0], TriggerCheckpoint)
    assert c.on_timer(2000) == []
    actions = c.on_decline("map-0", 1, "busy", now_ms=2100)
    assert ScheduleNextTrigger(2100) in actions


def test_timer_honours_min_pause() -> None:
    c = coordinator(min_pause_ms=300, tolerable_failures=5)
    c.on_timer(0)
    ack_all(c, 1)
    c.on_metadata_written(1, now_ms=900)
    assert c.on_timer(1000) == [ScheduleNextTrigger(1200)]
    actions = c.on_timer(1200)
    assert isinstance(actions[0], TriggerCheckpoint)
    assert actions[1] == ScheduleNextTrigger(2200)


def test_min_pause_allows_no_concurrency_and_waits_after_the_end() -> None:
    c = coordinator(min_pause_ms=300, max_concurrent=3)
    c.on_timer(0)
    assert c.on_timer(1000) == []
    ack_all(c, 1)
    assert c.on_metadata_written(1, now_ms=1100)[-1] == ScheduleNextTrigger(1400)


def test_manual_trigger_bypasses_limits_and_savepoints_are_aligned() -> None:
    c = coordinator(unaligned=True)
    [first, _] = c.on_timer(0)
    assert isinstance(first, TriggerCheckpoint) and first.unaligned
    [sp] = c.trigger_checkpoint(10, is_savepoint=True)
    assert sp == TriggerCheckpoint(2, 10, True, False, 0, tuple(SOURCES))


def test_aligned_timeout_starts_aligned_with_a_timeout() -> None:
    c = coordinator(unaligned=True, aligned_timeout_ms=50)
    [trigger, _] = c.on_timer(0)
    assert isinstance(trigger, TriggerCheckpoint)
    assert not trigger.unaligned and trigger.aligned_timeout_ms == 50


def test_decline_aborts_discards_and_fails_the_job_beyond_tolerance() -> None:
    c = coordinator(tolerable_failures=1, max_concurrent=3)
    c.trigger_checkpoint(0)
    c.on_acknowledge("src-0", 1, "h0")
    actions = c.on_decline("map-0", 1, "no space")
    assert actions[0] == NotifyCheckpointAborted(1, tuple(ALL), "declined by task map-0: no space")
    assert actions[1] == DiscardCheckpoint(1, {"src-0": "h0"})
    assert not any(isinstance(a, FailJob) for a in actions)
    c.trigger_checkpoint(1)
    actions = c.on_decline("sink-0", 2, "again")
    assert isinstance(actions[-1], FailJob)
    assert "2 checkpoints failed in a row" in actions[-1].reason
    assert c.statistics().num_failed == 2


def test_completion_resets_the_failure_count() -> None:
    c = coordinator(tolerable_failures=1)
    c.trigger_checkpoint(0)
    c.on_decline("map-0", 1, "x")
    complete(c, 10)
    c.trigger_checkpoint(20)
    assert not any(isinstance(a, FailJob) for a in c.on_decline("map-0", 3, "x"))


def test_savepoint_failures_do_not_fail_the_job() -> None:
    c = coordinator()
    c.trigger_checkpoint(0, is_savepoint=True)
    assert not any(isinstance(a, FailJob) for a in c.on_decline("map-0", 1, "x"))


def test_expiry() -> None:
    c = coordinator(timeout_ms=100, tolerable_failures=3, max_concurrent=2)
    c.trigger_checkpoint(0)
    c.trigger_checkpoint(50)
    assert c.next_expiry_ms() == 100
    assert c.on_expire_check(99) == []
    actions = c.on_expire_check(100)
    assert [a.checkpoint_id for a in actions if isinstance(a, NotifyCheckpointAborted)] == [1]
    assert "expired" in actions[0].reason  # type: ignore[union-attr]
    # A checkpoint writing its metadata does not expire: the write decides.
    ack_all(c, 2)
    assert c.on_expire_check(10_000) == []
    assert c.next_expiry_ms() is None
    assert c.on_metadata_written(2)[0] == NotifyCheckpointComplete(2, tuple(ALL))


def test_metadata_failure_aborts() -> None:
    c = coordinator(tolerable_failures=0)
    c.trigger_checkpoint(0)
    ack_all(c, 1)
    actions = c.on_metadata_failed(1, OSError("disk full"))
    assert isinstance(actions[0], NotifyCheckpointAborted) and "disk full" in actions[0].reason
    assert isinstance(actions[1], DiscardCheckpoint) and len(actions[1].handles) == 4
    assert isinstance(actions[-1], FailJob)
    assert c.latest_completed() is None


def test_metadata_events_in_the_wrong_state_are_violations() -> None:
    c = coordinator()
    c.trigger_checkpoint(0)
    with pytest.raises(ProtocolViolation, match=r"on_metadata_written for checkpoint 1 in state PENDING"):
        c.on_metadata_written(1)
    with pytest.raises(ProtocolViolation, match="in state unknown"):
        c.on_metadata_failed(9, "x")


def test_late_and_duplicate_acks_are_ignored_unknown_tasks_are_violations() -> None:
    c = coordinator()
    c.trigger_checkpoint(0)
    assert c.on_acknowledge("src-0", 1, "h") == []
    assert c.on_acknowledge("src-0", 1, "h-again") == []  # duplicate
    assert c.pending_checkpoints()[0].state_handles["src-0"] == "h"
    assert c.on_acknowledge("src-0", 99, "h") == []  # unknown checkpoint
    with pytest.raises(ProtocolViolation, match="unknown task 'ghost'"):
        c.on_acknowledge("ghost", 1, "h")
    with pytest.raises(ProtocolViolation):
        c.on_decline("ghost", 1, "x")
    with pytest.raises(ProtocolViolation):
        c.on_task_failure("ghost")
    for task in ALL[1:]:
        c.on_acknowledge(task, 1, "h")
    assert c.on_acknowledge("map-0", 1, "h") == []  # while writing
    c.on_metadata_written(1)
    assert c.on_acknowledge("map-0", 1, "h") == []  # completed
    assert c.on_decline("map-0", 1, "late") == []


def test_late_ack_for_an_aborted_checkpoint_discards_its_handles() -> None:
    c = coordinator(tolerable_failures=9)
    c.trigger_checkpoint(0)
    c.on_decline("map-0", 1, "x")
    assert c.on_acknowledge("sink-0", 1, "orphan") == [DiscardCheckpoint(1, {"sink-0": "orphan"})]


def test_task_failure_aborts_pending_but_not_writing_and_does_not_count() -> None:
    c = coordinator(max_concurrent=2)
    c.trigger_checkpoint(0)
    c.trigger_checkpoint(1)
    ack_all(c, 2)
    actions = c.on_task_failure("map-0")
    assert [a.checkpoint_id for a in actions if isinstance(a, NotifyCheckpointAborted)] == [1]
    assert not any(isinstance(a, FailJob) for a in actions)
    assert c.on_metadata_written(2)[0] == NotifyCheckpointComplete(2, tuple(ALL))


def test_completion_subsumes_older_pending_checkpoints_but_not_savepoints() -> None:
    c = coordinator(max_concurrent=3)
    c.trigger_checkpoint(0)
    c.trigger_checkpoint(1, is_savepoint=True)
    c.trigger_checkpoint(2)
    ack_all(c, 3)
    actions = c.on_metadata_written(3)
    aborted = [a for a in actions if isinstance(a, NotifyCheckpointAborted)]
    assert [a.checkpoint_id for a in aborted] == [1]
    assert "subsumed" in aborted[0].reason
    assert [p.checkpoint_id for p in c.pending_checkpoints()] == [2]


def test_retention_keeps_num_retained_and_every_savepoint() -> None:
    c = coordinator(num_retained=2)
    assert complete(c, 0) == 1
    assert complete(c, 10, is_savepoint=True) == 2
    assert complete(c, 20) == 3
    [trigger] = c.trigger_checkpoint(30)
    ack_all(c, trigger.checkpoint_id)  # type: ignore[union-attr]
    actions = c.on_metadata_written(4)
    assert SubsumeCheckpoints((1,)) in actions
    assert [x.checkpoint_id for x in c.completed_checkpoints()] == [2, 3, 4]
    latest = c.latest_completed()
    assert latest is not None and latest.checkpoint_id == 4
    complete(c, 40, is_savepoint=True)
    latest = c.latest_completed()
    assert latest is not None and latest.checkpoint_id == 4
    latest = c.latest_completed(include_savepoints=True)
    assert latest is not None and latest.checkpoint_id == 5


def test_shutdown() -> None:
    c = coordinator(max_concurrent=2)
    c.trigger_checkpoint(0)
    c.trigger_checkpoint(1)
    ack_all(c, 2)
    actions = c.shutdown()
    assert [a.checkpoint_id for a in actions if isinstance(a, NotifyCheckpointAborted)] == [1]
    assert c.on_timer(5000) == []
    with pytest.raises(UsageError, match="shut down"):
        c.trigger_checkpoint(5000)
    assert c.on_metadata_written(2)[0] == NotifyCheckpointComplete(2, tuple(ALL))


def test_timer_without_interval_is_a_usage_error() -> None:
    c = CheckpointCoordinator("job", SOURCES, ALL, CheckpointCoordinatorConfig())
    with pytest.raises(UsageError, match="interval_ms"):
        c.on_timer(0)


@pytest.mark.parametrize(
    "bad",
    [
        {"interval_ms": 0},
        {"timeout_ms": 0},
        {"min_pause_ms": -1},
        {"max_concurrent": 0},
        {"tolerable_failures": -1},
        {"num_retained": 0},
        {"aligned_timeout_ms": -1},
        {"unaligned": True, "max_concurrent": 2},
    ],
)
def test_config_validation(bad: dict) -> None:
    with pytest.raises(UsageError, match="CheckpointCoordinatorConfig"):
        CheckpointCoordinatorConfig(**bad)


def test_constructor_validation() -> None:
    with pytest.raises(UsageError):
        CheckpointCoordinator("job", SOURCES, [], CheckpointCoordinatorConfig())
    with pytest.raises(UsageError):
        CheckpointCoordinator("job", SOURCES, ["a", "a"], CheckpointCoordinatorConfig())


def test_config_from_configuration() -> None:
    conf = Configuration()
    conf.set_string("execution.checkpointing.interval", "10 s")
    conf.set_string("execution.checkpointing.num-retained", "3")
    conf.set_string("execution.checkpointing.unaligned.enabled", "true")
    cfg = CheckpointCoordinatorConfig.from_configuration(conf)
    assert cfg.interval_ms == 10_000
    assert cfg.num_retained == 3
    assert cfg.unaligned
    assert cfg.timeout_ms == 600_000


def test_statistics_counts() -> None:
    c = coordinator(max_concurrent=2, tolerable_failures=5)
    complete(c, 0)
    c.trigger_checkpoint(10)
    c.on_decline("map-0", 2, "x", now_ms=15)
    c.trigger_checkpoint(20)
    stats = c.statistics()
    assert (stats.num_triggered, stats.num_completed, stats.num_failed, stats.num_in_progress) == (3, 1, 1, 1)
    assert stats.latest_completed_id == 1
    assert [s.status for s in stats.checkpoints] == [
        CheckpointStatus.COMPLETED,
        CheckpointStatus.ABORTED,
        CheckpointStatus.PENDING,
    ]
    assert stats.checkpoints[1].failure_reason == "declined by task map-0: x"
    assert stats.checkpoints[1].duration_ms == 5
    assert stats.checkpoints[2].duration_ms is None

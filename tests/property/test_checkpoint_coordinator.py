"""The checkpoint coordinator under random sequences of triggers, answers, expiry and metadata."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.checkpoint.coordinator import (
    CheckpointCoordinator,
    CheckpointCoordinatorConfig,
    DiscardCheckpoint,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    ScheduleNextTrigger,
    SubsumeCheckpoints,
    TriggerCheckpoint,
    WriteMetadata,
)

TASKS = ["src-0", "map-0", "map-1", "sink-0"]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("timer"), st.integers(0, 500)),
        st.tuples(st.just("trigger"), st.booleans()),
        st.tuples(st.just("trigger"), st.just(False)),
        st.tuples(st.just("ack_pending"), st.integers(0, 8), st.just(len(TASKS))),
        st.tuples(st.just("ack"), st.integers(0, len(TASKS) - 1), st.integers(-1, 8)),
        st.tuples(st.just("ack"), st.integers(0, len(TASKS) - 1), st.integers(-1, 8)),
        st.tuples(st.just("ack"), st.integers(0, len(TASKS) - 1), st.integers(-1, 8)),
        st.tuples(st.just("ack_pending"), st.integers(0, 8), st.integers(1, len(TASKS))),
        st.tuples(st.just("ack_pending"), st.integers(0, 8), st.integers(1, len(TASKS))),
        st.tuples(st.just("meta_ok"), st.integers(0, 8)),
        st.tuples(st.just("decline"), st.integers(0, len(TASKS) - 1), st.integers(-1, 8)),
        st.tuples(st.just("expire"), st.integers(0, 2000)),
        st.tuples(st.just("meta_ok"), st.integers(0, 8)),
        st.tuples(st.just("meta_fail"), st.integers(0, 8)),
        st.tuples(st.just("task_failure"), st.integers(0, len(TASKS) - 1)),
        st.tuples(st.just("restore"), st.integers(0, 30)),
    ),
    min_size=10,
    max_size=150,
)

configs = st.builds(
    CheckpointCoordinatorConfig,
    interval_ms=st.integers(1, 1000),
    timeout_ms=st.integers(1, 3000),
    min_pause_ms=st.integers(0, 300),
    max_concurrent=st.integers(1, 3),
    tolerable_failures=st.integers(0, 3),
    num_retained=st.integers(1, 3),
)


@settings(max_examples=400)
@given(configs, ops)
def test_coordinator_invariants(config: CheckpointCoordinatorConfig, sequence: list) -> None:
    c = CheckpointCoordinator("job", TASKS[:1], TASKS, config)
    now = 0
    triggered: list[int] = []
    savepoints: set[int] = set()
    acked: dict[int, set[str]] = {}
    write_requested: set[int] = set()
    writing: set[int] = set()  # WriteMetadata emitted, not yet answered
    meta_ok: set[int] = set()
    completed: set[int] = set()
    aborted: set[int] = set()
    subsumed: set[int] = set()
    restored_floor = 0

    for op in sequence:
        kind = op[0]
        actions: list = []
        if kind == "timer":
            now += op[1]
            actions = c.on_timer(now)
        elif kind == "trigger":
            actions = c.trigger_checkpoint(now, is_savepoint=op[1])
        elif kind == "ack":
            task, checkpoint_id = (
                TASKS[op[1]],
                (triggered[op[2]] if 0 <= op[2] < len(triggered) else 100 + op[2]),
            )
            if checkpoint_id in triggered and checkpoint_id not in completed | aborted:
                acked.setdefault(checkpoint_id, set()).add(task)
            actions = c.on_acknowledge(
                task, checkpoint_id, f"{task}@{checkpoint_id}", {"state_size_bytes": 1}
            )
        elif kind == "ack_pending":
            # Several tasks acknowledge one in-flight checkpoint (so that many complete).
            pending = c.pending_checkpoints()
            if not pending:
                continue
            checkpoint_id = pending[op[1] % len(pending)].checkpoint_id
            for task in TASKS[: op[2]]:
                if checkpoint_id not in completed | aborted:
                    acked.setdefault(checkpoint_id, set()).add(task)
                actions += c.on_acknowledge(task, checkpoint_id, f"{task}@{checkpoint_id}")
        elif kind == "decline":
            task, checkpoint_id = (
                TASKS[op[1]],
                (triggered[op[2]] if 0 <= op[2] < len(triggered) else 100 + op[2]),
            )
            actions = c.on_decline(task, checkpoint_id, "declined")
        elif kind == "expire":
            now += op[1]
            actions = c.on_expire_check(now)
        elif kind in ("meta_ok", "meta_fail"):
            if not writing:
                continue
            checkpoint_id = sorted(writing)[op[1] % len(writing)]
            writing.discard(checkpoint_id)
            if kind == "meta_ok":
                meta_ok.add(checkpoint_id)
                actions = c.on_metadata_written(checkpoint_id, now_ms=now)
            else:
                actions = c.on_metadata_failed(checkpoint_id, "io error", now_ms=now)
        elif kind == "task_failure":
            actions = c.on_task_failure(TASKS[op[1]])
        else:
            restored_floor = max(restored_floor, op[1])
            c.restore_from(op[1])

        for action in actions:
            if isinstance(action, TriggerCheckpoint):
                # Ids rise by one from 1, skipping only to after a restored checkpoint.
                previous = triggered[-1] if triggered else 0
                assert action.checkpoint_id == max(previous, restored_floor) + 1
                triggered.append(action.checkpoint_id)
                if action.is_savepoint:
                    savepoints.add(action.checkpoint_id)
                    assert not action.unaligned
            elif isinstance(action, WriteMetadata):
                assert action.checkpoint_id not in write_requested
                assert acked.get(action.checkpoint_id) == set(TASKS)
                assert set(action.pending.state_handles) == set(TASKS)
                write_requested.add(action.checkpoint_id)
                writing.add(action.checkpoint_id)
            elif isinstance(action, NotifyCheckpointComplete):
                # Only after every ack and the metadata write; once.
                assert action.checkpoint_id in write_requested
                assert action.checkpoint_id in meta_ok
                assert action.checkpoint_id not in completed | aborted
                completed.add(action.checkpoint_id)
            elif isinstance(action, NotifyCheckpointAborted):
                assert action.checkpoint_id not in completed | aborted
                assert action.checkpoint_id in triggered
                aborted.add(action.checkpoint_id)
                writing.discard(action.checkpoint_id)
            elif isinstance(action, DiscardCheckpoint):
                # Never the state of a completed checkpoint, savepoint or not.
                assert action.checkpoint_id not in completed
                assert action.checkpoint_id in aborted
            elif isinstance(action, SubsumeCheckpoints):
                for checkpoint_id in action.checkpoint_ids:
                    assert checkpoint_id in completed
                    assert checkpoint_id not in savepoints
                    assert checkpoint_id not in subsumed
                    subsumed.add(checkpoint_id)
            elif isinstance(action, ScheduleNextTrigger):
                assert action.at_ms >= now

        retained = [x for x in c.completed_checkpoints() if not x.is_savepoint]
        assert len(retained) <= config.num_retained
        assert {x.checkpoint_id for x in c.completed_checkpoints()} == completed - subsumed
        assert savepoints & completed <= {x.checkpoint_id for x in c.completed_checkpoints()}
        # Retained are the newest completed checkpoints.
        checkpoints_done = sorted(completed - savepoints)
        assert [x.checkpoint_id for x in retained] == checkpoints_done[
            len(checkpoints_done) - len(retained) :
        ]
        in_flight = set(triggered) - completed - aborted
        assert {p.checkpoint_id for p in c.pending_checkpoints()} == in_flight
        assert c.statistics().num_in_progress == len(in_flight)


@settings(max_examples=200)
@given(configs, st.lists(st.integers(0, 400), max_size=60))
def test_periodic_triggers_never_exceed_max_concurrent(
    config: CheckpointCoordinatorConfig, steps: list
) -> None:
    c = CheckpointCoordinator("job", TASKS[:1], TASKS, config)
    now = 0
    limit = 1 if config.min_pause_ms > 0 else config.max_concurrent
    for dt in steps:
        now += dt
        c.on_timer(now)
        assert len(c.pending_checkpoints()) <= limit
        # Acknowledge the oldest checkpoint now and then, to let others start.
        pending = c.pending_checkpoints()
        if pending and dt % 3 == 0:
            checkpoint_id = pending[0].checkpoint_id
            for task in TASKS:
                c.on_acknowledge(task, checkpoint_id, None)
            c.on_metadata_written(checkpoint_id, now_ms=now)

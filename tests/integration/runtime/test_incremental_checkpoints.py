"""LMDB incremental checkpoints end to end (MockClock): a job that fails and recovers from a chain of
delta files gives the output of a run without failure, and no shared file outlives its checkpoints."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.checkpoint.storage import CheckpointStorage
from weir.cluster import checkpointing, job_master
from weir.cluster.checkpoint_stats import HISTORY_FILE_NAME
from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster
from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.state_backend import LmdbStateBackend
from weir.graph.job_graph import generate_job_graph
from weir.state.incremental import ChainRestore
from weir.state.state_file import decode_state_file

EVENTS = 24_000
HALF = EVENTS // 2  # at parallelism 2 the generator's subtasks read [0, HALF) and [HALF, EVENTS)
SEED = 2_000  # each half first creates SEED keys, then updates only HOT of them,
HOT = 50  # so the checkpoints after the first few are small deltas on a large base
FAIL_AT = 15_000
ARMED = {"fail": False}


def key_of(n: int) -> int:
    """The two halves have disjoint keys: every key is fed by one source subtask, in order, so its
    running sums are the same in every run."""
    offset = n % HALF
    return (n // HALF) * SEED + (offset if offset < SEED else offset % HOT)


def explode_once(n: int) -> int:
    if n == FAIL_AT and ARMED["fail"]:
        ARMED["fail"] = False
        raise RuntimeError(f"injected failure at record {FAIL_AT}")
    return n


async def _run(tmp_path: Path, name: str, fail: bool) -> tuple[list[tuple[int, int]], Any, Path]:
    ARMED["fail"] = fail
    conf = Configuration()
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "3")
    conf.set_string("restart-strategy.fixed-delay.delay", "500 ms")
    conf.set_string("execution.checkpointing.num-retained", "2")
    conf.set_string("execution.checkpointing.dir", str(tmp_path / name / "checkpoints"))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_state_backend(LmdbStateBackend(tmp_path / name / "lmdb", enable_incremental_checkpointing=True))
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    out: list[tuple[int, int]] = []
    (
        env.from_source(
            DataGeneratorSource(lambda i: i, EVENTS, rate_limit=2000.0, type_info=Types.LONG()),
            WatermarkStrategy.no_watermarks(),
            "numbers",
        )
        .map(explode_once)
        .key_by(key_of)
        .map(lambda n: (key_of(n), n))
        .key_by(lambda p: p[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("sums")
        .add_sink(out.append)
    )
    job_graph = generate_job_graph(env.get_stream_graph(f"incremental sums {name}"))
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=2)) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))
        result = await handle.wait()
        master = handle.job_master
    assert result.status.name == "FINISHED", result.failure
    return out, master, tmp_path / name / "checkpoints" / master.job_id


async def test_recovery_from_a_chain_gives_the_output_of_a_run_without_failure(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    restored_chains: list[int] = []
    load = job_master._load_restore_state

    def spy(storage: Any, metadata: Any) -> Any:
        state = load(storage, metadata)
        for payloads in state.values():
            restored_chains.extend(
                len(p["keyed"].handle.chain) for p in payloads if isinstance(p.get("keyed"), ChainRestore)
            )
        return state

    monkeypatch.setattr(job_master, "_load_restore_state", spy)
    left_at_the_end: list[Any] = []  # what the job left just before its end discarded its checkpoints
    discard = checkpointing.discard_job_checkpoints

    def look_then_discard(storage: CheckpointStorage) -> None:
        listing = storage.list_checkpoints()
        left_at_the_end.append((listing, storage.list_shared_files(), list(storage.job_dir.glob("chk-*/.*"))))
        discard(storage)

    monkeypatch.setattr(checkpointing, "discard_job_checkpoints", look_then_discard)

    expected_out, _, _ = await _run(tmp_path, "clean", fail=False)
    out, master, job_dir = await _run(tmp_path, "failing", fail=True)

    assert master.restarts == 1 and "injected failure" in str(master.failures[0]), master.failures
    # the restore read chains (two keyed operators, two subtasks each), some with deltas on their base
    assert len(restored_chains) == 4 and max(restored_chains) >= 2, restored_chains
    # the sink is not transactional: records after the checkpoint are emitted twice, but every
    # running sum is one the clean run emitted too, and none is missing -- the state is exactly once
    assert len(out) > len(expected_out)
    assert set(out) == set(expected_out)
    totals: dict[int, int] = defaultdict(int)
    for i in range(EVENTS):
        totals[key_of(i)] += i
    final: dict[int, int] = {}
    for key, total in out:
        final[key] = max(final.get(key, 0), total)
    assert final == dict(totals)

    # no orphans at the job's end: every shared file belongs to a retained checkpoint, every
    # checkpoint is complete; then the FINISHED job's checkpoints are discarded (Flink's retention)
    _clean_run, (listing, shared, temporary) = left_at_the_end
    assert not listing.incomplete, listing.incomplete
    assert 1 <= len(listing.completed) <= 2
    referenced = {f.path for m in listing.completed for f in m.shared_files()}
    assert referenced and set(shared) == referenced
    assert not temporary, "temporary files left behind"
    assert [p.name for p in job_dir.iterdir()] == [HISTORY_FILE_NAME]


@pytest.mark.parametrize("writer", ["thread", "child"])
async def test_the_driver_keeps_exactly_the_files_retained_checkpoints_need(
    writer: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """One LMDB subtask checkpointing through a real CheckpointDriver: an aborted checkpoint's upload is
    deleted, its changes reach the next checkpoint, retention drops an old base only once no retained
    checkpoint lists it, and when the driver stops nothing unreferenced is left -- whether a worker
    thread or a forked child (``weir.task.forked``) writes the runs."""
    from weir.checkpoint.coordinator import CheckpointCoordinatorConfig
    from weir.cluster.checkpointing import CheckpointDriver
    from weir.datastream.state import ValueStateDescriptor
    from weir.keys import KeyGroupRange
    from weir.state import LmdbKeyedStateBackend
    from weir.state.incremental import load_for_restore
    from weir.task.forked import write_in_child
    from weir.task.snapshots import OperatorSnapshot, write_operator_snapshots

    triggered: list[int] = []
    # no expiry: while a worker thread writes, MockClock's autojump may leap over any timeout
    config = CheckpointCoordinatorConfig(
        interval_ms=1000, timeout_ms=10**12, num_retained=2, tolerable_failures=5
    )
    driver = CheckpointDriver(
        "job", tmp_path / "checkpoints", config, ["writer"], ["writer", "other"],
        lambda: int(trio.current_time() * 1000), lambda action: triggered.append(action.checkpoint_id),
        lambda checkpoint_id: None, lambda reason: None,
    )  # fmt: skip
    storage = driver.storage
    rng = KeyGroupRange(0, 15)
    backend = LmdbKeyedStateBackend(
        "op", 16, rng, path=tmp_path / "lmdb", incremental=True, max_chain_length=3
    )
    value = backend.get_state(ValueStateDescriptor("v"))

    def on_disk() -> set[str]:
        return set(storage.list_shared_files())

    async def eventually(condition: Any, what: str) -> None:
        """Deletions run in the driver's worker threads: give them real time, a bounded number of times."""
        for _ in range(3000):
            if condition():
                return
            await trio.to_thread.run_sync(time.sleep, 0.001)
        raise AssertionError(f"never happened: {what}")

    def retained_files() -> set[str]:
        return {f.path for m in storage.list_checkpoints().completed for f in m.shared_files()}

    async def checkpoint(outcome: str) -> Any:
        while not triggered:
            await trio.sleep(0.1)
        checkpoint_id = triggered.pop(0)
        for k in range(checkpoint_id * 10, checkpoint_id * 10 + 20):  # 20 keys, half of them new
            backend.set_current_key(k)
            value.update(checkpoint_id)
        snap = OperatorSnapshot(
            "op", 1, 16, 0, keyed=backend.snapshot_incremental(checkpoint_id, storage.is_complete),
            key_group_range=rng,
        )  # fmt: skip
        if writer == "child":
            acks, size, _ = await write_in_child(storage, checkpoint_id, [snap])
        else:
            acks, size = await trio.to_thread.run_sync(
                write_operator_snapshots, storage, checkpoint_id, [snap]
            )
        driver.on_acknowledge("writer", checkpoint_id, acks, size)
        if outcome == "complete":
            driver.on_acknowledge("other", checkpoint_id, [], 0)
            while not storage.is_complete(checkpoint_id) or driver.completed[-1:] != [checkpoint_id]:
                await trio.sleep(0.01)
        else:
            driver.on_decline("other", checkpoint_id, "injected")
            await eventually(lambda: not storage.checkpoint_dir(checkpoint_id).exists(), "discarded")
        return acks[0].handle

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.run, lambda: True)
            first = await checkpoint("complete")
            second = await checkpoint("complete")
            assert len(second.shared_files) == 2 and second.shared_files[0] == first.shared_files[0]
            aborted = await checkpoint("decline")
            await eventually(lambda: aborted.shared_files[-1].path not in on_disk(), "its upload deleted")
            assert {f.path for f in second.shared_files} <= on_disk()  # ...the chain it built on is not
            third = await checkpoint("complete")  # built on the second; covers the aborted one's keys
            assert third.shared_files[:2] == second.shared_files and len(third.shared_files) == 3
            await eventually(lambda: on_disk() == retained_files(), "only retained files")
            fourth = await checkpoint("complete")  # the chain was full: a new base
            assert len(fourth.shared_files) == 1
            await eventually(lambda: on_disk() == retained_files(), "only retained files")
            fifth = await checkpoint("complete")  # retention drops the third: the old chain goes
            expected = {f.path for f in (*fourth.shared_files, *fifth.shared_files)}
            await eventually(lambda: on_disk() == expected, "the old chain deleted")
            nursery.cancel_scope.cancel()
        assert on_disk() == retained_files()
        assert not storage.list_checkpoints().incomplete
        latest = storage.list_checkpoints().completed[0]
        (handle,) = latest.operators[0].state_handles
        payload = decode_state_file(storage.read_state_file(handle.file), handle.file.path, trusted=False)
        chain = load_for_restore(payload["keyed"], handle.shared_files, storage.read_state_file)
        restored = LmdbKeyedStateBackend("op", 16, rng, path=tmp_path / "restored")
        try:
            restored.restore([chain])
            assert restored.snapshot() == backend.snapshot()
        finally:
            restored.dispose()
    finally:
        backend.dispose()

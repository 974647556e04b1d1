"""Aligned checkpoints end to end (MockClock): barriers, snapshots, _metadata, a consistent cut."""

from __future__ import annotations

from collections import defaultdict

import pytest
import trio

from weir.checkpoint.storage import CheckpointStorage
from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster
from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import ExternalizedCheckpointRetention, StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.state import ValueStateDescriptor
from weir.graph.job_graph import generate_job_graph
from weir.keys import KeyGroupRange
from weir.state import create_keyed_backend
from weir.state.state_file import decode_state_file

KEYS = 5


def keyed_sum_job(backend: str) -> tuple[StreamExecutionEnvironment, object]:
    conf = Configuration()
    conf.set_string("state.backend.type", backend)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    (
        env.from_source(
            DataGeneratorSource(lambda i: i, None, rate_limit=2000.0, type_info=Types.LONG()),
            WatermarkStrategy.no_watermarks(),
            "numbers",
        )
        .key_by(lambda n: n % KEYS)
        .reduce(lambda a, b: a + b)
        .uid("sum")
        .rebalance()
        .add_sink(lambda v: None)
    )
    return env, generate_job_graph(env.get_stream_graph("checkpointed sum"))


@pytest.mark.parametrize("transport", ["local", "tcp"])
@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
async def test_checkpoints_complete_and_capture_a_consistent_cut(
    backend: str, transport: str, autojump_clock: trio.testing.MockClock
) -> None:
    env, job_graph = keyed_sum_job(backend)
    retain = ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION  # the test reads it after the cancel
    env.get_checkpoint_config().set_externalized_checkpoint_retention(retain)
    # one slot each: the two subtasks run on different TaskManagers, the shuffle between them is remote
    config = ClusterConfig(taskmanagers=2, slots_per_taskmanager=1, transport=transport)
    async with open_minicluster(config) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))  # type: ignore[arg-type]
        driver = None
        with trio.fail_after(300):
            while driver is None or len(driver.completed) < 3:
                await trio.sleep(0.5)
                driver = handle.job_master.checkpoints
        connections = [c.statistics() for c in cluster.registry.connections()]
        assert {c.transport for c in connections} == {transport}
        assert sum(c.buffers_sent for c in connections) > 0
        assert sum(c.events_sent for c in connections) >= 2 * 3  # barriers travel the remote channels
        handle.cancel()
        await handle.wait()
        assert driver.completed == sorted(driver.completed)
        storage: CheckpointStorage = driver.storage
        listing = storage.list_checkpoints()
        assert [m.checkpoint_id for m in listing.completed] == [driver.completed[-1]]  # 1 retained
        metadata = storage.load(driver.completed[-1], verify_checksums=True)
        payloads = {
            h.file.path: decode_state_file(storage.read_state_file(h.file), h.file.path, trusted=False)
            for op in metadata.operators
            for h in op.state_handles
        }  # read before the cluster (and its working directory) goes away

    # sources recorded where they stopped; the sum operator's state must be exactly the sum
    # of everything the sources emitted before the barrier: the checkpoint is a consistent cut
    source_op = next(op for op in metadata.operators if op.source_positions)
    expected: dict[int, int] = defaultdict(int)
    for subtask, position in source_op.source_positions.items():
        ((next_index, _, stride),) = position["splits"]  # one unbounded split: every 2nd index from next
        for i in range(int(subtask), next_index, stride):
            expected[i % KEYS] += i
    sum_op = next(op for op in metadata.operators if any(h.state_kind == "keyed" for h in op.state_handles))
    restored = create_keyed_backend("hashmap", sum_op.operator_id, sum_op.max_parallelism,
                                    KeyGroupRange(0, sum_op.max_parallelism - 1))  # fmt: skip
    for h in sum_op.state_handles:
        payload = payloads[h.file.path]
        assert payload["keyed"] is not None
        assert h.key_group_range is not None
        restored.restore([payload["keyed"]])
    state = restored.get_state(ValueStateDescriptor("_weir_rolling_value"))
    got = {}
    for key in restored.keys("_weir_rolling_value"):
        restored.set_current_key(key)
        got[key] = state.value()
    assert got == dict(expected)
    assert sum(expected.values()) > 0


async def test_a_cancelled_jobs_checkpoints_are_discarded_by_default(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """NO_EXTERNALIZED_CHECKPOINTS (Flink's default): nothing of the checkpoints outlives the job."""
    env, job_graph = keyed_sum_job("hashmap")
    async with open_minicluster(ClusterConfig(taskmanagers=1, slots_per_taskmanager=2)) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))  # type: ignore[arg-type]
        with trio.fail_after(300):
            while handle.job_master.checkpoints is None or not handle.job_master.checkpoints.completed:
                await trio.sleep(0.5)
        storage: CheckpointStorage = handle.job_master.checkpoints.storage
        assert storage.list_checkpoints().completed
        handle.cancel()
        result = await handle.wait()
        assert result.status.name == "CANCELED"
        assert not storage.list_checkpoints().completed and not storage.shared_dir.exists()


FAIL_ONCE = {"armed": True}


def explode_once(n: int) -> int:
    # record 9,500 of subtask 0 comes 9.5 s after its start (1,000 records/s), half way
    # between two checkpoints: a failure on a checkpoint's tick would leave which comes
    # first, the barrier or the failing batch, to the order of two tasks woken together
    if n == 9_500 and FAIL_ONCE["armed"]:
        FAIL_ONCE["armed"] = False
        raise RuntimeError("injected failure at record 9500")
    return n


@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
async def test_recovery_restores_state_and_rewinds_sources_exactly_once(
    backend: str, autojump_clock: trio.testing.MockClock
) -> None:
    FAIL_ONCE["armed"] = True
    events = 20_000
    conf = Configuration()
    conf.set_string("state.backend.type", backend)
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "3")
    conf.set_string("restart-strategy.fixed-delay.delay", "500 ms")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    out: list[tuple[int, int]] = []
    (
        env.from_source(
            DataGeneratorSource(lambda i: i, events, rate_limit=2000.0, type_info=Types.LONG()),
            WatermarkStrategy.no_watermarks(),
            "numbers",
        )
        .map(explode_once)
        .key_by(lambda n: n % KEYS)
        .map(lambda n: (n % KEYS, n))
        .key_by(lambda p: p[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .add_sink(out.append)
    )
    job_graph = generate_job_graph(env.get_stream_graph("recovering sum"))
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=2)) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))
        result = await handle.wait()
        master = handle.job_master
    assert result.status.name == "FINISHED", result.failure
    assert master.restarts == 1 and "injected failure" in str(master.failures[0]), master.failures
    assert master.checkpoints is not None and master.checkpoints.completed
    # the sink is not transactional, so records after the checkpoint are emitted twice;
    # but the state is exactly once: each key's final running sum is the true total
    final: dict[int, int] = {}
    for key, total in out:
        final[key] = max(final.get(key, 0), total)
    expected: dict[int, int] = defaultdict(int)
    for i in range(events):
        expected[i % KEYS] += i
    assert final == dict(expected)
    assert len(out) > events  # the replay after the restore really happened

"""Aligned checkpoints end to end (MockClock): barriers, snapshots, _metadata, a consistent cut."""

from __future__ import annotations

import pickle
from collections import defaultdict

import pytest
import trio

from engine.checkpoint.storage import CheckpointStorage
from engine.common import Configuration, Types, WatermarkStrategy
from engine.datastream import StreamExecutionEnvironment
from engine.datastream.connectors.datagen import DataGeneratorSource
from engine.datastream.state import ValueStateDescriptor
from engine.graph.job_graph import generate_job_graph
from engine.keys import KeyGroupRange
from engine.runtime.client import job_settings_for
from engine.runtime.minicluster import ClusterConfig, open_minicluster
from engine.state import create_keyed_backend

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


@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
async def test_checkpoints_complete_and_capture_a_consistent_cut(
    backend: str, autojump_clock: trio.testing.MockClock
) -> None:
    env, job_graph = keyed_sum_job(backend)
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=2)) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))  # type: ignore[arg-type]
        driver = None
        with trio.fail_after(300):
            while driver is None or len(driver.completed) < 3:
                await trio.sleep(0.5)
                driver = handle.job_master.checkpoints
        handle.cancel()
        await handle.wait()
        assert driver.completed == sorted(driver.completed)
        storage: CheckpointStorage = driver.storage
        listing = storage.list_checkpoints()
        assert [m.checkpoint_id for m in listing.completed] == [driver.completed[-1]]  # 1 retained
        metadata = storage.load(driver.completed[-1], verify_checksums=True)
        payloads = {
            h.file.path: pickle.loads(storage.read_state_file(h.file))
            for op in metadata.operators
            for h in op.state_handles
        }  # read before the cluster (and its working directory) goes away

    # sources recorded where they stopped; the sum operator's state must be exactly the sum
    # of everything the sources emitted before the barrier: the checkpoint is a consistent cut
    source_op = next(op for op in metadata.operators if op.source_positions)
    expected: dict[int, int] = defaultdict(int)
    for subtask, position in source_op.source_positions.items():
        for i in range(int(subtask), position["next"], 2):  # the generator's stride split over 2 subtasks
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

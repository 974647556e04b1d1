"""Unaligned checkpoints end to end (MockClock): barriers overtake buffered output, in-flight
data becomes channel state, and recovery replays it: the state is exactly once."""

from __future__ import annotations

from collections import defaultdict

import pytest
import trio

from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster
from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.graph.job_graph import generate_job_graph

KEYS = 7
ARMED = {"fail_at": None}


def explode_once(n: int) -> int:
    if n == ARMED["fail_at"]:
        ARMED["fail_at"] = None
        raise RuntimeError(f"injected failure at record {n}")
    return n


def job(events: int, backend: str, aligned_timeout_ms: int, out: list) -> tuple:
    conf = Configuration()
    conf.set_string("state.backend.type", backend)
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "3")
    conf.set_string("restart-strategy.fixed-delay.delay", "200 ms")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    config = env.get_checkpoint_config().enable_unaligned_checkpoints()
    if aligned_timeout_ms:
        from weir.common import Duration

        config.set_aligned_checkpoint_timeout(Duration.of_millis(aligned_timeout_ms))
    (
        env.from_source(
            DataGeneratorSource(lambda i: i, events, rate_limit=20_000.0, type_info=Types.LONG()),
            WatermarkStrategy.no_watermarks(),
            "numbers",
        )
        .map(explode_once, output_type=Types.LONG())
        .key_by(lambda n: n % KEYS, key_type=Types.LONG())
        .map(lambda n: (n % KEYS, n), output_type=Types.TUPLE([Types.LONG(), Types.LONG()]))
        .key_by(lambda p: p[0], key_type=Types.LONG())
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .add_sink(out.append)
    )
    return env, generate_job_graph(env.get_stream_graph("unaligned sum"))


@pytest.mark.parametrize(("backend", "aligned_timeout_ms"), [("hashmap", 0), ("lmdb", 0), ("hashmap", 5)])
async def test_unaligned_recovery_is_exactly_once_for_state(
    backend: str, aligned_timeout_ms: int, autojump_clock: trio.testing.MockClock
) -> None:
    events = 30_000
    ARMED["fail_at"] = 21_001
    out: list = []
    env, graph = job(events, backend, aligned_timeout_ms, out)
    persisted: list[int] = []
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=4)) as cluster:
        handle = cluster.submit(graph, job_settings_for(env))

        async def watch() -> None:
            while True:
                persisted.append(
                    sum(
                        h.task.checkpointing.persisted_in_flight_bytes
                        for h in handle.job_master.handles.values()
                        if h.task
                    )
                )
                await trio.sleep(0.05)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            result = await handle.wait()
            nursery.cancel_scope.cancel()
        master = handle.job_master
    assert result.status.name == "FINISHED", result.failure
    assert master.restarts == 1 and master.checkpoints.completed
    if aligned_timeout_ms == 0:
        assert max(persisted) > 0  # barriers overtook buffered data: channel state was written
    final: dict[int, int] = {}
    for key, total in out:
        final[key] = max(final.get(key, 0), total)
    expected: dict[int, int] = defaultdict(int)
    for i in range(events):
        expected[i % KEYS] += i
    assert final == dict(expected)

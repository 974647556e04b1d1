"""Broadcast state through a savepoint: every subtask of the resumed job, at another
parallelism, has the broadcast state the stopped job built, and keyed state moves with its keys."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from weir.common import Configuration, Types
from weir.datastream import KeyedBroadcastProcessFunction, StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.state import MapStateDescriptor, ValueStateDescriptor

PAIR = Types.TUPLE([Types.LONG(), Types.LONG()])
FACTORS = MapStateDescriptor("factors", Types.STRING(), Types.LONG())
SEEN = ValueStateDescriptor("seen", Types.LONG())
KEYS = 5


class Scale(KeyedBroadcastProcessFunction):
    """(key, n-th record of the key, factor from the broadcast state or -1 before it arrived)."""

    def open(self, runtime_context: Any) -> None:
        self.seen = runtime_context.get_state(SEEN)

    def process_element(self, value: Any, ctx: Any) -> Any:
        n = (self.seen.value() or 0) + 1
        self.seen.update(n)
        factor = ctx.get_broadcast_state(FACTORS).get("factor")
        yield (ctx.get_current_key(), n, -1 if factor is None else factor)

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        if value[0] == 0:  # the first record sets the factor, the others keep the source running
            ctx.get_broadcast_state(FACTORS).put("factor", value[1])


def job(parallelism: int, backend: str, out: list, savepoint: str | None = None) -> Any:
    from weir.graph.job_graph import generate_job_graph

    conf = Configuration()
    conf.set_string("state.backend.type", backend)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    records = env.from_source(
        DataGeneratorSource(lambda i: (i % KEYS, i), 400, rate_limit=200.0, type_info=PAIR),
        _no_watermarks(),
        "records",
    ).uid("records")
    factor = env.from_source(
        DataGeneratorSource(lambda i: (i, 7), 400, rate_limit=200.0, type_info=PAIR),
        _no_watermarks(),
        "factor",
    ).uid("factor")
    (
        records.key_by(lambda r: r[0])
        .connect(factor.broadcast(FACTORS))
        .process(Scale())
        .uid("scale")
        .add_sink(out.append)
        .set_parallelism(1)
    )
    if savepoint is not None:
        env._restore_from(savepoint, False)
    return env, generate_job_graph(env.get_stream_graph("broadcast savepoint"))


def _no_watermarks() -> Any:
    from weir.common import WatermarkStrategy

    return WatermarkStrategy.no_watermarks()


@pytest.mark.parametrize(("old_p", "new_p", "new_backend"), [(2, 3, "lmdb"), (3, 1, "hashmap")])
async def test_broadcast_state_survives_a_savepoint_at_another_parallelism(
    old_p: int, new_p: int, new_backend: str, tmp_path: Any, autojump_clock: Any
) -> None:
    import trio

    from weir.cluster.client import job_settings_for
    from weir.cluster.minicluster import ClusterConfig, open_minicluster

    first: list = []
    env, graph = job(old_p, "hashmap", first)
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=4)) as cluster:
        handle = cluster.submit(graph, job_settings_for(env))
        await trio.sleep(1.0)
        path = await handle.job_master.trigger_savepoint(str(tmp_path), "canonical", "no_drain")
        result = await handle.wait()
    assert result.status.name == "FINISHED", result.failure
    assert 0 < len(first) < 400  # stopped midway
    assert any(factor == 7 for _, _, factor in first)  # the factor arrived before the savepoint
    second: list = []
    env, graph = job(new_p, new_backend, second, savepoint=path)
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=4)) as cluster:
        result = await cluster.submit(graph, job_settings_for(env)).wait()
    assert result.status.name == "FINISHED", result.failure
    # the factor source resumes past its first record: only the restored broadcast state gives
    # 7 to every subtask
    assert {factor for _, _, factor in second} == {7}
    # keyed state moved with the keys: each key's records are numbered 1..80 once over both runs
    counts = Counter((key, n) for key, n, _ in first + second)
    assert counts == Counter((key, n) for key in range(KEYS) for n in range(1, 400 // KEYS + 1))

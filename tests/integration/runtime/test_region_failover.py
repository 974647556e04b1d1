"""Failover strategies (MockClock): with ``region`` (the default, as in Flink) a failure restarts
only the pipelined region of the failed task; with ``full`` every task restarts."""

from __future__ import annotations

from collections import defaultdict

import pytest

from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster
from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.graph.execution_graph import build_execution_graph
from weir.graph.job_graph import generate_job_graph

EVENTS = 8_000
ARMED = {"fail_at": None}


def explode_once(n: int) -> int:
    if n == ARMED["fail_at"]:
        ARMED["fail_at"] = None
        raise RuntimeError(f"injected failure at record {n}")
    return n


def two_pipelines(strategy: str, left: list, right: list) -> tuple:
    conf = Configuration()
    conf.set_string("jobmanager.execution.failover-strategy", strategy)
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "3")
    conf.set_string("restart-strategy.fixed-delay.delay", "100 ms")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.enable_checkpointing(200)
    for name, out, fail in (("left", left, True), ("right", right, False)):
        numbers = env.from_source(
            DataGeneratorSource(lambda i: i, EVENTS, rate_limit=4000.0, type_info=Types.LONG()),
            WatermarkStrategy.no_watermarks(),
            name,
        )
        if fail:
            numbers = numbers.map(explode_once, output_type=Types.LONG())
        (
            numbers.map(lambda n: (n % 3, n), output_type=Types.TUPLE([Types.LONG(), Types.LONG()]))
            .key_by(lambda p: p[0], key_type=Types.LONG())
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
            .add_sink(out.append)
        )
    return env, generate_job_graph(env.get_stream_graph(f"two pipelines ({strategy})"))


def finals(out: list) -> dict[int, int]:
    final: dict[int, int] = {}
    for key, total in out:
        final[key] = max(final.get(key, 0), total)
    return final


@pytest.mark.parametrize("strategy", ["region", "full"])
async def test_a_failure_restarts_its_region_only_unless_full(strategy: str, autojump_clock: object) -> None:
    ARMED["fail_at"] = 5_001
    left: list = []
    right: list = []
    env, graph = two_pipelines(strategy, left, right)
    assert len(build_execution_graph(graph, "x" * 32).regions) == 2  # two disjoint pipelines
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=4)) as cluster:
        handle = cluster.submit(graph, job_settings_for(env))
        result = await handle.wait()
        master = handle.job_master
    assert result.status.name == "FINISHED", result.failure
    assert master.restarts == 1
    assert master.region_restarts == (1 if strategy == "region" else 0)
    right_attempts = {name for name in master.deploy_order if "right" in name}
    deployments_of_right = sum(1 for name in master.deploy_order if "right" in name)
    # region: the right pipeline was deployed once; full: twice
    assert deployments_of_right == len(right_attempts) * (1 if strategy == "region" else 2)
    expected: dict[int, int] = defaultdict(int)
    for i in range(EVENTS):
        expected[i % 3] += i
    assert finals(left) == dict(expected) == finals(right)
    if strategy == "region":
        assert len(right) == EVENTS  # never replayed: one running sum per record
    else:
        assert len(right) > EVENTS

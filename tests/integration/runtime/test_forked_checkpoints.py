"""Checkpoints and savepoints whose files forked children write (``weir.checkpointing.async-snapshot:
PROCESS``) restore to the uninterrupted result, and say what the fork cost.

A child works in real time while the MockClock jumps whenever every task waits: the jobs
here give their checkpoints a timeout of years, so that no jump expires one."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import trio

from tests.integration.runtime.test_savepoints import build, oracle, run_to_end
from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster


def children_write(env: object) -> None:
    conf = env.get_configuration()  # type: ignore[attr-defined]
    conf.set_string("weir.checkpointing.async-snapshot", "PROCESS")
    conf.set_string("execution.checkpointing.timeout", f"{10**11} ms")


@pytest.mark.parametrize(("backend", "new_backend"), [("hashmap", "lmdb"), ("lmdb", "hashmap")])
async def test_a_savepoint_written_by_children_restores_at_another_parallelism(
    backend: str, new_backend: str, tmp_path: Path, autojump_clock: object
) -> None:
    first: list = []
    env, graph = build(2, backend, first)
    children_write(env)
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=4)) as cluster:
        handle = cluster.submit(graph, job_settings_for(env))
        await trio.sleep(1.2)
        path = await handle.job_master.trigger_savepoint(
            str(tmp_path / "savepoints"), "canonical", "no_drain"
        )
        result = await handle.wait()
    assert result.status.name == "FINISHED", result.failure
    stats = result.accumulators["checkpoint_stats"]
    assert [s["kind"] for s in stats] == ["savepoint"] and stats[0]["fork_ms"] > 0, stats
    assert 0 < len(first) < len(oracle())
    second: list = []
    env, graph = build(3, new_backend, second, savepoint=path)
    await run_to_end(env, graph)
    assert Counter(first) + Counter(second) == oracle()


@pytest.mark.parametrize(("backend", "incremental"), [("hashmap", False), ("lmdb", True)])
async def test_a_job_whose_checkpoints_children_write_commits_exactly_the_oracle(
    backend: str, incremental: bool, tmp_path: Path, autojump_clock: object
) -> None:
    from tests.integration.runtime.test_exactly_once import (
        Case,
        build_job,
        committed_lines,
        describe_difference,
        run_job,
    )
    from tests.integration.runtime.test_exactly_once import oracle as exact_oracle

    case = Case("window", 2, backend, False)
    env, job_graph = build_job(case, tmp_path, 8_000)
    children_write(env)
    env.get_configuration().set_string("execution.checkpointing.incremental", str(incremental).lower())
    result, _ = await run_job(env, job_graph)
    assert result.status.name == "FINISHED", result.failure
    stats = [s for s in result.accumulators["checkpoint_stats"] if s["status"] == "COMPLETED"]
    assert all(s["fork_ms"] > 0 for s in stats), stats  # how many complete before the end varies
    assert describe_difference(committed_lines(tmp_path), exact_oracle(case, 8_000)) == ""

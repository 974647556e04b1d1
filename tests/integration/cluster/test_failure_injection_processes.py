"""The seeded exactly-once failure suites with TaskManagers as processes.

The same jobs, faults and oracles as ``tests/integration/runtime/test_exactly_once.py``,
on an embedded cluster whose TaskManagers are child processes: record faults (``raise``,
``lose-taskmanager``) fire inside the processes — a lost TaskManager is a process that
SIGKILLs itself, noticed by the lost connection and replaced — and checkpoint faults on
the JobManager side. Wall clock (a child cannot follow a MockClock); the tests wait only
on the jobs' ends, with a timeout that fails them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.integration.runtime.test_exactly_once import (
    FAST_EVENTS,
    SLOW_EVENTS,
    Case,
    build_job,
    check_case_under_failures,
    job_graph_parallelism,
)
from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster

TIMEOUT_S = 300  # generous: a failure, never a measurement


async def run_in_processes(env: Any, job_graph: Any) -> tuple[Any, Any]:
    """The job on 2 TaskManager processes with one slot per subtask of one of them."""
    config = ClusterConfig(
        taskmanagers=2,
        slots_per_taskmanager=-(-job_graph_parallelism(job_graph) // 2),
        taskmanager_processes=True,
    )
    with trio.fail_after(TIMEOUT_S):
        async with open_minicluster(config) as cluster:
            handle = cluster.submit(job_graph, job_settings_for(env))
            result = await handle.wait()
            return result, handle.job_master


async def test_a_raise_and_a_lost_taskmanager_fire_inside_the_processes(tmp_path: Path) -> None:
    case = Case("sum", 2, "lmdb", False)
    spec = "raise:operator=Sum,after=300,attempt=0;lose-taskmanager:operator=Map,after=300,attempt=1"
    env, job_graph = build_job(case, tmp_path / "out", FAST_EVENTS, spec, seed=3)
    result, master = await run_in_processes(env, job_graph)
    assert result.status.name == "FINISHED", result.failure
    injected = result.accumulators["injected_failures"]
    assert [re.search(r"fault \d+ ([a-z-]+)\)", line).group(1) for line in injected] == [  # type: ignore[union-attr]
        "raise",
        "lose-taskmanager",
    ], injected
    assert "TaskManager taskmanager-" in injected[1] and "(pid " in injected[1], injected
    log = result.accumulators["restart_log"]
    assert "InjectedFailure" in log[0] or "injected failure 1" in log[0], log
    assert "was lost" in log[1], log  # the JobManager noticed the process's death by its connection
    # exactly two: the restart after the loss waits for a registered TaskManager's slot, so no
    # consumer is deployed while the dead process's address is all its peers know
    assert master.restarts == 2, log


FAST_CASES = [Case("sum", 2, "hashmap", False), Case("window", 2, "lmdb", True)]


@pytest.mark.parametrize("case", FAST_CASES[:1], ids=str)
async def test_a_few_seeded_failures_in_processes_change_nothing(case: Case, tmp_path: Path) -> None:
    await check_case_under_failures(
        case, tmp_path, FAST_EVENTS * 4, failures=4, seed=11, run=run_in_processes
    )


SLOW_CASES = [
    Case("window", 2, "hashmap", False),
    Case("sum", 2, "lmdb", True),
    Case("window", 4, "lmdb", False),
    Case("sum", 4, "hashmap", True),
]


@pytest.mark.slow
@pytest.mark.parametrize("case", [*FAST_CASES[1:], *SLOW_CASES], ids=str)
async def test_twenty_seeded_failures_in_processes_change_nothing(case: Case, tmp_path: Path) -> None:
    await check_case_under_failures(case, tmp_path, SLOW_EVENTS, failures=20, seed=2024, run=run_in_processes)

"""TaskManagers as child processes of the embedded cluster (weir.taskmanager.processes).

The JobManager side runs in the test's process; each TaskManager is a real child process
that registers over the authenticated RPC. These tests run on the wall clock (a child
cannot follow a MockClock) and wait only on real events: a job's end, a process's exit.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.integration.runtime.test_exactly_once import (
    Case,
    build_job,
    committed_lines,
    describe_difference,
    job_graph_parallelism,
    oracle,
)
from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster
from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.functions import SinkFunction
from weir.errors import JobExecutionError

EVENTS = 40_000  # about 2 s at the source rate: several checkpoints complete
TIMEOUT_S = 120  # generous: a failure, never a measurement


def process_config(job_graph: object, taskmanagers: int = 1) -> ClusterConfig:
    """``taskmanagers`` processes with slots for the whole job spread over them."""
    return ClusterConfig(
        taskmanagers=taskmanagers,
        slots_per_taskmanager=-(-job_graph_parallelism(job_graph) // taskmanagers),
        taskmanager_processes=True,
    )


async def test_a_job_runs_in_a_taskmanager_process_and_commits_exactly_the_oracle(tmp_path: Path) -> None:
    case = Case("sum", 2, "hashmap", False)
    env, job_graph = build_job(case, tmp_path / "out", EVENTS)
    with trio.fail_after(TIMEOUT_S):
        async with open_minicluster(process_config(job_graph)) as cluster:
            (pid,) = cluster.taskmanager_pids()
            assert pid != os.getpid()
            result = await cluster.submit(job_graph, job_settings_for(env)).wait()
    assert result.status.name == "FINISHED", result.failure
    assert result.accumulators["checkpoints_completed"] >= 1
    assert describe_difference(committed_lines(tmp_path / "out"), oracle(case, EVENTS)) == ""


class LinesTo(SinkFunction):
    """Appends each record to a file: a function of a test module, imported by reference there."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: Any = None

    def open(self, runtime_context: Any) -> None:
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def invoke(self, value: Any, context: Any) -> None:
        self._file.write(f"{value}\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def processes_env() -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_string("weir.taskmanager.processes", "true")
    return StreamExecutionEnvironment.get_execution_environment(conf)


def test_env_execute_with_the_switch_runs_the_tasks_in_a_child_process(tmp_path: Path) -> None:
    env = processes_env()
    out = tmp_path / "pids.txt"
    numbers = env.from_collection(list(range(10)), type_info=Types.LONG())
    numbers.map(lambda n: f"{n} {os.getpid()}", output_type=Types.STRING()).add_sink(LinesTo(str(out)))
    result = env.execute("in a child")
    assert result.get_job_status().name == "FINISHED"
    lines = [line.split() for line in out.read_text().splitlines()]
    assert sorted(int(n) for n, _ in lines) == list(range(10))
    assert {int(pid) for _, pid in lines} - {os.getpid()} == {int(pid) for _, pid in lines}


def _clock_of_the_task(_: Any) -> str:
    """What the task's event loop runs on, seen from inside a TaskManager process."""
    clock = trio.lowlevel.current_clock()
    policy = getattr(clock, "policy", "-")
    before = time.perf_counter()
    now = clock.current_time()
    after = time.perf_counter()
    whole_seconds = now - after - 1e-9 <= round(now - before) <= now - before + 1e-9
    return f"{type(clock).__name__} {getattr(policy, 'min_load', policy)} {whole_seconds}"


@pytest.mark.parametrize(
    ("enabled", "seen"),
    [
        ("true", "BusyPollClock 0.7 True"),
        pytest.param("false", "BusyPollClock None True", marks=pytest.mark.slow),
    ],
)
def test_a_taskmanager_process_runs_on_the_busy_poll_clock_of_the_job_s_keys(
    tmp_path: Path, enabled: str, seen: str
) -> None:
    """As ``execute()`` in one process: the loop polls while loaded unless busy polling is
    off, and its clock counts whole seconds from CLOCK_MONOTONIC, so the 1 ms ticks of every
    TaskManager process fall on the same instants."""
    conf = Configuration()
    conf.set_string("weir.taskmanager.processes", "true")
    conf.set_string("execution.busy-poll.enabled", enabled)
    conf.set_string("execution.busy-poll.min-load", "0.7")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    out = tmp_path / "clock.txt"
    numbers = env.from_collection([1], type_info=Types.LONG())
    numbers.map(_clock_of_the_task, output_type=Types.STRING()).add_sink(LinesTo(str(out)))
    assert env.execute("which clock").get_job_status().name == "FINISHED"
    assert out.read_text().splitlines() == [seen]


def test_execute_and_collect_streams_records_back_from_taskmanager_processes() -> None:
    """The maps run in two TaskManager processes and the collect sink (parallelism 1, as
    Flink's) in one of them; its records come back over the RPC in the order it took them."""
    env = processes_env()
    env.get_configuration().set_integer("local.number-taskmanager", 2)
    env.set_parallelism(2)
    pair = Types.TUPLE([Types.LONG(), Types.LONG()])
    numbers = env.from_collection(list(range(5_000)), type_info=Types.LONG())
    tagged = numbers.key_by(lambda n: n % 5).map(lambda n: (n, os.getpid()), output_type=pair)
    records = list(tagged.execute_and_collect("collect across processes"))
    assert sorted(n for n, _ in records) == list(range(5_000))
    pids = {pid for _, pid in records}
    assert len(pids) == 2 and os.getpid() not in pids  # the maps ran in both processes
    for pid in pids:  # each map's records of a key reached the sink, and the caller, in order
        by_key: dict[int, list[int]] = {}
        for n, p in records:
            if p == pid:
                by_key.setdefault(n % 5, []).append(n)
        assert all(ns == sorted(ns) for ns in by_key.values())


def test_a_closed_collect_iterator_cancels_its_job_on_taskmanager_processes() -> None:
    env = processes_env()
    source = DataGeneratorSource(lambda i: i, 10_000_000, rate_limit=500.0, type_info=Types.LONG())
    endless = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
    started = time.monotonic()
    assert endless.execute_and_collect("endless", limit=4) == [0, 1, 2, 3]
    assert time.monotonic() - started < TIMEOUT_S  # returned: the job was cancelled, its process stopped


def test_a_failure_in_a_taskmanager_process_ends_the_collect_iterator_with_the_cause() -> None:
    def bad(n: int) -> int:
        if n == 13:
            raise ValueError("bad record 13")
        return n

    env = processes_env()
    numbers = env.from_collection(list(range(100)), type_info=Types.LONG())
    with pytest.raises(JobExecutionError, match="bad record 13"):
        list(numbers.map(bad, output_type=Types.LONG()).execute_and_collect("failing"))


async def test_a_job_spread_over_two_taskmanager_processes_shuffles_over_tcp(tmp_path: Path) -> None:
    case = Case("window", 2, "lmdb", False)
    env, job_graph = build_job(case, tmp_path / "out", EVENTS)
    with trio.fail_after(TIMEOUT_S):
        async with open_minicluster(process_config(job_graph, taskmanagers=2)) as cluster:
            handle = cluster.submit(job_graph, job_settings_for(env))
            result = await handle.wait()
            pids = {te.pid for te in cluster.task_executors}
    assert result.status.name == "FINISHED", result.failure
    assert len(pids) == 2 and os.getpid() not in pids
    master = handle.job_master
    placed = {master.plan.taskmanager_of(ev) for ev in master.execution_graph.all_execution_vertices()}
    assert placed == {0, 1}  # subtasks in both processes: the keyed shuffle crossed them
    assert describe_difference(committed_lines(tmp_path / "out"), oracle(case, EVENTS)) == ""


async def kill_taskmanager_after_a_checkpoint(cluster: object, master: object, checkpoints: int) -> int:
    """SIGKILL TaskManager 0 once ``checkpoints`` checkpoints completed; returns the killed pid."""
    while master.checkpoints is None or len(master.checkpoints.completed) < checkpoints:  # type: ignore[attr-defined]
        await trio.sleep(0.005)  # polls the JobMaster's state (the event), not a duration
    (pid,) = cluster.taskmanager_pids()[:1]  # type: ignore[attr-defined]
    os.kill(pid, signal.SIGKILL)
    return pid


async def test_a_killed_taskmanager_process_restarts_its_region_and_the_output_stays_exact(
    tmp_path: Path,
) -> None:
    case = Case("sum", 2, "lmdb", False)
    events = 40_000  # about 2 s at the source's rate: the kill lands mid-job
    env, job_graph = build_job(case, tmp_path / "out", events)
    with trio.fail_after(TIMEOUT_S):
        async with open_minicluster(process_config(job_graph)) as cluster:
            handle = cluster.submit(job_graph, job_settings_for(env))
            killed = await kill_taskmanager_after_a_checkpoint(cluster, handle.job_master, 2)
            result = await handle.wait()
            assert cluster.taskmanager_pids()[0] != killed  # a new process took its place
    assert result.status.name == "FINISHED", result.failure
    assert handle.job_master.restarts >= 1
    assert "was lost" in result.accumulators["restart_log"][0], result.accumulators["restart_log"]
    assert describe_difference(committed_lines(tmp_path / "out"), oracle(case, events)) == ""


@pytest.mark.slow
async def test_a_stopped_taskmanager_process_is_declared_dead_by_heartbeat_timeout(tmp_path: Path) -> None:
    """SIGSTOP keeps the connection open: only the missing heartbeats tell. The silent process
    is killed and replaced, and the job restarts from its latest checkpoint."""
    case = Case("sum", 2, "hashmap", False)
    env, job_graph = build_job(case, tmp_path / "out", EVENTS)
    config = process_config(job_graph)
    config.heartbeat_interval_ms, config.heartbeat_timeout_ms = 200, 3_000
    with trio.fail_after(TIMEOUT_S):
        async with open_minicluster(config) as cluster:
            handle = cluster.submit(job_graph, job_settings_for(env))
            master = handle.job_master
            while master.checkpoints is None or len(master.checkpoints.completed) < 2:
                await trio.sleep(0.005)  # polls the JobMaster's state (the event), not a duration
            (stopped,) = cluster.taskmanager_pids()
            os.kill(stopped, signal.SIGSTOP)
            result = await handle.wait()
            assert cluster.taskmanager_pids()[0] != stopped
    assert result.status.name == "FINISHED", result.failure
    assert "no heartbeat within 3000 ms" in result.accumulators["restart_log"][0]
    assert describe_difference(committed_lines(tmp_path / "out"), oracle(case, EVENTS)) == ""


KILLS_PER_RUN = 4
SEEDS = range(5)  # 5 seeds x 4 kills: 20 SIGKILLs


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
async def test_sigkills_of_taskmanager_processes_across_seeds_keep_the_output_exact(
    seed: int, tmp_path: Path
) -> None:
    rng = random.Random(seed)
    case = Case(rng.choice(["sum", "window"]), 2, rng.choice(["hashmap", "lmdb"]), rng.random() < 0.3)
    events = 400_000  # about 20 s at the source's rate, with restarts
    env, job_graph = build_job(case, tmp_path / "out", events)
    killed: list[int] = []
    with trio.fail_after(10 * TIMEOUT_S):
        async with open_minicluster(process_config(job_graph, taskmanagers=2)) as cluster:
            handle = cluster.submit(job_graph, job_settings_for(env))
            master = handle.job_master
            for _ in range(KILLS_PER_RUN):
                # after the last restart, let 1..3 more checkpoints complete, then kill a random one
                target = len(master.checkpoints.completed if master.checkpoints else []) + rng.randint(1, 3)
                while (master.checkpoints is None or len(master.checkpoints.completed) < target) and (
                    not handle.done.is_set()
                ):
                    await trio.sleep(0.005)  # polls the JobMaster's state, not a duration
                if handle.done.is_set():
                    break
                busy = [cluster.processes[i].pid for i, te in enumerate(cluster.task_executors) if te.tasks]
                pid = rng.choice(busy)  # a TaskManager that runs tasks of the job
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                while master.restarts < len(killed) and not handle.done.is_set():
                    await trio.sleep(0.005)
            result = await handle.wait()
    assert result.status.name == "FINISHED", result.failure
    problem = describe_difference(committed_lines(tmp_path / "out"), oracle(case, events))
    assert not problem, f"{case}, seed {seed}, {len(killed)} kills: {problem}"
    assert len(killed) == KILLS_PER_RUN, f"{case}: the job ended after {len(killed)} kills; make it longer"
    assert master.restarts >= KILLS_PER_RUN


@pytest.mark.slow  # the region restart after a kill is also in the fast suite, with a replacement
async def test_a_lost_taskmanager_s_region_restarts_on_the_remaining_ones_without_a_replacement(
    tmp_path: Path,
) -> None:
    """Three TaskManager processes of one slot, a job of two: SIGKILL one that runs tasks; with
    weir.taskmanager.replace-lost off nothing takes its place, and the restarted tasks take
    the spare slot of the third process (the plan's slots are re-placed, as Flink's scheduler
    takes any registered TaskManager's slots)."""
    case = Case("sum", 2, "lmdb", False)
    events = 40_000
    env, job_graph = build_job(case, tmp_path / "out", events)
    config = process_config(job_graph, taskmanagers=3)
    config.slots_per_taskmanager = 1
    config.replace_lost_taskmanagers = False
    with trio.fail_after(TIMEOUT_S):
        async with open_minicluster(config) as cluster:
            handle = cluster.submit(job_graph, job_settings_for(env))
            master = handle.job_master
            while master.checkpoints is None or len(master.checkpoints.completed) < 2:
                await trio.sleep(0.005)  # polls the JobMaster's state (the event), not a duration
            vertices = list(master.execution_graph.all_execution_vertices())
            before = {master.taskmanager_id_of(ev) for ev in vertices}
            assert len(before) == 2  # the third process has the spare slot
            busy = sorted(i for i, te in enumerate(cluster.task_executors) if te.tasks)
            victim = cluster.task_executors[busy[0]].taskmanager_id
            os.kill(cluster.processes[busy[0]].pid, signal.SIGKILL)
            result = await handle.wait()
            after = {master.taskmanager_id_of(ev) for ev in vertices}
            registrations = cluster.endpoint.registrations
            alive = [p.returncode is None for p in cluster.processes.values()]
    assert result.status.name == "FINISHED", result.failure
    assert master.restarts >= 1
    assert "was lost" in result.accumulators["restart_log"][0], result.accumulators["restart_log"]
    assert registrations == 3 and alive.count(True) == 2  # no replacement was started
    assert victim not in after and len(after) == 2, (victim, before, after)
    assert describe_difference(committed_lines(tmp_path / "out"), oracle(case, events)) == ""

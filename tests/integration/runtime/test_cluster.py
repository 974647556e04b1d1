"""The cluster under Trio's MockClock: cancellation, isolation of failures, batch regions."""

from __future__ import annotations

import pytest
import trio

from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster
from weir.common import WatermarkStrategy
from weir.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.graph.job_graph import generate_job_graph
from weir.graph.status import JobStatus


def unbounded_job(name: str) -> tuple[StreamExecutionEnvironment, object]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_source(
        DataGeneratorSource(lambda i: i, None, rate_limit=1000.0), WatermarkStrategy.no_watermarks(), "gen"
    ).map(lambda x: x).add_sink(lambda v: None)
    return env, generate_job_graph(env.get_stream_graph(name))


async def test_cancel_ends_in_canceled_with_no_task_left(autojump_clock: trio.testing.MockClock) -> None:
    env, job_graph = unbounded_job("forever")
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=1)) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))  # type: ignore[arg-type]
        await trio.sleep(5)
        assert handle.job_master.job_status is JobStatus.RUNNING
        assert (
            sum(len(te.tasks) for te in cluster.task_executors) == 2
        )  # source, map and sink chain into one vertex
        handle.cancel()
        result = await handle.wait()
        assert result.status is JobStatus.CANCELED
        await trio.testing.wait_all_tasks_blocked()
        assert all(not te.tasks for te in cluster.task_executors)
        states = {
            ev.current_execution.state.name
            for ev in handle.job_master.execution_graph.all_execution_vertices()
        }  # type: ignore[union-attr]
        assert states == {"CANCELED"}


async def test_a_failing_job_does_not_disturb_another(autojump_clock: trio.testing.MockClock) -> None:
    env, healthy_graph = unbounded_job("healthy")
    failing_env = StreamExecutionEnvironment.get_execution_environment()

    def fail(n: int) -> int:
        raise ValueError(f"bad record {n}")

    failing_env.from_source(NumberSequenceSource(1, 10), WatermarkStrategy.no_watermarks(), "n").map(
        fail
    ).print()
    failing_graph = generate_job_graph(failing_env.get_stream_graph("failing"))
    async with open_minicluster(ClusterConfig(taskmanagers=1, slots_per_taskmanager=3)) as cluster:
        healthy = cluster.submit(healthy_graph, job_settings_for(env))  # type: ignore[arg-type]
        failing = cluster.submit(failing_graph, job_settings_for(failing_env))
        result = await failing.wait()
        assert result.status is JobStatus.FAILED
        assert "bad record 1" in str(result.failure)
        await trio.sleep(2)
        assert healthy.job_master.job_status is JobStatus.RUNNING
        healthy.cancel()
        assert (await healthy.wait()).status is JobStatus.CANCELED


async def test_batch_regions_run_one_after_another(autojump_clock: trio.testing.MockClock) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.from_source(NumberSequenceSource(1, 100), WatermarkStrategy.no_watermarks(), "n").key_by(
        lambda n: n % 3
    ).reduce(lambda a, b: a + b).add_sink(lambda v: None)
    job_graph = generate_job_graph(env.get_stream_graph("batch"))
    async with open_minicluster(ClusterConfig(taskmanagers=1, slots_per_taskmanager=2)) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))
        result = await handle.wait()
    assert result.status is JobStatus.FINISHED
    eg = handle.job_master.execution_graph
    assert eg is not None and len(eg.regions) > 1
    order = handle.job_master.deploy_order
    producers = [name for name in order if name.startswith("Source")]
    consumers = [name for name in order if not name.startswith("Source")]
    assert order.index(consumers[0]) > max(order.index(p) for p in producers)
    assert all(handle.job_master.finished_before_deploy[c] >= set(producers) for c in consumers)


async def test_task_managers_stay_alive_through_long_jobs_and_a_silent_one_fails_its_job(
    autojump_clock: trio.testing.MockClock,
) -> None:
    env, job_graph = unbounded_job("long")
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=1)) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))  # type: ignore[arg-type]
        await trio.sleep(300)  # far beyond the 50 s heartbeat timeout: heartbeats keep them registered
        assert handle.job_master.job_status is JobStatus.RUNNING
        assert cluster.resource_manager.slot_manager.is_registered("taskmanager-1")
        # silence one TaskManager: its heartbeats stop, the ResourceManager declares it dead
        cluster.task_executors[1].heartbeats_enabled = False
        silenced_at = trio.current_time()
        result = await handle.wait()
        assert 40 <= trio.current_time() - silenced_at <= 60  # the 50 s heartbeat timeout
    assert result.status is JobStatus.FAILED
    assert "TaskManager taskmanager-1 was lost" in str(result.failure)


async def test_on_a_cluster_taskmanagers_may_join_a_job_too_big_waits_for_slots_then_fails_naming_the_fix(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The standalone cluster's JobMaster waits the slot request timeout for TaskManagers to
    register (Flink's slot.request.timeout); the embedded cluster's fails at once."""
    import dataclasses

    env, job_graph = unbounded_job("too big")  # parallelism 2
    settings = dataclasses.replace(job_settings_for(env), slot_request_timeout_ms=30_000)
    for may_join, waited in ((True, 30), (False, 0)):
        config = ClusterConfig(taskmanagers=1, slots_per_taskmanager=1, taskmanagers_may_join=may_join)
        async with open_minicluster(config) as cluster:
            start = trio.current_time()
            handle = cluster.submit(job_graph, settings)  # type: ignore[arg-type]
            result = await handle.wait()
            assert trio.current_time() - start == pytest.approx(waited, abs=0.5)
        assert result.status is JobStatus.FAILED
        message = str(result.failure)
        if may_join:
            assert "needs 2 slots; the cluster's TaskManagers offered 1 for 30 s" in message
            assert "weir cluster add-taskmanager" in message
        else:
            assert "needs 2 slots (group 'default': 2) but the cluster offers 1" in message


async def test_a_job_cancelled_while_it_waits_for_slots_is_canceled_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    env, job_graph = unbounded_job("waits")  # parallelism 2
    config = ClusterConfig(taskmanagers=1, slots_per_taskmanager=1, taskmanagers_may_join=True)
    async with open_minicluster(config) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))  # type: ignore[arg-type]
        await trio.sleep(10)
        assert handle.job_master.job_status is JobStatus.CREATED  # waiting for a second slot
        cancelled_at = trio.current_time()
        handle.cancel()
        result = await handle.wait()
        assert trio.current_time() - cancelled_at < 1
        slots = cluster.resource_manager.slot_manager.statistics()
        assert slots.free == slots.total == 1  # it held none
    assert result.status is JobStatus.CANCELED and result.failure is None

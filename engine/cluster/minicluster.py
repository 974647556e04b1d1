"""MiniCluster: the embedded cluster — Dispatcher, ResourceManager and TaskExecutors in one nursery.

``open_minicluster`` is an async context manager: inside it the cluster runs; leaving it
cancels every TaskExecutor and job. ``submit`` is the Dispatcher's entry point: it hands
out a job ID, persists the job's plan in the cluster's working directory (persist before
run, as Flink's Dispatcher does), starts a JobMaster and returns a handle to await or
cancel.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from weir.cluster.job_master import JobMaster, JobResult, JobSettings
from weir.cluster.resource_manager import ResourceManager
from weir.cluster.task_executor import TaskExecutor
from weir.errors import UsageError
from weir.graph.job_graph import JobGraph
from weir.graph.plan import job_graph_to_json
from weir.network.environment import Network, NetworkEnvironment, NetworkRegistry
from weir.network.tcp import TcpNetwork


@dataclass
class ClusterConfig:
    taskmanagers: int = 1
    slots_per_taskmanager: int = 1
    working_dir: str | None = None
    network_memory_bytes: int = 64 << 20
    segment_size: int = 32 * 1024
    buffers_per_channel: int = 2
    floating_buffers_per_gate: int = 8
    #: how remote channels travel between the TaskManagers: "local" (in-process queues) or
    #: "tcp" (loopback sockets authenticated with a random secret of this cluster)
    transport: str = "local"
    data_port: int = 0  # tcp: where the TaskManager listens (0: any free port; only with 1 TaskManager)
    bind_host: str = "127.0.0.1"  # tcp: the address the TaskManagers' listeners bind to

    def __post_init__(self) -> None:
        if self.taskmanagers < 1:
            raise UsageError(f"a cluster needs at least 1 TaskManager, got {self.taskmanagers}")
        if self.slots_per_taskmanager < 1:
            raise UsageError(f"a TaskManager needs at least 1 slot, got {self.slots_per_taskmanager}")
        if self.transport not in ("local", "tcp"):
            raise UsageError(f"taskmanager.network.transport: expected local or tcp, got {self.transport!r}")
        if self.data_port and self.taskmanagers > 1:
            raise UsageError(
                f"taskmanager.data.port {self.data_port}: the embedded cluster's {self.taskmanagers} "
                "TaskManagers each need a port of their own; use 0 (any free port)"
            )


@dataclass
class JobHandle:
    job_id: str
    job_master: JobMaster
    done: trio.Event = field(default_factory=trio.Event)
    result: JobResult | None = None
    start_ms: int = field(default_factory=lambda: int(time.time() * 1000))  # epoch ms of submission
    end_ms: int | None = None  # epoch ms when the job reached its terminal status

    def cancel(self) -> None:
        self.job_master.cancel()

    async def wait(self) -> JobResult:
        """Wait for the job to end. Cancellation: stops waiting; the job goes on."""
        await self.done.wait()
        assert self.result is not None
        return self.result


class MiniCluster:
    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.registry: Network = (
            NetworkRegistry()
            if config.transport == "local"
            else TcpNetwork(secrets.token_bytes(32), host=config.bind_host, port=config.data_port)
        )
        self.resource_manager = ResourceManager()
        self.task_executors: list[TaskExecutor] = []
        self.jobs: dict[str, JobHandle] = {}
        self._nursery: trio.Nursery | None = None
        self.working_dir = (
            Path(config.working_dir) if config.working_dir else Path(tempfile.mkdtemp(prefix="weir-"))
        )
        self._own_working_dir = config.working_dir is None

    async def _start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        await nursery.start(self.resource_manager.run)
        c = self.config
        for i in range(c.taskmanagers):
            tm_id = f"taskmanager-{i}"
            network = NetworkEnvironment(
                tm_id,
                self.registry,
                total_bytes=c.network_memory_bytes,
                segment_size=c.segment_size,
                buffers_per_channel=c.buffers_per_channel,
                floating_buffers_per_gate=c.floating_buffers_per_gate,
            )
            te = TaskExecutor(tm_id, c.slots_per_taskmanager, network, self.resource_manager)
            self.resource_manager.register_task_executor(tm_id, c.slots_per_taskmanager)
            await nursery.start(te.run)
            self.task_executors.append(te)

    def submit(self, job_graph: JobGraph, settings: JobSettings, job_id: str | None = None) -> JobHandle:
        """Accept a job: persist its plan, start its JobMaster. Returns at once."""
        if self._nursery is None:
            raise UsageError("the cluster is not running")
        job_id = job_id or secrets.token_hex(16)
        job_dir = self.working_dir / "jobs" / job_id
        job_dir.mkdir(parents=True, exist_ok=True)
        plan = job_graph_to_json(job_graph)
        tmp = job_dir / "jobgraph.json.tmp"
        tmp.write_text(json.dumps(plan, indent=2))
        tmp.replace(job_dir / "jobgraph.json")
        from weir.core.state_backend import LmdbStateBackend

        if settings.checkpoint_dir is None:  # also without periodic checkpoints: savepoints use it
            settings.checkpoint_dir = self.working_dir / "checkpoints"

        backend = settings.state_backend
        if isinstance(backend, LmdbStateBackend) and backend.path is None:
            # local state lives in the TaskManagers' working directory, removed with the cluster
            settings.state_backend = backend.with_path(job_dir / "state")
        master = JobMaster(
            job_graph,
            job_id,
            self.resource_manager,
            self.task_executors,
            self.config.slots_per_taskmanager,
            settings,
        )
        if master.failure_injector is not None:
            master.failure_injector.cluster = (
                self  # lose-taskmanager faults kill TaskManagers of this cluster
            )
        handle = JobHandle(job_id, master)
        self.jobs[job_id] = handle
        self._nursery.start_soon(self._run_job, handle, name=f"JobMaster {job_graph.job_name}")
        return handle

    async def _run_job(self, handle: JobHandle) -> None:
        try:
            handle.result = await handle.job_master.run()
        except Exception as exc:
            from weir.graph.status import JobStatus

            handle.result = JobResult(
                handle.job_id, handle.job_master.job_graph.job_name, JobStatus.FAILED, 0, exc
            )
        finally:
            handle.end_ms = int(time.time() * 1000)
            handle.done.set()

    def taskmanager_index_of(self, execution_id: str) -> int:
        """The index of the TaskManager running execution ``execution_id``."""
        for index, te in enumerate(self.task_executors):
            if execution_id in te.tasks:
                return index
        raise UsageError(f"no TaskManager of this cluster runs execution {execution_id}")

    def lose_taskmanager(self, index: int) -> list[Path]:
        """Failure injection: TaskManager ``index`` dies with its local state. Its tasks are
        cancelled and their state directories deleted, the ResourceManager drops it (so every
        JobMaster using it fails over at once), and a fresh TaskManager with the same id and
        slots registers in its place. Returns the deleted directories."""
        te = self.task_executors[index]
        self.resource_manager.unregister_task_executor(te.taskmanager_id)
        lost = te.crash()
        self.resource_manager.register_task_executor(te.taskmanager_id, te.num_slots)
        return lost

    def statistics(self) -> dict[str, Any]:
        return {
            "taskmanagers": [te.statistics() for te in self.task_executors],
            "resource_manager": self.resource_manager.statistics(),
        }

    def close(self) -> None:
        if self._own_working_dir:
            shutil.rmtree(self.working_dir, ignore_errors=True)


@contextlib.asynccontextmanager
async def open_minicluster(config: ClusterConfig) -> AsyncIterator[MiniCluster]:
    """Run an embedded cluster for the duration of the block. Cancellation: everything stops."""
    cluster = MiniCluster(config)
    try:
        async with trio.open_nursery() as nursery:
            await cluster._start(nursery)
            yield cluster
            nursery.cancel_scope.cancel()
    finally:
        cluster.close()

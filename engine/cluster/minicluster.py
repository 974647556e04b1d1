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
import os
import secrets
import shutil
import subprocess
import sys
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
from weir.errors import UsageError, WeirError
from weir.graph.job_graph import JobGraph
from weir.graph.plan import job_graph_to_json
from weir.loop.ticker import on_mock_clock
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
    #: weir.taskmanager.processes: TaskManagers run as child processes (docs/cluster.md)
    taskmanager_processes: bool = False
    #: weir.taskmanager.replace-lost: a TaskManager process that dies is replaced by a new one
    #: with its id; without, its tasks restart on the TaskManagers that remain
    replace_lost_taskmanagers: bool = True
    #: TaskManagers started elsewhere may register (the standalone cluster, whose secret is a
    #: file): a job that needs more slots than are registered waits for them (JobMaster._plan)
    taskmanagers_may_join: bool = False
    #: how long the child TaskManagers may take to start and register
    startup_timeout_s: float = 120.0
    #: where the JobManager's RPC endpoint listens (jobmanager.rpc.address/port; 0: any free port)
    rpc_host: str = "127.0.0.1"
    rpc_port: int = 0
    #: the cluster's secret (a standalone cluster's, from its file); None: a random one
    secret: bytes | None = None
    #: Flink's heartbeat.interval / heartbeat.timeout between TaskManagers and the ResourceManager
    heartbeat_interval_ms: float = 10_000
    heartbeat_timeout_ms: float = 50_000
    #: how remote channels travel between the TaskManagers: "local" (in-process queues) or
    #: "tcp" (loopback sockets authenticated with a random secret of this cluster)
    transport: str = "local"
    data_port: int = 0  # tcp: where the TaskManager listens (0: any free port; only with 1 TaskManager)
    bind_host: str = "127.0.0.1"  # tcp: the address the TaskManagers' listeners bind to
    #: TaskManager processes: their event loop polls while this share of it is busy
    #: (execution.busy-poll.min-load); None: it never polls (execution.busy-poll.enabled false)
    busy_poll_min_load: float | None = 0.5

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
        self.resource_manager = ResourceManager(config.heartbeat_interval_ms, config.heartbeat_timeout_ms)
        self.task_executors: list[Any] = []  # TaskExecutor, or RemoteTaskExecutor gateways
        self.jobs: dict[str, JobHandle] = {}
        self._nursery: trio.Nursery | None = None
        self.working_dir = (
            Path(config.working_dir) if config.working_dir else Path(tempfile.mkdtemp(prefix="weir-"))
        )
        self._own_working_dir = config.working_dir is None
        self.processes: dict[int, trio.Process] = {}  # TaskManager processes by index
        self.secret = b""
        self.endpoint: Any = None

    async def _start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        await nursery.start(self.resource_manager.run)
        c = self.config
        if c.taskmanager_processes:
            await self._start_processes(nursery)
            return
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

    async def _start_processes(self, nursery: trio.Nursery) -> None:
        """TaskManagers as child processes that register over RPC (``weir.cluster.gateway``)."""
        from weir.cluster.gateway import JobManagerEndpoint, RemoteTaskExecutor
        from weir.cluster.rpc import new_secret

        if on_mock_clock():
            raise UsageError(
                "weir.taskmanager.processes: TaskManager processes run on the wall clock and cannot "
                "follow a MockClock; run this test with TaskManagers in the process"
            )
        c = self.config
        self.secret = c.secret or new_secret()
        for i in range(c.taskmanagers):
            self.task_executors.append(RemoteTaskExecutor(f"taskmanager-{i}", c.slots_per_taskmanager))
        self.endpoint = JobManagerEndpoint(
            self.secret, self.resource_manager, self.task_executors, c.rpc_host, c.rpc_port
        )
        self.endpoint.on_silent = self._kill_silent_taskmanager
        port = await nursery.start(self.endpoint.serve)
        for i in range(c.taskmanagers):
            nursery.start_soon(self._supervise_taskmanager, i, port, name=f"taskmanager-{i} process")
        with trio.fail_after(c.startup_timeout_s):
            await self.endpoint.wait_for_taskmanagers(c.taskmanagers)

    def _taskmanager_command(self, index: int, port: int) -> list[str]:
        c = self.config
        command = taskmanager_command(c, port, f"taskmanager-{index}", c.slots_per_taskmanager)
        return [*command, "--secret-stdin"]

    async def _supervise_taskmanager(self, index: int, port: int) -> None:
        """Run TaskManager process ``index``; when it dies, start a new one with the same id
        (its slots come back for the restart) unless ``replace_lost_taskmanagers`` is off. Three deaths in a row before registering end
        the cluster with an error. Cancellation: the process is killed."""
        gateway = self.task_executors[index]
        # the job's modules (test files, a job file's neighbours) import the same way there
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
        early_deaths = 0
        while True:
            process = await trio.lowlevel.open_process(
                self._taskmanager_command(index, port), stdin=subprocess.PIPE, env=env
            )
            self.processes[index] = process
            try:
                assert process.stdin is not None
                await process.stdin.send_all(self.secret.hex().encode() + b"\n")
                await process.stdin.aclose()
                registrations = self.endpoint.registrations
                await process.wait()
            finally:
                if process.returncode is None:
                    process.kill()
                    with trio.CancelScope(shield=True):
                        await process.wait()
            if not self.config.replace_lost_taskmanagers:
                return
            early_deaths = early_deaths + 1 if self.endpoint.registrations == registrations else 0
            if early_deaths >= 3:
                raise WeirError(
                    f"TaskManager process {gateway.taskmanager_id} exited {early_deaths} times before "
                    f"registering (last exit status {process.returncode}); see its stderr above"
                )

    def _kill_silent_taskmanager(self, taskmanager_id: str) -> None:
        """A TaskManager process missed its heartbeats (hung, stopped): it is killed, so its
        supervisor starts a new one for the restart, as for a process that died."""
        for index, te in enumerate(self.task_executors):
            process = self.processes.get(index)
            if te.taskmanager_id == taskmanager_id and process is not None and process.returncode is None:
                process.kill()

    def taskmanager_pids(self) -> list[int]:
        """The pids of the TaskManager processes (weir.taskmanager.processes), by index."""
        return [self.processes[i].pid for i in sorted(self.processes)]

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
            taskmanagers_may_join=self.config.taskmanagers_may_join,
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
        if index in self.processes:  # a TaskManager process: it dies, and its supervisor starts another
            self.processes[index].kill()
            return []
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


def taskmanager_command(config: ClusterConfig, port: int, taskmanager_id: str, slots: int) -> list[str]:
    """The command line of a TaskManager process of a cluster of ``config`` whose JobManager
    listens on ``port``: its role first, so that ``ps`` tells the processes apart. Without
    ``--secret-stdin`` it reads the cluster's secret from ``$WEIR_HOME/cluster/secret``."""
    c = config
    return [
        sys.executable, "-m", "weir.cluster.entrypoint", "taskmanager",
        "--jobmanager", f"{_connect_host(c.rpc_host)}:{port}", "--id", taskmanager_id,
        "--slots", str(slots),
        "--network-memory", str(c.network_memory_bytes), "--segment-size", str(c.segment_size),
        "--buffers-per-channel", str(c.buffers_per_channel),
        "--floating-buffers-per-gate", str(c.floating_buffers_per_gate),
        "--bind-host", c.bind_host,
        "--busy-poll-min-load", str(c.busy_poll_min_load or 0),
    ]  # fmt: skip


def _connect_host(bind_host: str) -> str:
    """Where a local process reaches an endpoint bound to ``bind_host``."""
    return "127.0.0.1" if bind_host in ("", "0.0.0.0") else bind_host


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

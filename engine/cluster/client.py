"""The client side of ``env.execute()``: compile, start an embedded cluster, run, report.

``LocalExecutor`` is the executor ``execution.target: local`` names (registered under the
entry point group ``weir.executors``, see ``weir.core.execution``): the API hands it a
StreamGraph and frozen ``ExecutionSettings`` and never imports this module. The functions
here take those settings, or anything with an ``execution_settings()`` method (an
environment), for callers that hold one.

``execute`` is synchronous, like PyFlink's: it runs Trio (``trio.run``) until the job
ends. Inside an already running Trio program, use ``await run_stream_graph(env, graph)``.
``execute_and_collect`` runs the job in a background thread and streams its records back
through a bounded queue, so a slow reader backpressures the job; closing the iterator
cancels the job.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import trio

from weir.cluster.heartbeat import HeartbeatSettings
from weir.cluster.job_master import JobSettings
from weir.cluster.minicluster import ClusterConfig, JobHandle, MiniCluster, open_minicluster
from weir.cluster.savepoints import SavepointRestoreSettings
from weir.common import config_options as opts
from weir.common.completable_future import CompletableFuture
from weir.common.job_client import JobClient as _JobClientBase
from weir.common.job_client import JobExecutionResult, JobID
from weir.core.execution import CloseableIterator as _CloseableIteratorBase
from weir.core.execution import ExecutionSettings
from weir.core.state_backend import configured_state_backend
from weir.errors import JobExecutionError, UsageError
from weir.graph.execution_graph import build_execution_graph
from weir.graph.job_graph import JobGraph, generate_job_graph
from weir.graph.slots import required_slots
from weir.graph.status import JobStatus
from weir.graph.stream_graph import StreamGraph
from weir.loop.busy_poll import BusyPollClock, BusyPollPolicy
from weir.loop.ticker import on_mock_clock
from weir.loop.warmup import warm_up
from weir.network.debloat import DebloatSettings
from weir.operators.collect import CollectResults

Observer = Callable[[MiniCluster, JobHandle], Awaitable[None]]
_observer: Observer | None = None


@contextlib.contextmanager
def observe_jobs(observer: Observer) -> Iterator[None]:
    """Within this block every job run by ``execute`` also runs ``observer`` (e.g. a live view)."""
    global _observer
    previous, _observer = _observer, observer
    try:
        yield
    finally:
        _observer = previous


def processing_time_source() -> Callable[[], int]:
    """Processing time in epoch milliseconds on the Trio clock (MockClock: starts at 0)."""
    offset = 0.0 if on_mock_clock() else time.time() - trio.current_time()

    def now_ms() -> int:
        return int((trio.current_time() + offset) * 1000)

    return now_ms


def settings_of(env: Any) -> ExecutionSettings:
    """``env`` itself when it is ExecutionSettings, else its ``execution_settings()``."""
    return env if isinstance(env, ExecutionSettings) else env.execution_settings()


def cluster_config_for(env: Any, job_graph: JobGraph) -> ClusterConfig:
    conf = settings_of(env).configuration
    taskmanagers = int(conf.get_option(opts.NUMBER_OF_TASKMANAGERS))
    slots = conf.get_option(opts.SLOTS_PER_TASKMANAGER)
    if slots is None:
        needed = sum(required_slots(build_execution_graph(job_graph)).values())
        slots = max(1, -(-needed // taskmanagers))
    heartbeats = HeartbeatSettings.from_config(conf.to_dict())
    return ClusterConfig(
        taskmanagers=taskmanagers,
        slots_per_taskmanager=int(slots),
        network_memory_bytes=int(conf.get_option(opts.NETWORK_MEMORY)),
        segment_size=int(conf.get_option(opts.SEGMENT_SIZE)),
        buffers_per_channel=int(conf.get_option(opts.BUFFERS_PER_CHANNEL)),
        floating_buffers_per_gate=int(conf.get_option(opts.FLOATING_BUFFERS_PER_GATE)),
        taskmanager_processes=bool(conf.get_option(opts.TASKMANAGER_PROCESSES)),
        replace_lost_taskmanagers=bool(conf.get_option(opts.REPLACE_LOST_TASKMANAGERS)),
        heartbeat_interval_ms=heartbeats.interval_ms,
        heartbeat_timeout_ms=heartbeats.timeout_ms,
        transport=str(conf.get_option(opts.NETWORK_TRANSPORT)),
        data_port=int(conf.get_option(opts.DATA_PORT)),
        bind_host=str(conf.get_option(opts.BIND_HOST)),
        busy_poll_min_load=busy_poll_min_load(conf),
    )


def busy_poll_min_load(conf: Any) -> float | None:
    """``execution.busy-poll.min-load`` when ``execution.busy-poll.enabled``, else None."""
    if not conf.get_option(opts.BUSY_POLL_ENABLED):
        return None
    return float(conf.get_option(opts.BUSY_POLL_MIN_LOAD))


def state_backend_for(env: Any) -> Any:
    """The environment's StateBackend: set with ``set_state_backend`` or from ``state.backend.type``."""
    settings = settings_of(env)
    return configured_state_backend(settings.state_backend, settings.configuration)


def checkpoint_config_for(env: Any) -> Any:
    """The coordinator's configuration when ``enable_checkpointing`` (or its key) is set, else None."""
    settings = settings_of(env)
    if settings.checkpoint_interval_ms <= 0:
        return None
    from weir.checkpoint.coordinator import CheckpointCoordinatorConfig

    return CheckpointCoordinatorConfig.from_configuration(settings.configuration)


def job_settings_for(env: Any, collect_channels: dict[int, Any] | None = None) -> JobSettings:
    from weir.cluster.restart_strategy import restart_strategy_from_configuration

    settings = settings_of(env)
    conf = settings.configuration
    directory = settings.checkpoint_storage_dir
    checkpoint_config = checkpoint_config_for(settings)
    return JobSettings(
        state_backend=state_backend_for(settings),
        restart_strategy=restart_strategy_from_configuration(conf, checkpoint_config is not None),
        checkpoint_config=checkpoint_config,
        failover_strategy=conf.get_option(opts.FAILOVER_STRATEGY),
        checkpoint_dir=None if directory is None else Path(directory),
        savepoint_restore=SavepointRestoreSettings.from_configuration(conf),
        savepoint_dir=conf.get_option(opts.SAVEPOINT_DIRECTORY),
        checkpoint_retention=conf.get_option(opts.CHECKPOINTING_RETENTION),
        buffer_timeout_ms=settings.buffer_timeout_ms,
        auto_watermark_interval_ms=settings.auto_watermark_interval_ms,
        processing_time_ms=processing_time_source(),
        collect_channels=collect_channels or {},
        job_parameters=dict(settings.job_parameters),
        debloat=DebloatSettings.from_configuration(conf),
        async_snapshot=conf.get_option(opts.ASYNC_SNAPSHOT).lower(),
        savepoint_timeout_ms=conf.get_option(opts.CHECKPOINTING_TIMEOUT),
    )


async def run_job_graph(
    env: Any,
    job_graph: JobGraph,
    collect_channels: dict[int, Any] | None = None,
    cluster: MiniCluster | None = None,
    on_submit: Callable[[JobHandle], None] | None = None,
) -> JobExecutionResult:
    """Run a compiled job on ``cluster`` (or a new embedded one) and wait for its end.
    Cancellation: the job is cancelled with the surrounding scope."""
    env = settings_of(env)
    if cluster is None:
        cluster = env.cluster
    if cluster is not None:
        result = await _run_on(cluster, env, job_graph, collect_channels, on_submit)
    else:
        async with open_minicluster(cluster_config_for(env, job_graph)) as embedded:
            result = await _run_on(embedded, env, job_graph, collect_channels, on_submit)
    outcome = result._result
    if outcome.status is JobStatus.FAILED:
        cause = outcome.failure
        raise JobExecutionError(f"job '{outcome.job_name}' failed: {cause}") from cause
    return result


async def _run_on(
    cluster: MiniCluster,
    env: Any,
    job_graph: JobGraph,
    collect_channels: dict[int, Any] | None,
    on_submit: Callable[[JobHandle], None] | None = None,
) -> JobExecutionResult:
    handle = cluster.submit(job_graph, job_settings_for(env, collect_channels))
    if on_submit is not None:
        on_submit(handle)
    async with trio.open_nursery() as nursery:
        if _observer is not None:
            nursery.start_soon(_observer, cluster, handle)
        try:
            result = await handle.wait()
        except BaseException:
            handle.cancel()
            raise
        stats = handle.job_master.statistics()
        nursery.cancel_scope.cancel()
    return JobExecutionResult(result, stats)


async def run_stream_graph(env: Any, graph: StreamGraph) -> JobExecutionResult:
    """``execute`` for code already running inside Trio."""
    return await run_job_graph(env, generate_job_graph(graph))


def _in_trio() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


def loop_clock(env: Any) -> trio.abc.Clock | None:
    """The clock ``execute()`` runs Trio on: busy polling while the loop is loaded
    (``weir.loop.busy_poll``), unless ``execution.busy-poll.enabled`` is false (None:
    Trio's own). Jobs run from a background thread (``execute_async``, collecting) keep
    Trio's clock: a polling loop would hold the GIL the caller's thread works with."""
    min_load = busy_poll_min_load(settings_of(env).configuration)
    return None if min_load is None else BusyPollClock(BusyPollPolicy(min_load))


def execute_stream_graph(env: Any, graph: StreamGraph) -> JobExecutionResult:
    if _in_trio():
        raise UsageError(
            "env.execute() was called inside a running Trio event loop; "
            "use `await weir.cluster.client.run_stream_graph(env, env.get_stream_graph())` there"
        )
    if settings_of(env).configuration.get_option(opts.EXECUTION_TARGET) == "remote":
        from weir.cluster.standalone import execute_remote

        return execute_remote(settings_of(env), graph)
    job_graph = generate_job_graph(graph)
    warm_up()
    try:
        return trio.run(run_job_graph, env, job_graph, clock=loop_clock(env))
    except BaseExceptionGroup as group:
        from weir.cluster.task_executor import first_cause

        raise first_cause(group) from None


class JobClient(_JobClientBase):
    """``execute_async``: the job runs in a background thread; this handle waits for or cancels it."""

    def __init__(self, env: Any, job_graph: JobGraph) -> None:
        self._result: JobExecutionResult | None = None
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._handle: JobHandle | None = None
        self._ready = threading.Event()
        self._done: concurrent.futures.Future[JobExecutionResult] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._main, args=(env, job_graph), daemon=True, name="weir-job"
        )
        self._thread.start()
        self._ready.wait()

    def _main(self, env: Any, job_graph: JobGraph) -> None:
        def submitted(handle: JobHandle) -> None:
            self._handle = handle
            self._ready.set()

        async def body() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                self._scope = scope
                self._result = await run_job_graph(env, job_graph, on_submit=submitted)

        try:
            trio.run(body)
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()
            if self._error is not None:
                self._done.set_exception(self._error)
            elif self._result is None:
                self._done.set_exception(JobExecutionError("job was cancelled"))
            else:
                self._done.set_result(self._result)

    def get_job_status(self) -> CompletableFuture:
        """The job's status now (PyFlink: a future of a JobStatus, done at once here)."""
        if self._done.done():
            if self._result is not None:
                status = self._result.get_job_status()
            else:
                status = JobStatus.CANCELED if self._error is None else JobStatus.FAILED
        elif self._handle is not None:
            status = self._handle.job_master.job_status
        else:
            status = JobStatus.INITIALIZING
        return CompletableFuture.completed(status)

    def cancel(self) -> None:
        if self._token is not None and self._scope is not None and self._thread.is_alive():
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)

    def get_job_id(self) -> JobID:
        if self._handle is None:
            raise JobExecutionError(f"the job was not submitted: {self._error}")
        return JobID(self._handle.job_id)

    def _savepoint(self, directory: str | None, fmt: str, stop: str | None) -> concurrent.futures.Future:
        """Runs in the caller's thread and blocks until the savepoint ends; returns a done future."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self._handle is None or self._token is None or not self._thread.is_alive():
            future.set_exception(JobExecutionError("the job is not running, so it cannot take a savepoint"))
            return future
        try:
            path = trio.from_thread.run(
                self._handle.job_master.trigger_savepoint, directory, fmt, stop, trio_token=self._token
            )
        except (trio.RunFinishedError, trio.Cancelled) as exc:
            future.set_exception(JobExecutionError(f"the job ended before the savepoint completed ({exc})"))
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(path)
        return future

    def trigger_savepoint(
        self, savepoint_directory: str | None = None, format_type: str = "canonical"
    ) -> concurrent.futures.Future:
        """Take a savepoint while the job goes on; ``.result()`` is its directory."""
        return self._savepoint(savepoint_directory, _savepoint_format(format_type), None)

    def stop_with_savepoint(
        self,
        advance_to_end_of_event_time: bool = False,
        savepoint_directory: str | None = None,
        format_type: str = "canonical",
    ) -> concurrent.futures.Future:
        """Take a savepoint and end the job (FINISHED); with ``advance_to_end_of_event_time``
        event time ends first (Long.MAX watermark: every window and timer fires)."""
        stop = "drain" if advance_to_end_of_event_time else "no_drain"
        return self._savepoint(savepoint_directory, _savepoint_format(format_type), stop)

    def get_job_execution_result(self) -> CompletableFuture:
        """A future of the job's JobExecutionResult: ``.result(timeout_s)`` waits for the job's
        end and raises its failure (``JobExecutionError("job was cancelled")`` after ``cancel``)."""
        return CompletableFuture(self._done)


def _savepoint_format(format_type: Any) -> str:
    """PyFlink's SavepointFormatType (CANONICAL / NATIVE) or its name."""
    name = str(getattr(format_type, "name", format_type)).lower()
    if name not in ("canonical", "native"):
        raise UsageError(f"savepoint format must be CANONICAL or NATIVE, got {format_type!r}")
    return name


def submit_stream_graph(env: Any, graph: StreamGraph) -> Any:
    """``execute_async``: a JobClient of the job, which runs in a background thread here, or
    with ``execution.target: remote`` on the standalone cluster (``standalone.submit_remote``)."""
    settings = settings_of(env)
    if settings.configuration.get_option(opts.EXECUTION_TARGET) == "remote":
        from weir.cluster.standalone import submit_remote

        return submit_remote(settings, graph)
    warm_up()
    return JobClient(env, generate_job_graph(graph))


_END = object()


class CloseableIterator(_CloseableIteratorBase):
    """Records of ``execute_and_collect``; close it (or use ``with``) to stop the job early.

    ``produce(deliver)`` runs in a background thread under ``trio.run`` and runs the job,
    awaiting ``deliver(records)`` for each list of records; the thread hands them over a
    bounded queue, so a slow reader backpressures the job. Closing cancels ``produce``."""

    def __init__(self, produce: Callable[[Callable[[list[Any]], Awaitable[None]]], Awaitable[None]],
                 capacity: int = 16) -> None:  # fmt: skip
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=capacity)
        self._buffer: list[Any] = []
        self._closed = False
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._thread = threading.Thread(target=self._main, args=(produce,), daemon=True, name="weir-collect")
        self._thread.start()

    async def _deliver(self, records: list[Any]) -> None:
        await trio.to_thread.run_sync(self._queue.put, records, abandon_on_cancel=True)

    def _main(self, produce: Callable[[Callable[[list[Any]], Awaitable[None]]], Awaitable[None]]) -> None:
        async def body() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                self._scope = scope
                await produce(self._deliver)

        try:
            trio.run(body)
        except BaseException as exc:
            from weir.cluster.task_executor import first_cause

            self._error = first_cause(exc) if isinstance(exc, BaseExceptionGroup) else exc
        finally:
            while True:
                try:
                    self._queue.put(_END, timeout=0.1)
                    break
                except queue.Full:
                    if self._closed:
                        with contextlib.suppress(queue.Empty):
                            self._queue.get_nowait()

    def __iter__(self) -> CloseableIterator:
        return self

    def __next__(self) -> Any:
        while not self._buffer:
            if self._closed:
                raise StopIteration
            item = self._queue.get()
            if item is _END:
                self._closed = True
                self._thread.join()
                if self._error is not None:
                    raise self._error
                raise StopIteration
            self._buffer = list(reversed(item))
        return self._buffer.pop()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._token is not None and self._scope is not None:
            with contextlib.suppress(trio.RunFinishedError, RuntimeError):
                trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
        while self._thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=0.05)
        self._thread.join()

    def __enter__(self) -> CloseableIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def execute_and_collect(env: Any, graph: StreamGraph, sink_node_id: int, limit: int | None) -> Any:
    """Run ``graph`` in a background thread; its collect sink ``sink_node_id`` streams the records
    back: a closeable iterator, or with ``limit`` a list of at most that many. With
    ``execution.target: remote`` the job runs on the standalone cluster
    (``weir.cluster.standalone.collect_remote``)."""
    if _in_trio():
        raise UsageError("execute_and_collect() was called inside a running Trio event loop")
    settings = settings_of(env)
    if settings.configuration.get_option(opts.EXECUTION_TARGET) == "remote":
        from weir.cluster.standalone import collect_remote

        return collected(collect_remote(settings, graph, sink_node_id), limit)
    warm_up()
    job_graph = generate_job_graph(graph)
    results = CollectResults(collect_guarantee(settings))

    async def produce(deliver: Callable[[list[Any]], Awaitable[None]]) -> None:
        send, receive = trio.open_memory_channel[tuple[Any, ...]](0)
        async with trio.open_nursery() as nursery:

            async def forward() -> None:
                async with receive:
                    async for message in receive:
                        if records := results.take(message):
                            await deliver(records)

            nursery.start_soon(forward)
            async with send:
                await run_job_graph(settings, job_graph, {sink_node_id: send})

    return collected(CloseableIterator(produce), limit)


def collect_guarantee(env: Any) -> str:
    """What ``execute_and_collect`` promises across restarts (``weir.operators.collect``): the
    job's checkpointing mode, or "none" without checkpointing, as Flink's collect iterator."""
    settings = settings_of(env)
    if settings.checkpoint_interval_ms <= 0:
        return "none"
    mode = str(settings.configuration.get_option(opts.CHECKPOINTING_MODE)).upper()
    return "at_least_once" if mode == "AT_LEAST_ONCE" else "exactly_once"


def collected(iterator: CloseableIterator, limit: int | None) -> Any:
    """``iterator`` itself without ``limit``, else a list of its first ``limit`` records (the
    job is cancelled once they arrived)."""
    if limit is None:
        return iterator
    with iterator:
        out: list[Any] = []
        if limit == 0:
            return out
        for record in iterator:  # stop at the limit, not at the next record: a source may never end
            out.append(record)
            if len(out) >= limit:
                break
        return out


class LocalExecutor:
    """``execution.target: local`` (weir.core.execution's ``PipelineExecutor``): runs a job on an
    embedded MiniCluster, or on the running cluster ``settings.cluster`` names."""

    def execute(self, graph: StreamGraph, settings: ExecutionSettings) -> JobExecutionResult:
        return execute_stream_graph(settings, graph)

    def execute_async(self, graph: StreamGraph, settings: ExecutionSettings) -> JobClient:
        return submit_stream_graph(settings, graph)

    def execute_and_collect(
        self, graph: StreamGraph, settings: ExecutionSettings, sink_node_id: int, limit: int | None
    ) -> Any:
        return execute_and_collect(settings, graph, sink_node_id, limit)

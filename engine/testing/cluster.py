"""A MiniCluster shared by a whole test session, and the environments that submit to it.

Theory of operation
-------------------
``SharedCluster`` runs one Trio event loop in a daemon thread for the whole session. The
MiniClusters live in that loop, one per size (TaskManagers × slots), started the first
time a test asks for that size and kept until the session ends. A test gets a fresh
``TestEnvironment`` (a StreamExecutionEnvironment) whose ``cluster`` is a
``ClusterClient``: every way of running a job — ``execute``, ``execute_async``,
``execute_and_collect``, ``await run_stream_graph`` — submits through it to the shared
loop. Records for ``execute_and_collect`` are forwarded from the shared loop to the
caller's loop; the caller's loop only waits.

Time. The shared loop's clock is a Trio ``MockClock``. Normally it runs at the real rate
(rate 1, no autojump), so jobs see real time. A test that asks for ``weir_clock`` switches
it to mock time: the clock stands still (rate 0) and, while at least one job runs, jumps
to the next deadline as soon as every task is blocked (autojump threshold 0). Processing
time, watermark intervals, buffer timeouts, checkpoint intervals, restart delays and
heartbeats then pass instantly and deterministically. Between jobs the clock stands still,
so an idle cluster costs nothing. Under mock time each job's processing time starts at 0
ms; under real time it is epoch milliseconds, as in ``env.execute()``.

What it does not do: run two sessions at once (pytest-xdist workers are processes, each
with its own SharedCluster); isolate jobs from each other beyond what a real cluster does
(a job that never blocks keeps the others' mock clock from jumping).
"""

from __future__ import annotations

import contextlib
import math
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio
import trio.testing

from weir.datastream.stream_execution_environment import StreamExecutionEnvironment
from weir.errors import JobExecutionError, UsageError

DEFAULT_SLOTS_PER_TASKMANAGER = 16


@dataclass(frozen=True)
class ClusterSize:
    taskmanagers: int = 1
    slots_per_taskmanager: int = DEFAULT_SLOTS_PER_TASKMANAGER

    def __post_init__(self) -> None:
        for name in ("taskmanagers", "slots_per_taskmanager"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} of the test cluster must be a positive integer, got {value!r}")


def job_clock(mock_time: bool) -> Callable[[], int]:
    """A job's processing time in ms on the current Trio clock: from 0 under mock time,
    epoch milliseconds otherwise. Floors with a tiny tolerance, so float error in the
    clock never turns ``k`` ms into ``k - 1``."""
    base = trio.current_time()
    epoch_ms = 0 if mock_time else int(time.time() * 1000)

    def now_ms() -> int:
        return epoch_ms + math.floor((trio.current_time() - base) * 1000 + 1e-6)

    return now_ms


class _ThreadAwareAutojump(trio.abc.Instrument):
    """Keeps the shared loop's autojump from jumping while a worker thread is busy.

    Trio counts a task waiting in ``trio.to_thread.run_sync`` as blocked, so a plain
    autojump clock jumps while a checkpoint is being written in a thread, and how many
    checkpoints complete per minute of mock time would depend on the disk. While a thread
    of the default limiter is busy, this instrument vetoes the jump (it wakes a parked
    helper task, so the loop is not idle) and lets the loop wait in real time instead
    (the thread's completion wakes it); once the threads are done, time jumps again.
    Threads that stay busy for longer than ``LONG_THREAD_S`` (a legacy SourceFunction
    running in a thread for the whole job) stop the veto, so time cannot freeze.
    """

    THREAD_WAIT_S = 0.005
    LONG_THREAD_S = 0.25

    def __init__(self, shared: SharedCluster) -> None:
        self.shared = shared
        self.lot = trio.lowlevel.ParkingLot()
        self._busy_since: float | None = None

    def _veto(self) -> bool:
        if trio.to_thread.current_default_thread_limiter().statistics().borrowed_tokens == 0:
            self._busy_since = None
            return False
        now = time.monotonic()
        if self._busy_since is None:
            self._busy_since = now
        return now - self._busy_since < self.LONG_THREAD_S

    def before_io_wait(self, timeout: float) -> None:
        if self.shared.jumping:
            wanted = self.THREAD_WAIT_S if self._veto() else 0.0
            if self.shared.clock.autojump_threshold != wanted:
                self.shared.clock.autojump_threshold = wanted

    def after_io_wait(self, timeout: float) -> None:
        if self.shared.jumping and self._veto():
            self.lot.unpark_all()

    async def run_helper(self) -> None:
        while True:
            await self.lot.park()


class SharedCluster:
    """The session's Trio loop (in a thread) and the MiniClusters running in it."""

    def __init__(self, working_dir: str | None = None) -> None:
        self.clock = trio.testing.MockClock(rate=1.0)
        self._instrument = _ThreadAwareAutojump(self)
        self.working_dir = working_dir
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._thread: threading.Thread | None = None
        self._clusters: dict[ClusterSize, Any] = {}
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self.mock_time = False
        self.running_jobs = 0
        self.jobs_run = 0

    # -- life cycle (called from ordinary threads) ----------------------------------------------
    def start(self) -> SharedCluster:
        """Start the loop thread (idempotent); numba kernels are loaded here, once."""
        from weir.loop.warmup import warm_up

        with self._lock:
            if self._thread is not None:
                return self
            warm_up()
            ready = threading.Event()
            self._thread = threading.Thread(target=self._main, args=(ready,), daemon=True, name="weir-shared")
            self._thread.start()
            ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def _main(self, ready: threading.Event) -> None:
        async def body() -> None:
            self._token = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._instrument.run_helper)
                ready.set()
                await trio.sleep_forever()

        try:
            trio.run(body, clock=self.clock, instruments=[self._instrument])
        except BaseException as exc:  # pragma: no cover - the loop only ends by stop()
            self._error = exc
        finally:
            ready.set()

    def stop(self) -> None:
        """Cancel every job and cluster and end the loop thread."""
        thread, token = self._thread, self._token
        if thread is None or token is None:
            return
        nursery = self._nursery
        if nursery is not None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(nursery.cancel_scope.cancel)
        thread.join(timeout=30)
        self._thread = None
        self._clusters.clear()

    @property
    def token(self) -> trio.lowlevel.TrioToken:
        if self._token is None:
            raise UsageError("the shared test cluster is not running; call start() first")
        return self._token

    def cluster(self, size: ClusterSize) -> Any:
        """The MiniCluster of this size, started on first use (blocks until it runs)."""
        self.start()
        with self._lock:
            found = self._clusters.get(size)
            if found is None:
                found = trio.from_thread.run(self._open, size, trio_token=self.token)
                self._clusters[size] = found
        return found

    async def _open(self, size: ClusterSize) -> Any:
        assert self._nursery is not None
        return await self._nursery.start(self._host, size)

    async def _host(self, size: ClusterSize, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        from weir.cluster.minicluster import ClusterConfig, open_minicluster

        config = ClusterConfig(
            taskmanagers=size.taskmanagers,
            slots_per_taskmanager=size.slots_per_taskmanager,
            working_dir=None if self.working_dir is None else f"{self.working_dir}/tm{size.taskmanagers}",
        )
        async with open_minicluster(config) as cluster:
            task_status.started(cluster)
            await trio.sleep_forever()

    # -- time ------------------------------------------------------------------------------------
    def set_mock_time(self, on: bool) -> None:
        """Switch the loop's clock between real time and mock time (see the module docstring)."""
        self.start()
        trio.from_thread.run_sync(self._set_mock_time, on, trio_token=self.token)

    def _set_mock_time(self, on: bool) -> None:
        self.mock_time = on
        self.clock.rate = 0.0 if on else 1.0
        self._sync_autojump()

    @property
    def jumping(self) -> bool:
        """Mock time with jobs running: the clock jumps when everything waits."""
        return self.mock_time and self.running_jobs > 0

    def _sync_autojump(self) -> None:
        self.clock.autojump_threshold = 0.0 if self.jumping else math.inf

    def current_time(self) -> float:
        """The loop clock's time in seconds (virtual under mock time)."""
        return self.clock.current_time()

    # -- jobs (called inside the loop) -----------------------------------------------------------
    def job_started(self) -> Callable[[], int]:
        """Count a job in (mock time starts jumping) and return its processing-time clock."""
        self.running_jobs += 1
        self.jobs_run += 1
        self._sync_autojump()
        return job_clock(self.mock_time)

    def job_ended(self) -> None:
        self.running_jobs -= 1
        self._sync_autojump()


class _JobMasterView:
    """What callers of a remote job see of its JobMaster: reads go to the real one (it
    lives in the shared loop); ``trigger_savepoint`` is awaited across the two loops."""

    def __init__(self, handle: RemoteJobHandle) -> None:
        self._handle = handle

    async def trigger_savepoint(self, *args: Any, **kwargs: Any) -> str:
        shared = self._handle.shared

        async def in_shared_loop() -> str:
            master = self._handle.real_master()
            return str(await master.trigger_savepoint(*args, **kwargs))

        def blocking() -> str:
            return trio.from_thread.run(in_shared_loop, trio_token=shared.token)

        return await trio.to_thread.run_sync(blocking, abandon_on_cancel=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle.real_master(), name)


class RemoteJobHandle:
    """The JobHandle that ``ClusterClient.submit`` returns to a caller in another Trio loop
    (or thread): ``wait`` and ``cancel`` work from there; the job runs in the shared loop."""

    def __init__(self, shared: SharedCluster, cluster: Any, job_id: str) -> None:
        self.shared = shared
        self.cluster = cluster
        self.job_id = job_id
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self._real: Any = None
        self._cancel_requested = False
        self.job_master = _JobMasterView(self)

    def real_master(self) -> Any:
        if self._real is None:
            raise JobExecutionError(f"job {self.job_id} has not started on the shared cluster yet")
        return self._real.job_master

    # -- caller side ---------------------------------------------------------------------------
    async def wait(self) -> Any:
        """Wait for the job's end. Cancellation: stops waiting; the job goes on (as JobHandle)."""
        if not self.done.is_set():
            await trio.to_thread.run_sync(self.done.wait, abandon_on_cancel=True)
        return self.wait_blocking()

    def wait_blocking(self, timeout_s: float | None = None) -> Any:
        if not self.done.wait(timeout_s):
            raise TimeoutError(f"job {self.job_id} still running after {timeout_s} s")
        if self.error is not None:
            raise self.error
        return self.result

    def cancel(self) -> None:
        self._cancel_requested = True
        with contextlib.suppress(trio.RunFinishedError):
            self.shared.token.run_sync_soon(self._cancel_in_loop)

    def _cancel_in_loop(self) -> None:
        if self._real is not None:
            self._real.cancel()

    # -- shared-loop side ----------------------------------------------------------------------
    def start_in_loop(self, job_graph: Any, settings: Any, forwards: list[tuple[Any, Any, Any]]) -> None:
        """Runs as a ``run_sync_soon`` callback in the shared loop."""
        try:
            settings.processing_time_ms = self.shared.job_started()
        except BaseException as exc:  # pragma: no cover - job_started does not raise
            self.error = exc
            self.done.set()
            return
        try:
            self._real = self.cluster.submit(job_graph, settings, job_id=self.job_id)
        except BaseException as exc:
            self.shared.job_ended()
            self.error = exc
            self.done.set()
            return
        if self._cancel_requested:
            self._real.cancel()
        assert self.shared._nursery is not None
        self.shared._nursery.start_soon(self._watch, forwards, name=f"watch job {self.job_id}")

    async def _watch(self, forwards: list[tuple[Any, Any, Any]]) -> None:
        """Wait for the job, forward its collected records, report. Never raises into the
        shared loop (that would end the session's clusters); cancellation ends it."""
        try:
            async with trio.open_nursery() as nursery:
                for local_receive, caller_send, caller_token in forwards:
                    nursery.start_soon(_forward, local_receive, caller_send, caller_token)
                try:
                    self.result = await self._real.wait()
                finally:
                    for local_send in self._local_sends:
                        local_send.close()
        except Exception as exc:
            self.error = exc
        finally:
            self.cluster.jobs.pop(self.job_id, None)
            self.shared.job_ended()
            self.done.set()

    _local_sends: list[Any]


async def _forward(local_receive: Any, caller_send: Any, caller_token: Any) -> None:
    """Hand ``execute_and_collect`` records from the shared loop to the caller's loop.
    Stops when the caller is gone. Cancellation: stops forwarding."""

    def deliver(items: Any) -> bool:
        try:
            trio.from_thread.run(caller_send.send, items, trio_token=caller_token)
        except (trio.RunFinishedError, trio.BrokenResourceError, trio.ClosedResourceError, trio.Cancelled):
            return False  # the caller closed its iterator or ended: its loop's exceptions stay there
        return True

    async with local_receive:
        async for items in local_receive:
            if not await trio.to_thread.run_sync(deliver, items, abandon_on_cancel=True):
                return


class ClusterClient:
    """A shared MiniCluster as ``env.cluster`` sees it: ``submit`` works from any thread
    or Trio loop other than the shared one, and returns a RemoteJobHandle."""

    def __init__(self, shared: SharedCluster, size: ClusterSize) -> None:
        self.shared = shared
        self.size = size
        self.cluster = shared.cluster(size)
        self.handles: list[RemoteJobHandle] = []

    @property
    def config(self) -> Any:
        return self.cluster.config

    def check_slots(self, job_graph: Any) -> None:
        from weir.graph.execution_graph import build_execution_graph
        from weir.graph.slots import required_slots

        needed = sum(required_slots(build_execution_graph(job_graph)).values())
        have = self.size.taskmanagers * self.size.slots_per_taskmanager
        if needed > have:
            raise UsageError(
                f"job '{job_graph.job_name}' needs {needed} slots but the test cluster has {have} "
                f"({self.size.taskmanagers} TaskManager(s) × {self.size.slots_per_taskmanager} slots); "
                f"ask for more with @pytest.mark.weir(slots_per_taskmanager=...)"
            )

    def submit(self, job_graph: Any, settings: Any, job_id: str | None = None) -> RemoteJobHandle:
        """Accept a job; it starts in the shared loop right after. Returns at once."""
        self.check_slots(job_graph)
        handle = RemoteJobHandle(self.shared, self.cluster, job_id or secrets.token_hex(16))
        forwards = []
        local_sends = []
        if settings.collect_channels:
            caller_token = trio.lowlevel.current_trio_token()
            channels = {}
            for node_id, caller_send in settings.collect_channels.items():
                local_send, local_receive = trio.open_memory_channel[Any](1)
                channels[node_id] = local_send
                local_sends.append(local_send)
                forwards.append((local_receive, caller_send, caller_token))
            settings.collect_channels = channels
        handle._local_sends = local_sends
        self.handles.append(handle)
        self.shared.token.run_sync_soon(handle.start_in_loop, job_graph, settings, forwards)
        return handle

    def cancel_all(self) -> None:
        """Cancel this client's jobs that still run (a test's teardown)."""
        for handle in self.handles:
            if not handle.done.is_set():
                handle.cancel()
        for handle in self.handles:
            handle.done.wait(timeout=30)
        self.handles.clear()

    def statistics(self) -> dict[str, Any]:
        return dict(self.cluster.statistics())


class TestEnvironment(StreamExecutionEnvironment):
    """A StreamExecutionEnvironment whose jobs run on the session's shared cluster.

    Everything of StreamExecutionEnvironment works; ``execute`` blocks until the job ends,
    as always. In an ``async def`` test use ``await env.run()`` instead (it keeps the
    test's own Trio loop free while the job runs).
    """

    __test__ = False  # not a pytest test class

    def __init__(self, client: ClusterClient, configuration: Any = None) -> None:
        super().__init__(configuration)
        self.cluster = client

    def execute(self, job_name: str | None = None, *args: Any, **kwargs: Any) -> Any:
        """As StreamExecutionEnvironment's (savepoint arguments included); the job runs on the
        shared cluster."""
        if _in_trio():
            raise UsageError(
                "weir_env.execute() blocks, and this test runs inside Trio (an async test); "
                "use `await weir_env.run()` there"
            )
        return super().execute(job_name, *args, **kwargs)

    async def run(self, job_name: str | None = None) -> Any:
        """``execute`` for async tests. Cancellation: the job is cancelled."""
        client = self.cluster
        before = list(client.handles)
        try:
            return await trio.to_thread.run_sync(self.execute, job_name, abandon_on_cancel=True)
        except trio.Cancelled:
            for handle in client.handles:
                if handle not in before:
                    handle.cancel()
            raise


def _in_trio() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True

"""JobMaster: one per job. Builds the ExecutionGraph, gets slots, deploys tasks, tracks states.

Theory of operation
-------------------
The job status machine starts INITIALIZING → CREATED once the ExecutionGraph exists. The
JobMaster computes the slot plan (slot sharing, Flink's placement), asks the
ResourceManager for exactly those slots and, once it has them, moves the job to RUNNING
and deploys pipelined regions: a streaming job is one region, deployed at once; in BATCH
mode a region is deployed only when every blocking result it consumes is complete.

Each execution attempt follows its own state machine (CREATED → SCHEDULED → DEPLOYING →
INITIALIZING → RUNNING → FINISHED). Tasks report through ``on_task_event``. The first
failure moves the job to FAILING: every other task is cancelled, and when all are terminal
the job is FAILED (restarts arrive with checkpointing). ``cancel()`` moves it to
CANCELLING and then CANCELED. When every execution has FINISHED the job is FINISHED.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import trio

from weir.cluster.slot_manager import SlotId
from weir.cluster.task_executor import TaskExecutor, TaskHandle
from weir.errors import JobExecutionError, UsageError, WeirError
from weir.graph.execution_graph import Execution, ExecutionGraph, ExecutionVertex, build_execution_graph
from weir.graph.job_graph import JobGraph, vertex_buffer_timeout_ms
from weir.graph.slots import SlotPlan, plan_slots, required_slots
from weir.graph.status import JobStatus, JobStatusMachine
from weir.network.environment import ChannelSpec
from weir.task.task import ProducedPartition, TaskDeployment


@dataclass
class JobResult:
    job_id: str
    job_name: str
    status: JobStatus
    net_runtime_ms: int
    failure: BaseException | None = None
    accumulators: dict[str, Any] = field(default_factory=dict)


@dataclass
class JobSettings:
    buffer_timeout_ms: int
    auto_watermark_interval_ms: int
    processing_time_ms: Callable[[], int]
    collect_channels: dict[int, Any] = field(default_factory=dict)
    job_parameters: dict[str, str] = field(default_factory=dict)
    slot_request_timeout_ms: int = 300_000
    state_backend: Any = None  # a StateBackend (weir.core.state_backend); None: hashmap
    checkpoint_config: Any = None  # CheckpointCoordinatorConfig when checkpointing is enabled
    checkpoint_dir: Any = None  # Path of the checkpoint storage root
    restart_strategy: Any = None  # weir.cluster.restart_strategy.RestartStrategy; None: no restarts
    savepoint_restore: Any = None  # weir.cluster.savepoints.SavepointRestoreSettings: start from it
    failover_strategy: str = "region"  # jobmanager.execution.failover-strategy: "full" | "region"
    savepoint_dir: Any = (
        None  # default target directory of savepoints (execution.checkpointing.savepoint-dir)
    )
    debloat: Any = None  # weir.network.debloat.DebloatSettings; None: batches keep their size
    #: execution.checkpointing.externalized-checkpoint-retention: which end of the job discards its checkpoints
    checkpoint_retention: str = "NO_EXTERNALIZED_CHECKPOINTS"
    #: execution.checkpointing.timeout, for savepoints of a job without periodic checkpoints
    savepoint_timeout_ms: int = 600_000
    #: weir.checkpointing.async-snapshot: where the asynchronous part of a checkpoint runs
    async_snapshot: str = "auto"


class JobMaster:
    def __init__(
        self,
        job_graph: JobGraph,
        job_id: str,
        resource_manager: Any,
        task_executors: list[TaskExecutor],
        slots_per_taskmanager: int,
        settings: JobSettings,
        taskmanagers_may_join: bool = False,
    ) -> None:
        self.job_graph = job_graph
        self.job_id = job_id
        self.rm = resource_manager
        self.task_executors = task_executors
        self.slots_per_taskmanager = slots_per_taskmanager
        self.settings = settings
        #: TaskManagers may register while the job waits for slots (the standalone cluster)
        self.taskmanagers_may_join = taskmanagers_may_join
        self.status = JobStatusMachine()
        self.execution_graph: ExecutionGraph | None = None
        self.plan: SlotPlan | None = None
        #: the plan's slots, (taskmanager index, slot index), and the slot the job holds for each
        self.placement: dict[tuple[int, int], SlotId] = {}
        self.handles: dict[str, TaskHandle] = {}
        #: each attempt's last statistics, kept when the job ended and its tasks were let go
        self._final_statistics: dict[str, Any] | None = None
        self.executions: dict[str, Execution] = {}
        self.failure: BaseException | None = None
        self._changed = trio.Event()
        self._cancel_requested = False
        self._deployed_regions: set[int] = set()
        self.checkpoints: Any = None
        self._nursery: trio.Nursery | None = None
        self._driver_scope: trio.CancelScope | None = None
        self._restore_state: dict[str, list[dict[str, Any]]] | None = None
        self._initial_restore: dict[str, list[dict[str, Any]]] | None = None  # from a savepoint
        self._stop_modes: dict[int, str] = {}  # savepoint id -> "drain" | "no_drain" (stop-with-savepoint)
        self._pending_stop: str | None = None
        self._failed_executions: list[str] = []
        self._restarting_regions: set[int] | None = None  # region failover in progress
        self.region_restarts = 0
        self._restart_delay_ms = 0
        self.restarts = 0
        self.failures: list[BaseException] = []
        self.deploy_order: list[str] = []  # task names in deployment order (for tests and the UI)
        self.finished_before_deploy: dict[str, set[str]] = {}
        self._driver_stopped: trio.Event | None = None
        self.recovery_log: list[str] = []  # what recovery skipped and why (damaged checkpoints)
        self.restart_log: list[str] = []  # one line per restart: which, how soon, and its cause
        self.restart_listeners: list[Callable[[str], None]] = []  # called with each new line
        self.failure_injector = _failure_injector(
            job_graph
        )  # weir.failure-injection.* (tests, --inject-failures)

    # -- control -------------------------------------------------------------------------------
    def cancel(self) -> None:
        self._cancel_requested = True
        self._changed.set()

    async def trigger_savepoint(
        self, target_dir: str | None = None, savepoint_format: str = "canonical", stop: str | None = None
    ) -> str:
        """Take a savepoint (always aligned) and return its directory; with ``stop`` ("drain" or
        "no_drain") the sources end after it, so the job FINISHES (stop-with-savepoint).
        Raises CheckpointError when it fails. Cancellation: stops waiting."""
        from pathlib import Path

        from weir.errors import CheckpointError

        directory = target_dir or self.settings.savepoint_dir
        if directory:
            from weir.common.config_options import local_path

            directory = local_path("savepoint target directory", directory)
        if not directory:
            raise UsageError(
                "no savepoint target directory: give one, or set execution.checkpointing.savepoint-dir "
                "(state.savepoints.dir) in the job's configuration"
            )
        if stop not in (None, "drain", "no_drain"):
            raise UsageError(f"stop must be None, 'drain' or 'no_drain', got {stop!r}")
        if self.job_graph.is_batch:
            raise UsageError("savepoints are for streaming jobs; this job runs in BATCH mode")
        while not (self.status.state is JobStatus.RUNNING and self._all_running()):
            finished = [e for e in self.executions.values() if e.state.name == "FINISHED"]
            if finished:
                raise CheckpointError(
                    f"cannot take a savepoint of job {self.job_id}: {len(finished)} of its tasks already "
                    "finished (their input ended), and a savepoint needs every task"
                )
            if self.status.state not in (
                JobStatus.INITIALIZING, JobStatus.CREATED, JobStatus.RUNNING, JobStatus.RESTARTING
            ):  # fmt: skip
                raise CheckpointError(
                    f"cannot take a savepoint of job {self.job_id}: it is {self.status.state.name}"
                )
            await trio.sleep(0.01)
        driver = self.checkpoints
        if driver is None:
            raise CheckpointError(
                f"job {self.job_id} has no checkpoint storage, so it cannot take savepoints"
            )
        self._pending_stop = stop
        try:
            path = await driver.trigger_savepoint(Path(directory), savepoint_format)
        finally:
            self._pending_stop = None
        return str(path)

    @property
    def job_status(self) -> JobStatus:
        return self.status.state

    # -- the job -------------------------------------------------------------------------------
    async def run(self) -> JobResult:
        """Run the job to a terminal status. Cancellation: tasks are cancelled with the cluster."""
        from weir.loop.gc_pauses import frozen_heap
        from weir.loop.heap_memory import keep_freed_memory

        keep_freed_memory()  # a batch's arrays land on pages the process has already
        with frozen_heap():  # short full collections while the job runs
            return await self._run()

    async def _plan(self, eg: ExecutionGraph) -> SlotPlan | None:
        """The job's slot plan (None: the job was cancelled while it waited for slots). On a
        cluster that TaskManagers may join, a job that needs more slots than are registered
        first waits for them up to the slot request timeout (Flink's ``slot.request.timeout``),
        then is planned on the TaskManagers registered by then, at the most slots one offers
        (a planned slot that does not exist is taken elsewhere by the ResourceManager).
        Elsewhere the cluster's TaskManagers are all it will have, and a job too big for them
        fails at once."""
        if not self.taskmanagers_may_join:
            return plan_slots(eg, len(self.task_executors), self.slots_per_taskmanager)
        needed = sum(required_slots(eg).values())
        timeout_ms = self.settings.slot_request_timeout_ms
        there: list[bool] = []
        async with trio.open_nursery() as nursery:

            async def wait() -> None:
                there.append(await self.rm.wait_for_slots(needed, timeout_ms))
                nursery.cancel_scope.cancel()

            nursery.start_soon(wait)
            while not self._cancel_requested:  # cancel() sets the flag, then the event
                self._changed = trio.Event()
                await self._changed.wait()
            nursery.cancel_scope.cancel()
        if not there:
            return None
        if not there[0]:
            total = self.rm.slot_manager.statistics().total
            raise UsageError(
                f"job {self.job_graph.job_name!r} needs {needed} slots; the cluster's TaskManagers offered "
                f"{total} for {timeout_ms / 1000:g} s (the slot request timeout). Add TaskManagers "
                "(weir cluster add-taskmanager) or lower the job's parallelism"
            )
        registered = self.rm.slot_manager.is_registered
        live = [te for te in self.task_executors if registered(te.taskmanager_id)]
        return plan_slots(eg, len(self.task_executors), max(te.num_slots for te in live))

    async def _run(self) -> JobResult:
        started = trio.current_time()
        eg = build_execution_graph(self.job_graph, self.job_id)
        self.execution_graph = eg
        self.status.on_event("initialized")
        plan = await self._plan(eg)
        if plan is None:  # cancelled while it waited for slots: nothing was deployed
            self.status.on_event("cancel")
            self.status.on_event("all_terminal")
            runtime_ms = int((trio.current_time() - started) * 1000)
            return JobResult(self.job_id, self.job_graph.job_name, self.status.state, runtime_ms, None, {})
        self.plan = plan
        preferred = [
            SlotId(self.task_executors[s.taskmanager].taskmanager_id, s.index) for s in self.plan.slots
        ]
        granted = await self.rm.request_slots(
            self.job_id, len(preferred), preferred=preferred, timeout_ms=self.settings.slot_request_timeout_ms
        )
        # the preferred slots when all were free, else whichever the ResourceManager had
        self.placement = {
            (s.taskmanager, s.index): slot for s, slot in zip(self.plan.slots, granted, strict=True)
        }
        self.rm.add_listener(self._on_taskmanager_lost)
        restore = self.settings.savepoint_restore
        if restore is not None:
            from weir.cluster.savepoints import load_savepoint_restore_state

            try:
                self._initial_restore = await trio.to_thread.run_sync(
                    load_savepoint_restore_state,
                    restore.path,
                    self.job_graph,
                    restore.allow_non_restored_state,
                    restore.allow_untrusted_pickle,
                )
            except BaseException:
                self.rm.remove_listener(self._on_taskmanager_lost)
                self.rm.release_slots(self.job_id)
                raise
            self._restore_state = self._initial_restore
        self.checkpoints = self._checkpoint_driver(eg)
        try:
            self.status.on_event("schedule")
            eg.status.on_event("schedule")
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._start_checkpoint_driver()
                await self._supervise(eg)
                if self.status.state is JobStatus.FINISHED:
                    if self._driver_scope is not None:
                        self._driver_scope.cancel()  # no checkpoint completes after the job's end
                    # exactly-once sinks commit what they wrote after the last checkpoint
                    await trio.to_thread.run_sync(_commit_finished_sinks, self.job_graph)
                nursery.cancel_scope.cancel()
        finally:
            self.rm.remove_listener(self._on_taskmanager_lost)
            self.rm.release_slots(self.job_id)
            self._release_partitions(eg)
            self._archive_tasks()
        await self._apply_checkpoint_retention()
        runtime_ms = int((trio.current_time() - started) * 1000)
        accumulators: dict[str, Any] = {"restarts": self.restarts}
        if self.restart_log:
            accumulators["restart_log"] = list(self.restart_log)  # which restart, when, and its cause
        if self.checkpoints is not None:
            accumulators["checkpoints_completed"] = len(self.checkpoints.completed)
            accumulators["checkpoint_stats"] = [r.to_json() for r in self.checkpoints.history.finished]
        if self.recovery_log:
            accumulators["recovery"] = list(self.recovery_log)
        if self.failure_injector is not None:
            accumulators["injected_failures"] = list(self.failure_injector.log)
        return JobResult(
            self.job_id, self.job_graph.job_name, self.status.state, runtime_ms, self.failure, accumulators
        )

    async def _apply_checkpoint_retention(self) -> None:
        """The job ended: discard its checkpoints unless the retention keeps them for this status
        (a process that dies never gets here, so its checkpoints stay for ``weir run -s``)."""
        from weir.cluster.checkpointing import discard_job_checkpoints, discards_checkpoints_on

        driver = self.checkpoints
        if driver is None or not discards_checkpoints_on(
            self.settings.checkpoint_retention, self.status.state.name
        ):
            return
        try:
            await trio.to_thread.run_sync(discard_job_checkpoints, driver.storage)
        except OSError as exc:  # best effort, as in Flink: the job's result stands
            driver.cleanup_failures.append(f"discarding the checkpoints of the ended job: {exc}")

    async def _supervise(self, eg: ExecutionGraph) -> None:
        while True:
            self._changed = trio.Event()
            state = self.status.state
            if state is JobStatus.RUNNING:
                if self._cancel_requested:
                    self.status.on_event("cancel")
                    self._cancel_all()
                    continue
                if self._restarting_regions is not None:
                    if all(
                        ev.current_execution.is_terminal
                        for r in self._restarting_regions
                        for ev in eg.regions[r].vertices
                    ):
                        await self._restart_regions(eg, self._restarting_regions)
                        continue
                elif self.failure is not None:
                    if self._driver_scope is not None:
                        self._driver_scope.cancel()  # no checkpoint can complete once tasks are cancelled
                    self.failures.append(self.failure)
                    strategy = self.settings.restart_strategy
                    decision = (
                        None if strategy is None else strategy.on_failure(self.settings.processing_time_ms())
                    )
                    regions = self._regions_to_restart(eg)
                    if decision is not None and decision.restart:
                        self._announce_restart(decision.delay_ms, regions, len(eg.regions))
                    if decision is not None and decision.restart and regions is not None:
                        # region failover: the job stays RUNNING; only the failed regions restart
                        self._restarting_regions = regions
                        self._restart_delay_ms = decision.delay_ms
                        self._cancel_regions(eg, regions)
                        continue
                    if decision is not None and decision.restart:
                        self.status.on_event("restart")
                        self._restart_delay_ms = decision.delay_ms
                    else:
                        self.status.on_event("fail")
                    self._cancel_all()
                    continue
                if all(ev.current_execution.state.name == "FINISHED" for ev in eg.all_execution_vertices()):
                    self.status.on_event("all_finished")
                    return
                self._deploy_ready_regions(eg)
            elif state in (JobStatus.FAILING, JobStatus.CANCELLING) and all(
                ev.current_execution.is_terminal for ev in eg.all_execution_vertices()
            ):
                self.status.on_event("all_terminal")
                return
            elif state is JobStatus.RESTARTING and all(
                ev.current_execution.is_terminal for ev in eg.all_execution_vertices()
            ):
                await self._restart(eg)
                continue
            await self._changed.wait()

    def _announce_restart(self, delay_ms: int, regions: set[int] | None, num_regions: int) -> None:
        """Say that the job restarts and why (Flink logs 'switched from state RUNNING to
        RESTARTING' with the exception): into ``restart_log`` and to every listener."""
        what = "the job" if regions is None else f"{len(regions)} of {num_regions} regions"
        line = (
            f"job '{self.job_graph.job_name}' restart {self.restarts + 1} ({what}, in {delay_ms} ms) "
            f"after: {self.failure}"
        )
        self.restart_log.append(line)
        for listener in self.restart_listeners:
            listener(line)

    def _regions_to_restart(self, eg: ExecutionGraph) -> set[int] | None:
        """The pipelined regions a region failover restarts, or None for a full restart: the
        strategy is "full", the job has one region, it runs in BATCH mode (blocking results
        would have to be recomputed for their consumers), or every region failed anyway."""
        if self.settings.failover_strategy != "region" or self.job_graph.is_batch or len(eg.regions) < 2:
            return None
        failed = set(self._failed_executions)
        regions = {
            region.id
            for region in eg.regions
            if any(ev.current_execution.attempt_id in failed for ev in region.vertices)
        }
        if not regions or len(regions) == len(eg.regions):
            return None
        return regions

    def _cancel_regions(self, eg: ExecutionGraph, regions: set[int]) -> None:
        self._cancel_vertices(ev for r in sorted(regions) for ev in eg.regions[r].vertices)

    async def _restart_regions(self, eg: ExecutionGraph, regions: set[int]) -> None:
        """The failed regions' tasks are terminal: wait the restart delay, restore them from
        the latest completed checkpoint and deploy new attempts. The other regions never
        stopped: they exchange no data with these."""
        await trio.sleep(self._restart_delay_ms / 1000)
        await self._replace_lost_slots(ev for r in regions for ev in eg.regions[r].vertices)
        if self._driver_scope is not None:
            self._driver_scope.cancel()
        if self._driver_stopped is not None:
            await self._driver_stopped.wait()
        self._restore_state = self._initial_restore
        old = self.checkpoints
        if old is not None:
            latest = await trio.to_thread.run_sync(old.storage.latest_valid)
            if latest.metadata is not None:
                self._restore_state = await trio.to_thread.run_sync(
                    _load_restore_state, old.storage, latest.metadata
                )
        restarted = [ev for r in sorted(regions) for ev in eg.regions[r].vertices]
        old_attempts = {ev.current_execution.attempt_id for ev in restarted}
        for ev in restarted:
            for partition in ev.produced_partitions:
                for te in self.task_executors:
                    te.network.release_partition(_partition_id(partition))
            self.handles.pop(ev.current_execution.attempt_id, None)
            self.executions.pop(ev.current_execution.attempt_id, None)
            ev.reset_for_new_execution()
        # a failure elsewhere while these regions restarted is handled next, not forgotten
        self._failed_executions = [e for e in self._failed_executions if e not in old_attempts]
        if not self._failed_executions:
            self.failure = None
        self._restarting_regions = None
        self.restarts += 1
        self.region_restarts += 1
        for ev in restarted:
            self._deploy(eg, ev)  # new attempts first: the new driver knows their ids
        self.checkpoints = self._checkpoint_driver(eg)
        if self.checkpoints is not None:
            if old is not None:
                last_used = old.coordinator.next_checkpoint_id - 1
                if last_used:
                    self.checkpoints.coordinator.restore_from(last_used)  # ids are never reused
                self.checkpoints.completed = list(old.completed)
                self.checkpoints.history.finished = list(old.history.finished)
            self._start_checkpoint_driver()

    async def _replace_lost_slots(self, vertices: Iterable[ExecutionVertex]) -> None:
        """Before ``vertices`` restart: each plan slot of theirs whose slot went with a lost
        TaskManager gets another slot from the ResourceManager, on any registered TaskManager
        (the ones that remain, one started later, or a replacement), as Flink's scheduler
        takes slots from whatever TaskManagers are registered. Waits up to the slot request
        timeout for enough free slots."""
        assert self.plan is not None
        keys = sorted({(slot.taskmanager, slot.index) for slot in map(self.plan.slot_of, vertices)})
        sm = self.rm.slot_manager
        lost = [
            key
            for key in keys
            if not sm.is_registered(self.placement[key].tm_id)
            or sm.status(self.placement[key]).job_id != self.job_id
        ]
        if not lost:
            return
        granted = await self.rm.request_slots(
            self.job_id, len(lost), timeout_ms=self.settings.slot_request_timeout_ms
        )
        for key, slot in zip(lost, granted, strict=True):
            self.placement[key] = slot

    def _release_partitions(self, eg: ExecutionGraph) -> None:
        """Release the current attempts' result partitions on every TaskManager."""
        for ev in eg.all_execution_vertices():
            for partition in ev.produced_partitions:
                for te in self.task_executors:
                    te.network.release_partition(_partition_id(partition))

    def _start_checkpoint_driver(self) -> None:
        if self.checkpoints is None or self._nursery is None:
            return
        scope = trio.CancelScope()
        self._driver_scope = scope
        driver = self.checkpoints
        stopped = self._driver_stopped = trio.Event()

        async def run_driver() -> None:
            try:
                with scope:
                    await driver.run(self._all_running)
            finally:
                stopped.set()

        self._nursery.start_soon(run_driver)

    async def _restart(self, eg: ExecutionGraph) -> None:
        """Every task is terminal: wait the restart delay, restore the latest completed
        checkpoint and deploy new attempts of every execution (restart all)."""
        await trio.sleep(self._restart_delay_ms / 1000)
        await self._replace_lost_slots(eg.all_execution_vertices())
        if self._driver_scope is not None:
            self._driver_scope.cancel()
        if self._driver_stopped is not None:
            await self._driver_stopped.wait()  # a _metadata write in flight lands before we pick a checkpoint
        latest_id = 0
        self._restore_state = self._initial_restore  # no checkpoint yet: start again from the savepoint
        old = self.checkpoints
        if old is not None:
            latest = await trio.to_thread.run_sync(old.storage.latest_valid)
            note = await trio.to_thread.run_sync(_recovery_note, self.restarts + 1, latest, old.storage)
            if note is not None:
                self.recovery_log.append(note)
            if latest.metadata is not None:
                latest_id = latest.metadata.checkpoint_id
                self._restore_state = await trio.to_thread.run_sync(
                    _load_restore_state, old.storage, latest.metadata
                )
        self._release_partitions(eg)
        for ev in eg.all_execution_vertices():
            ev.reset_for_new_execution()
        self.handles.clear()
        self.executions.clear()
        self._deployed_regions.clear()
        self.failure = None
        self._failed_executions.clear()
        self.restarts += 1
        self.checkpoints = self._checkpoint_driver(eg)
        if self.checkpoints is not None:
            last_used = old.coordinator.next_checkpoint_id - 1 if old is not None else latest_id
            if last_used:
                self.checkpoints.coordinator.restore_from(last_used)  # ids are never reused
            if old is not None:
                self.checkpoints.completed = list(old.completed)
                self.checkpoints.history.finished = list(old.history.finished)
            self._start_checkpoint_driver()
        self.status.on_event("restarted")

    def _checkpoint_driver(self, eg: ExecutionGraph) -> Any:
        s = self.settings
        if self.job_graph.is_batch or s.checkpoint_dir is None:
            return None
        from weir.checkpoint.coordinator import CheckpointCoordinatorConfig
        from weir.cluster.checkpointing import CheckpointDriver

        # without periodic checkpoints the driver still takes savepoints, with the job's timeout
        config = s.checkpoint_config or CheckpointCoordinatorConfig(timeout_ms=s.savepoint_timeout_ms)

        vertices = eg.all_execution_vertices()
        sources = [ev.current_execution.attempt_id for ev in vertices if ev.job_vertex.job_vertex.is_source]
        tasks = [ev.current_execution.attempt_id for ev in vertices]

        def fail(reason: str) -> None:
            if self.failure is None:
                self.failure = JobExecutionError(f"checkpointing failed: {reason}")
                self._changed.set()

        driver = CheckpointDriver(
            self.job_id, s.checkpoint_dir, config, sources, tasks, s.processing_time_ms,
            self._trigger_checkpoint, self._notify_checkpoint_complete, fail,
            self._notify_checkpoint_aborted,
        )  # fmt: skip
        driver.failure_injector = self.failure_injector
        return driver

    def _all_running(self) -> bool:
        return (
            all(e.state.name == "RUNNING" for e in self.executions.values())
            and len(self.executions) == len(self.handles)
            and all(h.task is not None for h in self.handles.values())
        )

    def _trigger_checkpoint(self, action: Any) -> None:
        from weir.network.events import CheckpointBarrier

        driver = self.checkpoints
        request = None if driver is None else driver.savepoints.get(action.checkpoint_id)
        native = request is not None and request.savepoint_format == "native"
        barrier = CheckpointBarrier(
            action.checkpoint_id, action.timestamp, action.is_savepoint, action.unaligned, native
        )
        stop = self._pending_stop if action.is_savepoint else None
        for attempt_id in action.targets:
            handle = self.handles.get(attempt_id)
            if handle is not None and handle.task is not None:
                handle.task.trigger_checkpoint(barrier, stop)

    def _notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        for handle in self.handles.values():
            if handle.task is not None:
                handle.task.notify_checkpoint_complete(checkpoint_id)

    # the tasks' checkpoint callbacks go through here, to whichever driver is current: after a
    # region failover the tasks that kept running report to the new driver, and a late report
    # of an attempt that no longer exists is dropped
    def _current_driver(self, execution_id: str) -> Any:
        return self.checkpoints if execution_id in self.executions else None

    def _checkpoint_ack(self, execution_id: str, checkpoint_id: int, acks: Any, size: int) -> None:
        driver = self._current_driver(execution_id)
        if driver is not None:
            driver.on_acknowledge(execution_id, checkpoint_id, acks, size)

    def _checkpoint_metrics(self, execution_id: str, checkpoint_id: int, metrics: Any) -> None:
        driver = self._current_driver(execution_id)
        if driver is not None:
            driver.on_task_metrics(execution_id, checkpoint_id, metrics)

    def _checkpoint_decline(
        self, execution_id: str, checkpoint_id: int, reason: str, counts: bool = True
    ) -> None:
        driver = self._current_driver(execution_id)
        if driver is not None:
            driver.on_decline(execution_id, checkpoint_id, reason, counts)

    def _notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        for handle in self.handles.values():
            if handle.task is not None:
                handle.task.notify_checkpoint_aborted(checkpoint_id)

    def _deploy_ready_regions(self, eg: ExecutionGraph) -> None:
        for region in eg.regions:
            if region.id in self._deployed_regions:
                continue
            ready = all(
                p.producer.current_execution.state.name == "FINISHED" for p in region.blocking_inputs()
            )
            if ready:
                self._deployed_regions.add(region.id)
                for ev in region.vertices:
                    self._deploy(eg, ev)

    def _cancel_all(self) -> None:
        assert self.execution_graph is not None
        self._cancel_vertices(self.execution_graph.all_execution_vertices())

    def _cancel_vertices(self, vertices: Any) -> None:
        """Cancel the current attempts of ``vertices`` that are not terminal yet."""
        for ev in vertices:
            execution = ev.current_execution
            if execution.is_terminal:
                continue
            if execution.state.name in ("CREATED", "SCHEDULED"):
                execution.on_event("cancel_unscheduled")
            else:
                if execution.state.name != "CANCELING":
                    execution.on_event("cancel")
                handle = self.handles.get(execution.attempt_id)
                if handle is not None:
                    handle.cancel()
        self._changed.set()

    # -- deployment ----------------------------------------------------------------------------
    def taskmanager_id_of(self, ev: ExecutionVertex) -> str:
        """The id of the TaskManager holding the slot that ``ev`` runs in (now)."""
        assert self.plan is not None
        slot = self.plan.slot_of(ev)
        placed = self.placement.get((slot.taskmanager, slot.index))
        if placed is None:  # not placed yet
            return str(self.task_executors[slot.taskmanager].taskmanager_id)
        return str(placed.tm_id)

    def _taskmanager_of(self, ev: ExecutionVertex) -> TaskExecutor:
        tm_id = self.taskmanager_id_of(ev)
        for te in self.task_executors:
            if te.taskmanager_id == tm_id:
                return te
        raise WeirError(f"job '{self.job_graph.job_name}': no TaskManager {tm_id!r} to deploy {ev} to")

    def _deploy(self, eg: ExecutionGraph, ev: ExecutionVertex) -> None:
        execution = ev.current_execution
        execution.on_event("schedule")
        execution.on_event("deploy")
        ejv = ev.job_vertex
        produced = [
            ProducedPartition(
                _partition_id(p), p.num_subpartitions, p.result.job_edge, p.result.result_type.is_blocking
            )
            for p in ev.produced_partitions
        ]
        inputs = []
        for gate, partitions in enumerate(ev.consumed_partitions):
            edge = ejv.input_edges[gate]
            for p in partitions:
                inputs.append(
                    (
                        edge,
                        ChannelSpec(
                            _partition_id(p),
                            p.subpartition_of(ev),
                            self._taskmanager_of(p.producer).taskmanager_id,
                        ),
                    )
                )
        s = self.settings
        deployment = TaskDeployment(
            job_id=self.job_id,
            job_name=self.job_graph.job_name,
            execution_id=execution.attempt_id,
            job_vertex=ejv.job_vertex,
            stream_graph=self.job_graph.stream_graph,
            subtask_index=ev.subtask_index,
            attempt_number=execution.attempt_number,
            produced=produced,
            input_channels=inputs,
            buffer_timeout_ms=-1
            if self.job_graph.is_batch
            else vertex_buffer_timeout_ms(self.job_graph, ejv.job_vertex, s.buffer_timeout_ms),
            auto_watermark_interval_ms=s.auto_watermark_interval_ms,
            batch_mode=self.job_graph.is_batch,
            processing_time_ms=s.processing_time_ms,
            collect_channels=s.collect_channels,
            job_parameters=s.job_parameters,
            state_backend=s.state_backend,
            checkpoint_storage=None if self.checkpoints is None else self.checkpoints.storage,
            on_checkpoint_ack=None if self.checkpoints is None else self._checkpoint_ack,
            on_checkpoint_metrics=None if self.checkpoints is None else self._checkpoint_metrics,
            on_checkpoint_decline=None if self.checkpoints is None else self._checkpoint_decline,
            restore_state=self._restore_state,
            on_recovery_note=self.recovery_log.append,
            failure_injector=self.failure_injector,
            unaligned_checkpoints=s.checkpoint_config is not None and s.checkpoint_config.unaligned,
            aligned_timeout_ms=0 if s.checkpoint_config is None else s.checkpoint_config.aligned_timeout_ms,
            debloat=s.debloat,
            async_snapshot=s.async_snapshot,
            periodic_checkpoints=s.checkpoint_config is not None,
        )
        self.executions[execution.attempt_id] = execution
        self.deploy_order.append(ev.task_name_with_subtask)
        self.finished_before_deploy[ev.task_name_with_subtask] = {
            other.task_name_with_subtask
            for other in eg.all_execution_vertices()
            if other.current_execution.state.name == "FINISHED"
        }
        te = self._taskmanager_of(ev)
        self.handles[execution.attempt_id] = te.submit_task(deployment, self.on_task_event)

    def _on_taskmanager_lost(self, tm_id: str, lost: dict[str, list[Any]]) -> None:
        """The ResourceManager declared a TaskManager dead; if it held our slots, the job fails."""
        if self.job_id in lost and self.failure is None:
            self.failure = JobExecutionError(
                f"TaskManager {tm_id} was lost (no heartbeat within {self.rm.heartbeat_timeout_ms:.0f} ms) "
                f"while running {len(lost[self.job_id])} slot(s) of job '{self.job_graph.job_name}'"
            )
            self._changed.set()

    def on_task_event(self, execution_id: str, event: str, exc: BaseException | None) -> None:
        execution = self.executions[execution_id]
        state = execution.state.name
        if event == "initialize" and state == "DEPLOYING":
            execution.on_event("initialize")
        elif event == "run" and state == "INITIALIZING":
            execution.on_event("run")
        elif event == "finish":
            if state == "INITIALIZING":
                execution.on_event("run")
            if execution.state.name == "RUNNING":
                execution.on_event("finish")
                if self.checkpoints is not None:
                    self.checkpoints.on_task_finished(execution_id)
            elif execution.state.name == "CANCELING":
                execution.on_event("canceled")
        elif event == "canceled":
            if state != "CANCELING" and not execution.is_terminal:
                execution.on_event("cancel")
            if not execution.is_terminal:
                execution.on_event("canceled")
        elif event == "fail" and not execution.is_terminal:
            if state == "CANCELING":
                execution.on_event("canceled")
            else:
                execution.on_event("fail")
                self._failed_executions.append(execution_id)
                if self.failure is None and exc is not None:
                    self.failure = exc
        self._changed.set()

    def statistics(self) -> list[Any]:
        return list(self.task_statistics().values())

    def task_statistics(self) -> dict[str, Any]:
        """Each deployed attempt's ``TaskStatistics`` by execution id (the dashboard reads these);
        once the job ended, those of its last attempts."""
        if self._final_statistics is not None:
            return self._final_statistics
        stats = {eid: h.task.statistics() for eid, h in self.handles.items() if h.task is not None}
        return {eid: s for eid, s in stats.items() if s is not None}  # a remote task's come every second

    def _archive_tasks(self) -> None:
        """At the job's end, keep its tasks' last statistics and let the tasks go. A cluster
        keeps its ended jobs for their results and the dashboard (as Flink's Dispatcher keeps
        an archived execution graph); a task holds its operators, and so every pane and table
        of their state, which would stay in memory for as long as the cluster runs."""
        self._final_statistics = self.task_statistics()
        for handle in self.handles.values():
            handle.task = None


def raise_for_result(result: JobResult) -> None:
    if result.status is JobStatus.FAILED:
        cause = result.failure
        raise JobExecutionError(f"job '{result.job_name}' ({result.job_id}) failed: {cause}") from cause


def job_seed(job_graph: JobGraph) -> int:
    digest = hashlib.blake2b("/".join(v.id for v in job_graph.vertices).encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little")


def _failure_injector(job_graph: JobGraph) -> Any:
    """The job's FailureInjector when its configuration names faults (weir.failure-injection.spec)."""
    from weir.cluster.failure_injector import FailureInjector

    conf = getattr(job_graph.stream_graph, "configuration", None)
    return None if conf is None else FailureInjector.from_configuration(conf)


def _commit_finished_sinks(job_graph: JobGraph) -> None:
    """The job FINISHED: sinks that hold output back until the job's end commit it now."""
    from weir.operators.file_sink import commit_finished_job

    commit_finished_job(job_graph)


def _recovery_note(restart: int, latest: Any, storage: Any) -> str | None:
    """One line for the job's result when recovery skipped a damaged checkpoint (one whose
    ``_metadata`` exists but whose files fail their checks): which, why, and what it used."""
    damaged = [s for s in latest.skipped if storage.metadata_path(s.checkpoint_id).exists()]
    if not damaged:
        return None  # only checkpoints that never completed: nothing to report
    reasons = "; ".join(f"checkpoint {s.checkpoint_id} ({s.reason})" for s in damaged)
    used = (
        f"restored checkpoint {latest.metadata.checkpoint_id}"
        if latest.metadata is not None
        else "no valid checkpoint is left, so the job starts from the beginning"
    )
    return f"restart {restart}: recovery skipped damaged {reasons}; {used}"


def _load_restore_state(storage: Any, metadata: Any) -> dict[str, list[dict[str, Any]]]:
    """Every operator's checkpointed payloads (checksums verified), tagged with their subtask.
    Incremental keyed state comes with the bytes of its chain of shared files. Recovery takes
    only checkpoints whose signature verified (``CheckpointStorage.load``), so they are trusted."""
    from weir.state.state_file import load_payloads

    where = f"checkpoint {storage.checkpoint_dir(metadata.checkpoint_id)}"
    return load_payloads(metadata, storage.read_state_file, where, trusted=True)


def _partition_id(partition: Any) -> str:
    """Flink's ResultPartitionID: the partition plus the producing attempt, so a restart gets fresh ones."""
    return f"{partition.id}@{partition.producer.current_execution.attempt_number}"

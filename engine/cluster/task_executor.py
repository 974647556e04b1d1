"""TaskExecutor: a TaskManager's slots, its network environment, and the tasks running in it.

Each TaskExecutor is a nursery inside the cluster's nursery; each task runs in its own
cancel scope inside it. A task that fails is reported to its JobMaster through the
``report`` callback and never tears down the TaskExecutor or other tasks.

In a TaskManager process (``collect_when_idle``), a TaskExecutor collects garbage
(``gc.collect``) when its last task has ended. A task's operators, state backends and
network views refer to one another, so what an ended task held (a window's pane tables: 128
MiB per subtask in the shared query at 4 M events) is freed by the cycle collector, not
when the task is dropped, and the collector's thresholds are raised while jobs run
(``weir.loop.gc_pauses``). Left to it, the tables were still allocated when the next job's
tasks started, which then took fresh memory from the kernel: 0.4 s of zeroing pages per run
of that job, and the process grew by 110 MiB a job until the collector ran. The collection
walks only what the jobs created (the process's own objects are frozen), so it is short.
In the embedded cluster the JobMaster holds its tasks until the job ends, and the end of
the job collects (``weir.loop.gc_pauses.frozen_heap``).
"""

from __future__ import annotations

import gc
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from weir.errors import WeirError
from weir.task.task import Task, TaskDeployment

# report(execution_id, event, exception) with event in: initialize, run, finish, fail, canceled
Report = Callable[[str, str, BaseException | None], None]


@dataclass
class TaskHandle:
    deployment: TaskDeployment
    cancel_scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    task: Task | None = None
    done: trio.Event = field(default_factory=trio.Event)

    def cancel(self) -> None:
        self.cancel_scope.cancel()


def first_cause(exc: BaseException) -> BaseException:
    """The most telling exception inside (possibly nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        inner = [first_cause(e) for e in exc.exceptions]
        for e in inner:
            if isinstance(e, WeirError):
                return e
        for e in inner:
            if not isinstance(e, trio.Cancelled):
                return e
        return inner[0]
    return exc


class TaskExecutor:
    def __init__(
        self,
        taskmanager_id: str,
        num_slots: int,
        network: Any,
        resource_manager: Any = None,
        collect_when_idle: bool = False,
    ) -> None:
        self.taskmanager_id = taskmanager_id
        self.num_slots = num_slots
        self.network = network
        self.resource_manager = resource_manager
        self.collect_when_idle = collect_when_idle  # a TaskManager process's (module docstring)
        self.heartbeats_enabled = True  # tests silence a TaskManager by turning this off
        self.tasks: dict[str, TaskHandle] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve tasks until cancelled. Cancellation: every running task is cancelled with it."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.network.run)
            task_status.started()
            if self.resource_manager is None:
                await trio.sleep_forever()
            await self._send_heartbeats()

    async def _send_heartbeats(self) -> None:
        """Tell the ResourceManager this TaskManager is alive, every heartbeat interval.
        Cancellation: heartbeats stop, and the ResourceManager will declare it dead."""
        rm = self.resource_manager
        while True:
            await trio.sleep(rm.heartbeat_interval_ms / 1000)
            if self.heartbeats_enabled and rm.slot_manager.is_registered(self.taskmanager_id):
                rm.heartbeat_from_task_executor(self.taskmanager_id)

    def submit_task(self, deployment: TaskDeployment, report: Report) -> TaskHandle:
        if self._nursery is None:
            raise WeirError(f"TaskExecutor {self.taskmanager_id} is not running")
        handle = TaskHandle(deployment)
        self.tasks[deployment.execution_id] = handle
        self._nursery.start_soon(self._run_task, handle, report, name=deployment.name_with_subtask)
        return handle

    async def _run_task(self, handle: TaskHandle, report: Report) -> None:
        d = handle.deployment
        task: Task | None = None
        try:
            report(d.execution_id, "initialize", None)
            task = Task(d, self.network)
            handle.task = task
            with handle.cancel_scope:
                await task.run(on_running=lambda: report(d.execution_id, "run", None))
            if handle.cancel_scope.cancelled_caught:
                report(d.execution_id, "canceled", None)
            else:
                report(d.execution_id, "finish", None)
        except Exception as exc:  # a failing task is reported, never propagated
            report(d.execution_id, "fail", first_cause(exc))
        except BaseExceptionGroup as group:
            cause = first_cause(group)
            if isinstance(cause, trio.Cancelled):
                raise
            report(d.execution_id, "fail", cause)
        finally:
            handle.done.set()
            self.tasks.pop(d.execution_id, None)
            if self.collect_when_idle and not self.tasks:
                del handle, task  # this frame's references go before the collection
                gc.collect()  # the ended tasks' cycles, before the next job allocates

    def crash(self) -> list[Path]:
        """Failure injection: every task is cancelled at once and its local state directories
        (LMDB environments) are deleted, as when the TaskManager's process and disk are gone.
        Returns the deleted directories."""
        lost: list[Path] = []
        for handle in list(self.tasks.values()):
            handle.cancel()
            for backend in handle.task.keyed_backends if handle.task is not None else []:
                path = getattr(backend, "path", None)
                if path is not None:
                    shutil.rmtree(path, ignore_errors=True)
                    lost.append(Path(path))
        return lost

    def statistics(self) -> dict[str, Any]:
        return {
            "taskmanager": self.taskmanager_id,
            "slots": self.num_slots,
            "tasks": [h.task.statistics() for h in self.tasks.values() if h.task is not None],
        }

"""The ResourceManager: the cluster's slot inventory and TaskManager liveness, on Trio.

Theory of operation
-------------------
A thin Trio driver around two pure cores: a ``SlotManager`` (which slots exist, who holds
them) and a ``HeartbeatMonitor`` (who has been silent too long). It knows nothing about
job logic; it deals purely in slots (as Flink's ResourceManager).

- TaskManagers call ``register_task_executor`` with their slot report and then
  ``heartbeat_from_task_executor`` every ``heartbeat_interval_ms``. A registration may
  pass ``on_slot_request(slot_id, job_id)``: the ResourceManager calls it for every slot
  of that TaskManager it allocates (Flink's ``requestSlot`` RPC to the TaskExecutor).
- JobMasters call ``await request_slots(job_id, n, preferred)``. If enough slots are free
  the request is met at once; otherwise it waits (standalone mode: TaskManagers register
  on their own, jobs release slots) until the free slots suffice or ``timeout_ms``
  (Flink's ``slot.request.timeout``, 5 min) passes on Trio's clock, which raises
  ``SlotRequestTimeout`` naming what was needed and what the cluster has. Waiting
  requests are served first-fit in arrival order whenever slots appear (a registration,
  ``release_slots``, ``free_slot``): an earlier request that does not fit does not block
  a later one that does, so a very large request can wait while small ones go ahead.
- ``run()`` watches heartbeats: it sleeps on Trio's clock until the next heartbeat
  deadline (or at most ``heartbeat_interval_ms``), and declares every TaskManager whose
  deadline passed dead: its slots leave the inventory and each listener added with
  ``add_listener`` is called with the TaskManager's id and the lost slots per job, so
  the affected JobMasters can fail over. An explicit ``unregister_task_executor`` (a
  clean disconnect) does the same without waiting for the timeout. When ``run()`` wakes
  later than it asked, its loop was blocked and could read no heartbeat meanwhile, so the
  deadlines move by the delay: a TaskManager in the same process as a task that held the
  loop for a minute (a snapshot's synchronous part over millions of entries) is not
  declared dead for it.

Time is ``trio.current_time()`` in milliseconds, never the wall clock, so tests drive it
with ``MockClock``; so even the synchronous methods must be called inside ``trio.run``.
One Trio task runs ``run()``; everything else is synchronous and called from Trio tasks
of the same run, so there are no locks.

Callbacks (``on_slot_request``, listeners) are called synchronously from whichever call
triggered them and must not block or raise: an exception propagates to that caller
(for listeners of a heartbeat timeout, out of ``run()``). They should only hand the
news on, e.g. with ``send_nowait`` on a memory channel.

What it does not do: no resource profiles, no active resource providers (it never
starts TaskManagers), no slot reports in heartbeats, no leader election.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from weir.cluster.heartbeat import (
    HEARTBEAT_INTERVAL_MS,
    HEARTBEAT_TIMEOUT_MS,
    HeartbeatMonitor,
    HeartbeatSettings,
    HeartbeatStatistics,
)
from weir.cluster.slot_manager import (
    JobId,
    NotEnoughSlots,
    SlotId,
    SlotManager,
    SlotManagerStatistics,
    SlotState,
    TaskManagerId,
)
from weir.errors import ProtocolViolation, UsageError

__all__ = [
    "SLOT_REQUEST_TIMEOUT_MS",
    "ResourceManager",
    "ResourceManagerStatistics",
    "SlotRequestCallback",
    "SlotRequestTimeout",
    "TaskManagerLostListener",
]

SLOT_REQUEST_TIMEOUT_MS = 300_000  # Flink's slot.request.timeout

SlotRequestCallback = Callable[[SlotId, JobId], None]
TaskManagerLostListener = Callable[[TaskManagerId, dict[JobId, list[SlotId]]], None]


class SlotRequestTimeout(NotEnoughSlots):
    """A waiting slot request ran out of time; names needed, free, total and the timeout."""

    def __init__(
        self, job_id: JobId, needed: int, free: int, total: int, task_managers: int, timeout_ms: float
    ) -> None:
        self.timeout_ms = timeout_ms
        super().__init__(
            job_id,
            needed,
            free,
            total,
            task_managers,
            message=(
                f"could not acquire {_plural(needed, 'slot')} for job {job_id!r} within {_fmt_ms(timeout_ms)} ms: "
                f"{free} free of {total} registered on {_plural(task_managers, 'TaskManager')}; "
                f"start more TaskManagers, add slots (taskmanager.numberOfTaskSlots) or lower the "
                f"job's parallelism"
            ),
        )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _fmt_ms(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(eq=False)
class _PendingRequest:
    job_id: JobId
    n: int
    preferred: list[SlotId] | None
    granted_event: trio.Event
    granted: list[SlotId] | None = None


@dataclass(frozen=True)
class ResourceManagerStatistics:
    """A snapshot of the ResourceManager."""

    slots: SlotManagerStatistics
    heartbeats: HeartbeatStatistics
    pending_requests: int
    pending_slots: int  # slots the pending requests ask for, in total
    task_managers_lost: int  # declared dead or disconnected since start
    running: bool  # whether run() is watching heartbeats


class ResourceManager:
    """Slot inventory plus heartbeat watch for one cluster; see the module docstring."""

    def __init__(
        self,
        heartbeat_interval_ms: float = HEARTBEAT_INTERVAL_MS,
        heartbeat_timeout_ms: float = HEARTBEAT_TIMEOUT_MS,
    ) -> None:
        settings = HeartbeatSettings(heartbeat_interval_ms, heartbeat_timeout_ms)
        self.heartbeat_interval_ms = settings.interval_ms
        self.heartbeat_timeout_ms = settings.timeout_ms
        self._slot_manager = SlotManager()
        self._monitor = HeartbeatMonitor(settings.timeout_ms)
        self._on_slot_request: dict[TaskManagerId, SlotRequestCallback] = {}
        self._listeners: list[TaskManagerLostListener] = []
        self._pending: list[_PendingRequest] = []
        self._slots_added = trio.Event()  # set, then replaced, when a registration adds slots
        self._lost = 0
        self._running = False
        self._clock_floor_ms = -math.inf

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ResourceManager:
        """Build from Flink's ``heartbeat.interval`` / ``heartbeat.timeout`` keys."""
        settings = HeartbeatSettings.from_config(config)
        return cls(settings.interval_ms, settings.timeout_ms)

    @property
    def slot_manager(self) -> SlotManager:
        """The slot inventory, for queries; change it only through the ResourceManager."""
        return self._slot_manager

    def _now_ms(self) -> float:
        # Never behind a deadline run() already woke up for (float rounding of ms <-> s).
        return max(trio.current_time() * 1000.0, self._clock_floor_ms)

    # -- TaskManagers ---------------------------------------------------------------

    def register_task_executor(
        self,
        tm_id: TaskManagerId,
        slot_count: int,
        on_slot_request: SlotRequestCallback | None = None,
    ) -> list[SlotId]:
        """Take a TaskManager's slot report; returns its new slots (none on a same-count reconnect).

        Counts as a heartbeat. Waiting slot requests that now fit are granted at once.
        """
        added = self._slot_manager.register_task_manager(tm_id, slot_count)
        self._monitor.register(tm_id, self._now_ms())
        if on_slot_request is not None:
            self._on_slot_request[tm_id] = on_slot_request
        self._serve_pending()
        if added:
            self._slots_added.set()
            self._slots_added = trio.Event()
        return added

    async def wait_for_slots(self, n: int, timeout_ms: float) -> bool:
        """Wait up to ``timeout_ms`` until the registered TaskManagers offer ``n`` slots in all
        (free or held); whether they do. For a cluster that TaskManagers may still join:
        a job that needs more slots than are registered waits for them, as Flink's scheduler
        waits ``slot.request.timeout`` for TaskManagers to offer slots.
        Cancellation: nothing to undo."""
        with trio.move_on_after(timeout_ms / 1000):
            while self._slot_manager.statistics().total < n:
                await self._slots_added.wait()
        return self._slot_manager.statistics().total >= n

    def heartbeat_from_task_executor(self, tm_id: TaskManagerId) -> None:
        """``tm_id`` is alive now; a TaskManager that was declared dead must register again."""
        if not self._slot_manager.is_registered(tm_id):
            raise ProtocolViolation(
                f"ResourceManager: heartbeat from TaskManager {tm_id!r}, which is not registered "
                f"(never registered, disconnected, or declared dead after {_fmt_ms(self.heartbeat_timeout_ms)} "
                f"ms without a heartbeat); expected it to register again"
            )
        self._monitor.on_heartbeat(tm_id, self._now_ms())

    def unregister_task_executor(self, tm_id: TaskManagerId) -> dict[JobId, list[SlotId]]:
        """A TaskManager disconnects: like a heartbeat timeout, now. Returns the lost slots per job."""
        if not self._slot_manager.is_registered(tm_id):
            raise UsageError(
                f"ResourceManager: cannot unregister TaskManager {tm_id!r}: not registered "
                f"(registered: {self._slot_manager.task_managers!r})"
            )
        return self._lose(tm_id)

    def add_listener(self, listener: TaskManagerLostListener) -> None:
        """Call ``listener(tm_id, lost_slots_per_job)`` whenever a TaskManager is lost."""
        self._listeners.append(listener)

    def remove_listener(self, listener: TaskManagerLostListener) -> None:
        try:
            self._listeners.remove(listener)
        except ValueError:
            raise UsageError(f"ResourceManager: listener {listener!r} was never added") from None

    def _lose(self, tm_id: TaskManagerId) -> dict[JobId, list[SlotId]]:
        lost = self._slot_manager.unregister_task_manager(tm_id)
        if self._monitor.is_live(tm_id) or self._monitor.is_timed_out(tm_id):
            self._monitor.unregister(tm_id)
        self._on_slot_request.pop(tm_id, None)
        self._lost += 1
        for listener in list(self._listeners):
            listener(tm_id, {job_id: list(slots) for job_id, slots in lost.items()})
        return lost

    # -- slots ----------------------------------------------------------------------

    async def request_slots(
        self,
        job_id: JobId,
        n: int,
        preferred: Iterable[SlotId] | None = None,
        timeout_ms: float = SLOT_REQUEST_TIMEOUT_MS,
    ) -> list[SlotId]:
        """Allocate ``n`` slots to ``job_id``, waiting up to ``timeout_ms`` for enough to be free.

        ``preferred`` slots are taken if all of them are free when the request is met
        (see ``SlotManager.try_request``). A malformed request raises ``UsageError`` at
        once; running out of time raises ``SlotRequestTimeout``. ``timeout_ms=0`` means
        "only if free now"; ``math.inf`` waits forever.

        Cancellation: a request cancelled while waiting is withdrawn and allocates
        nothing; if its slots were granted in the same instant, they are given back
        (FREE again) before ``Cancelled`` propagates. A request met at once is not
        interrupted by cancellation (its checkpoint is shielded).
        """
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | float) or not timeout_ms >= 0:
            raise UsageError(
                f"slot request of job {job_id!r}: timeout_ms must be a non-negative number "
                f"(math.inf to wait forever), got {timeout_ms!r}"
            )
        await trio.lowlevel.checkpoint_if_cancelled()
        wanted = None if preferred is None else list(preferred)
        granted = self._slot_manager.try_request(job_id, n, wanted)
        if granted is not None:
            self._notify_slot_requests(job_id, granted)
            await trio.lowlevel.cancel_shielded_checkpoint()
            return granted
        pending = _PendingRequest(job_id, n, wanted, trio.Event())
        self._pending.append(pending)
        try:
            with trio.move_on_after(timeout_ms / 1000):
                await pending.granted_event.wait()
        except BaseException:
            if pending.granted is not None:
                self._give_back(pending.job_id, pending.granted)
            raise
        finally:
            if pending in self._pending:
                self._pending.remove(pending)
        if pending.granted is None:
            stats = self._slot_manager.statistics()
            raise SlotRequestTimeout(job_id, n, stats.free, stats.total, len(stats.task_managers), timeout_ms)
        return pending.granted

    def release_slots(self, job_id: JobId) -> list[SlotId]:
        """Every slot of ``job_id`` -> FREE (the job is done with them); returns them."""
        released = self._slot_manager.release_slots(job_id)
        if released:
            self._serve_pending()
        return released

    def activate_slot(self, slot_id: SlotId, job_id: JobId) -> None:
        """ALLOCATED -> ACTIVE: the JobMaster deploys into the slot."""
        self._slot_manager.activate(slot_id, job_id)

    def mark_slot_releasing(self, slot_id: SlotId) -> None:
        """ALLOCATED/ACTIVE -> RELEASING: the slot's tasks are going away."""
        self._slot_manager.mark_releasing(slot_id)

    def free_slot(self, slot_id: SlotId) -> None:
        """RELEASING -> FREE: the slot is empty; waiting requests may now fit."""
        self._slot_manager.free(slot_id)
        self._serve_pending()

    def _notify_slot_requests(self, job_id: JobId, slots: list[SlotId]) -> None:
        for slot_id in slots:
            callback = self._on_slot_request.get(slot_id.tm_id)
            if callback is not None:
                callback(slot_id, job_id)

    def _serve_pending(self) -> None:
        for pending in list(self._pending):
            if pending.granted is not None:
                continue
            granted = self._slot_manager.try_request(pending.job_id, pending.n, pending.preferred)
            if granted is None:
                continue
            pending.granted = granted
            self._pending.remove(pending)
            pending.granted_event.set()
            self._notify_slot_requests(pending.job_id, granted)

    def _give_back(self, job_id: JobId, slots: list[SlotId]) -> None:
        """Free slots granted to a request whose caller went away (still ALLOCATED to that job)."""
        freed = False
        for slot_id in slots:
            if not self._slot_manager.is_registered(slot_id.tm_id):
                continue
            status = self._slot_manager.status(slot_id)
            if status.state is SlotState.ALLOCATED and status.job_id == job_id:
                self._slot_manager.mark_releasing(slot_id)
                self._slot_manager.free(slot_id)
                freed = True
        if freed:
            self._serve_pending()

    # -- heartbeats -----------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Watch heartbeats until cancelled; declare silent TaskManagers dead.

        Wakes at the next heartbeat deadline, and at least every ``heartbeat_interval_ms``
        so that TaskManagers registered meanwhile are watched. Only one ``run()`` at a time.

        Cancellation: stops watching and changes nothing; TaskManagers stay registered
        with their deadlines, and a later ``run()`` declares dead those that stayed
        silent meanwhile at its first check.
        """
        if self._running:
            raise UsageError("ResourceManager.run() is already running; expected one run() at a time")
        self._running = True
        try:
            task_status.started()
            while True:
                now_ms = self._now_ms()
                for tm_id in self._monitor.check(now_ms):
                    if self._slot_manager.is_registered(tm_id):
                        self._lose(tm_id)
                wake_ms = now_ms + self.heartbeat_interval_ms
                deadline_ms = self._monitor.next_deadline()
                if deadline_ms is not None:
                    wake_ms = min(wake_ms, deadline_ms)
                await trio.sleep_until(wake_ms / 1000)
                self._clock_floor_ms = max(self._clock_floor_ms, wake_ms)
                # woken late: the loop was blocked (a long synchronous step of a task in this
                # process), and no heartbeat could be read meanwhile, not even an in-process
                # TaskManager's; that time does not count against anyone
                self._monitor.extend(max(0.0, self._now_ms() - wake_ms))
        finally:
            self._running = False

    # -- introspection --------------------------------------------------------------

    def statistics(self) -> ResourceManagerStatistics:
        return ResourceManagerStatistics(
            slots=self._slot_manager.statistics(),
            heartbeats=self._monitor.statistics(),
            pending_requests=len(self._pending),
            pending_slots=sum(p.n for p in self._pending),
            task_managers_lost=self._lost,
            running=self._running,
        )

"""The ResourceManager's slot inventory: which TaskManager offers which slots, and who holds them.

Theory of operation
-------------------
A TaskManager registers with a *slot report*: its id and how many task slots it
offers (Flink's ``taskmanager.numberOfTaskSlots``). Each slot gets a ``SlotId(tm_id,
index)`` with ``index`` in ``0..slot_count-1`` and starts ``FREE``. Registering the same
TaskManager again with the same count is a no-op (a reconnect keeps its slots as they
are); with a different count it is a ``ProtocolViolation``: the slot count of a
TaskManager is fixed for its lifetime.

A JobMaster asks for ``n`` slots (``request_slots``). If it names ``preferred`` slots
(the ones its ``SlotPlan`` placed its subtasks on) and every one of them is free, it gets
exactly those (topped up from the free slots if ``n`` is larger). Otherwise it gets any
``n`` free slots, filling TaskManagers in registration order and each one's slots in
index order, like Flink's default slot matching and like ``plan_slots``. Allocation is
all or nothing: too few free slots raise ``NotEnoughSlots`` (``request_slots``) or
return ``None`` (``try_request``, for a driver that waits for TaskManagers to register
or slots to be released).

A slot then follows Flink's TaskSlot states (Flink's TaskSlot)::

    FREE --allocate--> ALLOCATED(job) --activate--> ACTIVE(job)
    ALLOCATED(job) / ACTIVE(job) --mark_releasing--> RELEASING(job) --free--> FREE
    ALLOCATED(job) / ACTIVE(job) / RELEASING(job) --release--> FREE   (release_slots(job))

``ALLOCATED`` means the ResourceManager assigned the slot to a job but the JobMaster has
not started using it; ``ACTIVE`` means tasks may be deployed into it; ``RELEASING`` means
its tasks failed or were cancelled and the slot waits until they are gone. ``free``
completes a release slot by slot; ``release_slots(job)`` gives back every slot of a job
at once, whatever its state (the job is done with all of them). The table
``SLOT_TRANSITIONS`` is the whole definition; any other event raises
``IllegalStateTransition`` (a ``ProtocolViolation``) naming the slot, its state and the
event, and changes nothing.

Losing a TaskManager (``unregister_task_manager``: disconnect or heartbeat timeout)
removes its slots from the inventory whatever their state and returns the allocations
that were lost, per job, so the affected JobMasters can be told.

Invariants
----------
- Every registered slot is in exactly one state; a non-FREE slot belongs to exactly one
  job, a FREE slot to none.
- Per TaskManager, free + allocated + active + releasing == its slot count, and the
  total is the sum of the registered slot counts (``statistics``).
- A refused call changes nothing.

What it does not do: no I/O, no clock, no callbacks, no waiting, no resource profiles
(every slot is alike) and no requests to an external resource provider (standalone
mode: TaskManagers register on their own). The Trio driver is
``weir.cluster.resource_manager``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple, TypeAlias

from weir.errors import IllegalStateTransition, ProtocolViolation, UsageError

__all__ = [
    "SLOT_TRANSITIONS",
    "JobId",
    "NotEnoughSlots",
    "SlotId",
    "SlotManager",
    "SlotManagerStatistics",
    "SlotState",
    "SlotStatus",
    "TaskManagerId",
    "TaskManagerSlots",
]

TaskManagerId: TypeAlias = Hashable
JobId: TypeAlias = Hashable


class SlotState(Enum):
    """The state of one task slot (Flink's TaskSlotState, plus FREE)."""

    FREE = "FREE"
    ALLOCATED = "ALLOCATED"
    ACTIVE = "ACTIVE"
    RELEASING = "RELEASING"

    def __str__(self) -> str:
        return self.value


SLOT_TRANSITIONS: Mapping[tuple[SlotState, str], SlotState] = {
    (SlotState.FREE, "allocate"): SlotState.ALLOCATED,
    (SlotState.ALLOCATED, "activate"): SlotState.ACTIVE,
    (SlotState.ALLOCATED, "mark_releasing"): SlotState.RELEASING,
    (SlotState.ACTIVE, "mark_releasing"): SlotState.RELEASING,
    (SlotState.RELEASING, "free"): SlotState.FREE,
    (SlotState.ALLOCATED, "release"): SlotState.FREE,
    (SlotState.ACTIVE, "release"): SlotState.FREE,
    (SlotState.RELEASING, "release"): SlotState.FREE,
}


@dataclass(frozen=True)
class SlotId:
    """Slot ``index`` of TaskManager ``tm_id``.

    A ``SlotPlan`` names slots by TaskManager position and slot index; a JobMaster whose
    TaskManagers registered under the ids ``0, 1, ...`` can pass
    ``SlotId(slot.taskmanager, slot.index)`` as a preferred slot directly.
    """

    tm_id: TaskManagerId
    index: int

    def __str__(self) -> str:
        return f"{self.tm_id}/slot{self.index}"


class SlotStatus(NamedTuple):
    """A slot's state and, unless it is FREE, the job holding it."""

    state: SlotState
    job_id: JobId | None = None

    def __str__(self) -> str:
        return str(self.state) if self.state is SlotState.FREE else f"{self.state}({self.job_id!r})"


_FREE = SlotStatus(SlotState.FREE)


@dataclass(frozen=True)
class TaskManagerSlots:
    """Slot counts of one TaskManager."""

    total: int
    free: int
    allocated: int
    active: int
    releasing: int


@dataclass(frozen=True)
class SlotManagerStatistics:
    """A snapshot of the inventory: per TaskManager (registration order) and in total."""

    task_managers: dict[TaskManagerId, TaskManagerSlots]
    total: int
    free: int
    allocated: int
    active: int
    releasing: int
    jobs: int  # jobs holding at least one slot


class NotEnoughSlots(UsageError):
    """A slot request cannot be met from the free slots: names needed, free and total."""

    def __init__(
        self,
        job_id: JobId,
        needed: int,
        free: int,
        total: int,
        task_managers: int,
        message: str | None = None,
    ) -> None:
        self.job_id = job_id
        self.needed = needed
        self.free = free
        self.total = total
        self.task_managers = task_managers
        if message is None:
            message = (
                f"job {job_id!r} needs {_plural(needed, 'slot')} but only {free} of {total} registered "
                f"slots are free (on {_plural(task_managers, 'TaskManager')})"
            )
        super().__init__(message)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _check_count(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{what} must be a positive integer, got {value!r}")
    return value


class SlotManager:
    """Registered TaskManagers, their slots and each slot's state. Pure; see the module docstring."""

    def __init__(self) -> None:
        self._task_managers: dict[TaskManagerId, int] = {}  # registration order -> slot count
        # Insertion order is registration order, then slot index: the fill order.
        self._slots: dict[SlotId, SlotStatus] = {}

    # -- registration ---------------------------------------------------------------

    def register_task_manager(self, tm_id: TaskManagerId, slot_count: int) -> list[SlotId]:
        """Take a TaskManager's slot report; returns the slots it added (none on a same-count reconnect)."""
        _check_count(f"slot report of TaskManager {tm_id!r}: slot_count", slot_count)
        known = self._task_managers.get(tm_id)
        if known is not None:
            if known != slot_count:
                raise ProtocolViolation(
                    f"TaskManager {tm_id!r} re-registered with {_plural(slot_count, 'slot')}, "
                    f"expected the {known} it registered with (a TaskManager's slot count is fixed)"
                )
            return []
        self._task_managers[tm_id] = slot_count
        added = [SlotId(tm_id, index) for index in range(slot_count)]
        for slot_id in added:
            self._slots[slot_id] = _FREE
        return added

    def unregister_task_manager(self, tm_id: TaskManagerId) -> dict[JobId, list[SlotId]]:
        """Remove a TaskManager and its slots; returns the lost allocations per job (first-holder order)."""
        slot_count = self._task_managers.pop(tm_id, None)
        if slot_count is None:
            raise UsageError(
                f"cannot unregister TaskManager {tm_id!r}: not registered "
                f"(registered: {list(self._task_managers)!r})"
            )
        lost: dict[JobId, list[SlotId]] = {}
        for index in range(slot_count):
            status = self._slots.pop(SlotId(tm_id, index))
            if status.state is not SlotState.FREE:
                lost.setdefault(status.job_id, []).append(SlotId(tm_id, index))
        return lost

    @property
    def task_managers(self) -> list[TaskManagerId]:
        """Registered TaskManagers in registration order."""
        return list(self._task_managers)

    def is_registered(self, tm_id: TaskManagerId) -> bool:
        return tm_id in self._task_managers

    def slot_count(self, tm_id: TaskManagerId) -> int:
        try:
            return self._task_managers[tm_id]
        except KeyError:
            raise UsageError(f"TaskManager {tm_id!r} is not registered") from None

    # -- queries --------------------------------------------------------------------

    @property
    def total_slots(self) -> int:
        return len(self._slots)

    @property
    def free_slots(self) -> int:
        return sum(1 for status in self._slots.values() if status.state is SlotState.FREE)

    def status(self, slot_id: SlotId) -> SlotStatus:
        """State and holder of one registered slot."""
        return self._status(slot_id, "status")

    def slots(self) -> dict[SlotId, SlotStatus]:
        """Every registered slot in fill order, with its status (a copy)."""
        return dict(self._slots)

    def slots_of(self, job_id: JobId) -> list[SlotId]:
        """The slots held by ``job_id`` (any non-FREE state), in fill order."""
        return [
            slot_id
            for slot_id, status in self._slots.items()
            if status.state is not SlotState.FREE and status.job_id == job_id
        ]

    def jobs(self) -> list[JobId]:
        """Jobs holding at least one slot, in order of their first slot."""
        seen: dict[JobId, None] = {}
        for status in self._slots.values():
            if status.state is not SlotState.FREE:
                seen.setdefault(status.job_id, None)
        return list(seen)

    def statistics(self) -> SlotManagerStatistics:
        """Per TaskManager and total counts of free, allocated, active and releasing slots."""
        per_tm: dict[TaskManagerId, TaskManagerSlots] = {}
        for tm_id, slot_count in self._task_managers.items():
            counts = dict.fromkeys(SlotState, 0)
            for index in range(slot_count):
                counts[self._slots[SlotId(tm_id, index)].state] += 1
            per_tm[tm_id] = TaskManagerSlots(
                total=slot_count,
                free=counts[SlotState.FREE],
                allocated=counts[SlotState.ALLOCATED],
                active=counts[SlotState.ACTIVE],
                releasing=counts[SlotState.RELEASING],
            )
        return SlotManagerStatistics(
            task_managers=per_tm,
            total=sum(s.total for s in per_tm.values()),
            free=sum(s.free for s in per_tm.values()),
            allocated=sum(s.allocated for s in per_tm.values()),
            active=sum(s.active for s in per_tm.values()),
            releasing=sum(s.releasing for s in per_tm.values()),
            jobs=len(self.jobs()),
        )

    # -- allocation -----------------------------------------------------------------

    def try_request(
        self, job_id: JobId, n: int, preferred: Iterable[SlotId] | None = None
    ) -> list[SlotId] | None:
        """Allocate ``n`` slots to ``job_id`` (preferred ones if all free), or ``None`` if too few are free.

        A malformed request (bad ``n``, malformed ``preferred``) raises ``UsageError``
        whether or not slots are free. ``None`` changes nothing.
        """
        if job_id is None:
            raise UsageError("slot request: job_id must not be None")
        _check_count(f"slot request of job {job_id!r}: n", n)
        wanted = self._check_preferred(job_id, n, preferred)
        if wanted and all(self._slots.get(s) == _FREE for s in wanted):
            chosen = list(wanted)
        else:
            chosen = []
        taken = set(chosen)
        for slot_id, status in self._slots.items():
            if len(chosen) == n:
                break
            if status.state is SlotState.FREE and slot_id not in taken:
                chosen.append(slot_id)
        if len(chosen) < n:
            return None
        for slot_id in chosen:
            self._transition(slot_id, "allocate", job_id)
        return chosen

    def request_slots(self, job_id: JobId, n: int, preferred: Iterable[SlotId] | None = None) -> list[SlotId]:
        """Like ``try_request``, but too few free slots raise ``NotEnoughSlots``."""
        chosen = self.try_request(job_id, n, preferred)
        if chosen is None:
            raise self.not_enough_slots(job_id, n)
        return chosen

    def not_enough_slots(self, job_id: JobId, n: int, message: str | None = None) -> NotEnoughSlots:
        """The error for a request of ``n`` slots that the current inventory cannot meet."""
        return NotEnoughSlots(job_id, n, self.free_slots, self.total_slots, len(self._task_managers), message)

    def _check_preferred(self, job_id: JobId, n: int, preferred: Iterable[SlotId] | None) -> list[SlotId]:
        if preferred is None:
            return []
        wanted = list(preferred)
        for slot_id in wanted:
            if not isinstance(slot_id, SlotId):
                raise UsageError(
                    f"slot request of job {job_id!r}: preferred slots must be SlotId, got {slot_id!r}"
                )
        if len(set(wanted)) != len(wanted):
            duplicates = sorted({str(s) for s in wanted if wanted.count(s) > 1})
            raise UsageError(
                f"slot request of job {job_id!r}: preferred slots must be distinct, got {duplicates} twice"
            )
        if len(wanted) > n:
            raise UsageError(
                f"slot request of job {job_id!r}: {len(wanted)} preferred slots for a request of {n}; "
                f"expected at most {n}"
            )
        return wanted

    # -- slot lifecycle -------------------------------------------------------------

    def activate(self, slot_id: SlotId, job_id: JobId) -> None:
        """ALLOCATED(job_id) -> ACTIVE(job_id): the JobMaster starts using the slot."""
        self._transition(slot_id, "activate", job_id)

    def mark_releasing(self, slot_id: SlotId) -> None:
        """ALLOCATED/ACTIVE -> RELEASING: the slot's tasks are going away; ``free`` follows."""
        self._transition(slot_id, "mark_releasing")

    def free(self, slot_id: SlotId) -> None:
        """RELEASING -> FREE: the slot is empty again."""
        self._transition(slot_id, "free")

    def release_slots(self, job_id: JobId) -> list[SlotId]:
        """Every slot of ``job_id``, whatever its state, -> FREE; returns them (none if it holds none)."""
        released = self.slots_of(job_id)
        for slot_id in released:
            self._transition(slot_id, "release")
        return released

    def _status(self, slot_id: SlotId, event: str) -> SlotStatus:
        try:
            return self._slots[slot_id]
        except KeyError:
            raise ProtocolViolation(
                f"slot {slot_id}: event '{event}' for a slot that is not registered "
                f"(TaskManager {slot_id.tm_id!r} "
                + (
                    f"offers slots 0..{self._task_managers[slot_id.tm_id] - 1})"
                    if slot_id.tm_id in self._task_managers
                    else "is not registered)"
                )
            ) from None

    def _transition(self, slot_id: SlotId, event: str, job_id: JobId | None = None) -> None:
        status = self._status(slot_id, event)
        target = SLOT_TRANSITIONS.get((status.state, event))
        if target is None:
            raise IllegalStateTransition(f"slot {slot_id}", status, event, "?")
        if event == "allocate":
            self._slots[slot_id] = SlotStatus(target, job_id)
            return
        if job_id is not None and status.job_id != job_id:
            raise ProtocolViolation(
                f"slot {slot_id}: event '{event}' for job {job_id!r}, but the slot is {status}"
            )
        self._slots[slot_id] = _FREE if target is SlotState.FREE else SlotStatus(target, status.job_id)

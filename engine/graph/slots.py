"""Slot sharing and slot placement: which subtasks run together, and on which TaskManager.

Theory of operation
-------------------
A TaskManager offers a fixed number of task slots. With slot sharing (Flink's default,
Flink's slot sharing) a slot holds one *pipeline slice* rather than one subtask: per slot sharing
group, shared slot ``k`` holds subtask ``k`` of every vertex of that group whose
parallelism is greater than ``k``. So a group needs as many slots as its largest
parallelism, and a job needs the sum over its groups (``required_slots``). Groups are
taken in the order they first appear in the topological vertex order.

``plan_slots`` then places the shared slots on TaskManagers: by default it fills
TaskManager 0's slots first, then TaskManager 1's, and so on (Flink's default slot
matching); with ``evenly_spread`` it deals them round robin across TaskManagers (Flink's
``cluster.evenly-spread-out-slots``). Too few slots is a ``UsageError`` that names what
each group needs and what the cluster offers.

Where subtasks land decides which input channels are local (same TaskManager, in-memory
exchange) and which are remote (over the transport): ``SlotPlan.channel_locality``.

What it does not do: no slot requests, no allocation protocol, no co-location groups; the
plan is computed up front and never changes while the job runs. Pure: no Trio, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from weir.errors import UsageError
from weir.graph.execution_graph import ExecutionGraph, ExecutionVertex
from weir.graph.job_graph import JobEdge

__all__ = ["EdgeLocality", "Slot", "SlotPlan", "plan_slots", "required_slots"]


@dataclass(eq=False)
class Slot:
    """One task slot of one TaskManager, holding one pipeline slice of one slot sharing group."""

    taskmanager: int
    index: int  # within its TaskManager
    slot_sharing_group: str
    shared_slot_index: int  # k: holds subtask k of each vertex of the group
    subtasks: list[ExecutionVertex] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"tm{self.taskmanager}/slot{self.index}"

    def __repr__(self) -> str:
        return (
            f"Slot({self.id}, {self.slot_sharing_group!r}, "
            f"{[ev.task_name_with_subtask for ev in self.subtasks]})"
        )


@dataclass(frozen=True)
class EdgeLocality:
    """How the input channels of one JobEdge split between local and remote."""

    edge: JobEdge
    producer: str
    consumer: str
    local: int
    remote: int

    @property
    def channels(self) -> int:
        return self.local + self.remote

    def __str__(self) -> str:
        return f"{self.producer} -{self.edge.partitioner}-> {self.consumer}: {self.local} local, {self.remote} remote"


@dataclass(eq=False)
class SlotPlan:
    """Where every subtask of one job runs."""

    taskmanagers: int
    slots_per_taskmanager: int
    slots: list[Slot]  # ordered by (taskmanager, index)
    required: dict[str, int]  # slots per slot sharing group
    _slot_of: dict[int, Slot] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._slot_of = {id(ev): slot for slot in self.slots for ev in slot.subtasks}

    @property
    def slots_used(self) -> int:
        return len(self.slots)

    @property
    def slots_offered(self) -> int:
        return self.taskmanagers * self.slots_per_taskmanager

    def slots_on(self, taskmanager: int) -> list[Slot]:
        return [s for s in self.slots if s.taskmanager == taskmanager]

    def slot_of(self, vertex: ExecutionVertex) -> Slot:
        try:
            return self._slot_of[id(vertex)]
        except KeyError:
            raise KeyError(f"{vertex!r} has no slot in this plan") from None

    def taskmanager_of(self, vertex: ExecutionVertex) -> int:
        return self.slot_of(vertex).taskmanager

    def is_local(self, producer: ExecutionVertex, consumer: ExecutionVertex) -> bool:
        """Whether a channel from ``producer`` to ``consumer`` stays inside one TaskManager."""
        return self.taskmanager_of(producer) == self.taskmanager_of(consumer)

    def channel_locality(self, execution_graph: ExecutionGraph) -> list[EdgeLocality]:
        """Per JobEdge (in consumer topological order, then gate order), local vs remote channels."""
        out: list[EdgeLocality] = []
        for ejv in execution_graph.job_vertices:
            for gate_index, edge in enumerate(ejv.input_edges):
                local = remote = 0
                for consumer in ejv.task_vertices:
                    for partition in consumer.consumed_partitions[gate_index]:
                        if self.is_local(partition.producer, consumer):
                            local += 1
                        else:
                            remote += 1
                out.append(EdgeLocality(edge, edge.producer.name, ejv.name, local, remote))
        return out

    def assign_to_executions(self) -> None:
        """Record each subtask's slot on its current Execution (``assigned_slot``)."""
        for slot in self.slots:
            for ev in slot.subtasks:
                ev.current_execution.assigned_slot = slot

    def __repr__(self) -> str:
        return f"SlotPlan({self.slots_used}/{self.slots_offered} slots on {self.taskmanagers} TaskManager(s))"


def _shared_slots(execution_graph: ExecutionGraph) -> dict[str, list[list[ExecutionVertex]]]:
    """Per slot sharing group (first-appearance order), the subtasks of each shared slot."""
    groups: dict[str, list[list[ExecutionVertex]]] = {}
    for ejv in execution_graph.job_vertices:
        shared = groups.setdefault(ejv.slot_sharing_group, [])
        while len(shared) < ejv.parallelism:
            shared.append([])
        for ev in ejv.task_vertices:
            shared[ev.subtask_index].append(ev)
    return groups


def required_slots(execution_graph: ExecutionGraph) -> dict[str, int]:
    """Slots each slot sharing group needs: its largest parallelism."""
    return {group: len(shared) for group, shared in _shared_slots(execution_graph).items()}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _check_positive(what: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{what} must be a positive integer, got {value!r}")


def plan_slots(
    execution_graph: ExecutionGraph,
    taskmanagers: int,
    slots_per_taskmanager: int,
    evenly_spread: bool = False,
) -> SlotPlan:
    """Place the job's shared slots on ``taskmanagers`` × ``slots_per_taskmanager`` slots."""
    _check_positive("taskmanagers", taskmanagers)
    _check_positive("slots_per_taskmanager", slots_per_taskmanager)
    groups = _shared_slots(execution_graph)
    required = {group: len(shared) for group, shared in groups.items()}
    needed = sum(required.values())
    offered = taskmanagers * slots_per_taskmanager
    if needed > offered:
        per_group = ", ".join(f"group {g!r}: {n}" for g, n in required.items())
        raise UsageError(
            f"job {execution_graph.job_name!r} needs {needed} slots ({per_group}) but the cluster offers "
            f"{offered} ({_plural(taskmanagers, 'TaskManager')} × {_plural(slots_per_taskmanager, 'slot')})"
        )
    if evenly_spread:
        positions = [(tm, i) for i in range(slots_per_taskmanager) for tm in range(taskmanagers)]
    else:
        positions = [(tm, i) for tm in range(taskmanagers) for i in range(slots_per_taskmanager)]
    slots: list[Slot] = []
    placed = iter(positions)
    for group, shared in groups.items():
        for k, subtasks in enumerate(shared):
            tm, index = next(placed)
            slots.append(Slot(tm, index, group, k, list(subtasks)))
    slots.sort(key=lambda s: (s.taskmanager, s.index))
    return SlotPlan(taskmanagers, slots_per_taskmanager, slots, required)

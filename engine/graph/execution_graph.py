"""ExecutionGraph: the JobGraph expanded by parallelism, as the JobMaster schedules it.

Theory of operation
-------------------
``build_execution_graph`` does what Flink's DefaultExecutionGraphBuilder and
EdgeManagerBuildUtil do, on one machine and without I/O:

1. **Vertices.** Every JobVertex becomes an ``ExecutionJobVertex`` holding one
   ``ExecutionVertex`` per subtask. Each ExecutionVertex has a *current* ``Execution``
   (one attempt, with its own ``ExecutionStateMachine``) and the list of its *prior*
   executions. A restart never revives an attempt: ``reset_for_new_execution`` starts
   attempt ``n + 1`` once attempt ``n`` is terminal.
2. **Results.** Every IntermediateDataSet becomes an ``IntermediateResult`` with one
   ``IntermediateResultPartition`` per producer subtask.
3. **Connections** (per JobEdge, i.e. per input gate of the consumer):

   - ALL_TO_ALL: every consumer subtask reads every partition; a partition has one
     subpartition per consumer subtask.
   - POINTWISE with P producers and C consumers: P == C pairs partition i with consumer i;
     P > C gives consumer i the partitions ``[i*P//C, (i+1)*P//C)``; P < C gives partition
     i the consumers ``[(i*C+P-1)//P, ((i+1)*C+P-1)//P)``. A pointwise partition has one
     subpartition per consumer it feeds.

   A consumer reads from a partition the subpartition at its own position in
   ``partition.consumers`` (``subpartition_of``), so channel ``k`` of gate ``g`` is
   ``consumed_partitions[g][k]``.
4. **Pipelined regions** (Flink's PipelinedRegionComputeUtil, simplified): subtasks joined
   by a PIPELINED_BOUNDED partition (its producer with each consumer) must run together, so
   they form one region (union-find); a BLOCKING partition never joins. Regions that would
   wait on each other in a cycle through blocking results are merged. Regions are listed in
   topological order: a region comes after every region whose blocking results it reads.
   A streaming job is one region; a BATCH job splits at every blocking edge.

Invariants: every partition has at least one consumer and every consumer gate at least
one channel; subtask, partition and attempt identifiers are deterministic, so the same
JobGraph always expands to the same ExecutionGraph.

What it does not do: no scheduling, no slots (``weir.graph.slots``), no deployment.
Pure: no Trio, no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from weir.errors import UsageError
from weir.graph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex, ResultPartitionType
from weir.graph.partitioners import DistributionPattern, Partitioner
from weir.graph.status import ExecutionState, ExecutionStateMachine, JobStatus, JobStatusMachine

if TYPE_CHECKING:
    from weir.graph.slots import Slot

__all__ = [
    "Execution",
    "ExecutionGraph",
    "ExecutionJobVertex",
    "ExecutionVertex",
    "IntermediateResult",
    "IntermediateResultPartition",
    "PipelinedRegion",
    "build_execution_graph",
    "pointwise_consumed_partitions",
]


# -- the objects --------------------------------------------------------------------------------


@dataclass(eq=False)
class Execution:
    """One attempt to run one subtask. Its state only moves forward; a retry is a new Execution."""

    vertex: ExecutionVertex
    attempt_number: int
    attempt_id: str
    state_machine: ExecutionStateMachine
    assigned_slot: Slot | None = None  # set by the scheduler

    @property
    def state(self) -> ExecutionState:
        return self.state_machine.state

    @property
    def is_terminal(self) -> bool:
        return self.state_machine.is_terminal

    def on_event(self, event: str) -> ExecutionState:
        """Apply an execution event (schedule, deploy, run, fail, ...) to this attempt."""
        return self.state_machine.on_event(event)

    def __repr__(self) -> str:
        return (
            f"Execution({self.vertex.task_name_with_subtask!r}, attempt={self.attempt_number}, {self.state})"
        )


@dataclass(eq=False)
class ExecutionVertex:
    """One parallel subtask of a JobVertex; deployed as one Task."""

    job_vertex: ExecutionJobVertex
    subtask_index: int
    job_id: str
    produced_partitions: list[IntermediateResultPartition] = field(default_factory=list)
    # one list per input JobEdge (= per input gate), channel order
    consumed_partitions: list[list[IntermediateResultPartition]] = field(default_factory=list)
    prior_executions: list[Execution] = field(default_factory=list)
    current_execution: Execution = field(init=False)

    def __post_init__(self) -> None:
        self.current_execution = self._new_execution(0)

    @property
    def id(self) -> str:
        """Flink's ExecutionVertexID: the JobVertex id and the subtask index."""
        return f"{self.job_vertex.id}_{self.subtask_index}"

    @property
    def parallelism(self) -> int:
        return self.job_vertex.parallelism

    @property
    def task_name_with_subtask(self) -> str:
        """``Name (i/n)`` with a 1-based subtask number, as Flink prints it."""
        return f"{self.job_vertex.name} ({self.subtask_index + 1}/{self.parallelism})"

    @property
    def execution_state(self) -> ExecutionState:
        return self.current_execution.state

    @property
    def num_input_gates(self) -> int:
        return len(self.consumed_partitions)

    def num_input_channels(self, gate_index: int) -> int:
        """How many channels input gate ``gate_index`` has: one per consumed partition."""
        if not 0 <= gate_index < len(self.consumed_partitions):
            raise UsageError(
                f"{self.task_name_with_subtask}: no input gate {gate_index}; it has "
                f"{len(self.consumed_partitions)} gate(s)"
            )
        return len(self.consumed_partitions[gate_index])

    def reset_for_new_execution(self) -> Execution:
        """Start the next attempt of this subtask; the current one must be terminal."""
        current = self.current_execution
        if not current.is_terminal:
            raise UsageError(
                f"{self.task_name_with_subtask}: cannot start a new execution while attempt "
                f"{current.attempt_number} is {current.state}; expected FINISHED, CANCELED or FAILED"
            )
        self.prior_executions.append(current)
        self.current_execution = self._new_execution(current.attempt_number + 1)
        return self.current_execution

    def _new_execution(self, attempt_number: int) -> Execution:
        attempt_id = f"{self.job_id}_{self.id}_{attempt_number}"  # Flink's ExecutionAttemptID layout
        machine = ExecutionStateMachine(
            name=f"Execution {self.task_name_with_subtask} attempt {attempt_number}"
        )
        return Execution(self, attempt_number, attempt_id, machine)

    def __repr__(self) -> str:
        return f"ExecutionVertex({self.task_name_with_subtask!r})"


@dataclass(eq=False)
class ExecutionJobVertex:
    """All subtasks of one JobVertex."""

    job_vertex: JobVertex
    task_vertices: list[ExecutionVertex] = field(default_factory=list)
    produced_results: list[IntermediateResult] = field(default_factory=list)
    inputs: list[IntermediateResult] = field(default_factory=list)  # one per input gate

    @property
    def id(self) -> str:
        return self.job_vertex.id

    @property
    def name(self) -> str:
        return self.job_vertex.name

    @property
    def parallelism(self) -> int:
        return self.job_vertex.parallelism

    @property
    def max_parallelism(self) -> int:
        return self.job_vertex.max_parallelism

    @property
    def slot_sharing_group(self) -> str:
        return self.job_vertex.slot_sharing_group

    @property
    def input_edges(self) -> list[JobEdge]:
        return self.job_vertex.inputs

    def __repr__(self) -> str:
        return f"ExecutionJobVertex({self.name!r}, p={self.parallelism})"


@dataclass(eq=False)
class IntermediateResult:
    """The runtime side of one IntermediateDataSet: one partition per producer subtask."""

    data_set: IntermediateDataSet
    producer: ExecutionJobVertex
    consumer: ExecutionJobVertex
    job_edge: JobEdge
    partitions: list[IntermediateResultPartition] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.data_set.id

    @property
    def result_type(self) -> ResultPartitionType:
        return self.data_set.result_type

    @property
    def partitioner(self) -> Partitioner:
        return self.job_edge.partitioner

    @property
    def distribution_pattern(self) -> DistributionPattern:
        return self.job_edge.distribution_pattern

    def __repr__(self) -> str:
        return (
            f"IntermediateResult({self.producer.name!r} -{self.partitioner}-> {self.consumer.name!r}, "
            f"{self.result_type.value})"
        )


@dataclass(eq=False)
class IntermediateResultPartition:
    """What one producer subtask writes for one result: ``num_subpartitions`` subpartitions."""

    result: IntermediateResult
    partition_number: int
    producer: ExecutionVertex
    consumers: list[ExecutionVertex] = field(default_factory=list)

    @property
    def id(self) -> str:
        """Flink's IntermediateResultPartitionID: the data set id and the partition number."""
        return f"{self.result.id}#{self.partition_number}"

    @property
    def num_subpartitions(self) -> int:
        """One per consumer subtask: all of them for ALL_TO_ALL, those it feeds for POINTWISE."""
        return len(self.consumers)

    @property
    def result_type(self) -> ResultPartitionType:
        return self.result.result_type

    def subpartition_of(self, consumer: ExecutionVertex) -> int:
        """The subpartition that ``consumer`` reads from this partition."""
        for index, candidate in enumerate(self.consumers):
            if candidate is consumer:
                return index
        raise UsageError(
            f"{consumer.task_name_with_subtask} does not consume partition {self.partition_number} of "
            f"{self.result!r}; its consumers are {[c.task_name_with_subtask for c in self.consumers]}"
        )

    def __repr__(self) -> str:
        return (
            f"IntermediateResultPartition({self.producer.task_name_with_subtask!r}, "
            f"subpartitions={self.num_subpartitions})"
        )


@dataclass(eq=False)
class PipelinedRegion:
    """Subtasks that exchange data through pipelined partitions and so must run at the same time."""

    id: int  # position in ExecutionGraph.regions (topological)
    vertices: list[ExecutionVertex]

    def __post_init__(self) -> None:
        self._members = set(map(id, self.vertices))

    def __contains__(self, vertex: object) -> bool:
        return id(vertex) in self._members

    def __iter__(self) -> Iterator[ExecutionVertex]:
        return iter(self.vertices)

    def __len__(self) -> int:
        return len(self.vertices)

    def blocking_inputs(self) -> list[IntermediateResultPartition]:
        """The blocking partitions produced outside this region that it reads (must be finished first)."""
        seen: set[int] = set()
        out: list[IntermediateResultPartition] = []
        for vertex in self.vertices:
            for gate in vertex.consumed_partitions:
                for partition in gate:
                    if (
                        partition.result_type.is_blocking
                        and partition.producer not in self
                        and id(partition) not in seen
                    ):
                        seen.add(id(partition))
                        out.append(partition)
        return out

    def __repr__(self) -> str:
        return f"PipelinedRegion({self.id}, {[v.task_name_with_subtask for v in self.vertices]})"


@dataclass(eq=False)
class ExecutionGraph:
    """The parallel job: what the JobMaster schedules, tracks and restarts."""

    job_id: str
    job_name: str
    job_graph: JobGraph
    job_vertices: list[ExecutionJobVertex]  # the JobGraph's topological order
    intermediate_results: dict[str, IntermediateResult]  # by data set id, producer order
    status: JobStatusMachine
    regions: list[PipelinedRegion] = field(default_factory=list)
    _region_of: dict[int, PipelinedRegion] = field(default_factory=dict, repr=False)

    @property
    def is_batch(self) -> bool:
        return self.job_graph.is_batch

    def all_execution_vertices(self) -> list[ExecutionVertex]:
        """Every subtask: vertices in topological order, subtasks in index order."""
        return [ev for ejv in self.job_vertices for ev in ejv.task_vertices]

    def job_vertex(self, vertex_id: str) -> ExecutionJobVertex:
        for ejv in self.job_vertices:
            if ejv.id == vertex_id:
                return ejv
        raise KeyError(
            f"no job vertex {vertex_id!r}; vertices: {[(v.id, v.name) for v in self.job_vertices]}"
        )

    def job_vertex_by_name(self, name: str) -> ExecutionJobVertex:
        matches = [v for v in self.job_vertices if v.name == name]
        if len(matches) != 1:
            raise KeyError(
                f"{len(matches)} vertices named {name!r}; names: {[v.name for v in self.job_vertices]}"
            )
        return matches[0]

    def execution_vertex(self, vertex_id: str, subtask: int) -> ExecutionVertex:
        ejv = self.job_vertex(vertex_id)
        if not 0 <= subtask < ejv.parallelism:
            raise KeyError(f"{ejv.name!r} has subtasks 0..{ejv.parallelism - 1}, not {subtask}")
        return ejv.task_vertices[subtask]

    def region_of(self, vertex: ExecutionVertex) -> PipelinedRegion:
        try:
            return self._region_of[id(vertex)]
        except KeyError:
            raise KeyError(f"{vertex!r} is not part of job {self.job_name!r}") from None

    def __repr__(self) -> str:
        return f"ExecutionGraph({self.job_name!r}, {self.job_id}, {len(self.job_vertices)} vertices)"


# -- connectivity -------------------------------------------------------------------------------


def pointwise_consumed_partitions(producers: int, consumers: int) -> list[range]:
    """For each consumer subtask of a POINTWISE edge, the partition numbers it reads.

    Flink's EdgeManagerBuildUtil.connectPointwise: equal parallelism pairs i with i; more
    producers split them into contiguous runs; fewer producers fan each out to a contiguous
    run of consumers.
    """
    if producers < 1 or consumers < 1:
        raise UsageError(f"a pointwise edge needs positive parallelisms, got {producers} -> {consumers}")
    if producers == consumers:
        return [range(i, i + 1) for i in range(consumers)]
    if producers > consumers:
        return [range(i * producers // consumers, (i + 1) * producers // consumers) for i in range(consumers)]
    out: list[range] = [range(0)] * consumers
    for partition in range(producers):
        start = (partition * consumers + producers - 1) // producers
        end = ((partition + 1) * consumers + producers - 1) // producers
        for consumer in range(start, end):
            out[consumer] = range(partition, partition + 1)
    return out


def _connect(result: IntermediateResult, gate_index: int) -> None:
    partitions = result.partitions
    consumers = result.consumer.task_vertices
    if result.distribution_pattern is DistributionPattern.ALL_TO_ALL:
        consumed: list[range] = [range(len(partitions))] * len(consumers)
    else:
        consumed = pointwise_consumed_partitions(len(partitions), len(consumers))
    for consumer, numbers in zip(consumers, consumed):
        gate = [partitions[n] for n in numbers]
        consumer.consumed_partitions[gate_index] = gate
        for partition in gate:
            partition.consumers.append(consumer)


# -- regions ------------------------------------------------------------------------------------


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)  # the root is the earliest vertex


def _strongly_connected(nodes: list[int], edges: dict[int, set[int]]) -> list[list[int]]:
    """Kosaraju's algorithm, iterative; small graphs (one node per region)."""
    order: list[int] = []
    visited: set[int] = set()
    for start in nodes:
        if start in visited:
            continue
        visited.add(start)
        stack = [(start, iter(sorted(edges.get(start, ()))))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                order.append(node)
            elif child not in visited:
                visited.add(child)
                stack.append((child, iter(sorted(edges.get(child, ())))))
    reverse: dict[int, set[int]] = {}
    for a, targets in edges.items():
        for b in targets:
            reverse.setdefault(b, set()).add(a)
    components: list[list[int]] = []
    assigned: set[int] = set()
    for start in reversed(order):
        if start in assigned:
            continue
        component = [start]
        assigned.add(start)
        todo = [start]
        while todo:
            node = todo.pop()
            for other in reverse.get(node, ()):
                if other not in assigned:
                    assigned.add(other)
                    component.append(other)
                    todo.append(other)
        components.append(component)
    return components


def _compute_regions(vertices: list[ExecutionVertex]) -> list[PipelinedRegion]:
    position = {id(v): i for i, v in enumerate(vertices)}
    sets = _UnionFind(len(vertices))
    for v in vertices:
        for partition in v.produced_partitions:
            if partition.result_type.is_pipelined:
                for consumer in partition.consumers:
                    sets.union(position[id(v)], position[id(consumer)])
    # region graph through blocking partitions, keyed by each region's root position
    edges: dict[int, set[int]] = {}
    for v in vertices:
        for partition in v.produced_partitions:
            if partition.result_type.is_blocking:
                producer_root = sets.find(position[id(v)])
                for consumer in partition.consumers:
                    consumer_root = sets.find(position[id(consumer)])
                    if consumer_root != producer_root:
                        edges.setdefault(producer_root, set()).add(consumer_root)
    roots = sorted({sets.find(i) for i in range(len(vertices))})
    for component in _strongly_connected(roots, edges):
        for other in component[1:]:  # regions waiting on each other in a cycle run together
            sets.union(component[0], other)
    members: dict[int, list[ExecutionVertex]] = {}
    for i, v in enumerate(vertices):
        members.setdefault(sets.find(i), []).append(v)
    merged: dict[int, set[int]] = {}
    for a, targets in edges.items():
        for b in targets:
            ra, rb = sets.find(a), sets.find(b)
            if ra != rb:
                merged.setdefault(ra, set()).add(rb)
    indegree = dict.fromkeys(members, 0)
    for targets in merged.values():
        for b in targets:
            indegree[b] += 1
    ready = [root for root, n in indegree.items() if n == 0]
    heapq.heapify(ready)  # ties: the region whose first subtask comes first
    regions: list[PipelinedRegion] = []
    while ready:
        root = heapq.heappop(ready)
        regions.append(PipelinedRegion(len(regions), members[root]))
        for b in sorted(merged.get(root, ())):
            indegree[b] -= 1
            if indegree[b] == 0:
                heapq.heappush(ready, b)
    return regions


# -- building -----------------------------------------------------------------------------------


def _default_job_id(job_graph: JobGraph) -> str:
    data = "\x00".join(v.id for v in job_graph.vertices).encode()
    return hashlib.blake2b(b"weir-job\x00" + data, digest_size=16).hexdigest()


def build_execution_graph(job_graph: JobGraph, job_id: str | None = None) -> ExecutionGraph:
    """Expand ``job_graph`` by parallelism (pure; see the module docstring)."""
    if job_id is None:
        job_id = _default_job_id(job_graph)
    elif not isinstance(job_id, str) or not job_id:
        raise UsageError(f"job_id must be a non-empty string, got {job_id!r}")
    ejvs: dict[str, ExecutionJobVertex] = {}
    for jv in job_graph.vertices:
        if jv.parallelism < 1:
            raise UsageError(f"job vertex {jv.name!r} has parallelism {jv.parallelism}; expected at least 1")
        ejv = ExecutionJobVertex(jv)
        ejv.task_vertices = [ExecutionVertex(ejv, i, job_id) for i in range(jv.parallelism)]
        for ev in ejv.task_vertices:
            ev.consumed_partitions = [[] for _ in jv.inputs]
        ejvs[jv.id] = ejv
    results: dict[str, IntermediateResult] = {}
    for jv in job_graph.vertices:
        producer = ejvs[jv.id]
        for data_set in jv.produced_data_sets:
            if len(data_set.consumers) != 1:
                raise UsageError(
                    f"intermediate data set {data_set.id} of {jv.name!r} has {len(data_set.consumers)} "
                    "consumers; expected exactly 1"
                )
            edge = data_set.consumers[0]
            result = IntermediateResult(data_set, producer, ejvs[edge.target.id], edge)
            result.partitions = [
                IntermediateResultPartition(result, ev.subtask_index, ev) for ev in producer.task_vertices
            ]
            for partition in result.partitions:
                partition.producer.produced_partitions.append(partition)
            producer.produced_results.append(result)
            results[data_set.id] = result
    for jv in job_graph.vertices:
        consumer = ejvs[jv.id]
        for gate_index, edge in enumerate(jv.inputs):
            result = results[edge.source.id]
            consumer.inputs.append(result)
            _connect(result, gate_index)
    graph = ExecutionGraph(
        job_id=job_id,
        job_name=job_graph.job_name,
        job_graph=job_graph,
        job_vertices=[ejvs[jv.id] for jv in job_graph.vertices],
        intermediate_results=results,
        status=JobStatusMachine(JobStatus.CREATED, name=f"job {job_graph.job_name!r} ({job_id})"),
    )
    graph.regions = _compute_regions(graph.all_execution_vertices())
    graph._region_of = {id(v): region for region in graph.regions for v in region.vertices}
    return graph

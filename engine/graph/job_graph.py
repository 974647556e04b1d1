"""JobGraph: the StreamGraph with chainable neighbours fused into JobVertices.

Theory of operation
-------------------
``generate_job_graph`` does what Flink's StreamingJobGraphGenerator does:

1. **Operator IDs.** Every StreamNode gets a stable 16-byte ID (``assign_operator_ids``):
   from ``set_uid_hash``, else from its ``uid``, else a deterministic hash of its position in
   the topology. The walk is breadth-first from the sources in ID order; a node is hashed
   once all its inputs are; its own hash covers how many nodes were hashed before it (once
   for itself and once per chainable output), and is then folded with its inputs' hashes.
   So the same job always gets the same IDs, in any process, and a change upstream changes
   every auto-generated ID downstream of it while a uid-given ID never changes. State is
   restored by these IDs.
2. **Chaining** (``is_chainable``): an edge is chained when the target has exactly one input,
   both ends are operators, they are in the same slot sharing group, the upstream strategy is
   not NEVER, the downstream strategy is ALWAYS (or HEAD_WITH_SOURCES after a source), the
   partitioner is FORWARD and the exchange is not a batch exchange, both ends have the same
   parallelism (and the same max parallelism, unless
   ``pipeline.operator-chaining.chain-operators-with-different-max-parallelism`` is on, which
   is Flink's default), and chaining is enabled.
3. **Vertices and edges.** Each chain becomes a JobVertex named after its operators
   (``A -> B -> (C, D)``) with the head's ID, parallelism, max parallelism and slot sharing
   group. Every non-chained StreamEdge leaving a chain becomes an IntermediateDataSet
   produced by that vertex and a JobEdge to the consumer's vertex, with the edge's
   partitioner, its distribution pattern and a result partition type: PIPELINED_BOUNDED for
   streaming, BLOCKING in BATCH mode (or for an explicit batch exchange).

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import struct
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from weir.errors import UsageError
from weir.graph.partitioners import DistributionPattern, Partitioner
from weir.graph.stream_graph import StreamEdge, StreamGraph, StreamNode
from weir.graph.transformations import ChainingStrategy, ExchangeMode


class ResultPartitionType(Enum):
    PIPELINED_BOUNDED = "PIPELINED_BOUNDED"
    BLOCKING = "BLOCKING"

    @property
    def is_pipelined(self) -> bool:
        return self is ResultPartitionType.PIPELINED_BOUNDED

    @property
    def is_blocking(self) -> bool:
        return self is ResultPartitionType.BLOCKING


@dataclass(eq=False)
class ChainedOperator:
    """One operator inside a JobVertex, in chain order."""

    id: str  # 32 hex characters
    node_id: int
    name: str
    uid: str | None
    max_parallelism: int
    chain_index: int

    def __repr__(self) -> str:
        return f"ChainedOperator({self.name!r}, {self.id[:8]})"


@dataclass(eq=False)
class IntermediateDataSet:
    id: str
    producer: JobVertex
    result_type: ResultPartitionType
    consumers: list[JobEdge] = field(default_factory=list)


@dataclass(eq=False)
class JobEdge:
    source: IntermediateDataSet
    target: JobVertex
    partitioner: Partitioner
    stream_edge: StreamEdge

    @property
    def distribution_pattern(self) -> DistributionPattern:
        return self.partitioner.pattern

    @property
    def result_partition_type(self) -> ResultPartitionType:
        return self.source.result_type

    @property
    def producer(self) -> JobVertex:
        return self.source.producer

    def __repr__(self) -> str:
        return f"JobEdge({self.producer.name!r} -{self.partitioner}-> {self.target.name!r})"


@dataclass(eq=False)
class JobVertex:
    id: str
    name: str
    parallelism: int
    max_parallelism: int
    slot_sharing_group: str
    operators: list[ChainedOperator]
    chained_node_ids: list[int]
    is_source: bool
    inputs: list[JobEdge] = field(default_factory=list)
    produced_data_sets: list[IntermediateDataSet] = field(default_factory=list)

    @property
    def head(self) -> ChainedOperator:
        return self.operators[0]

    @property
    def outputs(self) -> list[JobEdge]:
        return [e for ds in self.produced_data_sets for e in ds.consumers]

    def __repr__(self) -> str:
        return f"JobVertex({self.name!r}, p={self.parallelism})"


@dataclass(eq=False)
class JobGraph:
    job_name: str
    stream_graph: StreamGraph
    vertices: list[JobVertex]  # topological order, sources first
    operator_ids: dict[int, str]  # stream node id -> operator id

    @property
    def is_batch(self) -> bool:
        return self.stream_graph.is_batch

    def vertex(self, vertex_id: str) -> JobVertex:
        for v in self.vertices:
            if v.id == vertex_id:
                return v
        raise KeyError(vertex_id)

    def vertex_by_name(self, name: str) -> JobVertex:
        matches = [v for v in self.vertices if v.name == name]
        if len(matches) != 1:
            raise KeyError(
                f"{len(matches)} vertices named {name!r}; names: {[v.name for v in self.vertices]}"
            )
        return matches[0]

    def vertex_of_node(self, node_id: int) -> JobVertex:
        for v in self.vertices:
            if node_id in v.chained_node_ids:
                return v
        raise KeyError(node_id)

    @property
    def edges(self) -> list[JobEdge]:
        return [e for v in self.vertices for e in v.inputs]


# -- chaining ----------------------------------------------------------------------------------


def is_chainable(edge: StreamEdge, graph: StreamGraph) -> bool:
    """Flink's ``isChainable``: may ``edge`` be turned into a method call inside one task?"""
    down = graph.target_of(edge)
    return len(down.in_edges) == 1 and _is_chainable_input(edge, graph)


def _is_chainable_input(edge: StreamEdge, graph: StreamGraph) -> bool:
    up = graph.source_of(edge)
    down = graph.target_of(edge)
    return (
        graph.chaining_enabled
        and up.slot_sharing_group == down.slot_sharing_group
        and _are_operators_chainable(up, down, graph)
        and edge.partitioner.is_forward
        and edge.exchange_mode is not ExchangeMode.BATCH
    )


def _are_operators_chainable(up: StreamNode, down: StreamNode, graph: StreamGraph) -> bool:
    if up.is_sink or down.is_source:
        return False
    if up.chaining_strategy is ChainingStrategy.NEVER:
        return False
    strategy = down.chaining_strategy
    if strategy in (ChainingStrategy.NEVER, ChainingStrategy.HEAD):
        return False
    if strategy is ChainingStrategy.HEAD_WITH_SOURCES and not up.is_source:
        return False
    if up.parallelism != down.parallelism:
        return False
    return graph.chain_different_max_parallelism or up.max_parallelism == down.max_parallelism


def chaining_blockers(edge: StreamEdge, graph: StreamGraph) -> list[str]:
    """Why ``edge`` is not chained, as readable reasons (empty when it is chainable)."""
    up, down = graph.source_of(edge), graph.target_of(edge)
    reasons = []
    if not graph.chaining_enabled:
        reasons.append("operator chaining is disabled")
    if len(down.in_edges) != 1:
        reasons.append(f"'{down.name}' has {len(down.in_edges)} inputs")
    if up.slot_sharing_group != down.slot_sharing_group:
        reasons.append(
            f"slot sharing groups differ ({up.slot_sharing_group!r} vs {down.slot_sharing_group!r})"
        )
    if up.chaining_strategy is ChainingStrategy.NEVER:
        reasons.append(f"'{up.name}' has chaining disabled")
    if down.chaining_strategy is ChainingStrategy.NEVER:
        reasons.append(f"'{down.name}' has chaining disabled")
    if down.chaining_strategy is ChainingStrategy.HEAD:
        reasons.append(f"'{down.name}' starts a new chain")
    if not edge.partitioner.is_forward:
        reasons.append(f"the edge is {edge.partitioner}, not FORWARD")
    if edge.exchange_mode is ExchangeMode.BATCH:
        reasons.append("the edge is a batch exchange")
    if up.parallelism != down.parallelism:
        reasons.append(f"parallelism differs ({up.parallelism} vs {down.parallelism})")
    if not graph.chain_different_max_parallelism and up.max_parallelism != down.max_parallelism:
        reasons.append(f"max parallelism differs ({up.max_parallelism} vs {down.max_parallelism})")
    return reasons


# -- operator ids ------------------------------------------------------------------------------


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _uid_hash(uid: str) -> bytes:
    return _digest(b"weir-uid\x00" + uid.encode("utf-8"))


def assign_operator_ids(graph: StreamGraph) -> dict[int, str]:
    """Stable operator IDs for every node: 32 hex characters each (see the module docstring)."""
    hashes: dict[int, bytes] = {}
    sources = sorted(graph.source_ids)
    queue: deque[int] = deque(sources)
    visited = set(sources)
    while queue:
        node = graph.node(queue.popleft())
        if _generate_node_hash(node, graph, hashes):
            for edge in node.out_edges:
                if edge.target_id not in visited:
                    queue.append(edge.target_id)
                    visited.add(edge.target_id)
        else:
            visited.discard(node.id)  # revisited when its last input is hashed
    if len(hashes) != len(graph.nodes):  # pragma: no cover - a DAG from sources reaches every node
        missing = sorted(set(graph.nodes) - set(hashes))
        raise UsageError(f"operators {missing} are not reachable from a source")
    seen: dict[bytes, StreamNode] = {}
    for node_id, h in hashes.items():
        node = graph.node(node_id)
        if h in seen:
            other = seen[h]
            raise UsageError(
                f"operators '{other.name}' (node {other.id}) and '{node.name}' (node {node.id}) have the same "
                f"operator ID {h.hex()}; check that every uid and uid hash is unique"
            )
        seen[h] = node
    return {nid: h.hex() for nid, h in hashes.items()}


def _generate_node_hash(node: StreamNode, graph: StreamGraph, hashes: dict[int, bytes]) -> bool:
    if node.uid_hash is not None:
        hashes[node.id] = bytes.fromhex(node.uid_hash)
        return True
    if node.uid is not None:
        hashes[node.id] = _uid_hash(node.uid)
        return True
    if any(e.source_id not in hashes for e in node.in_edges):
        return False
    position = len(hashes)
    data = bytearray(b"weir-node\x00")
    data += struct.pack("<i", position)
    for edge in node.out_edges:
        if is_chainable(edge, graph):
            data += struct.pack("<i", position)  # chained successors are part of this node's identity
    h = bytearray(_digest(bytes(data)))
    for edge in node.in_edges:
        other = hashes[edge.source_id]
        for j in range(len(h)):
            h[j] = ((h[j] * 37) ^ other[j]) & 0xFF
    hashes[node.id] = bytes(h)
    return True


# -- job graph ---------------------------------------------------------------------------------


class _Builder:
    def __init__(self, graph: StreamGraph) -> None:
        self.graph = graph
        self.ids = assign_operator_ids(graph)
        self.built: set[int] = set()
        self.chains: dict[int, list[int]] = {}  # head node id -> chained node ids (chain order)
        self.chain_outputs: dict[int, list[StreamEdge]] = {}  # head -> non-chained out edges
        self.chained_names: dict[int, str] = {}

    def create_chain(self, current_id: int, start_id: int) -> list[StreamEdge]:
        if start_id in self.built:
            return []
        if current_id == start_id:
            self.chains[start_id] = []
        self.chains[start_id].append(current_id)
        node = self.graph.node(current_id)
        transitive: list[StreamEdge] = []
        chainable = [e for e in node.out_edges if is_chainable(e, self.graph)]
        non_chainable = [e for e in node.out_edges if not is_chainable(e, self.graph)]
        for edge in chainable:
            transitive.extend(self.create_chain(edge.target_id, start_id))
        for edge in non_chainable:
            transitive.append(edge)
        names = [self.chained_names[e.target_id] for e in chainable]
        if not names:
            self.chained_names[current_id] = node.name
        elif len(names) == 1:
            self.chained_names[current_id] = f"{node.name} -> {names[0]}"
        else:
            self.chained_names[current_id] = f"{node.name} -> ({', '.join(names)})"
        if current_id == start_id:
            self.built.add(start_id)
            self.chain_outputs[start_id] = transitive
            for target_id in non_chainable_targets(transitive):
                self.create_chain(target_id, target_id)
        return transitive

    def build(self) -> JobGraph:
        for source_id in sorted(self.graph.source_ids):
            self.create_chain(source_id, source_id)
        vertices: dict[int, JobVertex] = {}
        for head_id, members in self.chains.items():
            head = self.graph.node(head_id)
            ops = [
                ChainedOperator(
                    id=self.ids[nid],
                    node_id=nid,
                    name=self.graph.node(nid).name,
                    uid=self.graph.node(nid).uid,
                    max_parallelism=self.graph.node(nid).max_parallelism,
                    chain_index=i,
                )
                for i, nid in enumerate(members)
            ]
            vertices[head_id] = JobVertex(
                id=self.ids[head_id],
                name=self.chained_names[head_id],
                parallelism=head.parallelism,
                max_parallelism=head.max_parallelism,
                slot_sharing_group=head.slot_sharing_group,
                operators=ops,
                chained_node_ids=list(members),
                is_source=head.is_source,
            )
        node_to_head = {nid: head for head, members in self.chains.items() for nid in members}
        for head_id, out_edges in self.chain_outputs.items():
            producer = vertices[head_id]
            for edge in out_edges:
                if self.graph.is_batch or edge.exchange_mode is ExchangeMode.BATCH:
                    result_type = ResultPartitionType.BLOCKING
                else:
                    result_type = ResultPartitionType.PIPELINED_BOUNDED
                ds_id = _digest(
                    f"{producer.id}/{self.ids[edge.source_id]}/{self.ids[edge.target_id]}/{len(producer.produced_data_sets)}".encode()
                ).hex()
                data_set = IntermediateDataSet(ds_id, producer, result_type)
                consumer = vertices[node_to_head[edge.target_id]]
                job_edge = JobEdge(data_set, consumer, edge.partitioner, edge)
                data_set.consumers.append(job_edge)
                producer.produced_data_sets.append(data_set)
                consumer.inputs.append(job_edge)
        return JobGraph(
            job_name=self.graph.job_name,
            stream_graph=self.graph,
            vertices=_topological(list(vertices.values())),
            operator_ids=dict(self.ids),
        )


def non_chainable_targets(edges: list[StreamEdge]) -> list[int]:
    return [e.target_id for e in edges]


def _topological(vertices: list[JobVertex]) -> list[JobVertex]:
    """Kahn's order; ties broken by the head's stream node id so plans read source-first."""
    indegree = {v.id: len({e.producer.id for e in v.inputs}) for v in vertices}
    ready = sorted((v for v in vertices if indegree[v.id] == 0), key=lambda v: v.chained_node_ids[0])
    order: list[JobVertex] = []
    while ready:
        v = ready.pop(0)
        order.append(v)
        for consumer in {e.target.id: e.target for e in v.outputs}.values():
            indegree[consumer.id] -= 1
            if indegree[consumer.id] == 0:
                ready.append(consumer)
                ready.sort(key=lambda x: x.chained_node_ids[0])
    return order


def generate_job_graph(graph: StreamGraph) -> JobGraph:
    """Compile a StreamGraph into a JobGraph (pure)."""
    return _Builder(graph).build()


def _flush_urgency(timeout_ms: int) -> float:
    """How soon a buffer timeout flushes: 0 (every record) first, -1 (only when full) last."""
    return float("inf") if timeout_ms < 0 else float(timeout_ms)


def vertex_buffer_timeout_ms(job_graph: JobGraph, vertex: JobVertex, default_ms: int) -> int:
    """The buffer timeout of ``vertex``'s output partitions: that of the chained operators
    whose records leave the vertex (``DataStream.set_buffer_timeout``, else ``default_ms``,
    the job's). A task flushes all its partitions on one timer, so when those operators ask
    for different timeouts the one that flushes soonest wins."""
    members = set(vertex.chained_node_ids)
    timeouts = []
    for node_id in vertex.chained_node_ids:
        node = job_graph.stream_graph.nodes[node_id]
        if any(e.target_id not in members for e in node.out_edges):
            own = node.transformation.buffer_timeout_ms
            timeouts.append(default_ms if own is None else own)
    return min(timeouts, key=_flush_urgency) if timeouts else default_ms

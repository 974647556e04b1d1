"""StreamGraph: the job as written, one StreamNode per physical transformation.

``generate_stream_graph`` walks the environment's transformations the way Flink's
StreamGraphGenerator does: physical transformations (source, one- and two-input
operators, sink) become StreamNodes (a two-input node's edges carry ``type_number`` 1 or
2, the input they feed); partitioning, union and side-output transformations are virtual and
only decide the partitioner, the inputs and the side-output tag of the StreamEdges.

Rules applied here, as in Flink:
- an edge with no partitioner is FORWARD when both ends have the same parallelism and
  REBALANCE otherwise; an explicit FORWARD between different parallelisms is an error;
- when several partitioning calls stack up, the one closest to the consumer wins;
- an operator without a slot sharing group inherits its inputs' group when they all
  agree, and is in "default" otherwise;
- max parallelism is the operator's, else the environment's, else derived from the
  operator's parallelism (``default_max_parallelism``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from weir.common import config_options as opts
from weir.common.configuration import Configuration
from weir.common.typeinfo import TypeInformation
from weir.errors import UsageError
from weir.graph import partitioners as parts
from weir.graph.transformations import (
    LOWER_BOUND_MAX_PARALLELISM,
    UPPER_BOUND_MAX_PARALLELISM,
    ChainingStrategy,
    ExchangeMode,
    OneInputTransformation,
    OperatorSpec,
    PartitionTransformation,
    SideOutputTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    TwoInputTransformation,
    UnionTransformation,
)


class PipelineSource(Protocol):
    """What the StreamGraph generator reads of the program that built the transformations
    (the environment of ``weir.datastream``; the graph does not import the API)."""

    def get_configuration(self) -> Configuration: ...

    def get_parallelism(self) -> int: ...

    def get_max_parallelism(self) -> int: ...

    def get_runtime_mode(self) -> Any: ...

    def is_chaining_enabled(self) -> bool: ...

    def is_chaining_of_operators_with_different_max_parallelism_enabled(self) -> bool: ...

    def get_transformations(self) -> list[Transformation]: ...


DEFAULT_SLOT_SHARING_GROUP = "default"


def default_max_parallelism(parallelism: int) -> int:
    """Flink's rule: parallelism × 1.5 rounded up to a power of two, clamped to 128..32768."""
    target = parallelism + parallelism // 2
    power = 1
    while power < target:
        power <<= 1
    return min(max(power, LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)


@dataclass(eq=False)
class StreamNode:
    id: int
    name: str
    kind: str  # source | operator | sink
    transformation: Transformation
    parallelism: int
    max_parallelism: int
    slot_sharing_group: str
    chaining_strategy: ChainingStrategy
    uid: str | None
    uid_hash: str | None
    output_type: TypeInformation | None
    description: str
    in_edges: list[StreamEdge] = field(default_factory=list)
    out_edges: list[StreamEdge] = field(default_factory=list)

    @property
    def operator(self) -> OperatorSpec | None:
        t = self.transformation
        return t.operator if isinstance(t, (OneInputTransformation, TwoInputTransformation)) else None

    @property
    def state_key_selector(self) -> Any:
        """The key selector of the (first) input when the operator is keyed, else None."""
        t = self.transformation
        if isinstance(t, TwoInputTransformation):
            return t.state_key_selector1
        return t.state_key_selector if isinstance(t, OneInputTransformation) else None

    @property
    def state_key_selector2(self) -> Any:
        """The key selector of input 2 of a keyed two-input operator, else None."""
        t = self.transformation
        return t.state_key_selector2 if isinstance(t, TwoInputTransformation) else None

    @property
    def is_two_input(self) -> bool:
        return isinstance(self.transformation, TwoInputTransformation)

    @property
    def is_source(self) -> bool:
        return self.kind == "source"

    @property
    def is_sink(self) -> bool:
        return self.kind == "sink"

    def __repr__(self) -> str:
        return f"StreamNode({self.id}, {self.name!r}, p={self.parallelism})"


@dataclass(eq=False)
class StreamEdge:
    source_id: int
    target_id: int
    partitioner: parts.Partitioner
    exchange_mode: ExchangeMode = ExchangeMode.UNDEFINED
    side_output_tag: Any = None
    type_number: int = 0  # which input of the target (0 for one-input operators)

    def __repr__(self) -> str:
        tag = f", side={self.side_output_tag.tag_id}" if self.side_output_tag is not None else ""
        return f"StreamEdge({self.source_id} -{self.partitioner}-> {self.target_id}{tag})"


@dataclass(eq=False)
class StreamGraph:
    job_name: str
    configuration: Configuration
    runtime_mode: str  # STREAMING | BATCH (AUTOMATIC is resolved)
    chaining_enabled: bool
    chain_different_max_parallelism: bool
    nodes: dict[int, StreamNode] = field(default_factory=dict)
    edges: list[StreamEdge] = field(default_factory=list)

    @property
    def source_ids(self) -> list[int]:
        return [n.id for n in self.nodes.values() if n.is_source]

    @property
    def sink_ids(self) -> list[int]:
        return [n.id for n in self.nodes.values() if n.is_sink]

    def node(self, node_id: int) -> StreamNode:
        return self.nodes[node_id]

    def source_of(self, edge: StreamEdge) -> StreamNode:
        return self.nodes[edge.source_id]

    def target_of(self, edge: StreamEdge) -> StreamNode:
        return self.nodes[edge.target_id]

    @property
    def is_batch(self) -> bool:
        return self.runtime_mode == "BATCH"


@dataclass(frozen=True)
class _Handle:
    """An upstream end as seen through virtual transformations."""

    node_id: int
    partitioner: parts.Partitioner | None = None
    exchange_mode: ExchangeMode = ExchangeMode.UNDEFINED
    side_output_tag: Any = None


class _Generator:
    def __init__(self, env: PipelineSource, job_name: str) -> None:
        conf = env.get_configuration()
        self.default_parallelism = env.get_parallelism()
        self.env_max_parallelism = env.get_max_parallelism()
        mode = env.get_runtime_mode().name
        self.graph = StreamGraph(
            job_name=job_name,
            configuration=Configuration(conf),
            runtime_mode=mode,
            chaining_enabled=env.is_chaining_enabled(),
            chain_different_max_parallelism=env.is_chaining_of_operators_with_different_max_parallelism_enabled(),
        )
        self.done: dict[int, list[_Handle]] = {}
        self.uids: dict[str, StreamNode] = {}

    # -- walking -------------------------------------------------------------------------------
    def transform(self, t: Transformation) -> list[_Handle]:
        if t.id in self.done:
            return self.done[t.id]
        if isinstance(t, SourceTransformation):
            handles = [_Handle(self._add_node(t, "source", []).id)]
        elif isinstance(t, (OneInputTransformation, SinkTransformation)):
            inputs = self.transform(t.inputs[0])
            kind = "sink" if isinstance(t, SinkTransformation) else "operator"
            handles = [_Handle(self._add_node(t, kind, inputs).id)]
        elif isinstance(t, TwoInputTransformation):
            inputs1 = self.transform(t.inputs[0])
            inputs2 = self.transform(t.inputs[1])
            numbers = [1] * len(inputs1) + [2] * len(inputs2)
            handles = [_Handle(self._add_node(t, "operator", inputs1 + inputs2, numbers).id)]
        elif isinstance(t, PartitionTransformation):
            handles = [
                _Handle(h.node_id, t.partitioner, t.exchange_mode, h.side_output_tag)
                for h in self.transform(t.inputs[0])
            ]
        elif isinstance(t, UnionTransformation):
            handles = [h for i in t.inputs for h in self.transform(i)]
        elif isinstance(t, SideOutputTransformation):
            handles = [
                _Handle(h.node_id, h.partitioner, h.exchange_mode, t.tag) for h in self.transform(t.inputs[0])
            ]
        else:  # pragma: no cover - every transformation class is handled above
            raise UsageError(f"unknown transformation {type(t).__name__}")
        self.done[t.id] = handles
        return handles

    def _add_node(
        self, t: Transformation, kind: str, inputs: list[_Handle], type_numbers: list[int] | None = None
    ) -> StreamNode:
        """``type_numbers``: which input of a two-input node each handle feeds (1 or 2)."""
        parallelism = t.parallelism if t.parallelism is not None else self.default_parallelism
        if t.parallelism_fixed:
            parallelism = 1
        if t.max_parallelism is not None:
            max_parallelism = t.max_parallelism
        elif self.env_max_parallelism != -1:
            max_parallelism = self.env_max_parallelism
        else:
            max_parallelism = default_max_parallelism(parallelism)
        prefix = {"source": "Source: ", "sink": "Sink: "}.get(kind, "")
        name = prefix + t.name
        if parallelism > max_parallelism:
            raise UsageError(
                f"parallelism {parallelism} exceeds max_parallelism {max_parallelism} for operator '{name}'"
            )
        node = StreamNode(
            id=t.id,
            name=name,
            kind=kind,
            transformation=t,
            parallelism=parallelism,
            max_parallelism=max_parallelism,
            slot_sharing_group=self._slot_sharing_group(t, inputs),
            chaining_strategy=t.chaining_strategy,
            uid=t.uid,
            uid_hash=t.uid_hash,
            output_type=t.output_type,
            description=t.description or name,
        )
        if t.uid is not None:
            other = self.uids.get(t.uid)
            if other is not None:
                raise UsageError(
                    f"uid '{t.uid}' is used by both '{other.name}' (node {other.id}) and '{name}' (node {t.id}); "
                    f"every uid must be unique within a job"
                )
            self.uids[t.uid] = node
        self.graph.nodes[node.id] = node
        for h, number in zip(inputs, type_numbers or [0] * len(inputs)):
            self._add_edge(h, node, number)
        return node

    def _slot_sharing_group(self, t: Transformation, inputs: list[_Handle]) -> str:
        if t.slot_sharing_group is not None:
            return t.slot_sharing_group
        groups = {self.graph.nodes[h.node_id].slot_sharing_group for h in inputs}
        return groups.pop() if len(groups) == 1 else DEFAULT_SLOT_SHARING_GROUP

    def _add_edge(self, handle: _Handle, target: StreamNode, type_number: int = 0) -> None:
        source = self.graph.nodes[handle.node_id]
        partitioner = handle.partitioner
        if partitioner is None:
            partitioner = parts.FORWARD if source.parallelism == target.parallelism else parts.REBALANCE
        elif partitioner.is_forward and source.parallelism != target.parallelism:
            raise UsageError(
                f"forward partitioning does not allow a change of parallelism: upstream '{source.name}' "
                f"has parallelism {source.parallelism}, downstream '{target.name}' has {target.parallelism}; "
                f"use rebalance(), rescale(), shuffle(), broadcast() or key_by() instead"
            )
        op = target.operator
        broadcast_input = type_number == 2 and op is not None and op.options.get("broadcast_input2", False)
        if op is not None and op.keyed and partitioner.name != "HASH" and not broadcast_input:
            which = f"input {type_number} of " if type_number else ""
            raise UsageError(
                f"{which}operator '{target.name}' needs a keyed input: call key_by(...) before it"
            )
        edge = StreamEdge(
            source_id=source.id,
            target_id=target.id,
            partitioner=partitioner,
            exchange_mode=handle.exchange_mode,
            side_output_tag=handle.side_output_tag,
            type_number=type_number,
        )
        self.graph.edges.append(edge)
        source.out_edges.append(edge)
        target.in_edges.append(edge)

    # -- finishing -----------------------------------------------------------------------------
    def resolve_runtime_mode(self) -> None:
        sources = [n for n in self.graph.nodes.values() if n.is_source]
        unbounded = [
            n
            for n in sources
            if isinstance(n.transformation, SourceTransformation) and not n.transformation.bounded
        ]
        if self.graph.runtime_mode == "AUTOMATIC":
            self.graph.runtime_mode = "STREAMING" if unbounded else "BATCH"
        elif self.graph.runtime_mode == "BATCH" and unbounded:
            raise UsageError(
                f"source '{unbounded[0].name}' is unbounded, which execution.runtime-mode BATCH does not allow; "
                f"use STREAMING or AUTOMATIC"
            )


def generate_stream_graph(env: PipelineSource, job_name: str | None = None) -> StreamGraph:
    """Compile the environment's transformations into a StreamGraph (pure)."""
    transformations = env.get_transformations()
    if not transformations:
        raise UsageError(
            "the job has no operators: add at least one operator or sink (e.g. .print() or .sink_to(...)) "
            "before execute()"
        )
    name = job_name or env.get_configuration().get_option(opts.PIPELINE_NAME) or "weir Streaming Job"
    gen = _Generator(env, str(name))
    for t in transformations:
        gen.transform(t)
    gen.resolve_runtime_mode()
    return gen.graph

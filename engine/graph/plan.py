"""Plans a person reads: each graph level as JSON, text and Graphviz DOT.

JSON schemas (documented in docs/plan-format.md):

- stream level mirrors Flink's execution-plan JSON: ``{"nodes": [{"id", "type", "pact",
  "contents", "parallelism", "predecessors": [{"id", "ship_strategy", "side"}]}]}`` plus
  weir's ``max_parallelism``, ``slot_sharing_group``, ``uid`` and ``operator_id``;
- job level: ``{"job_name", "vertices": [{"id", "name", "parallelism", "max_parallelism",
  "slot_sharing_group", "operators": [{"id", "name", "uid", "execution"}]}], "edges": [{"source",
  "target", "partitioner", "result_partition_type", "distribution_pattern"}]}``;
- execution level: ``{"job_id", "job_name", "slots_used", "slots_offered", "subtasks":
  [{"vertex_id", "vertex", "subtask", "execution_vertex", "attempt", "state", "slot",
  "taskmanager", "input_channels", "subpartitions"}]}``.
"""

from __future__ import annotations

from typing import Any

from weir.graph.job_graph import JobGraph, generate_job_graph
from weir.graph.stream_graph import StreamGraph

_PACT = {"source": "Data Source", "sink": "Data Sink", "operator": "Operator"}


def _present(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` without its absent (None) fields: Flink's plan JSON leaves them out."""
    return {k: v for k, v in entry.items() if v is not None}


def stream_graph_to_json(graph: StreamGraph, notes: dict[int, str] | None = None) -> dict[str, Any]:
    ids = generate_job_graph(graph).operator_ids
    nodes = []
    for node in graph.nodes.values():
        entry: dict[str, Any] = {
            "id": node.id,
            "type": node.name,
            "pact": _PACT[node.kind],
            "contents": node.description,
            "parallelism": node.parallelism,
            "max_parallelism": node.max_parallelism,
            "slot_sharing_group": node.slot_sharing_group,
            "uid": node.uid,
            "operator_id": ids[node.id],
        }
        entry = _present(entry)
        if notes and node.id in notes:
            entry["execution"] = notes[node.id]
        if node.in_edges:
            entry["predecessors"] = [
                {
                    "id": e.source_id,
                    "ship_strategy": str(e.partitioner),
                    "side": "second",
                    **({"side_output": e.side_output_tag.tag_id} if e.side_output_tag is not None else {}),
                }
                for e in node.in_edges
            ]
        nodes.append(entry)
    return {"job_name": graph.job_name, "runtime_mode": graph.runtime_mode, "nodes": nodes}


def job_graph_to_json(job: JobGraph, notes: dict[int, str] | None = None) -> dict[str, Any]:
    return {
        "job_name": job.job_name,
        "runtime_mode": job.stream_graph.runtime_mode,
        "vertices": [
            {
                "id": v.id,
                "name": v.name,
                "parallelism": v.parallelism,
                "max_parallelism": v.max_parallelism,
                "slot_sharing_group": v.slot_sharing_group,
                "operators": [
                    _present({"id": op.id, "name": op.name, "uid": op.uid})
                    | ({"execution": notes[op.node_id]} if notes and op.node_id in notes else {})
                    for op in v.operators
                ],
            }
            for v in job.vertices
        ],
        "edges": [
            {
                "source": e.producer.id,
                "target": e.target.id,
                "partitioner": str(e.partitioner),
                "result_partition_type": e.result_partition_type.value,
                "distribution_pattern": e.distribution_pattern.value,
            }
            for e in job.edges
        ],
    }


def stream_graph_to_text(graph: StreamGraph, notes: dict[int, str] | None = None) -> str:
    lines = [f"StreamGraph '{graph.job_name}' ({graph.runtime_mode}), {len(graph.nodes)} nodes"]
    for node in graph.nodes.values():
        lines.append(
            f"  [{node.id}] {node.name}  parallelism={node.parallelism} max_parallelism={node.max_parallelism} "
            f"group={node.slot_sharing_group}" + (f" uid={node.uid}" if node.uid else "")
        )
        if notes and node.id in notes:
            lines.append(f"      {notes[node.id]}")
        for e in node.in_edges:
            side = f" (side output '{e.side_output_tag.tag_id}')" if e.side_output_tag is not None else ""
            lines.append(f"      <- [{e.source_id}] {e.partitioner}{side}")
    return "\n".join(lines)


def job_graph_to_text(job: JobGraph, notes: dict[int, str] | None = None) -> str:
    lines = [f"JobGraph '{job.job_name}' ({job.stream_graph.runtime_mode}), {len(job.vertices)} vertices"]
    for v in job.vertices:
        lines.append(
            f"  {v.name}  parallelism={v.parallelism} max_parallelism={v.max_parallelism} "
            f"group={v.slot_sharing_group} id={v.id[:8]}"
        )
        for op in v.operators:
            lines.append(f"      op {op.id[:8]} {op.name}" + (f" (uid {op.uid})" if op.uid else ""))
            if notes and op.node_id in notes:
                lines.append(f"         {notes[op.node_id]}")
        for e in v.inputs:
            lines.append(
                f"      <- {e.producer.name}  {e.partitioner} {e.distribution_pattern.value} {e.result_partition_type.value}"
            )
    return "\n".join(lines)


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def stream_graph_to_dot(graph: StreamGraph) -> str:
    lines = [f'digraph "{_dot_escape(graph.job_name)}" {{', "  rankdir=LR;", "  node [shape=box];"]
    for node in graph.nodes.values():
        label = f"{_dot_escape(node.name)}\\nparallelism {node.parallelism}"
        lines.append(f'  n{node.id} [label="{label}"];')
    for e in graph.edges:
        lines.append(f'  n{e.source_id} -> n{e.target_id} [label="{e.partitioner}"];')
    lines.append("}")
    return "\n".join(lines)


def job_graph_to_dot(job: JobGraph) -> str:
    lines = [f'digraph "{_dot_escape(job.job_name)}" {{', "  rankdir=LR;", "  node [shape=box];"]
    index = {v.id: i for i, v in enumerate(job.vertices)}
    for v in job.vertices:
        label = (
            f"{_dot_escape(v.name)}\\nparallelism {v.parallelism}, group {_dot_escape(v.slot_sharing_group)}"
        )
        lines.append(f'  v{index[v.id]} [label="{label}"];')
    for e in job.edges:
        style = "dashed" if e.result_partition_type.is_blocking else "solid"
        lines.append(
            f"  v{index[e.producer.id]} -> v{index[e.target.id]} "
            f'[label="{e.partitioner} {e.result_partition_type.value}", style={style}];'
        )
    lines.append("}")
    return "\n".join(lines)

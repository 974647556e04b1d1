"""The execution level of ``weir plan``: every subtask, its slot and its TaskManager.

Without ``--slots`` the cluster gets as many slots per TaskManager as the job needs
spread over the TaskManagers (weir's embedded default: enough slots for the job).
"""

from __future__ import annotations

import json
from typing import Any

from weir.graph.execution_graph import ExecutionGraph, build_execution_graph
from weir.graph.job_graph import generate_job_graph
from weir.graph.slots import SlotPlan, plan_slots, required_slots
from weir.graph.stream_graph import StreamGraph


def default_slots_per_taskmanager(execution_graph: ExecutionGraph, taskmanagers: int) -> int:
    needed = sum(required_slots(execution_graph).values())
    return max(1, -(-needed // taskmanagers))


def build_plan(
    stream_graph: StreamGraph, taskmanagers: int, slots: int | None
) -> tuple[ExecutionGraph, SlotPlan]:
    eg = build_execution_graph(generate_job_graph(stream_graph))
    per_tm = slots if slots is not None else default_slots_per_taskmanager(eg, taskmanagers)
    return eg, plan_slots(eg, taskmanagers, per_tm)


def execution_plan_to_json(eg: ExecutionGraph, plan: SlotPlan, taskmanagers: int) -> dict[str, Any]:
    subtasks = []
    for ejv in eg.job_vertices:
        for ev in ejv.task_vertices:
            slot = plan.slot_of(ev)
            subtasks.append(
                {
                    "vertex_id": ejv.id,
                    "vertex": ejv.name,
                    "subtask": ev.subtask_index,
                    "execution_vertex": ev.task_name_with_subtask,
                    "attempt": ev.current_execution.attempt_number,
                    "state": ev.current_execution.state.name,
                    "taskmanager": slot.taskmanager,
                    "slot": slot.index,
                    "input_channels": [ev.num_input_channels(g) for g in range(ev.num_input_gates)],
                    "subpartitions": [p.num_subpartitions for p in ev.produced_partitions],
                }
            )
    return {
        "job_id": eg.job_id,
        "job_name": eg.job_name,
        "taskmanagers": taskmanagers,
        "slots_per_taskmanager": plan.slots_offered // taskmanagers,
        "slots_used": plan.slots_used,
        "slots_offered": plan.slots_offered,
        "regions": len(eg.regions),
        "subtasks": subtasks,
    }


def execution_plan_to_text(eg: ExecutionGraph, plan: SlotPlan) -> str:
    lines = [
        f"ExecutionGraph '{eg.job_name}' job {eg.job_id[:8]}: {sum(len(j.task_vertices) for j in eg.job_vertices)} subtasks "
        f"in {plan.slots_used} of {plan.slots_offered} slots, {len(eg.regions)} pipelined region(s)"
    ]
    for slot in plan.slots:
        lines.append(f"  TaskManager {slot.taskmanager} slot {slot.index} ({slot.slot_sharing_group}):")
        for ev in slot.subtasks:
            gates = ", ".join(f"gate {g}: {ev.num_input_channels(g)} ch" for g in range(ev.num_input_gates))
            outs = ", ".join(f"{p.num_subpartitions} subpartitions" for p in ev.produced_partitions)
            detail = "; ".join(x for x in (gates, outs) if x)
            lines.append(f"      {ev.task_name_with_subtask}" + (f"  [{detail}]" if detail else ""))
    for loc in plan.channel_locality(eg):
        lines.append(f"  {loc}")
    return "\n".join(lines)


def execution_plan_to_dot(eg: ExecutionGraph, plan: SlotPlan) -> str:
    lines = [f'digraph "{eg.job_name}" {{', "  rankdir=LR;", "  node [shape=box];"]
    for tm in sorted({s.taskmanager for s in plan.slots}):
        lines.append(f'  subgraph cluster_tm{tm} {{ label="TaskManager {tm}";')
        for slot in plan.slots_on(tm):
            for ev in slot.subtasks:
                label = ev.task_name_with_subtask.replace('"', '\\"')
                lines.append(f'    "{ev.id}" [label="{label}\\nslot {slot.index}"];')
        lines.append("  }")
    for ejv in eg.job_vertices:
        for ev in ejv.task_vertices:
            for p in ev.produced_partitions:
                for consumer in p.consumers:
                    style = "solid" if plan.is_local(ev, consumer) else "dashed"
                    lines.append(f'  "{ev.id}" -> "{consumer.id}" [style={style}];')
    lines.append("}")
    return "\n".join(lines)


def render(stream_graph: StreamGraph, fmt: str, taskmanagers: int, slots: int | None) -> str:
    eg, plan = build_plan(stream_graph, taskmanagers, slots)
    if fmt == "json":
        return json.dumps(execution_plan_to_json(eg, plan, taskmanagers), indent=2)
    if fmt == "dot":
        return execution_plan_to_dot(eg, plan)
    return execution_plan_to_text(eg, plan)

"""The window operator family: one keyed window, three strategies, the same answers.

A keyed window runs on one of three strategies, chosen once when the operator is created
(``create_window_operator``); all give the same records in the same order and leave the
same state in a checkpoint, so a checkpoint of any of them restores into any other:

- ``vector`` (``VectorWindowOperator``): the built-ins ``sum``/``min``/``max``/``count``/
  ``mean`` over tumbling or sliding windows, on whole batches as columns through the numba
  ``kernels`` beside it (eligibility: ``vector_plan``);
- ``fast`` (``WindowOperator`` with ``fast``): other ``reduce``/``aggregate`` over tumbling
  or sliding windows with the default trigger, accumulators in Python dicts;
- ``per_record`` (``WindowOperator``): everything else, Flink's WindowOperator record by
  record with keyed state, timers, triggers, evictors and session merging.

``shared`` holds what they must not do differently: event times and the missing-timestamp
error, late records, driving by watermark and processing-time clock, writing panes into
and restoring them from the canonical checkpoint form, and the key-selector probe.
"""

from __future__ import annotations

from weir.graph.stream_graph import StreamNode
from weir.operators.base import StreamOperator
from weir.operators.window.per_record import WindowOperator
from weir.operators.window.vector import VectorPlan, VectorWindowOperator, vector_plan

__all__ = ["VectorPlan", "VectorWindowOperator", "WindowOperator", "create_window_operator", "vector_plan"]


def create_window_operator(node: StreamNode) -> StreamOperator:
    """The vectorized operator for an eligible built-in (``vector_plan``), else the
    per-record WindowOperator (which picks its fast mode itself)."""
    from weir.operators.factory import own_copy

    spec = node.operator
    assert spec is not None
    o = spec.options
    builtin = o.get("builtin")
    if builtin is not None:
        plan = vector_plan(
            builtin["aggregation"],
            builtin["field"],
            builtin["input_type"],
            o["assigner"],
            o["trigger"],
            o.get("allowed_lateness_ms", 0),
            o.get("evictor_count"),
        )
        if plan is not None:
            return VectorWindowOperator(
                node.name,
                node.state_key_selector,
                o["assigner"],
                plan,
                builtin["input_type"],
                o.get("late_data_tag"),
            )
    return WindowOperator(
        node.name,
        node.state_key_selector,
        o["assigner"],
        o["trigger"],
        o.get("allowed_lateness_ms", 0),
        o.get("late_data_tag"),
        o["function_kind"],
        spec.function,
        own_copy(node, o.get("window_function")),
        o.get("evictor_count"),
    )

"""The window operator family: one keyed window, three strategies, the same answers.

A keyed window runs on one of three strategies, chosen once when the operator is created
(``create_window_operator``); all give the same records in the same order and leave the
same state in a checkpoint, so a checkpoint of any of them restores into any other:

- ``vector`` (``VectorWindowOperator``): the built-ins ``sum``/``min``/``max``/``count``/
  ``mean`` over tumbling or sliding windows, on whole batches as columns through the numba
  ``kernels`` beside it (eligibility: ``vector_plan``); ``AggregatesWindowOperator``
  (``aggregates``) runs ``weir.columnar.Aggregates`` the same way, allowed lateness
  included (eligibility: ``aggregates_plan``);
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
from weir.operators.window.aggregates import AggregatesWindowOperator, aggregates_plan
from weir.operators.window.per_record import WindowOperator
from weir.operators.window.vector import VectorPlan, VectorWindowOperator, vector_plan

__all__ = [
    "AggregatesWindowOperator",
    "VectorPlan",
    "VectorWindowOperator",
    "WindowOperator",
    "aggregates_plan",
    "create_window_operator",
    "explain",
    "vector_plan",
]


def explain(node: StreamNode) -> tuple[bool, str]:
    """Whether the window of ``node`` runs vectorized, and why (``"vectorized: ..."`` or
    ``"per-record: <why>"``); pure: builds nothing."""
    spec = node.operator
    assert spec is not None
    o = spec.options
    if o.get("evictor") is not None:
        return False, f"per-record: evictor {o['evictor'].describe()} needs every element of a window"
    columnar = o.get("columnar")
    if columnar is not None:
        plan, reason = aggregates_plan(columnar, o["assigner"], o["trigger"], o.get("evictor"))
        return plan is not None, reason
    builtin = o.get("builtin")
    if builtin is None:
        return False, f"per-record: a {o.get('function_kind', 'window')} function of the user's"
    plan_ = vector_plan(
        builtin["aggregation"], builtin["field"], builtin["input_type"], o["assigner"], o["trigger"],
        o.get("allowed_lateness_ms", 0), o.get("evictor"),
    )  # fmt: skip
    if plan_ is not None:
        return (
            True,
            f"vectorized: {builtin['aggregation']}({builtin['field']!r}) over {o['assigner'].describe()}",
        )
    return False, (
        f"per-record: {builtin['aggregation']}({builtin['field']!r}) is vectorized only over tumbling/sliding "
        f"windows with the default trigger, no allowed lateness or evictor, on a numeric field of a typed stream"
    )


def create_window_operator(node: StreamNode) -> StreamOperator:
    """The vectorized operator for an eligible built-in (``vector_plan``) or ``Aggregates``
    (``aggregates_plan``), else the per-record WindowOperator (which picks its fast mode
    itself). The operator's ``vectorized_reason`` says which and why (``explain``)."""
    from weir.operators.factory import own_copy

    spec = node.operator
    assert spec is not None
    o = spec.options
    vectorized, reason = explain(node)
    operator: StreamOperator
    columnar = o.get("columnar")
    builtin = o.get("builtin")
    if vectorized and columnar is not None:
        plan, _ = aggregates_plan(columnar, o["assigner"], o["trigger"], o.get("evictor"))
        assert plan is not None
        operator = AggregatesWindowOperator(
            node.name,
            node.state_key_selector,
            o["assigner"],
            plan,
            columnar.get("input_type"),
            o.get("late_data_tag"),
            own_copy(node, spec.function),
            o.get("allowed_lateness_ms", 0),
        )
    elif vectorized and builtin is not None:
        plan_ = vector_plan(
            builtin["aggregation"], builtin["field"], builtin["input_type"], o["assigner"], o["trigger"],
            o.get("allowed_lateness_ms", 0), o.get("evictor"),
        )  # fmt: skip
        assert plan_ is not None
        operator = VectorWindowOperator(
            node.name,
            node.state_key_selector,
            o["assigner"],
            plan_,
            builtin["input_type"],
            o.get("late_data_tag"),
        )
    else:
        operator = WindowOperator(
            node.name,
            node.state_key_selector,
            o["assigner"],
            o["trigger"],
            o.get("allowed_lateness_ms", 0),
            o.get("late_data_tag"),
            o["function_kind"],
            spec.function,
            own_copy(node, o.get("window_function")),
            own_copy(node, o.get("evictor")),
        )
    operator.vectorized_reason = reason
    return operator

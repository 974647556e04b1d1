"""Which operators of a job run vectorized (a call per batch over columns) and why the others
run record by record: what ``weir plan`` prints beside each operator.

Decided from the StreamGraph alone, by the same rules the operators apply when they are built
(``create_window_operator``, the factory's map and filter branches), so the plan says what the
job will do.
"""

from __future__ import annotations

from typing import Any

from weir.codec.batch import NO_TIMESTAMP
from weir.columnar.probe import IDENTITY, probe_key_field
from weir.graph.stream_graph import StreamGraph, StreamNode
from weir.graph.transformations import SinkTransformation, SourceTransformation

VECTORIZED = "vectorized"
PER_RECORD = "per-record"


def explain(node: StreamNode) -> tuple[bool, str]:
    """``(vectorized, reason)`` for one operator."""
    t = node.transformation
    if isinstance(t, SourceTransformation):
        return _source(t.source)
    if isinstance(t, SinkTransformation):
        return _sink(t.sink)
    spec = node.operator
    if spec is None:
        return False, "no operator"
    kind = spec.kind
    if kind in ("map", "filter"):
        if getattr(spec.function, "vectorized", False):
            return True, f"{spec.function!r}: one call per batch over its columns"
        return (
            False,
            f"a Python function per record (weir.columnar's batch_{kind}/scalar_{kind} run per batch)",
        )
    if kind == "timestamps_watermarks":
        strategy = spec.options.get("watermark_strategy")
        assigner = getattr(strategy, "timestamp_assigner", None)
        if assigner is None or hasattr(assigner, "timestamp_column"):
            return True, "timestamps read as a column" if assigner is not None else "no timestamp assigner"
        field = probe_key_field(_extract(assigner), None)
        if field is not None and field != IDENTITY:
            return True, f"the assigner returns field {field}: read as a column of columnar batches"
        return False, "a timestamp assigner per record (weir.columnar.timestamp_field(i) reads a column)"
    if kind == "window":
        from weir.operators.window import explain as explain_window

        return explain_window(node)
    if kind == "keyed_process" and "columnar" in spec.options:
        from weir.operators.running import explain as explain_running

        return explain_running(node)
    return False, f"{kind}: runs record by record"


def _extract(assigner: Any) -> Any:
    """The assigner as a function of the record alone."""
    from weir.common.watermark_strategy import _CallableTimestampAssigner

    extract = assigner._fn if type(assigner) is _CallableTimestampAssigner else assigner.extract_timestamp
    return lambda record: extract(record, NO_TIMESTAMP)


def _source(source: Any) -> tuple[bool, str]:
    if getattr(source, "produces_columns", False):
        return True, f"{type(source).__name__} emits columns"
    return False, f"{type(source).__name__} emits records"


def _sink(sink: Any) -> tuple[bool, str]:
    function = getattr(sink, "sink_function", None) or getattr(sink, "function", None)
    if type(sink).__name__ in ("DiscardingSink", "CollectSink") or hasattr(function, "invoke_batch"):
        return True, f"{type(sink).__name__} takes whole batches"
    if getattr(sink, "bulk_writer_factory", None) is not None:
        return True, "FileSink writes whole batches in a bulk format"
    return False, f"{type(sink).__name__} takes records"


def explain_graph(graph: StreamGraph) -> dict[int, str]:
    """A line per node: ``vectorized: <why>`` or ``per-record: <why>``."""
    from weir.operators.window import two_phase

    notes = {}
    for node in graph.nodes.values():
        vectorized, reason = explain(node)
        label = VECTORIZED if vectorized else PER_RECORD
        note = reason if reason.startswith(f"{label}: ") else f"{label}: {reason}"
        if vectorized and node.operator is not None and node.operator.options.get("columnar") is not None:
            why = two_phase.why_not(graph, node)
            note += (
                "; two-phase: partial rows per key and slice are combined before the shuffle"
                if why is None
                else f"; one phase: {why}"
            )
        notes[node.id] = note
    return notes

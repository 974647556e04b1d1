"""Two-phase window aggregation: partial aggregates before the shuffle.

Theory of operation
-------------------
Flink SQL splits a window aggregate into a local phase before the shuffle and a global one
after it (``table.optimizer.agg-phase-strategy``, default ``AUTO``). weir does the same for
the one window whose aggregates it knows: a ``weir.columnar.Aggregates`` window running
vectorized. The task that writes the window's keyed input folds each batch, before it is
partitioned, into one *partial row* per (key, slice): ``(key, count, int slots..., float
slots...)`` with the timestamp of the slice's first record (``kernels.local_aggregate``); the
window folds those rows in with the count as weight (``AggregatesWindowOperator``,
``partial_input``). A slice is ``slide`` ms aligned as the windows are, so every record of a
slice belongs to the same windows. At 100 keys a batch of 4,096 records becomes about 100
rows; at 10,000 keys nearly every record stays a row of its own, which costs one probe of a
small hash table per record.

The result is the one-phase result, row for row and in the same order:

- a partial row folds in as its records would: a sum adds, ``min``/``max`` keep the first
  extreme, ``first`` keeps and ``last`` replaces; the rows of a batch are in the order of
  their first records, so within a window panes are created in the same order;
- a record whose slice ends at or behind the writer's last watermark gets a row of its own:
  the window's watermark is never ahead of the last one this writer sent, so combined
  records are never late and never land in a window that fired (allowed lateness fires a
  window again per record);
- not eligible, so one phase: float sums and means (float addition is not associative, the
  sum would differ in the last bits), a late-data side output (it must get the records
  themselves), processing time (windows are assigned by the window task's clock), a key
  that is not an integer field read with ``weir.columnar.field(i)``, sliding windows whose
  size is not a multiple of the slide (a slice would not lie in one set of windows),
  ``last()`` or a float ``min``/``max`` over sliding windows (out-of-order records
  interleave a window's slices, so its last record, or the first of equal extremes such as
  ``0.0`` and ``-0.0``, need not be that of the slice folded last), and any input edge that
  is not ``key_by``. A batch with a NaN in a float ``min``/``max`` slot
  is written one row per record (NaN never replaces an extreme, so folding it ahead of the
  records before it could change the answer).

The partial rows are what travels on the edge (its serializer is built for them); state,
checkpoints and restores are the window's, unchanged, so a checkpoint restores into either
phase and into the per-record path. In-flight buffers of an unaligned checkpoint hold
partial rows: restore them with the same ``table.optimizer.agg-phase-strategy``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from weir.codec.batch import NO_TIMESTAMP, Batch, TupleColumns
from weir.columnar.functions import FieldKeySelector
from weir.common import config_options as opts
from weir.common.typeinfo import BasicTypeInfo, RowTypeInfo, TupleTypeInfo, TypeInformation, Types
from weir.core.window import SlidingEventTimeWindows, TumblingEventTimeWindows
from weir.graph.stream_graph import StreamEdge, StreamGraph, StreamNode
from weir.operators.window import kernels as wk
from weir.operators.window.aggregates import AggregatesPlan, aggregates_plan, slot_columns

__all__ = ["LocalAggregator", "PartialLayout", "edge_layout", "layout_for", "partial_keys", "why_not"]

_INT_KEYS = ("Byte", "Short", "Integer", "Long")


@dataclass(frozen=True)
class PartialLayout:
    """The partial rows of one two-phase window: the key's field and type, the slots' plan,
    and the window's slicing."""

    plan: AggregatesPlan
    key_field: int
    key_type: TypeInformation
    slide: int
    offset: int

    @property
    def mi(self) -> int:
        return len(self.plan.ops) - sum(self.plan.floats)

    @property
    def mf(self) -> int:
        return sum(self.plan.floats)

    @property
    def type_info(self) -> TypeInformation:
        """``(key, count, int slots..., float slots...)``: what the edge carries."""
        return Types.TUPLE(
            [self.key_type, Types.LONG()] + [Types.LONG()] * self.mi + [Types.DOUBLE()] * self.mf
        )

    def columns(self, values: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A batch of partial rows as the window's kernels take it: ``(int slots [n, mi],
        float slots [n, mf], counts)``."""
        cols = _columns_of(values, 2 + self.mi + self.mf)
        n = len(cols[0])
        mi, mf = self.mi, self.mf
        ivals = np.empty((n, mi), np.int64)
        fvals = np.empty((n, mf), np.float64)
        for j in range(mi):
            ivals[:, j] = cols[2 + j]
        for j in range(mf):
            fvals[:, j] = cols[2 + mi + j]
        return ivals, fvals, np.asarray(cols[1], np.int64)


def _columns_of(values: Any, width: int) -> list[Any]:
    """The columns of a batch of partial rows (a small batch arrives as tuples)."""
    if isinstance(values, TupleColumns):
        return list(values.columns)
    records = values if isinstance(values, list) else list(values)
    return [[r[j] for r in records] for j in range(width)]


def partial_keys(values: Any) -> np.ndarray:
    """Field 0 of a batch of partial rows, as int64."""
    if isinstance(values, TupleColumns):
        return np.asarray(values.columns[0]).astype(np.int64, copy=False)
    records = values if isinstance(values, list) else list(values)
    return np.fromiter((r[0] for r in records), np.int64, len(records))


def _strategy(graph: StreamGraph) -> str:
    return str(graph.configuration.get_option(opts.AGG_PHASE_STRATEGY))


def why_not(graph: StreamGraph, node: StreamNode) -> str | None:
    """None when the window of ``node`` aggregates in two phases, else why it does not."""
    _, reason = _decide(graph, node)
    return reason


def layout_for(graph: StreamGraph, node: StreamNode) -> PartialLayout | None:
    """The partial rows' layout when the window of ``node`` aggregates in two phases."""
    layout, _ = _decide(graph, node)
    return layout


def _decide(graph: StreamGraph, node: StreamNode) -> tuple[PartialLayout | None, str | None]:
    spec = node.operator
    if spec is None or spec.kind != "window" or spec.options.get("columnar") is None:
        return None, "not an Aggregates window"
    if _strategy(graph) == "ONE_PHASE":
        return None, "table.optimizer.agg-phase-strategy is ONE_PHASE"
    o = spec.options
    plan, reason = aggregates_plan(o["columnar"], o["assigner"], o["trigger"], o.get("evictor"))
    if plan is None:
        return None, reason
    assigner = o["assigner"]
    if not isinstance(assigner, TumblingEventTimeWindows | SlidingEventTimeWindows):
        return None, f"{assigner.describe()} is not an event-time window"
    size: int = assigner.size
    slide: int = getattr(assigner, "slide", size)
    if size % slide:
        return None, f"the window size {size} ms is not a multiple of its slide {slide} ms"
    if o.get("late_data_tag") is not None:
        return None, "a late-data side output needs the late records themselves"
    for op, is_float in zip(plan.ops, plan.floats):
        if is_float and op == wk.SUM:
            return None, "a float sum or mean (float addition is not associative)"
        if size != slide and (op == wk.LAST or (is_float and op in (wk.MIN, wk.MAX))):
            return None, (
                "last() or a float min/max over sliding windows (a window's slices interleave, so "
                "the last record, or the first of equal extremes such as 0.0 and -0.0, is not that of the last slice)"
            )
    selector = node.state_key_selector
    if not isinstance(selector, FieldKeySelector):
        return None, "the key is not weir.columnar.field(i)"
    input_type = o["columnar"].get("input_type")
    if not isinstance(input_type, TupleTypeInfo | RowTypeInfo):
        return None, "the input is not a TUPLE/ROW"
    types = input_type.get_field_types()
    if not -len(types) <= selector.index < len(types):
        return None, f"the key field {selector.index} does not exist"
    key_type = types[selector.index]
    if not isinstance(key_type, BasicTypeInfo) or key_type.name not in _INT_KEYS:
        return None, f"the key field is {key_type}, not an integer"
    if not node.in_edges or any(e.partitioner.name != "HASH" for e in node.in_edges):
        return None, "an input is not partitioned by key_by"
    offset: int = assigner.offset
    return PartialLayout(plan, selector.index % len(types), key_type, slide, offset), None


def edge_layout(graph: StreamGraph, edge: StreamEdge) -> PartialLayout | None:
    """The layout of the partial rows ``edge`` carries, or None (records)."""
    return layout_for(graph, graph.node(edge.target_id))


class LocalAggregator:
    """The local phase, at the writer of one edge into a two-phase window: holds partial rows
    across batches and hands them over (``flush``) before every watermark and event the writer
    sends (a checkpoint barrier, a watermark status, the end of the partition), when
    ``HOLD_ROWS`` rows are held, and after a batch that held a record behind the watermark
    (it may fire a window again downstream). The window can fire nothing before the next
    watermark, so holding adds no latency to its results; with ``hold`` False (a buffer
    timeout of 0) every batch is handed over at once."""

    HOLD_ROWS = 1 << 14

    def __init__(
        self,
        layout: PartialLayout,
        what: str,
        hold: bool = True,
        capacity: int = HOLD_ROWS,
        sampling: int | None = None,
        distinct_rate: float = 0.5,
    ) -> None:
        self.layout = layout
        self.what = what
        self.hold = hold
        #: adaptive (``table.exec.local-hash-agg.adaptive.*``): after ``sampling`` records, stop
        #: combining if they made more than ``distinct_rate`` rows a record; None: always combine
        self.sampling = sampling
        self.distinct_rate = distinct_rate
        self.sampled_records = 0
        self.sampled_rows = 0
        self.passing_through = False
        self.capacity = capacity
        self._passed: list[Batch] = []  # passing through: batches of rows of their own, held
        self._passed_rows = 0
        plan = layout.plan
        self._ops = (plan.iops, plan.fops)
        self._nan_checked = [j for j, op in enumerate(plan.fops.tolist()) if op in (wk.MIN, wk.MAX)]
        cap = capacity
        self._table = np.zeros(1 << (2 * cap - 1).bit_length(), np.int64)  # a power of two, at most half full
        self._key, self._slice, self._time, self._count = (np.empty(cap, np.int64) for _ in range(4))
        self._iacc = np.empty((cap, layout.mi), np.int64)
        self._facc = np.empty((cap, layout.mf), np.float64)
        self._state = np.zeros(3, np.int64)
        self._key_dtype: Any = np.dtype(np.int64)

    @property
    def held(self) -> int:
        return int(self._state[wk.HELD])

    def add(self, batch: Batch, watermark: int) -> list[Batch]:
        """Fold ``batch`` in (``watermark``: the last one the writer sent); the batches of
        partial rows to send now."""
        layout = self.layout
        values = batch.values
        n = len(batch)
        key_column = self._keys(values)
        if isinstance(key_column, np.ndarray):
            self._key_dtype = key_column.dtype
        keys = np.asarray(key_column, np.int64)
        ivals, fvals = slot_columns(layout.plan, values, n, self.what)
        times = batch.timestamps
        times = np.full(n, NO_TIMESTAMP, np.int64) if times is None else np.asarray(times, np.int64)
        if self.passing_through:
            self._passed.append(self._rows_of_their_own(keys, ivals, fvals, times))
            self._passed_rows += n
            slide, offset = layout.slide, layout.offset
            behind = times.min(initial=0) == NO_TIMESTAMP or bool(
                (times - (times - offset) % slide + (slide - 1) <= watermark).any()
            )
            if self.hold and self._passed_rows < self.capacity and not behind:
                return []  # held as combined rows are; a record behind the watermark goes at once
            flushed = self.flush()
            return [] if flushed is None else [flushed]
        made_before = self.held
        if times.min(initial=0) == NO_TIMESTAMP or (
            self._nan_checked and np.isnan(fvals[:, self._nan_checked]).any()
        ):
            watermark = np.iinfo(np.int64).max  # every record a row of its own
        out: list[Batch] = []
        iops, fops = self._ops
        state = self._state
        begin = 0
        while True:
            wk.local_aggregate(
                times, keys, ivals, fvals, iops, fops, layout.slide, layout.offset, watermark, begin,
                self._table, self._key, self._slice, self._time, self._count, self._iacc, self._facc, state,
            )  # fmt: skip
            begin = int(state[wk.HELD_STOP])
            if begin >= n:
                break
            made_before -= self.held
            out.append(self._take())  # every row taken: hand them over, go on
        if self.sampling is not None:
            self._sample(n, self.held - made_before)
        if not self.hold or state[wk.HELD_ALONE] or self.passing_through:
            flushed = self.flush()
            if flushed is not None:
                out.append(flushed)
        return out

    def _sample(self, records: int, rows: int) -> None:
        """Count a batch's records and the rows they made; once ``sampling`` records are
        counted, pass records through from then on if combining did not reduce them enough
        (Flink's adaptive local hash aggregation)."""
        self.sampled_records += records
        self.sampled_rows += rows
        if self.sampled_records >= self.sampling:  # type: ignore[operator]
            self.passing_through = self.sampled_rows > self.distinct_rate * self.sampled_records
            self.sampling = None

    def _rows_of_their_own(
        self, keys: np.ndarray, ivals: np.ndarray, fvals: np.ndarray, times: np.ndarray
    ) -> Batch:
        """Every record a partial row of its own (count 1), in record order."""
        layout = self.layout
        n = len(keys)
        columns: list[Any] = [keys.astype(self._key_dtype), np.ones(n, np.int64)]
        columns += [np.ascontiguousarray(ivals[:, j]) for j in range(layout.mi)]
        columns += [np.ascontiguousarray(fvals[:, j]) for j in range(layout.mf)]
        return Batch(TupleColumns(columns), times)

    def flush(self) -> Batch | None:
        """The held rows (None: none), in the order of their first records; none are held after."""
        if self._passed:
            passed, self._passed, self._passed_rows = self._passed, [], 0
            if len(passed) == 1:
                return passed[0]
            parts = [b.values.columns for b in passed if isinstance(b.values, TupleColumns)]
            columns = [np.concatenate([part[j] for part in parts]) for j in range(len(parts[0]))]
            times = np.concatenate([b.timestamps for b in passed if b.timestamps is not None])
            return Batch(TupleColumns(columns), times)
        return self._take() if self.held else None

    def _take(self) -> Batch:
        r = self.held
        layout = self.layout
        columns: list[Any] = [self._key[:r].astype(self._key_dtype), self._count[:r].copy()]
        columns += [self._iacc[:r, j].copy() for j in range(layout.mi)]
        columns += [self._facc[:r, j].copy() for j in range(layout.mf)]
        batch = Batch(TupleColumns(columns), self._time[:r].copy())
        self._table.fill(0)
        self._state[:] = 0
        return batch

    def _keys(self, values: Any) -> Any:
        field = self.layout.key_field
        if isinstance(values, TupleColumns):
            column = values.columns[field]
            if isinstance(column, np.ndarray) and column.dtype.kind == "i":
                return column
            return np.asarray(column, np.int64)
        records = values if isinstance(values, list) else list(values)
        return np.fromiter((r[field] for r in records), np.int64, len(records))

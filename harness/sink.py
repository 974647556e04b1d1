"""The latency sink: end-to-end latency and event-time lag of every record, per subtask.

Theory of operation: records reaching the sink end with ``intended_ns``, the time the
replay meant to emit the newest event they depend on (an event itself for record-level
queries; the latest contributing event for a window result). For a batch arriving at
``now`` the sink records ``now - intended_ns`` (µs) into a HdrHistogram, in one numpy
pass. Only records whose intended time is after the warm-up count; the others are
counted apart. Each subtask also keeps

- the event-time lag: ``now`` minus the moment the replay schedule reached the record's
  timestamp (window results carry the window's end), when the run has a rate;
- arrivals per 100 ms, and mean/max latency per 250 ms of intended time, so a report can
  show latency growing when the job cannot keep up;
- optionally the records themselves (without ``intended_ns``), to check correctness.

Collected records are committed like a two-phase-commit sink's: the records before
checkpoint ``n``'s barrier become output when ``n`` completes (or at the end of the
input); a restarted attempt commits what the checkpoint it restores had pre-committed (the
failure may have come between that checkpoint's completion and its notification), drops
the rest of what its predecessor had not committed, and replays it from the checkpoint.
So a job that fails over still has to produce exactly the expected answer. Latency
measurements are kept across attempts: replayed records are measured again, and their
latency shows what the recovery cost.

Subtask results live in the ``LatencySink`` object the job was built with (one process,
one Trio loop), keyed by subtask index, across restarts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from weir.codec.batch import NO_TIMESTAMP, Batch
from weir.common.typeinfo import Types
from weir.core.connectors import Sink
from weir.core.state import ListStateDescriptor
from weir.harness.latency import LatencyHistogram
from weir.harness.replay import ReplayRun, now_ns
from weir.operators.sinks import SinkOperator

_LAST = itemgetter(-1)  # a record's intended_ns

ARRIVAL_BUCKET_NS = 100_000_000
CHECKPOINT_STATE = "latency-sink-pre-committed"
TREND_BUCKET_NS = 250_000_000


@dataclass
class EventTimeMapping:
    """Where the replay schedule puts an event time: ``origin_ms`` is at schedule position 0
    and ``units_per_event_s`` schedule units pass per second of event time."""

    origin_ms: int
    units_per_event_s: float


@dataclass
class SinkSubtask:
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    lag: LatencyHistogram = field(default_factory=LatencyHistogram)
    records: int = 0
    warmup_records: int = 0
    first_arrival_ns: int | None = None
    last_arrival_ns: int = 0
    arrivals: dict[int, int] = field(default_factory=dict)  # 100 ms bucket -> records
    trend: dict[int, list[int]] = field(default_factory=dict)  # 250 ms bucket -> [count, sum_us, max_us]
    rows: list[tuple[Any, ...]] = field(default_factory=list)  # committed
    current_rows: list[tuple[Any, ...]] = field(default_factory=list)  # since the last barrier
    pending_rows: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)  # checkpoint id -> rows

    def commit(self, up_to: int | None) -> None:
        """Rows before barrier ``up_to`` (all rows when None) become part of the output."""
        for checkpoint_id in sorted(self.pending_rows):
            if up_to is None or checkpoint_id <= up_to:
                self.rows.extend(self.pending_rows.pop(checkpoint_id))
        if up_to is None:
            self.rows.extend(self.current_rows)
            self.current_rows = []


class LatencySink(Sink):
    """``sink_to(LatencySink(run))``: measures every record; ``collect=True`` also keeps them."""

    def __init__(
        self, run: ReplayRun, collect: bool = False, event_time: EventTimeMapping | None = None
    ) -> None:
        self.run = run
        self.collect = collect
        self.event_time = event_time
        self.subtasks: dict[int, SinkSubtask] = {}

    def default_name(self) -> str:
        return "Latency Sink"

    def describe(self) -> dict[str, Any]:
        return {"class": "LatencySink", "collect": self.collect}

    def create_operator(self, name: str) -> LatencySinkOperator:
        return LatencySinkOperator(name, self)

    # -- merged views --------------------------------------------------------------------------
    def latency(self) -> LatencyHistogram:
        return LatencyHistogram.merged(s.latency for s in self.subtasks.values())

    def lag(self) -> LatencyHistogram:
        return LatencyHistogram.merged(s.lag for s in self.subtasks.values())

    @property
    def records(self) -> int:
        return sum(s.records for s in self.subtasks.values())

    @property
    def last_arrival_ns(self) -> int:
        return max((s.last_arrival_ns for s in self.subtasks.values()), default=0)

    def commit_finished(self) -> None:
        """The job FINISHED: every row its last attempt received is part of the output (as
        Flink's two-phase-commit sinks commit on the job's final checkpoint)."""
        for subtask in self.subtasks.values():
            subtask.commit(None)

    def rows(self) -> list[tuple[Any, ...]]:
        return [row for s in self.subtasks.values() for row in s.rows]

    def trend(self) -> list[dict[str, float]]:
        """Mean and max latency (ms) per 250 ms of intended time after the warm-up, in order."""
        merged: dict[int, list[int]] = {}
        for s in self.subtasks.values():
            for bucket, (count, total, top) in s.trend.items():
                m = merged.setdefault(bucket, [0, 0, 0])
                m[0] += count
                m[1] += total
                m[2] = max(m[2], top)
        return [
            {"t_s": b * TREND_BUCKET_NS / 1e9, "mean_ms": total / count / 1000, "max_ms": top / 1000}
            for b, (count, total, top) in sorted(merged.items())
            if count
        ]

    def arrivals_per_s(self) -> list[float]:
        merged: dict[int, int] = {}
        for s in self.subtasks.values():
            for bucket, n in s.arrivals.items():
                merged[bucket] = merged.get(bucket, 0) + n
        if not merged:
            return []
        lo, hi = min(merged), max(merged)
        return [merged.get(b, 0) * 1e9 / ARRIVAL_BUCKET_NS for b in range(lo, hi + 1)]


class LatencySinkOperator(SinkOperator):
    """Per batch it only stamps the arrival time and keeps the arrays; every ``FLUSH_RECORDS``
    records (and at the end) one numpy pass records them, so a stream of small batches
    (low rates, short buffer timeouts) does not pay numpy's fixed cost per batch."""

    FLUSH_RECORDS = 8192

    def __init__(self, name: str, sink: LatencySink) -> None:
        super().__init__(name)
        self.sink = sink
        self._intended: list[np.ndarray] = []
        self._stamps: list[np.ndarray | None] = []
        self._arrivals: list[int] = []
        self._pending = 0

    def initialize_state(self) -> None:
        # the checkpoints this subtask pre-committed rows for, as in Flink's two-phase commit
        # sinks: a restored checkpoint's pending rows are committed on recovery, since the
        # failure may have come before its completion reached this subtask
        self._checkpoints = self.context.operator_state().get_list_state(
            ListStateDescriptor(CHECKPOINT_STATE, Types.LONG())
        )
        restored = list(self._checkpoints.get()) if self.context.is_restored else []
        self._restored_checkpoint: int | None = max(restored, default=None)

    def open(self) -> None:
        state = self.sink.subtasks.get(self.context.subtask_index)
        if state is None:
            state = self.sink.subtasks[self.context.subtask_index] = SinkSubtask()
        if self._restored_checkpoint is not None:
            state.commit(self._restored_checkpoint)  # part of the restored checkpoint: final
        state.current_rows = []  # a failed attempt's uncommitted output is gone
        state.pending_rows.clear()
        self.state = state

    def process_batch(self, batch: Batch) -> None:
        n = len(batch)
        if not n:
            return
        self.metrics.records_in += n
        now = now_ns()
        state = self.state
        columns = getattr(batch.values, "columns", None)
        if columns is not None and isinstance(columns[-1], np.ndarray):  # columns: no tuple is built
            intended = columns[-1].astype(np.int64, copy=False)
        else:
            intended = np.fromiter(map(_LAST, batch.as_list()), dtype=np.int64, count=n)
        if self.sink.collect:
            state.current_rows.extend(tuple(v[:-1]) for v in batch.as_list())
        state.records += n
        if state.first_arrival_ns is None:
            state.first_arrival_ns = now
        state.last_arrival_ns = now
        self._intended.append(intended)
        self._stamps.append(batch.timestamps)
        self._arrivals.append(now)
        self._pending += n
        if self._pending >= self.FLUSH_RECORDS:
            self.flush()

    def flush(self) -> None:
        """Record everything pending into the subtask's histograms and series."""
        if not self._pending:
            return
        intended_parts, stamp_parts, arrivals = self._intended, self._stamps, self._arrivals
        self._intended, self._stamps, self._arrivals, self._pending = [], [], [], 0
        state = self.state
        run = self.sink.run
        counts = np.fromiter((len(a) for a in intended_parts), dtype=np.int64, count=len(intended_parts))
        arrived_at = np.array(arrivals, dtype=np.int64)
        now = np.repeat(arrived_at, counts)
        intended = np.concatenate(intended_parts)
        anchor = run.anchor_ns if run.anchor_ns is not None else int(now[0])
        # one arrival time per batch: count the batches' records, not every record's copy of it
        arrived = state.arrivals
        buckets = (arrived_at - anchor) // ARRIVAL_BUCKET_NS
        for bucket, n in zip(buckets.tolist(), counts.tolist()):
            arrived[bucket] = arrived.get(bucket, 0) + n
        warm = run.warmup_end_ns
        measured = None
        if warm is not None:
            measured = intended >= warm
            kept = int(measured.sum())
            state.warmup_records += len(intended) - kept
            if kept == len(intended):
                measured = None
            else:
                intended, now = intended[measured], now[measured]
        if not len(intended):
            return
        latency_us = (now - intended) // 1000
        state.latency.record_array(latency_us)
        self._trend(intended, latency_us, anchor)
        mapping = self.sink.event_time
        if mapping is None or run.schedule_rate is None or any(t is None for t in stamp_parts):
            return
        stamps = np.concatenate([t for t in stamp_parts if t is not None])
        if measured is not None:
            stamps = stamps[measured]
        known = stamps != NO_TIMESTAMP
        if known.any():
            units = (stamps[known] - mapping.origin_ms) * (mapping.units_per_event_s / 1000.0)
            scheduled = anchor + (units * (1e9 / run.schedule_rate)).astype(np.int64)
            state.lag.record_array((now[known] - scheduled) // 1000)

    def snapshot_state(self, checkpoint_id: int) -> None:
        state = self.state
        state.pending_rows[checkpoint_id] = state.current_rows
        state.current_rows = []
        self._checkpoints.update([checkpoint_id])

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.state.commit(checkpoint_id)

    def finish(self) -> None:
        # The end of the input. What came after the last checkpoint is final only once the job
        # has FINISHED (``LatencySink.commit_finished``): the job may still fail and restart
        # from that checkpoint while other tasks run, and then it comes again.
        self.flush()

    def close(self) -> None:
        if hasattr(self, "state"):
            self.flush()

    def _trend(self, intended: np.ndarray, latency_us: np.ndarray, anchor: int) -> None:
        buckets = (intended - anchor) // TREND_BUCKET_NS
        trend = self.state.trend
        first, last = int(buckets.min()), int(buckets.max())
        # a flush's records usually fall in one bucket (8 k records are 27 ms at 300 k/s)
        for b in [first] if first == last else np.unique(buckets).tolist():
            sel = latency_us if first == last else latency_us[buckets == b]
            entry = trend.setdefault(int(b), [0, 0, 0])
            entry[0] += len(sel)
            entry[1] += int(sel.sum())
            entry[2] = max(entry[2], int(sel.max()))

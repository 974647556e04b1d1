"""``CollectingSink``: a sink that keeps what a job produced, per subtask and merged, for assertions.

``collect(stream)`` attaches one and returns it; after ``env.execute()`` its ``records``
hold the values (merged over subtasks, in arrival order per subtask),
``records_by_subtask()`` keeps them apart, ``records_with_timestamps()`` adds each
record's event timestamp, and ``watermarks()`` lists the watermarks each sink subtask saw.

Theory of operation
-------------------
The sink object is shared by all its subtasks (the job runs in this process). Each
subtask's operator appends to one store under a lock, because the job may run in another
thread (the shared test cluster) while the test reads.

At-least-once (the default): a record reaches the store when the sink receives it, so
after a failure and restart the replayed records appear again, as with any
non-transactional sink. ``exactly_once=True`` makes it a two-phase-commit sink: records
wait in a transaction per subtask; at a checkpoint the transaction is pre-committed
(its checkpoint id goes into the sink's operator state); when the checkpoint completes it
is committed to the store; after a restore, transactions up to the restored checkpoint
are committed (committing twice is harmless) and later ones are discarded. At the end of
input the open transaction is held until the whole job has FINISHED (the JobMaster calls
``commit_on_job_finished``): another task may still fail and restart the job from the
last checkpoint, and output committed early would then arrive twice (the file sink does
the same). After a restore, old subtask ``j``'s transactions are handled by new subtask
``j % parallelism``, so nothing is committed or dropped twice at any parallelism.

What it does not do: survive the process (it is for tests); order records across
subtasks (merged records are grouped by subtask, in the order each subtask received them).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from weir.codec.batch import Batch
from weir.core.connectors import Sink
from weir.errors import UsageError
from weir.operators.sinks import SinkOperator


class _Store:
    """What every subtask of one CollectingSink delivered (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: dict[int, list[tuple[Any, int | None]]] = defaultdict(list)
        self.watermarks: dict[int, list[int]] = defaultdict(list)
        # exactly-once: (subtask, checkpoint id) -> pre-committed records; committed ids
        self.pending: dict[tuple[int, int], list[tuple[Any, int | None]]] = {}
        self.committed: set[tuple[int, int]] = set()
        self.end_of_input: dict[int, list[tuple[Any, int | None]]] = {}

    def add(self, subtask: int, records: list[tuple[Any, int | None]]) -> None:
        with self.lock:
            self.records[subtask].extend(records)

    def pre_commit(self, subtask: int, checkpoint_id: int, records: list[tuple[Any, int | None]]) -> None:
        with self.lock:
            if (subtask, checkpoint_id) not in self.committed:
                self.pending[(subtask, checkpoint_id)] = list(records)

    def commit_up_to(self, subtask: int, checkpoint_id: int) -> None:
        with self.lock:
            for key in sorted(k for k in self.pending if k[0] == subtask and k[1] <= checkpoint_id):
                self.records[subtask].extend(self.pending.pop(key))
                self.committed.add(key)

    def discard_after(self, subtask: int, checkpoint_id: int) -> None:
        """Drop ``subtask``'s transactions after ``checkpoint_id`` and its held end-of-input output."""
        with self.lock:
            for key in [k for k in self.pending if k[0] == subtask and k[1] > checkpoint_id]:
                del self.pending[key]
            self.end_of_input.pop(subtask, None)

    def hold_end_of_input(self, subtask: int, records: list[tuple[Any, int | None]]) -> None:
        with self.lock:
            self.end_of_input[subtask] = list(records)

    def commit_all(self) -> None:
        with self.lock:
            for key in sorted(self.pending):
                self.records[key[0]].extend(self.pending.pop(key))
                self.committed.add(key)
            for subtask in sorted(self.end_of_input):
                self.records[subtask].extend(self.end_of_input.pop(subtask))


class CollectingSink(Sink):
    """Keeps every record the job sends it; read it after the job ran."""

    def __init__(self, exactly_once: bool = False) -> None:
        self.exactly_once = bool(exactly_once)
        self._store = _Store()

    def default_name(self) -> str:
        return "Collecting Sink"

    def describe(self) -> dict[str, Any]:
        return {"class": "CollectingSink", "exactly_once": self.exactly_once}

    def commit_on_job_finished(self) -> list[str]:
        """The JobMaster's hook when the job FINISHED: end-of-input output becomes visible."""
        self._store.commit_all()
        return []

    def create_operator(self, name: str) -> SinkOperator:
        """The runtime's hook (``weir.operators.factory.create_operator``)."""
        if self.exactly_once:
            return _ExactlyOnceCollectingOperator(name, self._store)
        return _CollectingOperator(name, self._store)

    # -- reading -------------------------------------------------------------------------------
    @property
    def records(self) -> list[Any]:
        """The values, all subtasks merged (subtask 0's first, each in arrival order)."""
        with self._store.lock:
            return [v for s in sorted(self._store.records) for v, _ in self._store.records[s]]

    def records_with_timestamps(self) -> list[tuple[Any, int | None]]:
        """``(value, event timestamp or None)`` pairs, merged as ``records``."""
        with self._store.lock:
            return [r for s in sorted(self._store.records) for r in self._store.records[s]]

    def records_by_subtask(self) -> dict[int, list[Any]]:
        """Sink subtask index -> the values it received, in order."""
        with self._store.lock:
            return {s: [v for v, _ in rs] for s, rs in sorted(self._store.records.items())}

    def watermarks(self, subtask: int | None = None) -> list[int] | dict[int, list[int]]:
        """The watermarks sink subtask ``subtask`` saw, in order (all subtasks: a dict)."""
        with self._store.lock:
            if subtask is None:
                return {s: list(ws) for s, ws in sorted(self._store.watermarks.items())}
            return list(self._store.watermarks.get(subtask, []))

    def clear(self) -> None:
        """Forget everything collected (to reuse the sink for another run)."""
        with self._store.lock:
            self._store.records.clear()
            self._store.watermarks.clear()
            self._store.pending.clear()
            self._store.committed.clear()
            self._store.end_of_input.clear()

    def __len__(self) -> int:
        with self._store.lock:
            return sum(len(rs) for rs in self._store.records.values())

    def __iter__(self) -> Any:
        return iter(self.records)

    def __repr__(self) -> str:
        return f"CollectingSink({len(self)} records{', exactly once' if self.exactly_once else ''})"


class _CollectingOperator(SinkOperator):
    def __init__(self, name: str, store: _Store) -> None:
        super().__init__(name)
        self.store = store

    def open(self) -> None:
        self.subtask = self.context.subtask_index

    def process_batch(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        if len(batch):
            self.deliver(list(zip(batch.as_list(), batch.timestamp_list())))

    def deliver(self, records: list[tuple[Any, int | None]]) -> None:
        self.store.add(self.subtask, records)

    def process_watermark(self, timestamp: int) -> None:
        self.current_watermark = timestamp
        with self.store.lock:
            self.store.watermarks[self.subtask].append(timestamp)


class _ExactlyOnceCollectingOperator(_CollectingOperator):
    """Two-phase commit into the store (see the module docstring)."""

    STATE = "collecting-sink-pre-committed"

    def _descriptor(self) -> Any:
        from weir.core.state import ListStateDescriptor

        return ListStateDescriptor(self.STATE)

    def initialize_state(self) -> None:
        self.transaction: list[tuple[Any, int | None]] = []
        ctx = self.context
        store = ctx.operator_state()
        if not ctx.is_restored or self.STATE not in store.state_names():
            # a fresh start: what an earlier attempt of this subtask left is not part of this run
            self.store.discard_after(ctx.subtask_index, -1)
            return
        # union state: every subtask sees every old subtask's last pre-committed checkpoint;
        # old subtask j is handled by new subtask j % parallelism
        for old_subtask, checkpoint_id in store.get_union_list_state(self._descriptor()).get():
            if int(old_subtask) % ctx.parallelism == ctx.subtask_index:
                self.store.commit_up_to(int(old_subtask), int(checkpoint_id))
                self.store.discard_after(int(old_subtask), int(checkpoint_id))

    def deliver(self, records: list[tuple[Any, int | None]]) -> None:
        self.transaction.extend(records)

    def snapshot_state(self, checkpoint_id: int) -> None:
        self.store.pre_commit(self.subtask, checkpoint_id, self.transaction)
        self.transaction = []
        state = self.context.operator_state().get_union_list_state(self._descriptor())
        state.update([(self.subtask, checkpoint_id)])

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.store.commit_up_to(self.subtask, checkpoint_id)

    def finish(self) -> None:
        # end of input: the rest is final once the job FINISHES (commit_on_job_finished)
        self.store.hold_end_of_input(self.subtask, self.transaction)
        self.transaction = []


def collect(stream: Any, exactly_once: bool = False, name: str | None = None) -> CollectingSink:
    """Attach a CollectingSink to ``stream`` and return it (read it after ``execute``)."""
    sink_to = getattr(stream, "sink_to", None)
    if sink_to is None:
        raise UsageError(f"collect() needs a DataStream, got {stream!r}")
    sink = CollectingSink(exactly_once=exactly_once)
    added = sink_to(sink)
    if name is not None:
        added.name(name)
    return sink

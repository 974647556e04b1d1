"""``execute_and_collect``: the collect sink, and what its client may return when, with Flink's guarantees.

Theory of operation
-------------------
The collect sink (parallelism 1, as Flink's) numbers the records it takes: its *offset*
counts them from the job's start, and it is the sink's operator state, so a restored sink
goes on from the offset of its checkpoint. It sends three kinds of message over the job's
collect channel, in the order it takes records and learns of checkpoints:

- ``("records", offset, [record, ...])``: the records from ``offset`` on;
- ``("commit", offset)``: a completed checkpoint holds every record before ``offset`` (sent
  when the sink learns that the checkpoint completed, and at the end of its input for all
  it took);
- ``("restart", offset)``: a new attempt of the sink, restored at ``offset`` (0 without a
  checkpoint to restore).

Whoever reads the channel (the caller's ``execute_and_collect`` iterator, in its process or
another) keeps a ``CollectResults``, whose guarantee is the job's, as Flink's collect
iterator chooses its result buffer:

- ``exactly_once`` (checkpointing on, mode EXACTLY_ONCE): records are returned once a commit
  covers them, so a failover never shows a record twice nor loses one. A restart commits
  its offset (it came from a completed checkpoint, whose notification the sink may have
  missed) and drops what it received after it, which the restored sink sends again;
  records before what was already returned are skipped.
- ``at_least_once`` (checkpointing on, mode AT_LEAST_ONCE): records are returned as they
  come; after a restart, records after the restored offset may come again.
- ``none`` (no checkpointing): records are returned as they come; a restart ends the
  iterator with ``JobExecutionError``, since nothing tells which records came before (Flink
  throws "Job restarted" there too).

A job that fails or is cancelled ends the iterator with what was committed: records after
the last commit were never covered by a checkpoint.
"""

from __future__ import annotations

from typing import Any

from weir.codec.batch import Batch
from weir.errors import JobExecutionError, ProtocolViolation
from weir.operators.sinks import SinkOperator

GUARANTEES = ("exactly_once", "at_least_once", "none")
STATE_NAME = "collect-offset"


class CollectSinkOperator(SinkOperator):
    """Sends records to the client of ``execute_and_collect`` (``channel``: an object with
    ``async send(message)``, e.g. a Trio memory channel); see the module docstring."""

    def __init__(self, name: str, channel: Any = None) -> None:
        super().__init__(name)
        self.channel = channel  # None until the task hands it the job's collect channel
        self.offset = 0
        self._pending: list[tuple[Any, ...]] = []  # messages the channel has not taken yet
        self._commits: dict[int, int] = {}  # checkpoint id -> the offset at its barrier
        self._state: Any = None

    def initialize_state(self) -> None:
        from weir.common.typeinfo import Types
        from weir.core.state import ListStateDescriptor

        ctx = self.context
        self._state = ctx.operator_state().get_list_state(ListStateDescriptor(STATE_NAME, Types.LONG()))
        if ctx.is_restored:
            self.offset = max((int(v) for v in self._state.get()), default=0)
        self._state.clear()
        if ctx.attempt_number > 0:
            self._pending.append(("restart", self.offset))

    def process_batch(self, batch: Batch) -> None:
        n = len(batch)
        self.metrics.records_in += n
        if n:
            self._pending.append(("records", self.offset, batch.as_list()))
            self.offset += n

    def snapshot_state(self, checkpoint_id: int) -> None:
        self._state.update([self.offset])
        self._commits[checkpoint_id] = self.offset

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        offset = self._commits.get(checkpoint_id)
        for older in [c for c in self._commits if c <= checkpoint_id]:
            del self._commits[older]
        if offset is not None:
            self._pending.append(("commit", offset))

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self._commits.pop(checkpoint_id, None)

    def finish(self) -> None:
        self._pending.append(("commit", self.offset))  # the end of input: everything it took

    async def drain(self) -> None:
        """Cancellation: a message not yet taken by the channel is dropped with the job."""
        while self._pending:
            await self.channel.send(self._pending[0])
            self._pending.pop(0)


def check_message(message: Any, sender: str) -> tuple[Any, ...]:
    """``message`` when it is a collect message; else ProtocolViolation naming what came."""
    if isinstance(message, tuple) and message:
        kind = message[0]
        if (
            kind == "records"
            and len(message) == 3
            and _is_offset(message[1])
            and isinstance(message[2], list)
        ):
            return message
        if kind in ("commit", "restart") and len(message) == 2 and _is_offset(message[1]):
            return message
    shown = repr(message)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise ProtocolViolation(
        f"{sender} sent collect message {shown}; expected ('records', offset, [...]), "
        "('commit', offset) or ('restart', offset)"
    )


def _is_offset(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class CollectResults:
    """The client's side of one collect sink: ``take(message)`` returns the records that may be
    returned now (see the module docstring for each guarantee)."""

    def __init__(self, guarantee: str) -> None:
        if guarantee not in GUARANTEES:
            raise ValueError(f"collect guarantee {guarantee!r}; expected one of {GUARANTEES}")
        self.guarantee = guarantee
        self.returned = 0  # exactly-once: the offset after the last record returned
        self._received: list[tuple[int, list[Any]]] = []  # exactly-once: (offset, records) not committed

    def take(self, message: tuple[Any, ...]) -> list[Any]:
        kind = message[0]
        if kind == "records":
            if self.guarantee != "exactly_once":
                return list(message[2])
            self._received.append((message[1], message[2]))
            return []
        if kind == "commit":
            return self._commit(message[1]) if self.guarantee == "exactly_once" else []
        # a restart
        if self.guarantee == "none":
            raise JobExecutionError(
                "the job restarted, and without checkpointing execute_and_collect() cannot tell "
                "which of its records it already returned; enable checkpointing "
                "(env.enable_checkpointing) for exactly-once results across restarts"
            )
        if self.guarantee == "at_least_once":
            return []
        out = self._commit(message[1])
        self._received = []  # all after the restored offset: the restored sink sends it again
        return out

    def _commit(self, upto: int) -> list[Any]:
        out: list[Any] = []
        kept: list[tuple[int, list[Any]]] = []
        for offset, records in self._received:
            end = offset + len(records)
            start = max(self.returned, offset)
            if start < min(upto, end):
                out.extend(records[start - offset : min(upto, end) - offset])
            if end > upto:
                kept.append((max(offset, upto), records[max(upto - offset, 0) :]))
        self._received = kept
        self.returned = max(self.returned, upto)
        return out

"""The subtask's side of checkpoints (Flink's SubtaskCheckpointCoordinator): restore the
chain's operators, take the synchronous part of a snapshot, forward the barrier, and start
the asynchronous part.

A source task checkpoints when the coordinator triggers it (``checkpoint``); any other
task when its barrier handler says so (``take_snapshot`` and ``forward_barrier``, driven
by the input processor). The synchronous part takes every chained operator's snapshot
with the drain lock held, at a cost that does not grow with the keyed state (the
backends' ``snapshot_async``: copy-on-write key groups on the heap, a pinned read view in
LMDB) and is one C-level dict copy per key group for timers, so the job's one thread
stops only briefly; the barrier then goes downstream, in line (aligned) or ahead of the
unsent output, which joins the checkpoint's channel state (unaligned); the
asynchronous part (``weir.task.snapshots``) writes the files while processing goes on, in
a forked child process (``weir.task.forked``; the default) or a worker thread, and acknowledges to the JobMaster with the checkpoint's timings.
Restore is the reverse of the synchronous part: keyed state and timers of this subtask's
key groups, its share of the operator list state, and the head operator's channel state.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import trio

from weir.codec.reader import FrameReader
from weir.network.events import CheckpointBarrier
from weir.operators.factory import SourceOperator
from weir.operators.window import two_phase
from weir.state.operator_state import repartition_operator_state
from weir.task.chain import OperatorChain
from weir.task.channel_state import ChannelState
from weir.task.forked import use_child, write_in_child
from weir.task.snapshots import OperatorSnapshot, write_operator_snapshots

if TYPE_CHECKING:
    from weir.task.task import TaskDeployment

__all__ = ["SubtaskCheckpointCoordinator"]


class SubtaskCheckpointCoordinator:
    """Checkpoints and restore of one subtask's chain. Its methods that snapshot run with
    the task's drain lock held; ``nursery`` runs the asynchronous parts."""

    def __init__(self, deployment: TaskDeployment, chain: OperatorChain) -> None:
        self.d = deployment
        self.chain = chain
        self.nursery: trio.Nursery | None = None
        self.channel_state: ChannelState | None = None  # of the unaligned checkpoint in progress
        self.persisted_in_flight_bytes = 0
        self._checkpoint_timing: dict[int, dict[str, float]] = {}  # id -> alignment_ms, sync_ms
        self._first_barrier_ms: dict[int, int] = {}
        self._is_savepoint: dict[int, bool] = {}
        self._taken: list[OperatorSnapshot] = []

    def restore(self, restore_state: dict[str, list[dict[str, Any]]]) -> dict[str, Any] | None:
        """Load checkpointed state (recovery, or a savepoint at any parallelism): keyed state and
        timers of this subtask's key groups, and this subtask's share of the operator list
        state (sources keep their splits there). Returns the channel state the head operator
        persisted for this subtask (an unaligned checkpoint), if any."""
        from weir.keys import KeyGroupRange

        d = self.d
        restored_channels = None
        for op in self.chain.operators:
            payloads = restore_state.get(op.context.operator_id)
            if not payloads:
                continue
            backend = op.context.keyed_backend
            if backend is not None:
                from weir.state.incremental import restorable_for  # chains: native or folded

                keyed = [p["keyed"] for p in payloads if p.get("keyed") is not None]
                backend.restore(restorable_for(backend, keyed))
            timers = getattr(op, "timers", None)
            internal: Any = getattr(timers, "internal", timers)
            snapshots = [p["timers"] for p in payloads if p.get("timers") is not None]
            if internal is not None and hasattr(internal, "restore") and snapshots:
                key_groups = (
                    backend.key_group_range
                    if backend is not None
                    else KeyGroupRange(0, op.context.max_parallelism - 1)
                )
                internal.restore(snapshots, key_groups)
            # one payload per old subtask: index i holds old subtask i's operator state
            operator_states = [
                p.get("operator_state") for p in sorted(payloads, key=lambda p: p.get("subtask", 0))
            ]
            if any(s is not None for s in operator_states):
                parts = repartition_operator_state(operator_states, d.job_vertex.parallelism)
                op.context.operator_state().restore([parts[d.subtask_index]])
            op.context.is_restored = True
            if op is self.chain.operators[0]:
                mine = [p for p in payloads if p.get("subtask") == d.subtask_index and p.get("channel_state")]
                if mine:
                    restored_channels = mine[0]["channel_state"]
        return restored_channels

    def on_barrier(self, barrier: CheckpointBarrier, now_ms: int) -> None:
        """A barrier arrived on an input channel: the first one starts the alignment time."""
        self._first_barrier_ms.setdefault(barrier.checkpoint_id, now_ms)
        # canonical savepoints are full; native ones keep the backend's own (incremental) form
        self._is_savepoint[barrier.checkpoint_id] = barrier.is_savepoint and not barrier.native

    async def snapshot_operators(self, checkpoint_id: int, full: bool = False) -> list[OperatorSnapshot]:
        """The synchronous part of a checkpoint: copy out every chained operator's state.
        Operators first flush what they hold outside the backends (head first, so what a head
        emits reaches its successors before they snapshot), then snapshot themselves.
        Keyed state is incremental where the backend has it on (LMDB), unless ``full`` (savepoints:
        always the full, canonical snapshot). Keyed snapshots are taken with ``snapshot_async``:
        here only what does not grow with the state; the entries are encoded in the
        asynchronous part (``write_operator_snapshots``), except for an operator that declares
        ``shares_state_objects`` (it mutates objects it also handed to the backend). An operator
        with ``defer_pane_snapshots`` (the fast and the vectorized window operators) freezes the
        panes it holds outside its backend at the barrier and hands them over as
        ``pane_snapshot``, which is merged into the keyed and timer snapshots in the
        asynchronous part (into an incremental run by the backend itself), or, where the panes
        have a native section and the file need not be canonical, written beside the keyed
        snapshot as they are (``weir.state.panes``)."""
        d = self.d
        started = time.perf_counter()
        first = self._first_barrier_ms.pop(checkpoint_id, None)
        timing = self._checkpoint_timing.setdefault(checkpoint_id, {})
        timing["alignment_ms"] = 0.0 if first is None else float(d.processing_time_ms() - first)
        storage = d.checkpoint_storage
        for op in self.chain.operators:
            if hasattr(op, "defer_pane_snapshots"):
                op.defer_pane_snapshots = True  # frozen panes, merged in the asynchronous part
        for node_id in d.job_vertex.chained_node_ids:
            self.chain.guards[node_id].call("prepare_snapshot_pre_barrier", checkpoint_id)
        await self.chain.drain()
        for node_id in d.job_vertex.chained_node_ids:
            self.chain.guards[node_id].call("snapshot_state", checkpoint_id)
        out = []
        for op in self.chain.operators:
            ctx = op.context
            op_state = ctx.operator_state_backend
            operator_state = op_state.snapshot() if op_state is not None and op_state.state_names() else None
            backend = ctx.keyed_backend
            timers = getattr(op, "timers", None)
            internal: Any = getattr(timers, "internal", timers)
            timer_snapshot = None
            if internal is not None and hasattr(internal, "snapshot_async"):
                timer_snapshot = internal.snapshot_async()  # sorted in write_operator_snapshots
            elif internal is not None and hasattr(internal, "snapshot"):
                timer_snapshot = internal.snapshot()
            panes = getattr(op, "pane_snapshot", None)  # frozen at the barrier
            incremental = (
                backend is not None and not full and storage is not None
                and getattr(backend, "incremental_checkpointing", False)
            )  # fmt: skip
            # beside the backend's snapshot as the operator holds them, except where the file
            # must be canonical (a canonical savepoint) or the backend takes them into its run
            native = panes is not None and panes.native is not None and not full and not incremental
            if panes is not None:
                op.pane_snapshot = None  # type: ignore[attr-defined]
                if not native:
                    timer_snapshot = panes.pending_timers(timer_snapshot)
            keyed: Any = None
            if backend is not None:
                if incremental:
                    keyed = backend.snapshot_incremental(checkpoint_id, storage.is_complete, panes)
                    panes = None  # the backend merges them into its run
                elif getattr(op, "shares_state_objects", False):
                    keyed = backend.snapshot()  # it mutates objects it also put in the backend
                else:
                    keyed = backend.snapshot_async()  # the rest happens in write_and_acknowledge
                if panes is not None:
                    keyed = panes.native_keyed(keyed) if native else panes.keyed(keyed)
            out.append(
                OperatorSnapshot(
                    operator_id=ctx.operator_id,
                    parallelism=ctx.parallelism,
                    max_parallelism=ctx.max_parallelism,
                    subtask_index=d.subtask_index,
                    keyed=keyed,
                    key_group_range=None if backend is None else backend.key_group_range,
                    timers=timer_snapshot,
                    source_position=op.position if isinstance(op, SourceOperator) else None,
                    operator_state=operator_state,
                )
            )
        timing["sync_ms"] = (time.perf_counter() - started) * 1000
        return out

    async def checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Snapshot, forward the barrier in line, and write the files in the background.
        Called with the drain lock held. Cancellation: the checkpoint is abandoned."""
        self.chain.flush_held()
        await self.chain.drain()  # everything before the barrier goes out first
        snapshots = await self.snapshot_operators(
            barrier.checkpoint_id, full=barrier.is_savepoint and not barrier.native
        )
        channel_state = self.new_channel_state(barrier.checkpoint_id) if barrier.unaligned else None
        await self.forward_barrier(barrier, channel_state)
        if channel_state is not None:
            channel_state.complete.set()  # a source has no input channels
        assert self.nursery is not None
        self.nursery.start_soon(self.write_and_acknowledge, barrier.checkpoint_id, snapshots, channel_state)

    async def forward_barrier(self, barrier: CheckpointBarrier, channel_state: ChannelState | None) -> None:
        """Send ``barrier`` downstream: in line (aligned), or ahead of the unsent output,
        which then belongs to the checkpoint's channel state (unaligned)."""
        self.chain.flush_held()
        await self.chain.drain()
        if not barrier.unaligned:
            for writer in self.chain.writers:
                writer.add_event(barrier)
            await self.chain.drain()
            return
        for i, partition in enumerate(self.chain.partitions):
            for sub, data in enumerate(partition.broadcast_priority_event(barrier)):
                if channel_state is not None and data:
                    channel_state.outputs[f"{i}:{sub}"] = data

    def partial_rows(self) -> tuple[bool, list[int]]:
        """Whether the task's inputs carry partial rows of a two-phase window, and which of its
        output partitions do (``weir.operators.window.two_phase``)."""
        graph = self.d.stream_graph
        head = graph.node(self.d.job_vertex.chained_node_ids[0])
        inputs = bool(head.in_edges) and two_phase.layout_for(graph, head) is not None
        return inputs, [i for i, w in enumerate(self.chain.writers) if w.combiner is not None]

    def new_channel_state(self, checkpoint_id: int) -> ChannelState:
        inputs, outputs = self.partial_rows()
        return ChannelState(checkpoint_id, partial_inputs=inputs, partial_outputs=outputs)

    def state_for(self, checkpoint_id: int) -> ChannelState:
        """The channel state of unaligned checkpoint ``checkpoint_id``, started if need be."""
        state = self.channel_state
        if state is None or state.checkpoint_id != checkpoint_id:
            state = self.channel_state = self.new_channel_state(checkpoint_id)
        return state

    async def take_snapshot(self, checkpoint_id: int, unaligned: bool, readers: list[FrameReader]) -> None:
        """The barrier handler's TakeSnapshot: the synchronous part (and, unaligned, the start
        of the asynchronous part, which waits for the channel state to be complete)."""
        assert self.nursery is not None
        await self.chain.drain()
        self._taken = await self.snapshot_operators(
            checkpoint_id, full=self._is_savepoint.pop(checkpoint_id, False)
        )
        if unaligned:
            # an input channel's incomplete frame was read before the snapshot but
            # not processed: it belongs to the channel state
            state = self.state_for(checkpoint_id)
            for channel, reader in enumerate(readers):
                pending = reader.pending_bytes()
                if pending:
                    state.inputs[channel] = bytearray(pending)
            self.nursery.start_soon(self.write_and_acknowledge, checkpoint_id, self._taken, state)

    async def forward_barrier_after_snapshot(self, barrier: CheckpointBarrier) -> None:
        """The barrier handler's ForwardBarrier (aligned: then the asynchronous part starts)."""
        assert self.nursery is not None
        if barrier.unaligned:
            await self.forward_barrier(barrier, self.state_for(barrier.checkpoint_id))
        else:
            await self.forward_barrier(barrier, None)
            self.nursery.start_soon(self.write_and_acknowledge, barrier.checkpoint_id, self._taken)

    def abort(self, checkpoint_id: int, reason: str) -> None:
        """The barrier handler's AbortCheckpoint: drop the channel state, decline."""
        d = self.d
        self.channel_state = None
        if d.on_checkpoint_decline is not None:
            d.on_checkpoint_decline(d.execution_id, checkpoint_id, reason)

    async def write_and_acknowledge(
        self, checkpoint_id: int, snapshots: list[OperatorSnapshot], channel_state: ChannelState | None = None
    ) -> None:
        """The asynchronous part: write in a forked child or a worker thread while processing
        goes on (for an unaligned checkpoint once its channel state is complete).
        Cancellation: the files written so far stay; the checkpoint never completes."""
        d = self.d
        if d.checkpoint_storage is None or d.on_checkpoint_ack is None:
            return
        persisted = 0
        if channel_state is not None:
            await channel_state.complete.wait()
            if self.channel_state is channel_state:
                self.channel_state = None
            payload = channel_state.to_payload()
            persisted = channel_state.size_bytes()
            self.persisted_in_flight_bytes += persisted
            snapshots = [replace(snapshots[0], channel_state=payload), *snapshots[1:]]
        started = time.perf_counter()
        fork_ms = 0.0
        try:
            if use_child(d.async_snapshot, snapshots):
                acks, size, fork_ms = await write_in_child(d.checkpoint_storage, checkpoint_id, snapshots)
            else:
                acks, size = await trio.to_thread.run_sync(
                    write_operator_snapshots, d.checkpoint_storage, checkpoint_id, snapshots
                )
        except Exception as exc:
            if d.on_checkpoint_decline is not None:
                # the task finished and closed its state while the files were written: not a
                # failure of checkpointing (Flink's CHECKPOINT_DECLINED_TASK_CLOSING is not
                # counted toward the tolerated failures either)
                closing = getattr(exc, "task_closing", False)
                d.on_checkpoint_decline(
                    d.execution_id, checkpoint_id, f"{type(exc).__name__}: {exc}", not closing
                )
            return
        timing = self._checkpoint_timing.pop(checkpoint_id, {})
        if d.on_checkpoint_metrics is not None:
            d.on_checkpoint_metrics(
                d.execution_id,
                checkpoint_id,
                {
                    "alignment_ms": timing.get("alignment_ms", 0.0),
                    "sync_ms": timing.get("sync_ms", 0.0),
                    "async_ms": (time.perf_counter() - started) * 1000,
                    "fork_ms": fork_ms,
                    "checkpointed_size_bytes": size,
                    "full_size_bytes": sum(
                        a.handle.file.size_bytes + sum(f.size_bytes for f in a.handle.shared_files)
                        for a in acks
                    ),
                    "persisted_in_flight_bytes": persisted,
                },
            )
        d.on_checkpoint_ack(d.execution_id, checkpoint_id, acks, size)

    # -- processing time -----------------------------------------------------------------------

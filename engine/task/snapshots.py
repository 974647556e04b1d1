"""The tasks' part of a checkpoint: what each chained operator hands over in the synchronous
part, and the asynchronous part that writes one state file per operator and acknowledges.

The JobMaster's part (the coordinator's driver, ``_metadata``, retention) is
``weir.cluster.checkpointing``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from weir.checkpoint.metadata import FileHandle, SubtaskStateHandle
from weir.checkpoint.storage import CheckpointStorage
from weir.state.state_file import state_file_parts

__all__ = ["OperatorAck", "OperatorSnapshot", "operator_ack", "write_operator_snapshots"]


@dataclass(frozen=True)
class OperatorSnapshot:
    """What one chained operator of one subtask contributes to a checkpoint (synchronous part)."""

    operator_id: str
    parallelism: int
    max_parallelism: int
    subtask_index: int
    keyed: Any = None  # KeyedStateSnapshot, PendingKeyedStateSnapshot or PendingIncrementalSnapshot
    key_group_range: Any = None
    timers: Any = None  # TimerSnapshot or PendingTimerSnapshot
    source_position: Any = None
    operator_state: Any = None  # OperatorStateSnapshot, or None when the operator has none
    channel_state: Any = None  # the task's in-flight data of an unaligned checkpoint (head operator only)


@dataclass(frozen=True)
class OperatorAck:
    """The handle of one operator's state file, sent back with the task's acknowledgement."""

    operator_id: str
    parallelism: int
    max_parallelism: int
    handle: SubtaskStateHandle
    source_position: Any


def write_operator_snapshots(
    storage: CheckpointStorage, checkpoint_id: int, snapshots: list[OperatorSnapshot]
) -> tuple[list[OperatorAck], int]:
    """The asynchronous part: one durable, checksummed file per operator. Runs in a worker thread.

    Incremental keyed state (``PendingIncrementalSnapshot``) first writes its new
    run into ``shared/``; the private file then holds the chain's handle, and the
    chain's files become the state handle's ``shared_files``. ``total`` counts the
    bytes this checkpoint wrote (an incremental checkpoint's size)."""
    from weir.state.backend import PendingKeyedStateSnapshot
    from weir.state.heap import PendingHeapSnapshot
    from weir.state.incremental import PendingIncrementalSnapshot
    from weir.state.lmdb_backend import PendingLmdbSnapshot
    from weir.state.panes import _MergedKeyedSnapshot
    from weir.time.timers import PendingTimerSnapshot

    acks = []
    total = 0
    for snap in snapshots:
        keyed = snap.keyed
        shared: tuple[Any, ...] = ()
        if isinstance(keyed, (_MergedKeyedSnapshot, PendingHeapSnapshot, PendingLmdbSnapshot)):
            keyed = keyed.for_file()  # packed from columns where the entries allow it
        elif isinstance(keyed, PendingKeyedStateSnapshot):
            keyed = keyed.result()  # encoded here, off the job's thread (copy-on-write, pinned view)
        if isinstance(keyed, PendingIncrementalSnapshot):
            written = keyed.write(storage)
            keyed, shared = written.handle, written.handle.chain
            total += written.uploaded_bytes
        timers = snap.timers
        if isinstance(timers, PendingTimerSnapshot):
            timers = timers.result()
        data = state_file_parts(
            {
                "keyed": keyed,
                "timers": timers,
                "source_position": snap.source_position,
                "operator_state": snap.operator_state,
                "channel_state": snap.channel_state,
            }
        )
        handle = storage.write_state_file(
            checkpoint_id, f"{snap.operator_id}-{snap.subtask_index}.state", data
        )
        total += handle.size_bytes
        acks.append(operator_ack(snap, handle, shared))
    return acks, total


def operator_ack(snap: OperatorSnapshot, file: FileHandle, shared: tuple[Any, ...] = ()) -> OperatorAck:
    """The acknowledgement of ``snap`` written to ``file`` (with the incremental chain ``shared``)."""
    keyed = snap.keyed is not None
    handle = SubtaskStateHandle(
        snap.subtask_index,
        "keyed" if keyed else "operator",
        file,
        snap.key_group_range if keyed else None,
        shared,
    )
    return OperatorAck(snap.operator_id, snap.parallelism, snap.max_parallelism, handle, snap.source_position)

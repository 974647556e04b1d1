"""The in-flight data of an unaligned checkpoint (Flink's channel state): what it holds,
and its replay after a restore.

An unaligned checkpoint lets barriers overtake buffered data; what they overtook belongs
to the checkpoint. Per input channel that is the bytes before the channel's barrier that
were not processed when the snapshot was taken; per output subpartition, the bytes the
barrier overtook in the partition. After a restore the task sends the overtaken output
first, then processes the persisted input, before it reads anything new.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import trio

from weir.errors import UsageError

__all__ = ["ChannelState", "check_partial_rows", "replay_output_state"]


@dataclass
class ChannelState:
    """The in-flight data of one unaligned checkpoint of one task (Flink's channel state):
    per input channel the bytes that belong before its barrier but were not processed
    when the snapshot was taken (an incomplete frame, then what arrived until the
    barrier), and per output subpartition the bytes the barrier overtook. Complete when
    every input channel delivered its barrier."""

    checkpoint_id: int
    inputs: dict[int, bytearray] = field(default_factory=dict)
    outputs: dict[str, bytes] = field(default_factory=dict)  # "<partition index>:<subpartition>"
    complete: trio.Event = field(default_factory=trio.Event)
    #: whether the inputs carry partial rows of a two-phase window, and which output
    #: partitions do (``weir.operators.window.two_phase``): the bytes are read back as such
    partial_inputs: bool = False
    partial_outputs: list[int] = field(default_factory=list)

    def size_bytes(self) -> int:
        return sum(map(len, self.inputs.values())) + sum(map(len, self.outputs.values()))

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "inputs": {ch: bytes(data) for ch, data in self.inputs.items() if data},
            "outputs": {key: data for key, data in self.outputs.items() if data},
        }
        if self.partial_inputs:
            payload["partial_inputs"] = True
        if self.partial_outputs:
            payload["partial_outputs"] = list(self.partial_outputs)
        return payload


def check_partial_rows(
    restored: dict[str, Any], partial_inputs: bool, partial_outputs: list[int], task: str
) -> None:
    """A ``UsageError`` when restored in-flight bytes were written as partial rows of a
    two-phase window and would now be read as records, or the other way round (the
    ``table.optimizer.agg-phase-strategy`` changed between the checkpoint and the restore)."""
    was_inputs = bool(restored.get("partial_inputs", False))
    was_outputs = set(restored.get("partial_outputs", []))
    mismatched = restored.get("inputs") and was_inputs != partial_inputs
    for key in restored.get("outputs", {}):
        index = int(key.split(":")[0])
        mismatched = mismatched or (index in was_outputs) != (index in partial_outputs)
    if mismatched:
        raise UsageError(
            f"task '{task}': the unaligned checkpoint's in-flight data was written "
            f"{'as records' if not (was_inputs or was_outputs) else 'partly as partial rows of a two-phase window'}, "
            f"and this job reads it {'as partial rows' if (partial_inputs or partial_outputs) else 'as records'}: "
            f"table.optimizer.agg-phase-strategy changed since the checkpoint; restore with the setting it was "
            f"taken with (two-phase windows: AUTO or TWO_PHASE; one phase: ONE_PHASE), or from an aligned "
            f"checkpoint or a savepoint, which hold no in-flight data"
        )


async def replay_output_state(partitions: list[Any], restored: dict[str, Any]) -> None:
    """Send a restored checkpoint's overtaken output to the subpartitions it was bound for.
    Cancellation: what was emitted stays emitted."""
    for key, data in sorted(restored.get("outputs", {}).items()):
        partition_index, subpartition = map(int, key.split(":"))
        await partitions[partition_index].emit(subpartition, data)

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

__all__ = ["ChannelState", "replay_output_state"]


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

    def size_bytes(self) -> int:
        return sum(map(len, self.inputs.values())) + sum(map(len, self.outputs.values()))

    def to_payload(self) -> dict[str, Any]:
        return {
            "inputs": {ch: bytes(data) for ch, data in self.inputs.items() if data},
            "outputs": {key: data for key, data in self.outputs.items() if data},
        }


async def replay_output_state(partitions: list[Any], restored: dict[str, Any]) -> None:
    """Send a restored checkpoint's overtaken output to the subpartitions it was bound for.
    Cancellation: what was emitted stays emitted."""
    for key, data in sorted(restored.get("outputs", {}).items()):
        partition_index, subpartition = map(int, key.split(":"))
        await partitions[partition_index].emit(subpartition, data)

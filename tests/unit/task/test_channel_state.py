"""An unaligned checkpoint's channel state: its payload, its size, and its output replay."""

from __future__ import annotations

from typing import Any

from weir.task.channel_state import ChannelState, replay_output_state


def test_the_payload_leaves_out_empty_channels() -> None:
    state = ChannelState(7)
    state.inputs[0] = bytearray(b"abc")
    state.inputs[1] = bytearray()
    state.outputs["0:1"] = b"xy"
    state.outputs["1:0"] = b""
    assert state.size_bytes() == 5
    assert state.to_payload() == {"inputs": {0: b"abc"}, "outputs": {"0:1": b"xy"}}


class _Partition:
    def __init__(self, log: list[tuple[int, int, bytes]], index: int) -> None:
        self.log = log
        self.index = index

    async def emit(self, subpartition: int, data: bytes) -> None:
        self.log.append((self.index, subpartition, data))


async def test_overtaken_output_goes_back_to_its_subpartitions() -> None:
    log: list[tuple[int, int, bytes]] = []
    partitions: list[Any] = [_Partition(log, 0), _Partition(log, 1)]
    await replay_output_state(partitions, {"outputs": {"1:0": b"b", "0:2": b"a"}, "inputs": {0: b"i"}})
    assert log == [(0, 2, b"a"), (1, 0, b"b")]

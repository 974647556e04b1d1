"""An unaligned checkpoint's channel state: its payload, its size, and its output replay."""

from __future__ import annotations

from typing import Any

import pytest

from weir.errors import UsageError
from weir.task.channel_state import ChannelState, check_partial_rows, replay_output_state


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


# -- partial rows of two-phase windows -------------------------------------------------------------


def test_the_payload_says_which_channels_carry_partial_rows() -> None:
    state = ChannelState(3, partial_inputs=True, partial_outputs=[1])
    state.inputs[0] = bytearray(b"in")
    state.outputs["1:0"] = b"out"
    payload = state.to_payload()
    assert payload["partial_inputs"] is True and payload["partial_outputs"] == [1]
    plain = ChannelState(3)
    plain.inputs[0] = bytearray(b"in")
    assert "partial_inputs" not in plain.to_payload() and "partial_outputs" not in plain.to_payload()


def test_in_flight_partial_rows_are_not_read_back_as_records() -> None:
    written = ChannelState(3, partial_inputs=True, partial_outputs=[0])
    written.inputs[0] = bytearray(b"rows")
    written.outputs["0:1"] = b"rows"
    payload = written.to_payload()
    check_partial_rows(payload, True, [0], "window")  # the same setting: fine
    with pytest.raises(UsageError, match=r"table\.optimizer\.agg-phase-strategy changed"):
        check_partial_rows(payload, False, [0], "window")  # inputs now read as records
    with pytest.raises(UsageError, match="restore with the setting it was taken with"):
        check_partial_rows(payload, True, [], "window")  # outputs now written as records
    records = ChannelState(3)
    records.inputs[0] = bytearray(b"records")
    with pytest.raises(UsageError, match="written as records, and this job reads it as partial rows"):
        check_partial_rows(records.to_payload(), True, [], "window")
    check_partial_rows(
        ChannelState(3).to_payload(), True, [0], "window"
    )  # nothing in flight: nothing to misread

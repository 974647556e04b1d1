"""An input gate's channel blocking (aligned checkpoints): a blocked channel delivers nothing,
and after ``unblock_all`` it delivers what waited, in order."""

from __future__ import annotations

from weir.network.environment import ChannelSpec, NetworkEnvironment, NetworkRegistry


def test_a_blocked_channel_delivers_nothing_until_unblocked() -> None:
    e = NetworkEnvironment("tm1", NetworkRegistry(), total_bytes=4 << 20)
    gate = e.create_input_gate(0, [ChannelSpec("p0", 0, "tm1"), ChannelSpec("p1", 0, "tm1")])
    partitions = [e.create_result_partition(f"p{i}", 1) for i in range(2)]
    gate.block(0)
    for n in range(3):
        for i, partition in enumerate(partitions):
            partition.emit_nowait(0, bytes([i * 10 + n]) * 8)
            partition.flush(0)
    seen: dict[int, bytes] = {0: b"", 1: b""}
    while (item := gate.poll_next()) is not None:
        seen[item.channel_index] += bytes(item.data)
        item.recycle()
    assert seen == {0: b"", 1: bytes([10]) * 8 + bytes([11]) * 8 + bytes([12]) * 8}
    assert gate.blocked_channels == {0}
    gate.unblock_all()
    while (item := gate.poll_next()) is not None:
        seen[item.channel_index] += bytes(item.data)
        item.recycle()
    assert seen[0] == bytes([0]) * 8 + bytes([1]) * 8 + bytes([2]) * 8
    assert gate.blocked_channels == frozenset()

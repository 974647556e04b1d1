"""Bytes through local and remote channels: identical, in order, events in line, large items, no leaks."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import numpy as np
import pytest
import trio
import trio.testing
from network_cluster import assert_all_returned, join_data, read_channels

from weir.network.environment import ChannelSpec, NetworkEnvironment
from weir.network.events import CheckpointBarrier, EndOfPartition, Event, Watermark
from weir.network.flusher import run_output_flusher
from weir.network.gate import InputGate
from weir.network.partition import ResultPartition

OpenCluster = Callable[..., AbstractAsyncContextManager[list[NetworkEnvironment]]]

SIZES = [1, 100, 32 * 1024, 32 * 1024 + 1, 100_000, 7, 70_000, 3]


def stream_for(producer: int, consumer: int) -> list[bytes | Event]:
    """What producer ``producer`` writes to consumer ``consumer``: items of every size, events between."""
    rng = np.random.default_rng(1000 * producer + consumer)
    items: list[bytes | Event] = []
    for k, size in enumerate(SIZES):
        items.append(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        if k % 3 == 2:
            items.append(Watermark(k))
    return items


@pytest.mark.parametrize("num_taskmanagers", [1, 2])
@pytest.mark.parametrize("parallelism", [1, 2, 4])
async def test_all_to_all_exchange_is_identical_and_in_order(
    num_taskmanagers: int, parallelism: int, open_cluster: OpenCluster, autojump_clock: trio.testing.MockClock
) -> None:
    p = parallelism
    async with open_cluster(num_taskmanagers) as tms:

        def tm(subtask: int) -> NetworkEnvironment:
            return tms[subtask % num_taskmanagers]

        # consumers first: their requests wait until the producers register
        gates = [
            tm(j).create_input_gate(
                0, [ChannelSpec(f"p{i}", j, f"tm{i % num_taskmanagers}") for i in range(p)]
            )
            for j in range(p)
        ]
        partitions = [tm(i).create_result_partition(f"p{i}", p) for i in range(p)]
        results: dict[int, dict[int, list[bytes | Event]]] = {}

        async def produce(i: int, partition: ResultPartition) -> None:
            streams = [stream_for(i, j) for j in range(p)]
            for k in range(max(len(s) for s in streams)):
                for j, stream in enumerate(streams):
                    if k < len(stream):
                        item = stream[k]
                        if isinstance(item, bytes):
                            await partition.emit(j, item)
                        else:
                            await partition.emit_event(j, item)
            await partition.broadcast_event(CheckpointBarrier(checkpoint_id=1, timestamp=0))
            await partition.finish()

        async def consume(j: int) -> None:
            results[j] = await read_channels(gates[j])

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for j in range(p):
                    nursery.start_soon(consume, j)
                for i, partition in enumerate(partitions):
                    nursery.start_soon(run_output_flusher, partition, 5)
                    nursery.start_soon(produce, i, partition)

        for j in range(p):
            for i in range(p):
                expected = join_data([*stream_for(i, j), CheckpointBarrier(1, 0), EndOfPartition()])
                assert results[j][i] == expected, (i, j)

        for gate in gates:
            gate.close()
        for i in range(p):
            tm(i).release_partition(f"p{i}")
        for environment in tms:
            assert_all_returned(environment.network_buffer_pool)


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
async def test_events_never_overtake_data(
    remote: bool, open_cluster: OpenCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_cluster(2) as (tm0, tm1):
        partition = tm0.create_result_partition("p", 1)
        gate = (tm1 if remote else tm0).create_input_gate(0, [ChannelSpec("p", 0, "tm0")])
        seen: list[object] = []

        async def consume() -> None:
            while (item := await gate.get_next()) is not None:
                seen.append(bytes(item.data) if item.data is not None else item.event)
                item.recycle()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            # no flush and no timer: only the events push the bytes out
            await partition.emit(0, b"a")
            await partition.emit_event(0, Watermark(1))
            await partition.emit(0, b"b" * 40_000)
            await partition.emit(0, b"c")
            await partition.emit_event(0, Watermark(2))
            await partition.finish()
        assert join_data(seen) == [b"a", Watermark(1), b"b" * 40_000 + b"c", Watermark(2), EndOfPartition()]  # type: ignore[arg-type]


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
async def test_cancelling_the_cluster_mid_stream_ends_cleanly(
    remote: bool, open_cluster: OpenCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_cluster(2) as (tm0, tm1):
        partition = tm0.create_result_partition("p", 1)
        gate = (tm1 if remote else tm0).create_input_gate(0, [ChannelSpec("p", 0, "tm0")])
        got = 0

        async def produce() -> None:
            while True:
                await partition.emit(0, b"x" * 10_000)

        async def consume() -> None:
            nonlocal got
            while (item := await gate.get_next()) is not None:
                got += item.size
                item.recycle()
                await trio.sleep(0.001)

        with trio.move_on_after(1):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(produce)
                nursery.start_soon(consume)
        assert got > 0
    # the environments stopped; their connections are closed
    assert all(c.closed for c in tm0.registry.connections())


async def test_a_blocking_partition_is_read_after_it_finished(
    open_cluster: OpenCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_cluster(2) as (tm0, tm1):
        # consumers first, one local and one remote: both wait for the producer to finish
        local = tm0.create_input_gate(0, [ChannelSpec("batch", 0, "tm0")])
        remote = tm1.create_input_gate(0, [ChannelSpec("batch", 1, "tm0")])
        partition = tm0.create_result_partition("batch", 2, blocking=True)
        payload = bytes(range(256)) * 4096  # 1 MiB: far more than the partition's pool of 12 buffers
        results: dict[str, dict[int, list[bytes | Event]]] = {}

        async def consume(name: str, gate: InputGate) -> None:
            results[name] = await read_channels(gate)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume, "local", local)
            nursery.start_soon(consume, "remote", remote)
            await partition.emit(0, payload)  # never waits on a consumer
            await partition.emit(1, payload[::-1])
            await trio.testing.wait_all_tasks_blocked()
            assert results == {}  # nothing is readable before finish
            await partition.finish()
        assert results["local"] == {0: [payload, EndOfPartition()]}
        assert results["remote"] == {0: [payload[::-1], EndOfPartition()]}

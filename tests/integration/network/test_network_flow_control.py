"""Buffer timeout on the Trio clock, backpressure isolation on a shared connection, fair share of memory."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import pytest
import trio
import trio.testing
from network_cluster import assert_all_returned, connection_statistics, read_channels

from weir.errors import UsageError
from weir.network.environment import ChannelSpec, NetworkEnvironment
from weir.network.events import EndOfPartition, Watermark
from weir.network.flusher import FlushPolicy, run_output_flusher
from weir.network.gate import InputGate

OpenCluster = Callable[..., AbstractAsyncContextManager[list[NetworkEnvironment]]]
SEGMENT = 32 * 1024


async def first_arrival(gate: InputGate, arrivals: list[tuple[float, object]]) -> None:
    while (item := await gate.get_next()) is not None:
        arrivals.append((trio.current_time(), bytes(item.data) if item.data is not None else item.event))
        item.recycle()


# --- buffer timeout ----------------------------------------------------------------------


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
@pytest.mark.parametrize(("timeout_ms", "visible_at"), [(100, 0.1), (0, 0.03)], ids=["100ms", "0ms"])
async def test_a_lone_record_becomes_visible_at_the_flush(
    remote: bool,
    timeout_ms: int,
    visible_at: float,
    open_cluster: OpenCluster,
    autojump_clock: trio.testing.MockClock,
) -> None:
    policy = FlushPolicy(timeout_ms)
    async with open_cluster(2) as (tm0, tm1):
        partition = tm0.create_result_partition("p", 1)
        gate = (tm1 if remote else tm0).create_input_gate(0, [ChannelSpec("p", 0, "tm0")])
        arrivals: list[tuple[float, object]] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first_arrival, gate, arrivals)
            nursery.start_soon(run_output_flusher, partition, timeout_ms)
            await trio.sleep(0.03)
            await partition.emit(0, b"lone record")
            if policy.flush_after_every_emit:
                partition.flush(0)  # what the RecordWriter does for timeout 0
            await trio.sleep(0.5)
            assert arrivals == [(pytest.approx(visible_at), b"lone record")]
            await partition.finish()
        assert arrivals[-1][1] == EndOfPartition()


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
async def test_without_timeout_bytes_wait_for_a_full_buffer_or_an_event(
    remote: bool, open_cluster: OpenCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_cluster(2) as (tm0, tm1):
        partition = tm0.create_result_partition("p", 1)
        gate = (tm1 if remote else tm0).create_input_gate(0, [ChannelSpec("p", 0, "tm0")])
        arrivals: list[tuple[float, object]] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first_arrival, gate, arrivals)
            nursery.start_soon(run_output_flusher, partition, -1)
            await partition.emit(0, b"a" * 100)
            await trio.sleep(10)
            assert arrivals == []  # no timer: it stays in the buffer
            await partition.emit(0, b"b" * (SEGMENT - 100))  # fills the buffer
            await trio.sleep(1)
            assert arrivals == [(pytest.approx(10), b"a" * 100 + b"b" * (SEGMENT - 100))]
            await partition.emit(0, b"c")
            await trio.sleep(1)
            assert len(arrivals) == 1
            await partition.emit_event(0, Watermark(9))  # an event pushes the bytes out
            await trio.sleep(1)
            assert arrivals[1:] == [(pytest.approx(12), b"c"), (pytest.approx(12), Watermark(9))]
            await trio.sleep(1)
            await partition.emit(0, b"d")
            await partition.finish()
        assert arrivals[3:] == [(pytest.approx(14), b"d"), (pytest.approx(14), EndOfPartition())]


# --- backpressure isolation (as Flink's) ------------------------------------------------------


async def test_a_stalled_consumer_does_not_stall_its_neighbour_on_the_same_connection(
    open_cluster: OpenCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_cluster(2) as (tm0, tm1):
        stalled_source = tm0.create_result_partition("a", 1)
        healthy_source = tm0.create_result_partition("b", 1)
        stalled = tm1.create_input_gate(0, [ChannelSpec("a", 0, "tm0")])  # never read
        healthy = tm1.create_input_gate(0, [ChannelSpec("b", 0, "tm0")])
        total = 4 << 20
        results: dict[int, list[object]] = {}

        async def flood() -> None:
            while True:
                await stalled_source.emit(0, b"s" * 10_000)

        async def produce() -> None:
            for _ in range(total // 8192):
                await healthy_source.emit(0, b"h" * 8192)
            await healthy_source.finish()

        async def consume() -> None:
            results.update(await read_channels(healthy))  # type: ignore[arg-type]

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flood)
            with trio.fail_after(60):  # a stalled connection would leave this waiting forever
                async with trio.open_nursery() as inner:
                    inner.start_soon(produce)
                    inner.start_soon(consume)
            await trio.testing.wait_all_tasks_blocked()

            assert results[0] == [b"h" * total, EndOfPartition()]
            # one connection tm1 <- tm0 carried both channels
            assert [(c.client_taskmanager, c.server_taskmanager) for c in tm1.statistics().connections] == [
                ("tm1", "tm0")
            ]
            stats = connection_statistics(tm1, "tm1", "tm0")
            assert stats.partition_requests == 2
            assert stats.readers == 1 and stats.readers_with_credit == 0  # the stalled channel's credit is 0
            # the receiver holds as much as its credit allowed: 2 exclusive + 8 floating, all full
            (channel,) = stalled.statistics().channels
            assert channel.credit == 0 and channel.unannounced_credit == 0
            assert channel.queued_buffers == 2 + 8
            # and the sender holds the backlog, its writer blocked on its own pool
            source = stalled_source.statistics()
            assert source.subpartitions[0].backlog > 0
            assert source.pool.used == source.pool.limit
            assert source.backpressured_since is not None
            nursery.cancel_scope.cancel()


async def test_a_backlog_that_grows_after_the_credit_ran_out_is_announced(
    open_cluster: OpenCluster, autojump_clock: trio.testing.MockClock
) -> None:
    # The interleaving that made the test above flaky, forced: each of the first buffers
    # leaves before the next one exists, so all tell the receiver "backlog 0"; the backlog
    # only grows once the credit is spent, and no buffer can carry it. (While they wait to
    # be read, floating buffers keep the initial credit free, Flink's backlog + initialCredit,
    # until the gate's pool is empty.)
    async with open_cluster(2) as (tm0, tm1):
        source = tm0.create_result_partition("a", 1)
        gate = tm1.create_input_gate(0, [ChannelSpec("a", 0, "tm0")])  # never read
        for _ in range(2 + 8):
            await source.emit(0, b"s" * SEGMENT)
            await trio.testing.wait_all_tasks_blocked()
        (channel,) = gate.statistics().channels
        assert (channel.queued_buffers, channel.credit, channel.backlog) == (2 + 8, 0, 0)
        assert channel.floating_buffers == 8

        async def flood() -> None:
            while True:
                await source.emit(0, b"s" * 10_000)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flood)
            await trio.testing.wait_all_tasks_blocked()
            (channel,) = gate.statistics().channels
            assert channel.backlog > 0  # the receiver heard of the backlog without a buffer
            assert channel.credit == 0 and channel.unannounced_credit == 0
            stats = connection_statistics(tm1, "tm1", "tm0")
            assert stats.backlog_announcements >= 1
            assert stats.buffers_sent == 2 + 8  # never a buffer without credit
            assert source.statistics().subpartitions[0].backlog > 0
            nursery.cancel_scope.cancel()


# --- network memory --------------------------------------------------------------------------


async def test_pools_share_short_network_memory_fairly_and_still_flow(
    open_cluster: OpenCluster, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_cluster(1, total_bytes=20 * SEGMENT) as (tm0,):
        a = tm0.create_result_partition("a", 4)  # required 5, max 4*2+8 = 16
        assert a.buffer_pool.limit == 16
        b = tm0.create_result_partition("b", 4)
        assert (a.buffer_pool.limit, b.buffer_pool.limit) == (10, 10)  # 5 + 5 each of the 10 left
        gates = {
            name: [tm0.create_input_gate(j, [ChannelSpec(name, j, "tm0")]) for j in range(4)] for name in "ab"
        }
        payload = bytes(range(256)) * 1024  # 256 KiB per subpartition
        got: dict[tuple[str, int], list[object]] = {}

        async def produce(partition_name: str) -> None:
            partition = a if partition_name == "a" else b
            for j in range(4):
                await partition.emit(j, payload)
            await partition.finish()

        async def consume(name: str, j: int) -> None:
            got[name, j] = (await read_channels(gates[name][j]))[0]

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for name in "ab":
                    nursery.start_soon(produce, name)
                    for j in range(4):
                        nursery.start_soon(consume, name, j)
        assert all(stream == [payload, EndOfPartition()] for stream in got.values())
        assert a.statistics().pool.limit == 10
        tm0.release_partition("b")
        assert a.buffer_pool.limit == 16
        tm0.release_partition("a")
        for gate_list in gates.values():
            for gate in gate_list:
                gate.close()
        assert_all_returned(tm0.network_buffer_pool)


async def test_too_little_network_memory_is_a_clear_error(open_cluster: OpenCluster) -> None:
    async with open_cluster(2) as (_, tm1):
        specs = [ChannelSpec(f"p{i}", 0, "tm0") for i in range(1100)]  # 1100 × 2 exclusive buffers
        with pytest.raises(UsageError) as error:
            tm1.create_input_gate(0, specs)
        message = str(error.value)
        assert "network memory of 64 MiB (2048 buffers of 32 KiB) is too small: 2200 required" in message
        assert "raise taskmanager.memory.network.max" in message
        # nothing was half-built: the memory is all there for a gate that fits
        assert tm1.network_buffer_pool.statistics().pools == ()
        tm1.create_input_gate(0, specs[:1000])

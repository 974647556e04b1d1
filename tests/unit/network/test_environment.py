"""NetworkEnvironment and NetworkRegistry: pool sizes, local vs remote, late producers, clear errors."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from weir.errors import UsageError
from weir.network.environment import ChannelSpec, NetworkEnvironment, NetworkRegistry
from weir.network.errors import ConnectionClosed, PartitionReleased
from weir.network.events import EndOfPartition
from weir.network.gate import InputGate, LocalInputChannel, RemoteInputChannel

MiB = 1 << 20


def env(tm: str = "tm1", registry: NetworkRegistry | None = None, **kwargs: int) -> NetworkEnvironment:
    return NetworkEnvironment(
        tm, registry or NetworkRegistry(), total_bytes=kwargs.pop("total_bytes", 4 * MiB), **kwargs
    )


def read_all(gate: InputGate) -> list[tuple[int, object]]:
    out: list[tuple[int, object]] = []
    while (item := gate.poll_next()) is not None:
        out.append((item.channel_index, bytes(item.data) if item.data is not None else item.event))
        item.recycle()
    return out


def test_partition_pools_follow_the_formula() -> None:
    e = env()
    partition = e.create_result_partition("p", 4)
    stats = partition.buffer_pool.statistics()
    assert (stats.num_required, stats.max_buffers) == (5, 4 * 2 + 8)


def test_gate_pools_hold_exclusive_plus_floating_buffers() -> None:
    registry = NetworkRegistry()
    consumer = env("tm1", registry)
    env("tm2", registry)
    gate = consumer.create_input_gate(
        0, [ChannelSpec("a", 0, "tm1"), ChannelSpec("b", 0, "tm2"), ChannelSpec("c", 0, "tm2")]
    )
    assert [type(c) for c in gate.channels] == [LocalInputChannel, RemoteInputChannel, RemoteInputChannel]
    assert gate.floating_pool is not None
    stats = gate.floating_pool.statistics()
    assert (stats.num_required, stats.max_buffers, stats.used) == (4, 4 + 8, 4)
    local_only = consumer.create_input_gate(1, [ChannelSpec("a", 1, "tm1")])
    assert local_only.floating_pool is None


def test_a_consumer_may_come_before_its_producer() -> None:
    e = env()
    gate = e.create_input_gate(0, [ChannelSpec("p", 0, "tm1"), ChannelSpec("p", 1, "tm1")])
    assert gate.poll_next() is None
    partition = e.create_result_partition("p", 2)
    partition.emit_nowait(1, b"late")
    partition.finish_nowait()
    assert sorted(read_all(gate), key=repr) == sorted(
        [(1, b"late"), (0, EndOfPartition()), (1, EndOfPartition())], key=repr
    )


def test_a_blocking_partition_is_served_once_finished() -> None:
    e = env()
    partition = e.create_result_partition("b", 1, blocking=True)
    gate = e.create_input_gate(0, [ChannelSpec("b", 0, "tm1")])
    partition.emit_nowait(0, b"batch")
    assert gate.poll_next() is None
    partition.finish_nowait()
    assert read_all(gate) == [(0, b"batch"), (0, EndOfPartition())]


def test_release_partition_fails_its_readers_and_frees_the_pool() -> None:
    e = env()
    partition = e.create_result_partition("p", 1)
    gate = e.create_input_gate(0, [ChannelSpec("p", 0, "tm1")])
    partition.emit_nowait(0, b"x" * 100_000)
    assert e.release_partition("p") is True
    with pytest.raises(PartitionReleased):
        gate.poll_next()
    stats = e.statistics().buffer_pool
    assert stats.available_segments == stats.total_segments and stats.pools == ()
    assert e.network_buffer_pool.statistics().required_segments == 0
    assert e.release_partition("p") is False  # unknown or released again: a no-op


def test_clear_errors() -> None:
    registry = NetworkRegistry()
    e = env("tm1", registry)
    e.create_result_partition("p", 1)
    with pytest.raises(UsageError, match="'p' already exists"):
        e.create_result_partition("p", 1)
    with pytest.raises(UsageError, match="'tm1' is already registered"):
        env("tm1", registry)
    with pytest.raises(UsageError, match="no taskmanager 'tm9' \\(registered: 'tm1'\\)"):
        e.create_input_gate(0, [ChannelSpec("q", 0, "tm9")])
    with pytest.raises(UsageError, match="segments of 1024 bytes"):
        env("tm2", registry, segment_size=1024)
    with pytest.raises(UsageError, match="at least 1 exclusive buffer per channel, got 0"):
        env("tm3", registry, buffers_per_channel=0)


def test_too_small_network_memory_names_the_numbers() -> None:
    e = env(total_bytes=64 * MiB)
    with pytest.raises(UsageError) as error:
        e.create_result_partition("wide", 2099)
    message = str(error.value)
    assert "network memory of 64 MiB (2048 buffers of 32 KiB) is too small: 2100 required" in message
    assert "raise taskmanager.memory.network.max" in message


def test_statistics_cover_pool_partitions_gates_and_connections() -> None:
    registry = NetworkRegistry()
    a = env("tm1", registry)
    env("tm2", registry)
    a.create_result_partition("p", 2)
    a.create_input_gate(3, [ChannelSpec("r", 0, "tm2")])
    stats = a.statistics()
    assert stats.taskmanager_id == "tm1"
    assert [p.partition_id for p in stats.partitions] == ["p"]
    assert [g.gate_index for g in stats.gates] == [3]
    (connection,) = stats.connections
    assert (connection.client_taskmanager, connection.server_taskmanager) == ("tm1", "tm2")
    assert connection.partition_requests == 1


async def test_stopping_a_producer_taskmanager_fails_remote_consumers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = NetworkRegistry()
    producer = env("tm1", registry)
    consumer = env("tm2", registry)
    partition = producer.create_result_partition("p", 1)
    gate = consumer.create_input_gate(0, [ChannelSpec("p", 0, "tm1")])
    async with trio.open_nursery() as outer:
        await outer.start(consumer.run)
        async with trio.open_nursery() as inner:
            await inner.start(producer.run)
            await partition.emit(0, b"x" * 10)
            await trio.sleep(1)
            inner.cancel_scope.cancel()
        with pytest.raises(ConnectionClosed, match="'tm2' to 'tm1' closed"):
            while await gate.get_next() is not None:
                pass
        with pytest.raises(UsageError, match="has stopped"):
            producer.create_result_partition("q", 1)
        outer.cancel_scope.cancel()
    assert partition.buffer_pool.used == 0  # the server released its view when it stopped

"""Helpers of the network integration tests: a small in-process cluster and stream readers."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from weir.network.buffer_pool import NetworkBufferPool
from weir.network.environment import Network, NetworkEnvironment, NetworkRegistry
from weir.network.events import Event
from weir.network.gate import InputGate
from weir.network.tcp import TcpNetwork
from weir.network.transport import ConnectionStatistics


@asynccontextmanager
async def open_cluster(
    num_taskmanagers: int, transport: str = "local", **options: Any
) -> AsyncIterator[list[NetworkEnvironment]]:
    """TaskManagers ``tm0``, ``tm1``, … with their connection tasks running; cancelled on exit.

    ``transport``: "local" (in-process connections) or "tcp" (each TaskManager listens on
    127.0.0.1 and remote channels go through real sockets, with one random secret).
    """
    network: Network = NetworkRegistry() if transport == "local" else TcpNetwork(secrets.token_bytes(32))
    environments = [NetworkEnvironment(f"tm{i}", network, **options) for i in range(num_taskmanagers)]
    async with trio.open_nursery() as nursery:
        for environment in environments:
            await nursery.start(environment.run)
        yield environments
        nursery.cancel_scope.cancel()


async def read_channels(gate: InputGate) -> dict[int, list[bytes | Event]]:
    """Everything a gate delivers, per channel: consecutive data joined into one bytes object."""
    streams: dict[int, list[bytes | Event]] = {}
    while (item := await gate.get_next()) is not None:
        stream = streams.setdefault(item.channel_index, [])
        if item.data is not None:
            if stream and isinstance(stream[-1], bytes):
                stream[-1] += bytes(item.data)
            else:
                stream.append(bytes(item.data))
        else:
            assert item.event is not None
            stream.append(item.event)
        item.recycle()
    return streams


def join_data(items: list[bytes | Event]) -> list[bytes | Event]:
    out: list[bytes | Event] = []
    for item in items:
        if isinstance(item, bytes) and out and isinstance(out[-1], bytes):
            out[-1] += item
        else:
            out.append(item)
    return out


def assert_all_returned(pool: NetworkBufferPool) -> None:
    stats = pool.statistics()
    assert stats.available_segments == stats.total_segments, stats


def connection_statistics(environment: NetworkEnvironment, client: str, server: str) -> ConnectionStatistics:
    """The statistics of the open connection ``client`` <- ``server``: over TCP the sum of its two ends
    (the client end counts requests and credit, the server end buffers, events and readers)."""
    ends = [
        c.statistics()
        for c in environment.registry.connections()
        if (c.client_taskmanager, c.server_taskmanager) == (client, server) and not c.closed
    ]
    assert ends and len(ends) == len({s.end for s in ends}), ends
    if len(ends) == 1:
        return ends[0]
    summed = {
        f.name: sum(getattr(s, f.name) for s in ends)
        for f in dataclasses.fields(ConnectionStatistics)
        if f.type in ("int", int)
    }
    return dataclasses.replace(ends[0], **summed)

"""Helpers of the network integration tests: a small in-process cluster and stream readers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from weir.network.buffer_pool import NetworkBufferPool
from weir.network.environment import NetworkEnvironment, NetworkRegistry
from weir.network.events import Event
from weir.network.gate import InputGate


@asynccontextmanager
async def open_cluster(num_taskmanagers: int, **options: Any) -> AsyncIterator[list[NetworkEnvironment]]:
    """TaskManagers ``tm0``, ``tm1``, … with their connection tasks running; cancelled on exit."""
    registry = NetworkRegistry()
    environments = [NetworkEnvironment(f"tm{i}", registry, **options) for i in range(num_taskmanagers)]
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

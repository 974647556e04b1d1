"""A collect sink's channel in a TaskManager process (``entrypoint.RemoteCollectChannel``):
one batch in flight, released by the JobManager's acknowledgement."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from weir.cluster.entrypoint import RemoteCollectChannel
from weir.errors import ProtocolViolation


class Sent:
    """Stands in for the RPC connection: keeps what the channel queues."""

    def __init__(self) -> None:
        self.messages: list[tuple[dict[str, Any], Any]] = []

    def send_nowait(self, header: dict[str, Any], payload: Any = None) -> None:
        self.messages.append((header, payload))


async def test_a_batch_is_sent_once_and_send_returns_only_after_its_ack() -> None:
    sent = Sent()
    channel = RemoteCollectChannel(sent, "e1", 7)  # type: ignore[arg-type]
    done: list[int] = []

    async def send(n: int) -> None:
        await channel.send([n])
        done.append(n)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send, 1)
        await trio.testing.wait_all_tasks_blocked()
        assert sent.messages == [({"type": "collect", "execution_id": "e1", "node": 7}, [1])]
        assert done == []  # waiting for the JobManager
        channel.on_ack()
        await trio.testing.wait_all_tasks_blocked()
        assert done == [1]
        nursery.start_soon(send, 2)
        await trio.testing.wait_all_tasks_blocked()
        assert len(sent.messages) == 2 and done == [1]
        channel.on_ack()
    assert done == [1, 2]


def test_an_ack_with_nothing_in_flight_is_a_protocol_violation() -> None:
    channel = RemoteCollectChannel(Sent(), "e1", 7)  # type: ignore[arg-type]
    with pytest.raises(
        ProtocolViolation, match="acknowledged a collect message of node 7 of e1, which has none in flight"
    ):
        channel.on_ack()

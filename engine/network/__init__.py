"""The network stack: buffers, pools, credit, wire format (pure); partitions, gates, flusher, local and TCP transport (Trio)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from weir.network.buffer import Buffer, BufferOrEvent
    from weir.network.buffer_pool import LocalBufferPool, NetworkBufferPool, WouldBlock
    from weir.network.credit import AnnounceCredit, CreditLedger, InputChannelCredit
    from weir.network.environment import ChannelSpec, Network, NetworkEnvironment, NetworkRegistry
    from weir.network.errors import AuthenticationFailed, ConnectionClosed, NetworkError, PartitionReleased
    from weir.network.events import (
        MAX_WATERMARK,
        CheckpointBarrier,
        EndOfData,
        EndOfPartition,
        Event,
        Watermark,
        WatermarkStatus,
    )
    from weir.network.flusher import FlushPolicy, run_output_flusher
    from weir.network.gate import InputGate, LocalInputChannel, RemoteInputChannel
    from weir.network.partition import ResultPartition, SubpartitionView
    from weir.network.tcp import TcpNetwork
    from weir.network.transport import Connection

# Exports are imported on first use, so that importing a pure module (buffer_pool, credit,
# buffer, events) does not pull in Trio through this package.
_EXPORTS = {
    "Buffer": "buffer",
    "BufferOrEvent": "buffer",
    "LocalBufferPool": "buffer_pool",
    "NetworkBufferPool": "buffer_pool",
    "WouldBlock": "buffer_pool",
    "AnnounceCredit": "credit",
    "CreditLedger": "credit",
    "InputChannelCredit": "credit",
    "ChannelSpec": "environment",
    "NetworkEnvironment": "environment",
    "Network": "environment",
    "NetworkRegistry": "environment",
    "AuthenticationFailed": "errors",
    "ConnectionClosed": "errors",
    "NetworkError": "errors",
    "PartitionReleased": "errors",
    "MAX_WATERMARK": "events",
    "CheckpointBarrier": "events",
    "EndOfData": "events",
    "EndOfPartition": "events",
    "Event": "events",
    "Watermark": "events",
    "WatermarkStatus": "events",
    "FlushPolicy": "flusher",
    "run_output_flusher": "flusher",
    "InputGate": "gate",
    "LocalInputChannel": "gate",
    "RemoteInputChannel": "gate",
    "ResultPartition": "partition",
    "SubpartitionView": "partition",
    "TcpNetwork": "tcp",
    "Connection": "transport",
}

__all__ = [
    "MAX_WATERMARK",
    "AnnounceCredit",
    "AuthenticationFailed",
    "Buffer",
    "BufferOrEvent",
    "ChannelSpec",
    "CheckpointBarrier",
    "Connection",
    "ConnectionClosed",
    "CreditLedger",
    "EndOfData",
    "EndOfPartition",
    "Event",
    "FlushPolicy",
    "InputChannelCredit",
    "InputGate",
    "LocalBufferPool",
    "LocalInputChannel",
    "Network",
    "NetworkBufferPool",
    "NetworkEnvironment",
    "NetworkError",
    "NetworkRegistry",
    "PartitionReleased",
    "RemoteInputChannel",
    "ResultPartition",
    "SubpartitionView",
    "TcpNetwork",
    "Watermark",
    "WatermarkStatus",
    "WouldBlock",
    "run_output_flusher",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'weir.network' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"weir.network.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

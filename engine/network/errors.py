"""Errors of the network stack that are neither a caller's mistake nor a peer's protocol slip.

``UsageError`` (a caller's mistake) and ``ProtocolViolation`` (a peer broke the protocol)
come from ``weir.errors``; these two say that the other side went away.
"""

from __future__ import annotations

from weir.errors import ProtocolViolation, WeirError


class NetworkError(WeirError):
    """Base of the network stack's own errors."""


class PartitionReleased(NetworkError):
    """A consumer read from a result partition that its producer has released."""


class ConnectionClosed(NetworkError):
    """The connection to another TaskManager closed while a channel still used it."""


class AuthenticationFailed(ProtocolViolation):
    """A peer of the TCP transport did not prove that it knows the cluster's secret."""

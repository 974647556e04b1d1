"""Heartbeat bookkeeping: who has been silent for too long.

Theory of operation
-------------------
A ``HeartbeatMonitor`` watches a set of *targets* (TaskManagers, for the
ResourceManager). Each target has a deadline, ``last heartbeat + timeout_ms``; the
clock is a parameter (``now_ms``) of every event, never read here.

Events:

- ``register(target, now_ms)`` starts watching a target (a second registration counts as
  a heartbeat and revives a target that had timed out: it reconnected).
- ``on_heartbeat(target, now_ms)`` moves its deadline to ``now_ms + timeout_ms``.
- ``check(now_ms)`` returns the targets whose deadline is ``<= now_ms`` and that were not
  reported before, earliest deadline first. A target times out *at* its deadline, not
  before, and is reported exactly once; after that it stays known as timed out (its
  heartbeats are refused) until it is unregistered or registered again.
- ``unregister(target)`` stops watching it.
- ``extend(by_ms)`` moves every live deadline: the watcher itself was stalled for that long
  (its event loop blocked), so it could not have read a heartbeat.

``next_deadline()`` is the earliest deadline of a live target, so a driver can sleep
exactly until the next possible timeout. Time never goes backwards: an event with a
``now_ms`` before the latest one seen raises ``UsageError``.

Flink's defaults are a heartbeat every 10 s (``heartbeat.interval``) and a timeout after
50 s without one (``heartbeat.timeout``); ``HeartbeatSettings`` holds the pair. The
interval is the senders' business (how often a TaskManager reports); the monitor only
needs the timeout.

What it does not do: no clock, no I/O, no sending of heartbeats or requests, no payloads
(Flink's heartbeats also carry slot reports); it does not act on a timeout, the driver
does.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from weir.common.config_options import parse_duration_ms
from weir.errors import ProtocolViolation, UsageError

__all__ = [
    "HEARTBEAT_INTERVAL_KEY",
    "HEARTBEAT_INTERVAL_MS",
    "HEARTBEAT_TIMEOUT_KEY",
    "HEARTBEAT_TIMEOUT_MS",
    "HeartbeatMonitor",
    "HeartbeatSettings",
    "HeartbeatStatistics",
    "TargetId",
]

TargetId: TypeAlias = Hashable

HEARTBEAT_INTERVAL_KEY = "heartbeat.interval"
HEARTBEAT_TIMEOUT_KEY = "heartbeat.timeout"
HEARTBEAT_INTERVAL_MS = 10_000
HEARTBEAT_TIMEOUT_MS = 50_000


def _check_positive_ms(what: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise UsageError(f"{what} must be a positive, finite number of milliseconds, got {value!r}")
    return value


def _check_now(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UsageError(f"{what}: now_ms must be a finite number of milliseconds, got {value!r}")
    return value


@dataclass(frozen=True)
class HeartbeatSettings:
    """Flink's ``heartbeat.interval`` and ``heartbeat.timeout``; the timeout must not be shorter."""

    interval_ms: float = HEARTBEAT_INTERVAL_MS
    timeout_ms: float = HEARTBEAT_TIMEOUT_MS

    def __post_init__(self) -> None:
        _check_positive_ms(HEARTBEAT_INTERVAL_KEY, self.interval_ms)
        _check_positive_ms(HEARTBEAT_TIMEOUT_KEY, self.timeout_ms)
        if self.timeout_ms < self.interval_ms:
            raise UsageError(
                f"{HEARTBEAT_TIMEOUT_KEY} ({self.timeout_ms} ms) must not be shorter than "
                f"{HEARTBEAT_INTERVAL_KEY} ({self.interval_ms} ms)"
            )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> HeartbeatSettings:
        """Read both keys (Flink's duration syntax: '10 s', '50000 ms', a bare number is ms)."""
        interval = config.get(HEARTBEAT_INTERVAL_KEY, HEARTBEAT_INTERVAL_MS)
        timeout = config.get(HEARTBEAT_TIMEOUT_KEY, HEARTBEAT_TIMEOUT_MS)
        return cls(
            interval_ms=parse_duration_ms(HEARTBEAT_INTERVAL_KEY, interval),
            timeout_ms=parse_duration_ms(HEARTBEAT_TIMEOUT_KEY, timeout),
        )


@dataclass(frozen=True)
class HeartbeatStatistics:
    """A snapshot: live targets with their deadlines, and targets that timed out."""

    timeout_ms: float
    deadlines_ms: dict[TargetId, float]  # live targets only
    timed_out: list[TargetId]
    next_deadline_ms: float | None


class HeartbeatMonitor:
    """Deadlines of a set of targets against a caller-supplied clock. Pure; see the module docstring."""

    def __init__(self, timeout_ms: float = HEARTBEAT_TIMEOUT_MS) -> None:
        self.timeout_ms = _check_positive_ms("heartbeat monitor: timeout_ms", timeout_ms)
        self._deadlines: dict[TargetId, float] = {}  # live targets, registration order
        self._timed_out: dict[TargetId, None] = {}  # reported, kept until unregister/register
        self._latest_now_ms = -math.inf

    def _advance(self, event: str, now_ms: float) -> float:
        now_ms = _check_now(f"heartbeat monitor: {event}", now_ms)
        if now_ms < self._latest_now_ms:
            raise UsageError(
                f"heartbeat monitor: {event} at now_ms={now_ms}, before the latest time seen "
                f"({self._latest_now_ms}); expected a clock that never goes backwards"
            )
        self._latest_now_ms = now_ms
        return now_ms

    def register(self, target_id: TargetId, now_ms: float) -> None:
        """Start watching ``target_id`` (or restart: counts as a heartbeat, revives a timed-out target)."""
        now_ms = self._advance(f"register({target_id!r})", now_ms)
        self._timed_out.pop(target_id, None)
        self._deadlines[target_id] = now_ms + self.timeout_ms

    def on_heartbeat(self, target_id: TargetId, now_ms: float) -> None:
        """``target_id`` is alive at ``now_ms``; its deadline moves to ``now_ms + timeout_ms``."""
        if target_id in self._timed_out:
            raise ProtocolViolation(
                f"heartbeat monitor: heartbeat from {target_id!r}, which already timed out; "
                f"expected it to register again"
            )
        if target_id not in self._deadlines:
            raise ProtocolViolation(
                f"heartbeat monitor: heartbeat from {target_id!r}, which is not registered "
                f"(registered: {list(self._deadlines)!r})"
            )
        now_ms = self._advance(f"on_heartbeat({target_id!r})", now_ms)
        self._deadlines[target_id] = now_ms + self.timeout_ms

    def unregister(self, target_id: TargetId) -> None:
        """Stop watching ``target_id`` (live or timed out)."""
        if target_id in self._deadlines:
            del self._deadlines[target_id]
        elif target_id in self._timed_out:
            del self._timed_out[target_id]
        else:
            raise UsageError(
                f"heartbeat monitor: cannot unregister {target_id!r}: not registered "
                f"(registered: {list(self._deadlines)!r})"
            )

    def check(self, now_ms: float) -> list[TargetId]:
        """Targets whose deadline is ``<= now_ms``, each reported once, earliest deadline first."""
        now_ms = self._advance("check", now_ms)
        expired = sorted(
            (t for t, deadline in self._deadlines.items() if deadline <= now_ms),
            key=self._deadlines.__getitem__,
        )  # sorted() is stable: ties stay in registration order
        for target_id in expired:
            del self._deadlines[target_id]
            self._timed_out[target_id] = None
        return expired

    def extend(self, by_ms: float) -> None:
        """The watcher could not hear anyone for ``by_ms`` (its own thread stalled): every
        live deadline moves by that much. A heartbeat that arrived meanwhile waits, unread,
        behind the stall, so the stall does not count against its sender."""
        if not math.isfinite(by_ms) or by_ms < 0:
            raise UsageError(f"heartbeat monitor: extend by_ms must be a finite number >= 0, got {by_ms!r}")
        for target_id in self._deadlines:
            self._deadlines[target_id] += by_ms

    def next_deadline(self) -> float | None:
        """The earliest deadline (ms) of a live target, or ``None`` when none is watched."""
        return min(self._deadlines.values(), default=None)

    def deadline_of(self, target_id: TargetId) -> float | None:
        """``target_id``'s deadline, or ``None`` if it is not live (unknown or timed out)."""
        return self._deadlines.get(target_id)

    def is_live(self, target_id: TargetId) -> bool:
        return target_id in self._deadlines

    def is_timed_out(self, target_id: TargetId) -> bool:
        return target_id in self._timed_out

    def statistics(self) -> HeartbeatStatistics:
        return HeartbeatStatistics(
            timeout_ms=self.timeout_ms,
            deadlines_ms=dict(self._deadlines),
            timed_out=list(self._timed_out),
            next_deadline_ms=self.next_deadline(),
        )

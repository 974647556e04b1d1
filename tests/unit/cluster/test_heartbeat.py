"""HeartbeatMonitor: deadlines against a caller-supplied clock; each timeout reported exactly once."""

from __future__ import annotations

import math

import pytest

from weir.cluster.heartbeat import (
    HEARTBEAT_INTERVAL_MS,
    HEARTBEAT_TIMEOUT_MS,
    HeartbeatMonitor,
    HeartbeatSettings,
)
from weir.errors import ProtocolViolation, UsageError


def test_flink_defaults() -> None:
    assert (HEARTBEAT_INTERVAL_MS, HEARTBEAT_TIMEOUT_MS) == (10_000, 50_000)
    assert HeartbeatMonitor().timeout_ms == 50_000
    assert HeartbeatSettings() == HeartbeatSettings(interval_ms=10_000, timeout_ms=50_000)


def test_timeout_fires_at_the_deadline_not_before_and_only_once() -> None:
    hb = HeartbeatMonitor(timeout_ms=50_000)
    hb.register("tm0", now_ms=0)
    assert hb.next_deadline() == 50_000
    assert hb.check(49_999) == []
    assert hb.check(50_000) == ["tm0"]
    assert hb.check(50_001) == []
    assert hb.check(1_000_000) == []
    assert hb.next_deadline() is None
    assert hb.is_timed_out("tm0")


def test_heartbeats_move_the_deadline() -> None:
    hb = HeartbeatMonitor(timeout_ms=50)
    hb.register("tm0", 0)
    for now in range(10, 200, 10):
        hb.on_heartbeat("tm0", now)
        assert hb.check(now) == []
    assert hb.deadline_of("tm0") == 240
    assert hb.check(239) == []
    assert hb.check(240) == ["tm0"]


def test_check_reports_earliest_deadline_first_ties_in_registration_order() -> None:
    hb = HeartbeatMonitor(timeout_ms=100)
    hb.register("c", 0)
    hb.register("b", 10)
    hb.register("a", 10)
    hb.on_heartbeat("c", 20)
    hb.register("d", 50)
    assert hb.next_deadline() == 110
    assert hb.check(120) == ["b", "a", "c"]
    assert hb.next_deadline() == 150
    assert hb.check(150) == ["d"]


def test_heartbeat_after_timeout_is_refused_until_registered_again() -> None:
    hb = HeartbeatMonitor(timeout_ms=10)
    hb.register("tm0", 0)
    assert hb.check(10) == ["tm0"]
    with pytest.raises(ProtocolViolation, match="heartbeat from 'tm0', which already timed out"):
        hb.on_heartbeat("tm0", 11)
    hb.register("tm0", 12)  # reconnect
    assert hb.is_live("tm0")
    assert hb.check(21) == []
    assert hb.check(22) == ["tm0"]


def test_heartbeat_from_unknown_target_is_a_protocol_violation() -> None:
    hb = HeartbeatMonitor(timeout_ms=10)
    hb.register("tm0", 0)
    with pytest.raises(
        ProtocolViolation, match=r"heartbeat from 'tm9', which is not registered \(registered: \['tm0'\]\)"
    ):
        hb.on_heartbeat("tm9", 1)


def test_register_again_counts_as_a_heartbeat() -> None:
    hb = HeartbeatMonitor(timeout_ms=10)
    hb.register("tm0", 0)
    hb.register("tm0", 8)
    assert hb.deadline_of("tm0") == 18


def test_unregister_stops_watching_live_or_timed_out_targets() -> None:
    hb = HeartbeatMonitor(timeout_ms=10)
    hb.register("live", 0)
    hb.register("dead", 0)
    hb.unregister("live")
    assert hb.check(10) == ["dead"]
    hb.unregister("dead")
    assert hb.statistics().timed_out == []
    with pytest.raises(UsageError, match="cannot unregister 'dead': not registered"):
        hb.unregister("dead")


def test_time_must_not_go_backwards() -> None:
    hb = HeartbeatMonitor(timeout_ms=10)
    hb.register("tm0", 100)
    with pytest.raises(
        UsageError, match=r"on_heartbeat\('tm0'\) at now_ms=99, before the latest time seen \(100\)"
    ):
        hb.on_heartbeat("tm0", 99)
    with pytest.raises(UsageError, match="check at now_ms=50"):
        hb.check(50)
    assert hb.deadline_of("tm0") == 110


def test_statistics() -> None:
    hb = HeartbeatMonitor(timeout_ms=10)
    hb.register("a", 0)
    hb.register("b", 5)
    hb.check(10)
    stats = hb.statistics()
    assert stats.deadlines_ms == {"b": 15}
    assert stats.timed_out == ["a"]
    assert stats.next_deadline_ms == 15


@pytest.mark.parametrize("bad", [0, -5, float("inf"), float("nan"), True, "50 s"])
def test_timeout_must_be_positive_and_finite(bad: object) -> None:
    with pytest.raises(UsageError, match="timeout_ms must be a positive, finite number of milliseconds"):
        HeartbeatMonitor(bad)  # type: ignore[arg-type]


def test_settings_reject_a_timeout_shorter_than_the_interval() -> None:
    with pytest.raises(
        UsageError,
        match=r"heartbeat.timeout \(5000 ms\) must not be shorter than heartbeat.interval \(10000 ms\)",
    ):
        HeartbeatSettings(interval_ms=10_000, timeout_ms=5_000)


def test_settings_from_flink_keys() -> None:
    settings = HeartbeatSettings.from_config({"heartbeat.interval": "2 s", "heartbeat.timeout": "1 min"})
    assert settings == HeartbeatSettings(interval_ms=2_000, timeout_ms=60_000)
    assert HeartbeatSettings.from_config({}) == HeartbeatSettings()
    with pytest.raises(UsageError, match=r"heartbeat\.timeout: expected a duration"):
        HeartbeatSettings.from_config({"heartbeat.timeout": "soon"})


def test_a_stalled_watcher_moves_every_live_deadline_by_the_stall() -> None:
    m = HeartbeatMonitor(timeout_ms=100)
    m.register("a", now_ms=0)
    m.register("gone", now_ms=0)
    m.register("b", now_ms=50)
    assert m.check(now_ms=100) == ["a", "gone"]
    m.register("a", now_ms=100)  # reconnected
    m.extend(400)  # the watcher's loop was blocked for 400 ms
    assert (m.deadline_of("a"), m.deadline_of("b"), m.deadline_of("gone")) == (600, 550, None)
    assert m.check(now_ms=549) == [] and m.check(now_ms=550) == ["b"]
    m.extend(0)
    assert m.deadline_of("a") == 600
    for bad in (-1, math.inf, math.nan):
        with pytest.raises(UsageError, match="extend by_ms"):
            m.extend(bad)

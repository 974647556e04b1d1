"""The dashboard's pure parts: back-pressure levels and sampling, summaries, request handling."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from weir.cluster.web.rest import BackPressureSampler, _summary, backpressure_level
from weir.cluster.web.server import DashboardApp, _host_of, check_port
from weir.errors import UsageError


@pytest.mark.parametrize(
    ("ratio", "level"),
    [(0.0, "ok"), (0.10, "ok"), (0.1001, "low"), (0.5, "low"), (0.5001, "high"), (1.0, "high")],
)
def test_levels_follow_flinks_thresholds(ratio: float, level: str) -> None:
    assert backpressure_level(ratio) == level


def test_the_ratio_is_over_the_last_interval_not_the_whole_life() -> None:
    sampler = BackPressureSampler()
    # before any sample: the ratio since the attempt started
    assert sampler.ratio("a", fallback=(3.0, 4.0)) == 0.75
    sampler.on_sample(1_000, {"a": (9.0, 10.0)})  # 90 % of its first 10 s waiting
    assert sampler.ratio("a") == pytest.approx(0.9)
    sampler.on_sample(2_000, {"a": (9.0, 11.0)})  # the last second it never waited
    assert sampler.ratio("a") == 0.0
    sampler.on_sample(3_000, {"a": (9.6, 12.0)})
    assert sampler.ratio("a") == pytest.approx(0.6)
    assert sampler.sampled_ms == 3_000


def test_an_attempt_that_went_away_is_forgotten_and_ratios_stay_within_0_and_1() -> None:
    sampler = BackPressureSampler()
    sampler.on_sample(1, {"a": (1.0, 1.0), "b": (5.0, 1.0)})  # clock skew cannot exceed 1
    assert sampler.ratio("b") == 1.0
    sampler.on_sample(2, {"c": (0.0, 1.0)})
    assert sampler.ratio("a") == 0.0 and sampler.ratio("a", fallback=(2.0, 4.0)) == 0.5


def test_summary_is_nearest_rank_over_completed_checkpoints() -> None:
    assert _summary([]) == dict.fromkeys(("min", "max", "avg", "p50", "p90", "p95", "p99", "p999"), 0)
    s = _summary([float(v) for v in range(1, 101)])
    assert (s["min"], s["max"], s["avg"], s["p50"], s["p90"], s["p99"]) == (1, 100, 50, 50, 90, 99)


class _NoJobs:
    def __init__(self) -> None:
        self.jobs: dict[str, object] = {}
        self.task_executors: list[object] = []
        self.resource_manager = SimpleNamespace()


def _app(loopback_only: bool = True) -> DashboardApp:
    from weir.cluster.web.rest import RestApi

    return DashboardApp(RestApi(_NoJobs(), lambda: 0, lambda: 0.0), loopback_only)


@pytest.mark.parametrize("host", ["127.0.0.1:8081", "localhost:8081", "[::1]:8081", "127.0.0.1", "localhost"])
def test_loopback_hosts_are_served(host: str) -> None:
    status, _, body = _app().respond("GET", "/jobs", host)
    assert status == 200 and json.loads(body) == {"jobs": []}


@pytest.mark.parametrize("host", ["rebound.example:8081", "10.0.0.7:8081", None])
def test_other_hosts_are_refused_when_bound_to_loopback(host: str | None) -> None:
    status, _, body = _app().respond("GET", "/jobs", host)
    assert status == 403 and "loopback" in json.loads(body)["errors"][0]
    assert _app(loopback_only=False).respond("GET", "/jobs", host)[0] == 200


def test_methods_other_than_get_are_405_with_allow() -> None:
    status, headers, body = _app().respond("DELETE", "/jobs/abc", "localhost")
    assert status == 405 and (b"allow", b"GET, HEAD") in headers
    assert "read-only" in json.loads(body)["errors"][0]


def test_host_parsing() -> None:
    assert [_host_of(h) for h in ("a:1", "[::1]:80", "::1", "name")] == ["a", "::1", "::1", "name"]


@pytest.mark.parametrize("port", [-1, 65536, "8081"])
def test_a_bad_port_is_one_clear_error(port: object) -> None:
    with pytest.raises(UsageError, match=r"rest.port must be a TCP port within 0..65535"):
        check_port(port)  # type: ignore[arg-type]

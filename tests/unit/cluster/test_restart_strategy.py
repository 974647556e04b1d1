from __future__ import annotations

import random

import pytest

from weir.cluster.restart_strategy import (
    ExponentialDelayRestartStrategy,
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    NoRestartStrategy,
    RestartDecision,
    restart_strategy_from_configuration,
)
from weir.common.configuration import Configuration
from weir.errors import UsageError


def decisions(strategy: object, times: list[int]) -> list[tuple[bool, int]]:
    out = []
    for t in times:
        d = strategy.on_failure(t)  # type: ignore[attr-defined]
        out.append((d.restart, d.delay_ms))
    return out


def test_no_restart_refuses_and_names_the_key() -> None:
    d = NoRestartStrategy().on_failure(0)
    assert not d.restart
    assert "disabled" in d.reason and "restart-strategy.type" in d.reason


def test_fixed_delay_allows_exactly_its_attempts() -> None:
    s = FixedDelayRestartStrategy(attempts=3, delay_ms=500)
    assert decisions(s, [0, 10, 20]) == [(True, 500)] * 3
    d = s.on_failure(30)
    assert d == RestartDecision(False, 0, "restart strategy fixed-delay allows 3 attempts; 3 used")
    assert not s.on_failure(10_000_000).restart  # attempts are over the job's life


def test_fixed_delay_zero_attempts_never_restarts() -> None:
    assert decisions(FixedDelayRestartStrategy(0, 1000), [0]) == [(False, 0)]


def test_exponential_backoff_doubles_and_caps() -> None:
    s = ExponentialDelayRestartStrategy(100, 1000, 2.0, 1_000_000, 100)
    delays = [d for _, d in decisions(s, [0, 1, 2, 3, 4, 5, 6])]
    assert delays == [100, 200, 400, 800, 1000, 1000, 1000]


def test_exponential_multiplier_truncates_like_java() -> None:
    s = ExponentialDelayRestartStrategy(1000, 60_000, 1.5, 1_000_000, 100)
    assert [d for _, d in decisions(s, [0, 1, 2, 3])] == [1000, 1500, 2250, 3375]
    assert s.on_failure(4).delay_ms == 5062


def test_exponential_fails_after_attempts_in_a_row() -> None:
    s = ExponentialDelayRestartStrategy(100, 1000, 2.0, 10_000, 3)
    assert decisions(s, [0, 200, 500]) == [(True, 100), (True, 200), (True, 400)]
    d = s.on_failure(1000)
    assert not d.restart
    assert "allows 3 attempts" in d.reason and "3 used" in d.reason


def _three_failures_then_restart_at_900() -> ExponentialDelayRestartStrategy:
    s = ExponentialDelayRestartStrategy(100, 1000, 2.0, 5000, 3)
    assert decisions(s, [0, 200, 500]) == [(True, 100), (True, 200), (True, 400)]
    s.on_restarted(900)
    return s


def test_exponential_resets_after_a_quiet_run_since_the_last_restart() -> None:
    # 4999 ms after the restart: not quiet long enough, and the 3 attempts are used up
    assert decisions(_three_failures_then_restart_at_900(), [5899]) == [(False, 0)]
    # 5000 ms after the restart: backoff and attempt count reset
    s = _three_failures_then_restart_at_900()
    assert decisions(s, [5900, 6000, 6200, 6600]) == [(True, 100), (True, 200), (True, 400), (False, 0)]


def test_exponential_assumes_restart_after_the_delay_without_on_restarted() -> None:
    s = ExponentialDelayRestartStrategy(100, 1000, 2.0, 5000, 10)
    assert s.on_failure(0).delay_ms == 100  # restart assumed at 100
    assert s.on_failure(5099).delay_ms == 200  # 4999 ms of running
    assert s.on_failure(5299 + 5000).delay_ms == 100  # restart assumed at 5299, then 5000 ms


def test_exponential_jitter_bounds_the_delay_but_not_the_backoff() -> None:
    s = ExponentialDelayRestartStrategy(1000, 8000, 2.0, 10**9, 100, jitter_factor=0.1, rng=random.Random(7))
    for t, base in zip(range(4), [1000, 2000, 4000, 8000]):
        d = s.on_failure(t)
        assert base - base // 10 <= d.delay_ms <= base + base // 10
        assert s.current_backoff_ms == base


def test_failure_rate_sliding_window() -> None:
    s = FailureRateRestartStrategy(max_failures_per_interval=2, failure_rate_interval_ms=1000, delay_ms=50)
    assert decisions(s, [0, 500]) == [(True, 50), (True, 50)]
    d = s.on_failure(1000)  # 0, 500, 1000: three within 1000 ms (inclusive)
    assert not d.restart
    assert "allows 2 failures per 1000 ms" in d.reason
    # the window slides: 500, 1000, 1501 span 1001 ms
    assert decisions(s, [1501]) == [(True, 50)]
    assert decisions(s, [2000]) == [(False, 0)]  # 1000, 1501, 2000
    assert decisions(s, [3001]) == [(True, 50)]  # 1501, 2000, 3001


def test_failure_rate_one_per_interval() -> None:
    s = FailureRateRestartStrategy(1, 1, 0)
    assert decisions(s, [0, 2, 4, 5]) == [(True, 0), (True, 0), (True, 0), (False, 0)]


def test_time_going_backwards_is_a_usage_error() -> None:
    s = FixedDelayRestartStrategy(3, 0)
    s.on_failure(100)
    with pytest.raises(UsageError, match="now_ms=99"):
        s.on_failure(99)


@pytest.mark.parametrize(
    "make",
    [
        lambda: FixedDelayRestartStrategy(-1, 0),
        lambda: ExponentialDelayRestartStrategy(1000, 500, 2.0, 0, 1),
        lambda: ExponentialDelayRestartStrategy(1000, 5000, 0.5, 0, 1),
        lambda: ExponentialDelayRestartStrategy(1000, 5000, 2.0, 0, 1, jitter_factor=2.0),
        lambda: FailureRateRestartStrategy(0, 1000, 0),
    ],
)
def test_bad_arguments_are_usage_errors(make: object) -> None:
    with pytest.raises(UsageError, match="expected"):
        make()  # type: ignore[operator]


def test_configuration_defaults_depend_on_checkpointing() -> None:
    assert isinstance(restart_strategy_from_configuration(Configuration()), NoRestartStrategy)
    s = restart_strategy_from_configuration(Configuration(), checkpointing_enabled=True)
    assert isinstance(s, FixedDelayRestartStrategy)
    assert (s.attempts, s.delay_ms) == (2**31 - 1, 1000)
    conf = Configuration().set_string("restart-strategy.type", "none")
    assert isinstance(
        restart_strategy_from_configuration(conf, checkpointing_enabled=True), NoRestartStrategy
    )


def test_configuration_fixed_delay() -> None:
    conf = Configuration.from_dict(
        {
            "restart-strategy.type": "fixeddelay",
            "restart-strategy.fixed-delay.attempts": "4",
            "restart-strategy.fixed-delay.delay": "2 s",
        }
    )
    s = restart_strategy_from_configuration(conf)
    assert isinstance(s, FixedDelayRestartStrategy)
    assert (s.attempts, s.delay_ms) == (4, 2000)


def test_configuration_exponential_delay_defaults_and_values() -> None:
    s = restart_strategy_from_configuration(
        Configuration().set_string("restart-strategy.type", "exponential-delay")
    )
    assert isinstance(s, ExponentialDelayRestartStrategy)
    assert (
        s.initial_backoff_ms,
        s.max_backoff_ms,
        s.backoff_multiplier,
        s.reset_backoff_threshold_ms,
        s.attempts_before_reset_backoff,
    ) == (1000, 60_000, 1.5, 3_600_000, 2**31 - 1)
    conf = Configuration.from_dict(
        {
            "restart-strategy.type": "exponential-delay",
            "restart-strategy.exponential-delay.initial-backoff": "10 ms",
            "restart-strategy.exponential-delay.max-backoff": "1 s",
            "restart-strategy.exponential-delay.backoff-multiplier": "2",
            "restart-strategy.exponential-delay.reset-backoff-threshold": "1 min",
            "restart-strategy.exponential-delay.attempts-before-reset-backoff": "5",
        }
    )
    s = restart_strategy_from_configuration(conf)
    assert isinstance(s, ExponentialDelayRestartStrategy)
    assert (s.initial_backoff_ms, s.max_backoff_ms, s.backoff_multiplier) == (10, 1000, 2.0)
    assert (s.reset_backoff_threshold_ms, s.attempts_before_reset_backoff) == (60_000, 5)


def test_configuration_failure_rate() -> None:
    conf = Configuration.from_dict(
        {
            "restart-strategy.type": "failure-rate",
            "restart-strategy.failure-rate.max-failures-per-interval": "3",
            "restart-strategy.failure-rate.failure-rate-interval": "5 min",
            "restart-strategy.failure-rate.delay": "10 s",
        }
    )
    s = restart_strategy_from_configuration(conf)
    assert isinstance(s, FailureRateRestartStrategy)
    assert (s.max_failures_per_interval, s.failure_rate_interval_ms, s.delay_ms) == (3, 300_000, 10_000)


def test_configuration_bad_values_are_usage_errors_naming_the_key() -> None:
    with pytest.raises(UsageError, match=r"restart-strategy\.type.*'sometimes'"):
        Configuration().set_string("restart-strategy.type", "sometimes")
    with pytest.raises(UsageError, match=r"restart-strategy\.fixed-delay\.delay"):
        Configuration().set_string("restart-strategy.fixed-delay.delay", "soon")
    conf = Configuration.from_dict(
        {
            "restart-strategy.type": "exponential-delay",
            "restart-strategy.exponential-delay.backoff-multiplier": "0.5",
        }
    )
    with pytest.raises(UsageError, match=r"backoff-multiplier: expected a value >= 1\.0, got 0\.5"):
        restart_strategy_from_configuration(conf)
    conf = Configuration.from_dict(
        {
            "restart-strategy.type": "exponential-delay",
            "restart-strategy.exponential-delay.initial-backoff": "10 s",
            "restart-strategy.exponential-delay.max-backoff": "1 s",
        }
    )
    with pytest.raises(UsageError, match=r"max-backoff: expected a value >= .*initial-backoff \(10000 ms\)"):
        restart_strategy_from_configuration(conf)

"""RestartStrategies: each configuration stands for Flink's ``restart-strategy.*`` keys."""

from __future__ import annotations

import datetime as dt

import pytest

from weir.cluster.restart_strategy import (
    FailureRateRestartStrategy,
    FixedDelayRestartStrategy,
    NoRestartStrategy,
    restart_strategy_from_configuration,
)
from weir.common import Configuration, RestartStrategies, RestartStrategyConfiguration
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.stream_execution_environment import default_configuration
from weir.errors import UsageError


def test_fixed_delay_sets_flinks_keys_and_reads_back() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(4, dt.timedelta(seconds=2)))
    conf = env.get_configuration()
    assert conf.get_string("restart-strategy.type") == "fixed-delay"
    assert conf.get_string("restart-strategy.fixed-delay.attempts") == "4"
    assert conf.get_string("restart-strategy.fixed-delay.delay") == "2000 ms"
    strategy = restart_strategy_from_configuration(conf)
    assert isinstance(strategy, FixedDelayRestartStrategy)
    assert (strategy.attempts, strategy.delay_ms) == (4, 2000)
    back = env.get_restart_strategy()
    assert back == RestartStrategies.fixed_delay_restart(4, 2000)
    assert back.get_restart_attempts() == 4
    assert back.get_delay_between_attempts_interval() == dt.timedelta(seconds=2)
    assert back.get_description() == "Restart with fixed delay (2000 ms). #4 restart attempts."


def test_failure_rate_sets_its_three_keys() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_restart_strategy(RestartStrategies.failure_rate_restart(3, 60_000, 500))
    strategy = restart_strategy_from_configuration(env.get_configuration())
    assert isinstance(strategy, FailureRateRestartStrategy)
    assert (strategy.max_failures_per_interval, strategy.failure_rate_interval_ms, strategy.delay_ms) == (
        3,
        60_000,
        500,
    )
    back = env.get_restart_strategy()
    assert back.get_max_failure_rate() == 3
    assert back.get_failure_interval() == dt.timedelta(minutes=1)


def test_a_new_strategy_replaces_the_keys_of_the_old_one() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_restart_strategy(RestartStrategies.failure_rate_restart(3, 60_000, 500))
    env.set_restart_strategy(RestartStrategies.no_restart())
    assert {k for k in env.get_configuration().key_set() if k.startswith("restart-strategy.")} == {
        "restart-strategy.type"
    }
    assert isinstance(restart_strategy_from_configuration(env.get_configuration()), NoRestartStrategy)
    assert env.get_restart_strategy().get_description() == "Restart deactivated."


def test_fall_back_restart_uses_what_weir_run_configured() -> None:
    cluster = Configuration().set_string("restart-strategy.type", "fixed-delay")
    cluster.set_string("restart-strategy.fixed-delay.attempts", "7")
    with default_configuration(cluster):
        env = StreamExecutionEnvironment.get_execution_environment()
    env.set_restart_strategy(RestartStrategies.no_restart())
    env.set_restart_strategy(RestartStrategies.fall_back_restart())
    strategy = restart_strategy_from_configuration(env.get_configuration())
    assert isinstance(strategy, FixedDelayRestartStrategy) and strategy.attempts == 7


def test_fall_back_restart_without_cluster_settings_leaves_flinks_default() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_restart_strategy(RestartStrategies.no_restart())
    env.set_restart_strategy(RestartStrategies.fall_back_restart())
    assert not env.get_configuration().contains_key("restart-strategy.type")
    assert env.get_restart_strategy() == RestartStrategies.fall_back_restart()
    assert isinstance(RestartStrategies.fall_back_restart(), RestartStrategyConfiguration)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: RestartStrategies.fixed_delay_restart(-1, 0), "restart_attempts"),
        (lambda: RestartStrategies.fixed_delay_restart(1, "10 s"), "delay_between_attempts"),
        (lambda: RestartStrategies.failure_rate_restart(0, 1000, 0), "failure_rate"),
        (lambda: RestartStrategies.failure_rate_restart(1, 0, 0), "failure_interval"),
    ],
)
def test_bad_values_are_named(make: object, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        make()  # type: ignore[operator]


def test_set_restart_strategy_needs_a_configuration() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(UsageError, match="RestartStrategyConfiguration"):
        env.set_restart_strategy("fixed-delay")

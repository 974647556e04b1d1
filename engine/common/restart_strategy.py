"""``RestartStrategies`` and ``RestartStrategyConfiguration``, as in ``pyflink.common``.

A configuration is a value: the ``restart-strategy.*`` keys of Flink's configuration that
it stands for (``to_configuration_entries``). ``StreamExecutionEnvironment.set_restart_strategy``
writes those keys into the job's configuration, so the JobMaster's restart strategy
(``weir.cluster.restart_strategy``) reads them exactly as if the job had set the keys
itself; ``get_restart_strategy`` reads them back into a configuration.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from weir.common import config_options as opts
from weir.common.time import Duration, Time
from weir.errors import UsageError

__all__ = ["RestartStrategies", "RestartStrategyConfiguration"]

#: the keys that say which restart strategy a job uses (what ``fall_back_restart`` clears)
RESTART_STRATEGY_KEY_PREFIX = "restart-strategy."


def _millis(what: str, value: Any) -> int:
    """Milliseconds from an int, a ``datetime.timedelta`` (PyFlink's two kinds), a Duration or a Time."""
    if isinstance(value, _dt.timedelta):
        ms = value // _dt.timedelta(milliseconds=1)
    elif isinstance(value, Duration | Time):
        ms = value.to_milliseconds()
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise UsageError(
            f"RestartStrategies: {what} must be milliseconds as int or a datetime.timedelta, got {value!r}"
        )
    if ms < 0:
        raise UsageError(f"RestartStrategies: {what} must not be negative, got {value!r}")
    return ms


def _count(what: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"RestartStrategies: {what} must be an int >= {minimum}, got {value!r}")
    return value


class RestartStrategyConfiguration:
    """A restart strategy as configuration (Flink's ``RestartStrategyConfiguration``)."""

    def get_description(self) -> str:
        """What the strategy does, in one sentence (Flink shows it in the web interface)."""
        raise NotImplementedError

    def to_configuration_entries(self) -> dict[str, str]:
        """The ``restart-strategy.*`` keys and values this configuration stands for."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(vars(self).items()))))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.get_description()!r})"


class NoRestartStrategyConfiguration(RestartStrategyConfiguration):
    """A failed job fails for good."""

    def get_description(self) -> str:
        return "Restart deactivated."

    def to_configuration_entries(self) -> dict[str, str]:
        return {opts.RESTART_STRATEGY.key: "none"}


class FixedDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
    """At most ``restart_attempts`` restarts over the job's life, each after the delay."""

    def __init__(self, restart_attempts: int, delay_between_attempts_interval: Any) -> None:
        self.restart_attempts = _count("restart_attempts", restart_attempts, 0)
        self.delay_ms = _millis("delay_between_attempts", delay_between_attempts_interval)

    def get_restart_attempts(self) -> int:
        return self.restart_attempts

    def get_delay_between_attempts_interval(self) -> _dt.timedelta:
        return _dt.timedelta(milliseconds=self.delay_ms)

    def get_description(self) -> str:
        return f"Restart with fixed delay ({self.delay_ms} ms). #{self.restart_attempts} restart attempts."

    def to_configuration_entries(self) -> dict[str, str]:
        return {
            opts.RESTART_STRATEGY.key: "fixed-delay",
            opts.FIXED_DELAY_ATTEMPTS.key: str(self.restart_attempts),
            opts.FIXED_DELAY_DELAY.key: f"{self.delay_ms} ms",
        }


class FailureRateRestartStrategyConfiguration(RestartStrategyConfiguration):
    """Restarts after the delay unless more than ``max_failure_rate`` failures fell within
    ``failure_interval``."""

    def __init__(
        self, max_failure_rate: int, failure_interval: Any, delay_between_attempts_interval: Any
    ) -> None:
        self.max_failure_rate = _count("failure_rate", max_failure_rate, 1)
        self.failure_interval_ms = _millis("failure_interval", failure_interval)
        if self.failure_interval_ms == 0:
            raise UsageError(
                f"RestartStrategies: failure_interval must be positive, got {failure_interval!r}"
            )
        self.delay_ms = _millis("delay_interval", delay_between_attempts_interval)

    def get_max_failure_rate(self) -> int:
        return self.max_failure_rate

    def get_failure_interval(self) -> _dt.timedelta:
        return _dt.timedelta(milliseconds=self.failure_interval_ms)

    def get_delay_between_attempts_interval(self) -> _dt.timedelta:
        return _dt.timedelta(milliseconds=self.delay_ms)

    def get_description(self) -> str:
        return (
            f"Failure rate restart with maximum of {self.max_failure_rate} failures within interval "
            f"{self.failure_interval_ms} ms and fixed delay {self.delay_ms} ms."
        )

    def to_configuration_entries(self) -> dict[str, str]:
        return {
            opts.RESTART_STRATEGY.key: "failure-rate",
            opts.FAILURE_RATE_MAX.key: str(self.max_failure_rate),
            opts.FAILURE_RATE_INTERVAL.key: f"{self.failure_interval_ms} ms",
            opts.FAILURE_RATE_DELAY.key: f"{self.delay_ms} ms",
        }


class FallbackRestartStrategyConfiguration(RestartStrategyConfiguration):
    """The cluster's restart strategy: the job sets no ``restart-strategy.*`` key of its own
    (``weir run``'s flags or the cluster's configuration decide, else Flink's default)."""

    def get_description(self) -> str:
        return "Cluster level default restart strategy"

    def to_configuration_entries(self) -> dict[str, str]:
        return {}


class RestartStrategies:
    """Makes ``RestartStrategyConfiguration``s (Flink's ``RestartStrategies``)."""

    @staticmethod
    def no_restart() -> NoRestartStrategyConfiguration:
        return NoRestartStrategyConfiguration()

    @staticmethod
    def fall_back_restart() -> FallbackRestartStrategyConfiguration:
        return FallbackRestartStrategyConfiguration()

    @staticmethod
    def fixed_delay_restart(
        restart_attempts: int, delay_between_attempts: Any
    ) -> FixedDelayRestartStrategyConfiguration:
        """``delay_between_attempts``: milliseconds as int, or a ``datetime.timedelta``."""
        return FixedDelayRestartStrategyConfiguration(restart_attempts, delay_between_attempts)

    @staticmethod
    def failure_rate_restart(
        failure_rate: int, failure_interval: Any, delay_interval: Any
    ) -> FailureRateRestartStrategyConfiguration:
        """At most ``failure_rate`` failures per ``failure_interval``; intervals in
        milliseconds as int, or ``datetime.timedelta``."""
        return FailureRateRestartStrategyConfiguration(failure_rate, failure_interval, delay_interval)


# PyFlink's nested names
RestartStrategies.NoRestartStrategyConfiguration = NoRestartStrategyConfiguration  # type: ignore[attr-defined]
RestartStrategies.FixedDelayRestartStrategyConfiguration = FixedDelayRestartStrategyConfiguration  # type: ignore[attr-defined]
RestartStrategies.FailureRateRestartStrategyConfiguration = FailureRateRestartStrategyConfiguration  # type: ignore[attr-defined]
RestartStrategies.FallbackRestartStrategyConfiguration = FallbackRestartStrategyConfiguration  # type: ignore[attr-defined]


def restart_strategy_of(conf: Any) -> RestartStrategyConfiguration | None:
    """The configuration that the ``restart-strategy.*`` keys of ``conf`` describe; None when
    ``conf`` sets no strategy. ``exponential-delay`` (no ``RestartStrategies`` factory in
    PyFlink 2.x) is reported as the fallback: the keys stay as they are."""
    if not conf.has_option(opts.RESTART_STRATEGY):
        return None
    kind = conf.get_option(opts.RESTART_STRATEGY)
    if kind == "none":
        return NoRestartStrategyConfiguration()
    if kind == "fixed-delay":
        return FixedDelayRestartStrategyConfiguration(
            conf.get_option(opts.FIXED_DELAY_ATTEMPTS), conf.get_option(opts.FIXED_DELAY_DELAY)
        )
    if kind == "failure-rate":
        return FailureRateRestartStrategyConfiguration(
            conf.get_option(opts.FAILURE_RATE_MAX),
            conf.get_option(opts.FAILURE_RATE_INTERVAL),
            conf.get_option(opts.FAILURE_RATE_DELAY),
        )
    return FallbackRestartStrategyConfiguration()

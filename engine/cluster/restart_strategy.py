"""Restart strategies: whether a failed job restarts, and after how long.

Theory of operation
-------------------
A strategy is a small state machine driven by the JobMaster, with Flink's semantics
(``RestartBackoffTimeStrategy`` and its four implementations). The clock is a parameter
(``now_ms``) of every event, never read here.

Events:

- ``on_failure(now_ms)`` records a failure of the job and returns a ``RestartDecision``:
  restart (after ``delay_ms``) or not, with a ``reason`` that explains a refusal.
- ``on_restarted(now_ms)`` tells the strategy when the job actually runs again. Only
  the exponential-delay strategy uses it (the quiet time that resets its backoff is
  measured from the last restart); without it the restart is assumed to happen
  ``delay_ms`` after the failure.

Strategies (``restart-strategy.type``):

- ``none``: never restarts.
- ``fixed-delay``: at most ``attempts`` restarts over the job's life, each after ``delay_ms``.
- ``exponential-delay``: the first failure waits ``initial_backoff_ms``; each further
  failure multiplies the backoff by ``backoff_multiplier`` (truncated to whole ms, as
  Java's ``long *= double``) up to ``max_backoff_ms``. A failure that comes at least
  ``reset_backoff_threshold_ms`` after the last restart resets the backoff and the attempt
  count. More than ``attempts_before_reset_backoff`` attempts in a row fail the job.
  ``jitter_factor`` adds a uniform jitter of up to ``±factor × backoff`` to the delay only.
- ``failure-rate``: restarts after ``delay_ms`` unless more than
  ``max_failures_per_interval`` failures (this one included) fell within the last
  ``failure_rate_interval_ms``, inclusive at the boundary: it keeps the timestamps of the
  last ``max + 1`` failures, and refuses when they span ``<= interval``.

Invariants: time never goes backwards (an event before the latest one seen raises
``UsageError``); a refusal is final for the job, but the strategy stays consistent if
it is asked again (later failures are refused the same way).

What it does not do: no clock, no I/O, no sleeping (the JobMaster waits ``delay_ms``);
it does not merge concurrent failures of one restart into one attempt (Flink 1.19's
exponential-delay does), since weir restarts the whole job on the first failure;
it does not classify failures (every failure is recoverable here).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Any

from weir.common import config_options as opts
from weir.errors import UsageError

INTEGER_MAX = 2**31 - 1
#: Flink's default when checkpointing is enabled and no strategy is configured.
CHECKPOINTING_DEFAULT_ATTEMPTS = INTEGER_MAX
CHECKPOINTING_DEFAULT_DELAY_MS = 1000


@dataclass(frozen=True)
class RestartDecision:
    """What to do about one failure: restart after ``delay_ms``, or fail the job."""

    restart: bool
    delay_ms: int
    reason: str


def _require(ok: bool, subject: str, value: Any, expected: str) -> None:
    if not ok:
        raise UsageError(f"{subject}: expected {expected}, got {value!r}")


class RestartStrategy:
    """Base: decides on failures; ``name`` is the ``restart-strategy.type`` value."""

    name = "none"

    def __init__(self) -> None:
        self._latest_ms: int | None = None

    def _advance(self, now_ms: int) -> None:
        if self._latest_ms is not None and now_ms < self._latest_ms:
            raise UsageError(
                f"restart strategy {self.name}: time went backwards, got now_ms={now_ms} "
                f"after now_ms={self._latest_ms}; expected a value >= {self._latest_ms}"
            )
        self._latest_ms = now_ms

    def on_failure(self, now_ms: int) -> RestartDecision:
        raise NotImplementedError

    def on_restarted(self, now_ms: int) -> None:
        """The job runs again at ``now_ms``. Most strategies do not care."""
        self._advance(now_ms)


class NoRestartStrategy(RestartStrategy):
    """Never restarts (Flink's ``NoRestartBackoffTimeStrategy``)."""

    name = "none"

    def on_failure(self, now_ms: int) -> RestartDecision:
        self._advance(now_ms)
        return RestartDecision(
            False,
            0,
            f"restarts are disabled ({opts.RESTART_STRATEGY.key}: none); set {opts.RESTART_STRATEGY.key} "
            "to fixed-delay, exponential-delay or failure-rate to enable them",
        )

    def __repr__(self) -> str:
        return "NoRestartStrategy()"


class FixedDelayRestartStrategy(RestartStrategy):
    """At most ``attempts`` restarts, each ``delay_ms`` after its failure."""

    name = "fixed-delay"

    def __init__(self, attempts: int, delay_ms: int) -> None:
        super().__init__()
        _require(attempts >= 0, "FixedDelayRestartStrategy attempts", attempts, "a value >= 0")
        _require(delay_ms >= 0, "FixedDelayRestartStrategy delay_ms", delay_ms, "a value >= 0")
        self.attempts = attempts
        self.delay_ms = delay_ms
        self.restart_attempts = 0

    def on_failure(self, now_ms: int) -> RestartDecision:
        self._advance(now_ms)
        if self.restart_attempts >= self.attempts:
            return RestartDecision(
                False,
                0,
                f"restart strategy fixed-delay allows {self.attempts} attempts; {self.restart_attempts} used",
            )
        self.restart_attempts += 1
        return RestartDecision(
            True,
            self.delay_ms,
            f"attempt {self.restart_attempts} of {self.attempts} after {self.delay_ms} ms",
        )

    def __repr__(self) -> str:
        return f"FixedDelayRestartStrategy(attempts={self.attempts}, delay_ms={self.delay_ms})"


class ExponentialDelayRestartStrategy(RestartStrategy):
    """Backoff that grows per failure and resets after a long enough healthy run."""

    name = "exponential-delay"

    def __init__(
        self,
        initial_backoff_ms: int,
        max_backoff_ms: int,
        backoff_multiplier: float,
        reset_backoff_threshold_ms: int,
        attempts_before_reset_backoff: int,
        jitter_factor: float = 0.0,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__()
        s = "ExponentialDelayRestartStrategy"
        _require(initial_backoff_ms >= 0, f"{s} initial_backoff_ms", initial_backoff_ms, "a value >= 0")
        _require(
            max_backoff_ms >= initial_backoff_ms,
            f"{s} max_backoff_ms",
            max_backoff_ms,
            f"a value >= initial_backoff_ms ({initial_backoff_ms})",
        )
        _require(backoff_multiplier >= 1.0, f"{s} backoff_multiplier", backoff_multiplier, "a value >= 1.0")
        _require(
            reset_backoff_threshold_ms >= 0,
            f"{s} reset_backoff_threshold_ms",
            reset_backoff_threshold_ms,
            "a value >= 0",
        )
        _require(
            attempts_before_reset_backoff >= 0,
            f"{s} attempts_before_reset_backoff",
            attempts_before_reset_backoff,
            "a value >= 0",
        )
        _require(0.0 <= jitter_factor <= 1.0, f"{s} jitter_factor", jitter_factor, "a value within 0.0..1.0")
        self.initial_backoff_ms = initial_backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.backoff_multiplier = backoff_multiplier
        self.reset_backoff_threshold_ms = reset_backoff_threshold_ms
        self.attempts_before_reset_backoff = attempts_before_reset_backoff
        self.jitter_factor = jitter_factor
        self._rng = rng if rng is not None else random.Random()
        self.current_backoff_ms: int | None = None  # None until the first failure
        self.restart_attempts = 0  # in a row, since the last reset
        self.last_restart_ms: int | None = None

    def _increased(self, backoff_ms: int) -> int:
        if backoff_ms < self.max_backoff_ms:
            backoff_ms = int(backoff_ms * self.backoff_multiplier)
        return max(self.initial_backoff_ms, min(backoff_ms, self.max_backoff_ms))

    def on_failure(self, now_ms: int) -> RestartDecision:
        self._advance(now_ms)
        if self.current_backoff_ms is None or (
            self.last_restart_ms is not None
            and now_ms - self.last_restart_ms >= self.reset_backoff_threshold_ms
        ):
            self.current_backoff_ms = self.initial_backoff_ms
            self.restart_attempts = 0
        else:
            self.current_backoff_ms = self._increased(self.current_backoff_ms)
        if self.restart_attempts >= self.attempts_before_reset_backoff:
            return RestartDecision(
                False,
                0,
                f"restart strategy exponential-delay allows {self.attempts_before_reset_backoff} attempts "
                f"before the backoff resets; {self.restart_attempts} used without a "
                f"{self.reset_backoff_threshold_ms} ms run since the last restart",
            )
        self.restart_attempts += 1
        delay_ms = self.current_backoff_ms
        span = int(delay_ms * self.jitter_factor)
        if span:
            delay_ms = max(0, delay_ms + self._rng.randint(-span, span))
        self.last_restart_ms = now_ms + delay_ms  # until on_restarted says otherwise
        return RestartDecision(
            True,
            delay_ms,
            f"attempt {self.restart_attempts} of {self.attempts_before_reset_backoff} after {delay_ms} ms",
        )

    def on_restarted(self, now_ms: int) -> None:
        self._advance(now_ms)
        self.last_restart_ms = now_ms

    def __repr__(self) -> str:
        return (
            f"ExponentialDelayRestartStrategy(initial_backoff_ms={self.initial_backoff_ms}, "
            f"max_backoff_ms={self.max_backoff_ms}, backoff_multiplier={self.backoff_multiplier}, "
            f"reset_backoff_threshold_ms={self.reset_backoff_threshold_ms}, "
            f"attempts_before_reset_backoff={self.attempts_before_reset_backoff}, "
            f"jitter_factor={self.jitter_factor})"
        )


class FailureRateRestartStrategy(RestartStrategy):
    """Restarts unless more than ``max_failures_per_interval`` failures fell within the interval."""

    name = "failure-rate"

    def __init__(self, max_failures_per_interval: int, failure_rate_interval_ms: int, delay_ms: int) -> None:
        super().__init__()
        s = "FailureRateRestartStrategy"
        _require(
            max_failures_per_interval >= 1,
            f"{s} max_failures_per_interval",
            max_failures_per_interval,
            "a value >= 1",
        )
        _require(
            failure_rate_interval_ms >= 1,
            f"{s} failure_rate_interval_ms",
            failure_rate_interval_ms,
            "a value >= 1",
        )
        _require(delay_ms >= 0, f"{s} delay_ms", delay_ms, "a value >= 0")
        self.max_failures_per_interval = max_failures_per_interval
        self.failure_rate_interval_ms = failure_rate_interval_ms
        self.delay_ms = delay_ms
        self.failure_timestamps: deque[int] = deque(maxlen=max_failures_per_interval + 1)

    def on_failure(self, now_ms: int) -> RestartDecision:
        self._advance(now_ms)
        self.failure_timestamps.append(now_ms)
        window = self.failure_timestamps
        if (
            len(window) > self.max_failures_per_interval
            and now_ms - window[0] <= self.failure_rate_interval_ms
        ):
            return RestartDecision(
                False,
                0,
                f"restart strategy failure-rate allows {self.max_failures_per_interval} failures per "
                f"{self.failure_rate_interval_ms} ms; {len(window)} failures happened from "
                f"{window[0]} ms to {now_ms} ms",
            )
        return RestartDecision(True, self.delay_ms, f"restart after {self.delay_ms} ms")

    def __repr__(self) -> str:
        return (
            f"FailureRateRestartStrategy(max_failures_per_interval={self.max_failures_per_interval}, "
            f"failure_rate_interval_ms={self.failure_rate_interval_ms}, delay_ms={self.delay_ms})"
        )


def restart_strategy_from_configuration(conf: Any, checkpointing_enabled: bool = False) -> RestartStrategy:
    """The strategy ``conf`` (an ``weir.common.configuration.Configuration``) asks for.

    Without ``restart-strategy.type``: Flink's default, fixed-delay with Integer.MAX_VALUE
    attempts and a 1 s delay if checkpointing is enabled, else no restarts. A malformed or
    out-of-range value raises ``UsageError`` naming the key.
    """
    if not conf.has_option(opts.RESTART_STRATEGY):
        if checkpointing_enabled:
            return FixedDelayRestartStrategy(CHECKPOINTING_DEFAULT_ATTEMPTS, CHECKPOINTING_DEFAULT_DELAY_MS)
        return NoRestartStrategy()
    kind = conf.get_option(opts.RESTART_STRATEGY)
    if kind == "fixed-delay":
        return FixedDelayRestartStrategy(
            conf.get_option(opts.FIXED_DELAY_ATTEMPTS), conf.get_option(opts.FIXED_DELAY_DELAY)
        )
    if kind == "exponential-delay":
        initial = conf.get_option(opts.EXP_INITIAL_BACKOFF)
        max_backoff = conf.get_option(opts.EXP_MAX_BACKOFF)
        multiplier = conf.get_option(opts.EXP_MULTIPLIER)
        threshold = conf.get_option(opts.EXP_RESET_THRESHOLD)
        _require(
            max_backoff >= initial,
            opts.EXP_MAX_BACKOFF.key,
            max_backoff,
            f"a value >= {opts.EXP_INITIAL_BACKOFF.key} ({initial} ms)",
        )
        _require(multiplier >= 1.0, opts.EXP_MULTIPLIER.key, multiplier, "a value >= 1.0")
        _require(threshold >= 0, opts.EXP_RESET_THRESHOLD.key, threshold, "a duration >= 0")
        return ExponentialDelayRestartStrategy(
            initial, max_backoff, multiplier, threshold, conf.get_option(opts.EXP_ATTEMPTS)
        )
    if kind == "failure-rate":
        return FailureRateRestartStrategy(
            conf.get_option(opts.FAILURE_RATE_MAX),
            conf.get_option(opts.FAILURE_RATE_INTERVAL),
            conf.get_option(opts.FAILURE_RATE_DELAY),
        )
    return NoRestartStrategy()

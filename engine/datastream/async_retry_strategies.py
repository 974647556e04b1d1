"""The retry strategies of async I/O: none, a fixed delay, an exponential backoff.

Attempts count from 1: after attempt ``n`` failed in a way the predicate matches, another
follows when ``can_retry(n)`` holds, ``get_backoff_time_millis(n)`` milliseconds later.
"""

from __future__ import annotations

from typing import Any, Generic

from weir.datastream.async_functions import (
    OUT,
    AsyncRetryPredicate,
    AsyncRetryStrategy,
    ExceptionPredicate,
    ResultPredicate,
)


class RetryPredicate(AsyncRetryPredicate[OUT], Generic[OUT]):
    def __init__(
        self, result_predicate: ResultPredicate | None, exception_predicate: ExceptionPredicate | None
    ) -> None:
        self._result_predicate = result_predicate
        self._exception_predicate = exception_predicate

    def result_predicate(self) -> ResultPredicate | None:
        return self._result_predicate

    def exception_predicate(self) -> ExceptionPredicate | None:
        return self._exception_predicate


class NoRetryStrategy(AsyncRetryStrategy[OUT], Generic[OUT]):
    def can_retry(self, current_attempts: int) -> bool:
        return False

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return -1

    def get_retry_predicate(self) -> AsyncRetryPredicate[OUT]:
        return RetryPredicate(None, None)


class FixedDelayRetryStrategy(AsyncRetryStrategy[OUT], Generic[OUT]):
    def __init__(
        self,
        max_attempts: int,
        backoff_time_millis: int,
        result_predicate: ResultPredicate | None = None,
        exception_predicate: ExceptionPredicate | None = None,
    ) -> None:
        self._max_attempts = max_attempts
        self._backoff_time_millis = backoff_time_millis
        self._predicate: RetryPredicate[OUT] = RetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return self._backoff_time_millis

    def get_retry_predicate(self) -> AsyncRetryPredicate[OUT]:
        return self._predicate


class ExponentialBackoffDelayRetryStrategy(AsyncRetryStrategy[OUT], Generic[OUT]):
    """The first backoff is ``initial_delay``; each next one ``multiplier`` times the last, capped."""

    def __init__(
        self,
        max_attempts: int,
        initial_delay: int,
        max_retry_delay: int,
        multiplier: float,
        result_predicate: ResultPredicate | None = None,
        exception_predicate: ExceptionPredicate | None = None,
    ) -> None:
        self._max_attempts = max_attempts
        self._initial_delay = initial_delay
        self._max_retry_delay = max_retry_delay
        self._multiplier = multiplier
        self._last_retry_delay = initial_delay
        self._predicate: RetryPredicate[OUT] = RetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        if current_attempts <= 1:
            self._last_retry_delay = self._initial_delay
            return self._last_retry_delay
        self._last_retry_delay = int(min(self._last_retry_delay * self._multiplier, self._max_retry_delay))
        return self._last_retry_delay

    def get_retry_predicate(self) -> AsyncRetryPredicate[OUT]:
        return self._predicate


NO_RETRY_STRATEGY: NoRetryStrategy[Any] = NoRetryStrategy()

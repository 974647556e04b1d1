"""Async I/O functions and their retry strategies, by PyFlink's names.

An ``AsyncFunction`` declares ``async def async_invoke(value)`` returning a list of results.
``AsyncDataStream`` (weir.datastream.async_data_stream) runs it per record with a timeout and,
given an ``AsyncRetryStrategy``, retries an attempt whose result or exception the strategy's
predicate matches, waiting the strategy's backoff between attempts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import Enum
from typing import Any, Generic, TypeVar

from weir.core.functions import Function

IN = TypeVar("IN")
OUT = TypeVar("OUT")

ResultPredicate = Callable[[list[Any]], bool]
ExceptionPredicate = Callable[[Exception], bool]


class AsyncRetryPredicate(ABC, Generic[OUT]):
    """Which results and which exceptions of an attempt call for another attempt."""

    @abstractmethod
    def result_predicate(self) -> ResultPredicate | None: ...

    @abstractmethod
    def exception_predicate(self) -> ExceptionPredicate | None: ...


class AsyncRetryStrategy(ABC, Generic[OUT]):
    """Whether attempt ``n`` may be followed by another, and after how long."""

    @abstractmethod
    def can_retry(self, current_attempts: int) -> bool: ...

    @abstractmethod
    def get_backoff_time_millis(self, current_attempts: int) -> int: ...

    @abstractmethod
    def get_retry_predicate(self) -> AsyncRetryPredicate[OUT]: ...

    @staticmethod
    def no_restart() -> AsyncRetryStrategy[Any]:
        from weir.datastream import async_retry_strategies

        return async_retry_strategies.NO_RETRY_STRATEGY

    @staticmethod
    def fixed_delay(
        max_attempts: int,
        backoff_time_millis: int,
        result_predicate: ResultPredicate | None,
        exception_predicate: ExceptionPredicate | None,
    ) -> AsyncRetryStrategy[Any]:
        from weir.datastream.async_retry_strategies import FixedDelayRetryStrategy

        return FixedDelayRetryStrategy(
            max_attempts, backoff_time_millis, result_predicate, exception_predicate
        )

    @staticmethod
    def exponential_backoff(
        max_attempts: int,
        initial_delay: int,
        max_retry_delay: int,
        multiplier: float,
        result_predicate: ResultPredicate | None,
        exception_predicate: ExceptionPredicate | None,
    ) -> AsyncRetryStrategy[Any]:
        from weir.datastream.async_retry_strategies import ExponentialBackoffDelayRetryStrategy

        return ExponentialBackoffDelayRetryStrategy(
            max_attempts, initial_delay, max_retry_delay, multiplier, result_predicate, exception_predicate
        )


class AsyncFunction(Function, Generic[IN, OUT]):
    """``async_invoke`` gives the results of one record; ``timeout`` is called when it is late."""

    @abstractmethod
    async def async_invoke(self, value: IN) -> list[OUT]: ...

    def timeout(self, value: IN) -> list[OUT]:
        raise TimeoutError("Async function call has timed out for input: " + str(value))


class AsyncFunctionDescriptor:
    """An async function with its timeout, capacity, retry strategy and output order."""

    class OutputMode(Enum):
        ORDERED = 0
        UNORDERED = 1

    def __init__(
        self,
        async_function: AsyncFunction[Any, Any],
        timeout: Any,
        capacity: int,
        async_retry_strategy: AsyncRetryStrategy[Any],
        output_mode: AsyncFunctionDescriptor.OutputMode,
    ) -> None:
        self.async_function = async_function
        self.timeout = timeout
        self.capacity = capacity
        self.async_retry_strategy = async_retry_strategy
        self.output_mode = output_mode

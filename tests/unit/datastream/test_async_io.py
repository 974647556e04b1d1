"""AsyncDataStream runs an AsyncFunction per record: results, timeout, retries, bad input."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from weir.common import Time, Types
from weir.datastream import AsyncDataStream, AsyncFunction, AsyncRetryStrategy, StreamExecutionEnvironment
from weir.datastream.async_retry_strategies import ExponentialBackoffDelayRetryStrategy
from weir.errors import UsageError


class Square(AsyncFunction):
    async def async_invoke(self, value: int) -> list[int]:
        await asyncio.sleep(0)
        return [value * value]


class Hangs(AsyncFunction):
    async def async_invoke(self, value: int) -> list[int]:
        await asyncio.Event().wait()  # never set: only the timeout ends it
        return [value]

    def timeout(self, value: int) -> list[str]:
        return [f"late {value}"]


class FailsTwice(AsyncFunction):
    """Fails the first two attempts of each record, then answers with the attempt number."""

    def open(self, runtime_context: Any) -> None:
        self.attempts: dict[int, int] = {}

    async def async_invoke(self, value: int) -> list[str]:
        self.attempts[value] = self.attempts.get(value, 0) + 1
        if self.attempts[value] <= 2:
            raise ConnectionError(f"attempt {self.attempts[value]}")
        return [f"{value} after {self.attempts[value]}"]


def env() -> StreamExecutionEnvironment:
    e = StreamExecutionEnvironment.get_execution_environment()
    e.set_parallelism(1)
    return e


@pytest.mark.parametrize("wait", [AsyncDataStream.ordered_wait, AsyncDataStream.unordered_wait])
def test_each_record_gets_the_async_results(wait: Any) -> None:
    e = env()
    out = wait(e.from_collection([1, 2, 3]), Square(), Time.seconds(10), 10, Types.INT())
    assert sorted(out.execute_and_collect(limit=10)) == [1, 4, 9]


def test_a_late_record_gets_what_timeout_returns() -> None:
    e = env()
    out = AsyncDataStream.ordered_wait(e.from_collection([7]), Hangs(), Time.milliseconds(50))
    assert out.execute_and_collect(limit=5) == ["late 7"]


def test_the_default_timeout_fails_the_job() -> None:
    class HangsWithDefaultTimeout(Hangs):
        timeout = AsyncFunction.timeout

    e = env()
    AsyncDataStream.ordered_wait(
        e.from_collection([7]), HangsWithDefaultTimeout(), Time.milliseconds(20)
    ).print()
    with pytest.raises(Exception, match="timed out for input: 7"):
        e.execute("times out")


def test_retries_follow_the_exception_predicate_and_stop_at_max_attempts() -> None:
    retry = AsyncRetryStrategy.fixed_delay(2, 1, None, lambda ex: isinstance(ex, ConnectionError))
    e = env()
    out = AsyncDataStream.ordered_wait_with_retry(
        e.from_collection([5]), FailsTwice(), Time.seconds(10), retry
    )
    assert out.execute_and_collect(limit=5) == ["5 after 3"]

    once = AsyncRetryStrategy.fixed_delay(1, 1, None, lambda ex: isinstance(ex, ConnectionError))
    e = env()
    AsyncDataStream.ordered_wait_with_retry(
        e.from_collection([5]), FailsTwice(), Time.seconds(10), once
    ).print()
    with pytest.raises(Exception, match="attempt 2"):
        e.execute("gives up")


def test_retries_follow_the_result_predicate() -> None:
    class EmptyFirst(AsyncFunction):
        def open(self, runtime_context: Any) -> None:
            self.calls = 0

        async def async_invoke(self, value: int) -> list[int]:
            self.calls += 1
            return [] if self.calls == 1 else [value, self.calls]

    retry = AsyncRetryStrategy.fixed_delay(3, 1, lambda results: results == [], None)
    e = env()
    out = AsyncDataStream.unordered_wait_with_retry(
        e.from_collection([9]), EmptyFirst(), Time.seconds(10), retry
    )
    assert out.execute_and_collect(limit=5) == [9, 2]


def test_exponential_backoff_grows_by_the_multiplier_up_to_the_cap() -> None:
    s = ExponentialBackoffDelayRetryStrategy(5, 100, 500, 2.0, None, None)
    assert [s.get_backoff_time_millis(n) for n in (1, 2, 3, 4)] == [100, 200, 400, 500]
    assert s.can_retry(5) and not s.can_retry(6)
    no = AsyncRetryStrategy.no_restart()
    assert not no.can_retry(1) and no.get_retry_predicate().result_predicate() is None


def test_bad_arguments_are_refused_by_name() -> None:
    class NotAsync(AsyncFunction):
        def async_invoke(self, value: int) -> list[int]:  # type: ignore[override]
            return [value]

    e = env()
    ds = e.from_collection([1])
    with pytest.raises(UsageError, match="async def"):
        AsyncDataStream.ordered_wait(ds, NotAsync(), Time.seconds(1))
    with pytest.raises(UsageError, match="capacity must be a positive integer, got 0"):
        AsyncDataStream.ordered_wait(ds, Square(), Time.seconds(1), 0)
    retry = AsyncRetryStrategy.fixed_delay(1, 1, None, None)
    with pytest.raises(UsageError, match="needs a positive timeout, got 0 ms"):
        AsyncDataStream.ordered_wait_with_retry(ds, Square(), Time.milliseconds(0), retry)

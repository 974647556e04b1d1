"""``AsyncDataStream``: apply an ``AsyncFunction`` to each record of a stream.

Each subtask keeps one asyncio event loop (made in ``open``) and runs, per record, the
attempts of ``async_invoke`` under the timeout: the timeout bounds all attempts of a record
together, as in Flink. An attempt whose results match the retry predicate's
``result_predicate``, or whose exception matches its ``exception_predicate``, is followed by
another after the strategy's backoff while ``can_retry(attempts)`` holds; otherwise its results
are emitted (or its exception fails the task). A record whose attempts outlast the timeout gets
``timeout(value)``'s results, whose default raises ``TimeoutError``.

A subtask has one record in flight at a time, so ordered and unordered output are the same
order (the input's; unordered allows any); ``capacity`` is checked but never reached.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from weir.common.time import Time
from weir.common.typeinfo import TypeInformation
from weir.core.functions import FlatMapFunction, RuntimeContext
from weir.datastream.async_functions import AsyncFunction, AsyncFunctionDescriptor, AsyncRetryStrategy
from weir.datastream.async_retry_strategies import NO_RETRY_STRATEGY
from weir.datastream.data_stream import DataStream
from weir.errors import UsageError

_Mode = AsyncFunctionDescriptor.OutputMode


class AsyncDataStream:
    """Applies an ``AsyncFunction`` to a stream, with or without retries."""

    @staticmethod
    def unordered_wait(
        data_stream: DataStream,
        async_function: AsyncFunction[Any, Any],
        timeout: Time,
        capacity: int = 100,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        return AsyncDataStream.unordered_wait_with_retry(
            data_stream, async_function, timeout, NO_RETRY_STRATEGY, capacity, output_type
        )

    @staticmethod
    def unordered_wait_with_retry(
        data_stream: DataStream,
        async_function: AsyncFunction[Any, Any],
        timeout: Time,
        async_retry_strategy: AsyncRetryStrategy[Any],
        capacity: int = 100,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        return _apply(
            data_stream, async_function, timeout, async_retry_strategy, capacity, output_type, _Mode.UNORDERED
        )

    @staticmethod
    def ordered_wait(
        data_stream: DataStream,
        async_function: AsyncFunction[Any, Any],
        timeout: Time,
        capacity: int = 100,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        return AsyncDataStream.ordered_wait_with_retry(
            data_stream, async_function, timeout, NO_RETRY_STRATEGY, capacity, output_type
        )

    @staticmethod
    def ordered_wait_with_retry(
        data_stream: DataStream,
        async_function: AsyncFunction[Any, Any],
        timeout: Time,
        async_retry_strategy: AsyncRetryStrategy[Any],
        capacity: int = 100,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        return _apply(
            data_stream, async_function, timeout, async_retry_strategy, capacity, output_type, _Mode.ORDERED
        )


def _apply(
    data_stream: DataStream,
    async_function: AsyncFunction[Any, Any],
    timeout: Time,
    strategy: AsyncRetryStrategy[Any],
    capacity: int,
    output_type: TypeInformation | None,
    mode: AsyncFunctionDescriptor.OutputMode,
) -> DataStream:
    if not isinstance(async_function, AsyncFunction) or not inspect.iscoroutinefunction(
        async_function.async_invoke
    ):
        raise UsageError(
            f"AsyncDataStream needs an AsyncFunction whose async_invoke is declared 'async def', "
            f"got {async_function!r}"
        )
    if not isinstance(timeout, Time):
        raise UsageError(f"AsyncDataStream's timeout must be a Time (Time.seconds(5)), got {timeout!r}")
    if strategy is None or not isinstance(strategy, AsyncRetryStrategy):
        raise UsageError(
            f"AsyncDataStream's retry strategy must be an AsyncRetryStrategy "
            f"(AsyncRetryStrategy.no_restart() for none), got {strategy!r}"
        )
    if strategy is not NO_RETRY_STRATEGY and timeout.to_milliseconds() <= 0:
        raise UsageError(
            f"AsyncDataStream with retries needs a positive timeout, got {timeout.to_milliseconds()} ms"
        )
    if strategy.get_retry_predicate() is None:
        raise UsageError(f"the retry strategy {strategy!r} has no retry predicate")
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
        raise UsageError(f"AsyncDataStream's capacity must be a positive integer, got {capacity!r}")
    descriptor = AsyncFunctionDescriptor(async_function, timeout, capacity, strategy, mode)
    name = "AsyncWaitOperator" if mode is _Mode.ORDERED else "UnorderedAsyncWaitOperator"
    return data_stream.flat_map(_AsyncWait(descriptor), output_type).name(name)


class _AsyncWait(FlatMapFunction):
    def __init__(self, descriptor: AsyncFunctionDescriptor) -> None:
        self.descriptor = descriptor
        self.loop: asyncio.AbstractEventLoop | None = None

    def open(self, runtime_context: RuntimeContext) -> None:
        self.descriptor.async_function.open(runtime_context)
        self.loop = asyncio.new_event_loop()

    def close(self) -> None:
        if self.loop is not None:
            self.loop.close()
            self.loop = None
        self.descriptor.async_function.close()

    def flat_map(self, value: Any) -> Any:
        assert self.loop is not None, "open() makes the event loop"
        function = self.descriptor.async_function
        timeout_ms = self.descriptor.timeout.to_milliseconds()
        attempts = self._attempts(value)
        try:
            if timeout_ms > 0:
                results = self.loop.run_until_complete(asyncio.wait_for(attempts, timeout_ms / 1000))
            else:
                results = self.loop.run_until_complete(attempts)
        except TimeoutError:
            results = function.timeout(value)
        return list(results) if results is not None else []

    async def _attempts(self, value: Any) -> Any:
        function = self.descriptor.async_function
        strategy = self.descriptor.async_retry_strategy
        predicate = strategy.get_retry_predicate()
        on_result, on_exception = predicate.result_predicate(), predicate.exception_predicate()
        attempt = 1
        while True:
            try:
                results = await function.async_invoke(value)
            except Exception as e:
                if on_exception is None or not on_exception(e) or not strategy.can_retry(attempt):
                    raise
            else:
                if on_result is None or not on_result(results) or not strategy.can_retry(attempt):
                    return results
            await asyncio.sleep(max(strategy.get_backoff_time_millis(attempt), 0) / 1000)
            attempt += 1

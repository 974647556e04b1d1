"""``CompletableFuture``: the result of an asynchronous job call, as PyFlink's
(``pyflink.common.CompletableFuture``): ``result()``, ``exception()``, ``done()``,
``cancel()``, ``cancelled()``. weir's ``result`` and ``exception`` also take a timeout."""

from __future__ import annotations

import concurrent.futures
from typing import Any


class CompletableFuture:
    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self._future = future

    @staticmethod
    def completed(value: Any) -> CompletableFuture:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_result(value)
        return CompletableFuture(future)

    def cancel(self) -> bool:
        return self._future.cancel()

    def cancelled(self) -> bool:
        return self._future.cancelled()

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout_s: float | None = None) -> Any:
        """The value, waiting for it (at most ``timeout_s``: then ``TimeoutError``); raises what the call raised."""
        try:
            return self._future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"no result after {timeout_s} s") from None

    def exception(self, timeout_s: float | None = None) -> BaseException | None:
        return self._future.exception(timeout_s)

    def __str__(self) -> str:
        return f"CompletableFuture({'done' if self.done() else 'pending'})"

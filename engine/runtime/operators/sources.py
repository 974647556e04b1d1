"""Source readers: each subtask reads its split of the source, a batch at a time.

Splits are deterministic: subtask ``i`` of ``p`` always reads the same part, so a run
can be repeated (and, with checkpoints, replayed).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import trio

from engine.codec.batch import Batch
from engine.errors import UsageError

DEFAULT_BATCH_SIZE = 4096


def split_range(start: int, count: int, subtask: int, parallelism: int) -> tuple[int, int]:
    """The contiguous part [lo, hi) of [start, start + count) that ``subtask`` reads."""
    lo = start + count * subtask // parallelism
    hi = start + count * (subtask + 1) // parallelism
    return lo, hi


class SourceReader:
    def position(self) -> Any:
        """Where the next read starts, as a JSON value (recorded by checkpoints); None: not replayable."""
        return None

    def restore(self, position: Any) -> None:
        """Continue from a position that ``position()`` returned (recovery rewinds sources here)."""
        raise UsageError(
            f"{type(self).__name__} cannot rewind: it is not replayable, so exactly-once recovery is impossible"
        )

    async def next_batch(self) -> Batch | None:
        """The next batch, or None at the end of a bounded split. Cancellation: nothing is lost
        that was returned; the reader simply stops."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class CollectionReader(SourceReader):
    def __init__(
        self, elements: list[Any], subtask: int, parallelism: int, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> None:
        lo, hi = split_range(0, len(elements), subtask, parallelism)
        self.elements = elements[lo:hi]
        self.offset = 0
        self.batch_size = batch_size

    def position(self) -> Any:
        return {"offset": self.offset}

    def restore(self, position: Any) -> None:
        self.offset = int(position["offset"])

    async def next_batch(self) -> Batch | None:
        if self.offset >= len(self.elements):
            return None
        end = min(self.offset + self.batch_size, len(self.elements))
        batch = Batch(self.elements[self.offset : end])
        self.offset = end
        return batch


class NumberSequenceReader(SourceReader):
    def __init__(
        self, start: int, end: int, subtask: int, parallelism: int, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> None:
        self.next, self.stop = split_range(start, end - start + 1, subtask, parallelism)
        self.batch_size = batch_size

    def position(self) -> Any:
        return {"next": self.next}

    def restore(self, position: Any) -> None:
        self.next = int(position["next"])

    async def next_batch(self) -> Batch | None:
        if self.next >= self.stop:
            return None
        hi = min(self.next + self.batch_size, self.stop)
        batch = Batch(np.arange(self.next, hi, dtype=np.int64))
        self.next = hi
        return batch


class DataGeneratorReader(SourceReader):
    """Indexes of this subtask's split through the generator; optionally rate limited on the task's clock."""

    def __init__(
        self,
        generator: Any,
        count: int | None,
        rate_limit: float | None,
        subtask: int,
        parallelism: int,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        self.generator = generator
        if count is None:
            self.next, self.stop = subtask, math.inf
            self.stride = parallelism
        else:
            self.next, self.stop = split_range(0, count, subtask, parallelism)
            self.stride = 1
        self.rate = None if rate_limit is None else rate_limit / parallelism
        self.batch_size = (
            batch_size if self.rate is None else max(1, min(batch_size, int(self.rate / 100) or 1))
        )
        self.emitted = 0
        self.started_at: float | None = None

    def position(self) -> Any:
        return {"next": self.next if self.next != math.inf else None, "emitted": self.emitted}

    def restore(self, position: Any) -> None:
        if position.get("next") is not None:
            self.next = int(position["next"])
        self.emitted = int(position.get("emitted", 0))

    async def next_batch(self) -> Batch | None:
        if self.next >= self.stop:
            return None
        if self.rate is not None:
            if self.started_at is None:
                self.started_at = trio.current_time()
            await trio.sleep_until(self.started_at + self.emitted / self.rate)
        n = self.batch_size
        if self.stride == 1:
            hi = int(min(self.next + n, self.stop))
            indexes = range(self.next, hi)
            self.next = hi
        else:
            indexes = range(self.next, self.next + n * self.stride, self.stride)
            self.next += n * self.stride
        gen = self.generator
        values = [gen(i) for i in indexes]
        self.emitted += len(values)
        return Batch(values)


class FileLinesReader(SourceReader):
    """Text lines of the files under the given paths; files are dealt to subtasks round robin."""

    def __init__(
        self,
        paths: list[str],
        charset: str,
        subtask: int,
        parallelism: int,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        files: list[Path] = []
        for p in paths:
            path = Path(p)
            if path.is_dir():
                files.extend(
                    sorted(f for f in path.rglob("*") if f.is_file() and not f.name.startswith((".", "_")))
                )
            elif path.is_file():
                files.append(path)
            else:
                raise UsageError(f"FileSource path '{p}' does not exist")
        self.files = [f for i, f in enumerate(files) if i % parallelism == subtask]
        self.charset = charset
        self.batch_size = batch_size
        self._lines: list[str] = []

    async def next_batch(self) -> Batch | None:
        while not self._lines:
            if not self.files:
                return None
            text = self.files.pop(0).read_text(encoding=self.charset)
            self._lines = text.splitlines()
        batch, self._lines = self._lines[: self.batch_size], self._lines[self.batch_size :]
        return Batch(batch)


class _SourceContext:
    """What a legacy SourceFunction's ``run(ctx)`` sees; runs in a worker thread."""

    def __init__(self, send: Any, batch_size: int) -> None:
        self._send = send
        self._batch: list[Any] = []
        self._batch_size = batch_size

    def collect(self, element: Any) -> None:
        self._batch.append(element)
        if len(self._batch) >= self._batch_size:
            self.flush()

    def collect_with_timestamp(self, element: Any, timestamp: int) -> None:
        self.collect(element)

    def flush(self) -> None:
        if self._batch:
            batch, self._batch = self._batch, []
            trio.from_thread.run(self._send, Batch(batch))


class FunctionSourceReader(SourceReader):
    """``add_source``: the SourceFunction runs in a worker thread and hands batches over a channel."""

    def __init__(self, function: Any, nursery: trio.Nursery, batch_size: int = 256) -> None:
        self.function = function
        send, self.receive = trio.open_memory_channel[Batch | None](1)
        self._started = False
        self._send = send
        self._nursery = nursery
        self._batch_size = batch_size

    async def _run(self) -> None:
        ctx = _SourceContext(self._send.send, self._batch_size)

        def body() -> None:
            self.function.run(ctx)
            ctx.flush()

        try:
            await trio.to_thread.run_sync(body, abandon_on_cancel=True)
            await self._send.send(None)
        finally:
            self._send.close()

    async def next_batch(self) -> Batch | None:
        if not self._started:
            self._started = True
            self._nursery.start_soon(self._run)
        try:
            return await self.receive.receive()
        except trio.EndOfChannel:
            return None

    def close(self) -> None:
        self.function.cancel()

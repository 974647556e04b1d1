"""Source readers: each subtask reads its split of the source, a batch at a time.

Splits are deterministic: subtask ``i`` of ``p`` always reads the same part, so a run
can be repeated (and, with checkpoints, replayed).
"""

from __future__ import annotations

from collections.abc import Callable
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
    """Reads one subtask's part of a source.

    Checkpoints record a reader's *splits*: JSON values that say what is left to read
    (Flink's source splits with their progress). On restore at the same parallelism each
    subtask gets its own splits back; at another parallelism the splits of all old
    subtasks are dealt to the new ones (split-distribute list state), so a reader whose
    splits are absolute (not relative to its subtask) rescales. A reader that only has a
    ``position`` is restorable at the parallelism it was saved with.
    """

    subtask = 0
    parallelism = 1

    def position(self) -> Any:
        """Where the next read starts, as a JSON value (recorded by checkpoints); None: not replayable."""
        return None

    def restore(self, position: Any) -> None:
        """Continue from a position that ``position()`` returned (recovery rewinds sources here)."""
        raise UsageError(
            f"{type(self).__name__} cannot rewind: it is not replayable, so exactly-once recovery is impossible"
        )

    def snapshot_splits(self) -> list[Any] | None:
        """What is left to read, as a list of JSON splits; None: not replayable."""
        position = self.position()
        if position is None:
            return None
        return [{"position": position, "subtask": self.subtask, "parallelism": self.parallelism}]

    def restore_splits(self, splits: list[Any]) -> None:
        """Take over ``splits`` (from ``snapshot_splits`` of this or other subtasks)."""
        if len(splits) == 1 and splits[0].get("parallelism") == self.parallelism:
            self.restore(splits[0]["position"])
            return
        saved = {s.get("parallelism") for s in splits}
        raise UsageError(
            f"{type(self).__name__} records positions relative to its subtask, so it restores only at the "
            f"parallelism it was saved with ({', '.join(map(str, sorted(saved)))}), not at {self.parallelism}; "
            "give the source that parallelism, or give the reader absolute splits "
            "(snapshot_splits/restore_splits)"
        )

    async def next_batch(self) -> Batch | None:
        """The next batch, or None at the end of a bounded split. Cancellation: nothing is lost
        that was returned; the reader simply stops."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class _SplitReader(SourceReader):
    """A reader whose position is a list of absolute splits, read one after another."""

    splits: list[list[Any]]

    def position(self) -> Any:
        return {"splits": [list(s) for s in self.splits]}

    def restore(self, position: Any) -> None:
        self.splits = [list(s) for s in position["splits"]]

    def snapshot_splits(self) -> list[Any] | None:
        return [list(s) for s in self.splits]

    def restore_splits(self, splits: list[Any]) -> None:
        self.splits = [list(s) for s in splits]


class CollectionReader(_SplitReader):
    """Splits: ``[lo, hi]`` index ranges into the collection."""

    def __init__(
        self,
        elements: list[Any],
        subtask: int,
        parallelism: int,
        batch_size: int = DEFAULT_BATCH_SIZE,
        as_records: Callable[[list[Any]], list[Any]] | None = None,
    ) -> None:
        self.elements = elements
        self.subtask, self.parallelism = subtask, parallelism
        self.splits = [list(split_range(0, len(elements), subtask, parallelism))]
        self.batch_size = batch_size
        self.as_records = as_records  # e.g. tuples to Rows on a ROW stream, as PyFlink's source does

    async def next_batch(self) -> Batch | None:
        while self.splits and self.splits[0][0] >= self.splits[0][1]:
            self.splits.pop(0)
        if not self.splits:
            return None
        split = self.splits[0]
        end = min(split[0] + self.batch_size, split[1])
        elements = self.elements[split[0] : end]
        batch = Batch(elements if self.as_records is None else self.as_records(elements))
        split[0] = end
        return batch


class NumberSequenceReader(_SplitReader):
    """Splits: ``[next, stop)`` ranges of the sequence."""

    def __init__(
        self, start: int, end: int, subtask: int, parallelism: int, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> None:
        self.subtask, self.parallelism = subtask, parallelism
        self.splits = [list(split_range(start, end - start + 1, subtask, parallelism))]
        self.batch_size = batch_size

    async def next_batch(self) -> Batch | None:
        while self.splits and self.splits[0][0] >= self.splits[0][1]:
            self.splits.pop(0)
        if not self.splits:
            return None
        split = self.splits[0]
        hi = min(split[0] + self.batch_size, split[1])
        batch = Batch(np.arange(split[0], hi, dtype=np.int64))
        split[0] = hi
        return batch


class DataGeneratorReader(_SplitReader):
    """Indexes of this subtask's split through the generator; optionally rate limited on the task's clock.

    Splits: ``[next, stop, stride]``: a bounded generator reads the index range
    ``[next, stop)`` (stride 1), an unbounded one every ``stride``-th index from ``next``
    (stop None); unbounded splits are read in turn, a batch each.
    """

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
        self.subtask, self.parallelism = subtask, parallelism
        if count is None:
            self.splits = [[subtask, None, parallelism]]
        else:
            self.splits = [[*split_range(0, count, subtask, parallelism), 1]]
        self.rate = None if rate_limit is None else rate_limit / parallelism
        self.batch_size = (
            batch_size if self.rate is None else max(1, min(batch_size, int(self.rate / 100) or 1))
        )
        self.emitted = 0
        self.started_at: float | None = None

    async def next_batch(self) -> Batch | None:
        while self.splits and self.splits[0][1] is not None and self.splits[0][0] >= self.splits[0][1]:
            self.splits.pop(0)
        if not self.splits:
            return None
        if self.rate is not None:
            if self.started_at is None:
                self.started_at = trio.current_time()
            await trio.sleep_until(self.started_at + self.emitted / self.rate)
        n = self.batch_size
        split = self.splits[0]
        start, stop, stride = split
        if stop is not None:
            hi = int(min(start + n * stride, stop))
            indexes = range(start, hi, stride)
            split[0] = hi
        else:
            indexes = range(start, start + n * stride, stride)
            split[0] = start + n * stride
            self.splits.append(self.splits.pop(0))  # unbounded splits take turns
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
        self.subtask, self.parallelism = subtask, parallelism
        self.splits: list[list[Any]] = [
            [str(f), 0] for i, f in enumerate(files) if i % parallelism == subtask
        ]
        self.charset = charset
        self.batch_size = batch_size
        self._lines: list[str] | None = None  # lines of the file of the first split

    def restore_splits(self, splits: list[Any]) -> None:
        super().restore_splits(splits)
        self._lines = None

    def restore(self, position: Any) -> None:
        super().restore(position)
        self._lines = None

    async def next_batch(self) -> Batch | None:
        """Splits: ``[path, lines already read]``, one per file, files in turn."""
        while self.splits:
            split = self.splits[0]
            if self._lines is None:
                path = Path(split[0])
                if not path.is_file():
                    raise UsageError(f"FileSource file '{path}' disappeared before it was read to its end")
                self._lines = path.read_text(encoding=self.charset).splitlines()
            if split[1] < len(self._lines):
                end = min(split[1] + self.batch_size, len(self._lines))
                batch = Batch(self._lines[split[1] : end])
                split[1] = end
                return batch
            self.splits.pop(0)
            self._lines = None
        return None


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

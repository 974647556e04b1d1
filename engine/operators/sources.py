"""Source readers: each subtask reads its split of the source, a batch at a time.

Splits are deterministic: subtask ``i`` of ``p`` always reads the same part, so a run
can be repeated (and, with checkpoints, replayed). The ``*_reader`` functions at the end
are the runtime sides that the built-in sources of ``weir.datastream.connectors`` name as
their ``reader_factory``.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import trio

from weir.codec.batch import NO_TIMESTAMP, Batch
from weir.errors import UsageError
from weir.loop.threads import long_running_limiter
from weir.loop.ticker import sleep_until

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
    # records one next_batch reads at most; None: the reader decides. A reader with a
    # batch_size lets the task shrink it when its chain is slow (buffer debloating).
    batch_size: int | None = None

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

    def on_snapshot(self, checkpoint_id: int, splits: list[Any] | None) -> None:
        """Checkpoint ``checkpoint_id`` recorded ``splits`` (what ``snapshot_splits`` gave as of
        the last emitted batch); a reader that acts when it completes (commits offsets) keeps them."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is complete (Flink's SourceReader is a CheckpointListener)."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` will never complete."""

    def start_in(self, nursery: trio.Nursery) -> None:
        """The task's nursery, before the first read, for a reader that runs work in the
        background; the default reader runs none."""

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

    A rate-limited reader waits for its next batch on the TaskManager's ticker
    (``weir.loop.ticker``), the one timer the output flusher sleeps on: the wait ends on the
    ticker's millisecond grid, at the tick whose flush then sends the batch, in the same
    wake-up of the thread, and costs less than a Trio deadline of its own.
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
            await sleep_until(self.started_at + self.emitted / self.rate)
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
        batch = self._generate(indexes)
        self.emitted += len(batch)
        return batch

    def _generate(self, indexes: range) -> Batch:
        """The records at ``indexes``, the generator called through ``map`` (the loop in C)."""
        return Batch(list(map(self.generator, indexes)))


def _files_under(paths: list[str], missing_ok: bool) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            files.extend(
                sorted(f for f in path.rglob("*") if f.is_file() and not f.name.startswith((".", "_")))
            )
        elif path.is_file():
            files.append(path)
        elif not missing_ok:
            raise UsageError(f"FileSource path '{p}' does not exist")
    return files


class FileLinesReader(SourceReader):
    """Text lines of the files under the given paths; files are dealt to subtasks round robin.
    Monitoring (``monitor_interval_ms``): the files are dealt by a hash of their path, and
    once a subtask has read its files it looks again every interval for files it has not
    seen (sleeping on the task's clock, cancellable), so it never ends."""

    def __init__(
        self,
        paths: list[str],
        charset: str,
        subtask: int,
        parallelism: int,
        batch_size: int = DEFAULT_BATCH_SIZE,
        monitor_interval_ms: int | None = None,
    ) -> None:
        files = _files_under(paths, missing_ok=False)
        self.paths = paths
        self.subtask, self.parallelism = subtask, parallelism
        self.monitor_interval_ms = monitor_interval_ms
        if monitor_interval_ms is None:
            mine = [f for i, f in enumerate(files) if i % parallelism == subtask]
        else:
            mine = [f for f in files if self._owns(f)]
        self.seen = {str(f) for f in files}
        self.splits: list[list[Any]] = [[str(f), 0] for f in mine]
        self.charset = charset
        self.batch_size = batch_size
        self._lines: list[Any] | None = None  # records of the file of the first split
        # a format's ``parse_records(text, where)`` (CSV); without one, a file's records are its lines
        self.parse: Any = None
        # a binary format's ``read_file(path)`` -> the file's records (Parquet, Avro); before ``parse``
        self.read_file: Any = None

    def restore_splits(self, splits: list[Any]) -> None:
        super().restore_splits(splits)
        self._lines = None

    def restore(self, position: Any) -> None:
        super().restore(position)
        self._lines = None

    async def next_batch(self) -> Batch | None:
        """Splits: ``[path, lines already read]``, one per file, files in turn."""
        while True:
            if not self.splits:
                if self.monitor_interval_ms is None:
                    return None
                await self._discover()
            split = self.splits[0]
            if self._lines is None:
                path = Path(split[0])
                if not path.is_file():
                    raise UsageError(f"FileSource file '{path}' disappeared before it was read to its end")
                if self.read_file is not None:
                    self._lines = self.read_file(path)
                else:
                    text = path.read_text(encoding=self.charset)
                    self._lines = (
                        text.splitlines()
                        if self.parse is None
                        else self.parse(text, f"FileSource file '{path}'")
                    )
            if split[1] < len(self._lines):
                end = min(split[1] + self.batch_size, len(self._lines))
                batch = Batch(self._lines[split[1] : end])
                split[1] = end
                return batch
            self.splits.pop(0)
            self._lines = None

    def _owns(self, path: Path) -> bool:
        return zlib.crc32(str(path).encode()) % self.parallelism == self.subtask

    async def _discover(self) -> None:
        """Wait for files this subtask has not seen; each is taken by the subtask its path hashes to."""
        assert self.monitor_interval_ms is not None
        while not self.splits:
            await trio.sleep(self.monitor_interval_ms / 1000)
            for f in _files_under(self.paths, missing_ok=True):
                if str(f) not in self.seen:
                    self.seen.add(str(f))
                    if self._owns(f):
                        self.splits.append([str(f), 0])


class _SourceContext:
    """What a SourceFunction's ``run(ctx)`` sees; it runs in a worker thread.

    Records wait in a buffer shared with the task; the task takes all of them whenever it
    asks for a batch, so a record never waits for others to fill a batch: once taken, the
    buffer timeout decides when it leaves the task, as for any other source. The first
    record into an empty buffer wakes the task (``wake`` is thread-safe and does not
    block). ``collect`` blocks while ``max_buffered`` records wait (backpressure), and
    returns at once after ``close``.
    """

    def __init__(self, wake: Callable[[], None], max_buffered: int) -> None:
        self._wake = wake
        self._max_buffered = max_buffered
        self._space = threading.Condition()
        self._values: list[Any] = []
        self._timestamps: list[int] = []
        self._stamped = False  # some record of the buffer came with a timestamp
        self._closed = False

    def collect(self, element: Any) -> None:
        self._add(element, NO_TIMESTAMP)

    def collect_with_timestamp(self, element: Any, timestamp: int) -> None:
        self._add(element, int(timestamp), stamped=True)

    def _add(self, element: Any, timestamp: int, stamped: bool = False) -> None:
        with self._space:
            while len(self._values) >= self._max_buffered and not self._closed:
                self._space.wait()
            if self._closed:
                return  # the job is going down; the function's cancel() ends its loop
            self._values.append(element)
            self._timestamps.append(timestamp)
            self._stamped = self._stamped or stamped
            first = len(self._values) == 1
        if first:
            self._wake()

    def take(self) -> Batch | None:
        """Every buffered record as one batch (None if there is none); called by the task."""
        with self._space:
            if not self._values:
                return None
            values, timestamps, stamped = self._values, self._timestamps, self._stamped
            self._values, self._timestamps, self._stamped = [], [], False
            self._space.notify_all()
        return Batch(values, np.array(timestamps, dtype=np.int64) if stamped else None)

    def close(self) -> None:
        with self._space:
            self._closed = True
            self._space.notify_all()


class FunctionSourceReader(SourceReader):
    """``add_source``: the SourceFunction runs in a worker thread; the task takes what it
    collected whenever it asks for a batch (see ``_SourceContext``)."""

    def __init__(self, function: Any, nursery: trio.Nursery | None = None, max_buffered: int = 4096) -> None:
        self.function = function
        self._nursery = nursery
        self._max_buffered = max_buffered
        self._ctx: _SourceContext | None = None
        self._arrived = trio.Event()
        self._finished = False

    def start_in(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    async def _run(self, ctx: _SourceContext) -> None:
        try:
            await trio.to_thread.run_sync(
                self.function.run, ctx, abandon_on_cancel=True, limiter=long_running_limiter()
            )
        finally:
            self._finished = True
            self._arrived.set()

    def _start(self) -> _SourceContext:
        token = trio.lowlevel.current_trio_token()
        ctx = self._ctx = _SourceContext(lambda: token.run_sync_soon(self._on_arrival), self._max_buffered)
        if self._nursery is None:
            raise UsageError(
                "a FunctionSourceReader runs its function in the task's nursery; call start_in first"
            )
        self._nursery.start_soon(self._run, ctx)
        return ctx

    def _on_arrival(self) -> None:
        self._arrived.set()

    async def next_batch(self) -> Batch | None:
        """What the function collected since the last call; waits for at least one record.
        None once the function returned and everything was taken. Cancellation: stops
        waiting; the records stay buffered."""
        ctx = self._ctx if self._ctx is not None else self._start()
        while True:
            self._arrived = trio.Event()  # before take(): a wake-up after it sets this one
            finished = self._finished
            batch = ctx.take()
            if batch is not None:
                return batch
            if finished:
                return None
            await self._arrived.wait()

    def close(self) -> None:
        self.function.cancel()
        if self._ctx is not None:
            self._ctx.close()


def collection_reader(source: Any, subtask: int, parallelism: int) -> CollectionReader:
    """``CollectionSource``: a tuple type makes Rows of the elements, as PyFlink's source does."""
    from weir.codec.serializers import serializer_for
    from weir.common.typeinfo import RowTypeInfo

    rows = isinstance(source.type_info, RowTypeInfo)
    as_records = serializer_for(source.type_info).as_rows if rows else None  # type: ignore[attr-defined]
    return CollectionReader(source.elements, subtask, parallelism, as_records=as_records)


def number_sequence_reader(source: Any, subtask: int, parallelism: int) -> NumberSequenceReader:
    return NumberSequenceReader(source.start, source.end, subtask, parallelism)


def data_generator_reader(source: Any, subtask: int, parallelism: int) -> DataGeneratorReader:
    return DataGeneratorReader(
        source.generator_function, source.count, source.rate_limit, subtask, parallelism
    )


def file_lines_reader(source: Any, subtask: int, parallelism: int) -> FileLinesReader:
    reader = FileLinesReader(
        source.paths,
        source.stream_format.charset,
        subtask,
        parallelism,
        monitor_interval_ms=getattr(source, "monitor_interval_ms", None),
    )
    reader.parse = getattr(source.stream_format, "parse_records", None)
    reader.read_file = getattr(source.stream_format, "read_file", None)
    return reader


class HybridSourceReader(SourceReader):
    """A ``HybridSource``'s subtask: reads its part of each source in turn. Its position is
    ``{"source": index, "inner": the current reader's position}``."""

    def __init__(self, source: Any, subtask: int, parallelism: int) -> None:
        self.sources = source.sources
        self.subtask, self.parallelism = subtask, parallelism
        self._nursery: trio.Nursery | None = None
        self._batch_size: int | None = None  # set by the task (debloating): passed on to each reader
        self._open(0)

    def _open(self, index: int) -> None:
        self.index = index
        self.current = self.sources[index].create_reader(self.subtask, self.parallelism)
        if self._batch_size is not None:
            self.current.batch_size = self._batch_size
        if self._nursery is not None:
            self.current.start_in(self._nursery)

    @property
    def batch_size(self) -> int | None:
        return self.current.batch_size

    @batch_size.setter
    def batch_size(self, value: int | None) -> None:
        self._batch_size = value
        if hasattr(self, "current"):
            self.current.batch_size = value

    def start_in(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self.current.start_in(nursery)

    async def next_batch(self) -> Batch | None:
        while True:
            batch = await self.current.next_batch()
            if batch is not None:
                return batch
            if self.index + 1 == len(self.sources):
                return None
            self.current.close()
            self._open(self.index + 1)

    def position(self) -> Any:
        inner = self.current.position()
        return None if inner is None else {"source": self.index, "inner": inner}

    def restore(self, position: Any) -> None:
        if self.index != position["source"]:
            self.current.close()
            self._open(position["source"])
        self.current.restore(position["inner"])

    def close(self) -> None:
        self.current.close()


def hybrid_source_reader(source: Any, subtask: int, parallelism: int) -> HybridSourceReader:
    return HybridSourceReader(source, subtask, parallelism)


def function_source_reader(source: Any, subtask: int, parallelism: int) -> FunctionSourceReader:
    """``add_source``: the task hands the reader its nursery (``start_in``) before the first read."""
    return FunctionSourceReader(source.function)

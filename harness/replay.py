"""Replaying a generated data set into a job: open loop, or as fast as possible.

Theory of operation
-------------------
A ``ReplaySource`` is a Source (``env.from_source``) over one table of a data set
(``workloads``). Subtask ``s`` of ``p`` reads the table's Parquet files in chunks with
pyarrow and takes the rows whose global row number is ``s`` modulo ``p``: the subtasks
interleave, so event time advances at the same pace on all of them. Every record is a
tuple of the chosen columns followed by one more field, ``intended_ns``.

Two modes, chosen by ``ReplayRun.schedule_rate``:

- **open loop** (a rate): row ``i`` has an intended emission time
  ``anchor + schedule(i) / schedule_rate``, where ``schedule(i)`` is the row number, or
  a column such as Nexmark's ``event_id`` so that several tables share one schedule. A
  reader sleeps until its next row is due, then emits every row that is due by now. It
  never waits for the engine to ask: if the job backpressures it, the rows it emits
  later keep their intended times, so the stall shows up as latency at the sink
  instead of silently lowering the offered rate (no coordinated omission).
- **throughput** (no rate): rows are emitted as fast as the job takes them;
  ``intended_ns`` is the emission time.

A run can be longer than its data set: with ``ReplayRun.lap_schedule_units`` set, a
reader that reaches the end of its split starts it again (a *lap*), with every schedule
value moved on by ``lap_schedule_units`` per lap and every event time (the source's
``event_time_column``) by ``lap_event_time_ms``, so lap ``k`` continues the data set as if
it had ``k`` times as many events: the schedule keeps its pace, windows keep filling, and
the watermark never makes a lapped event late. It laps until the schedule limit (open
loop) or ``max_duration_s`` (throughput mode). A lap that took no time on the clock could
never fill the run (a MockClock whose job costs nothing), so the replay ends after it.

Time is Trio's clock in nanoseconds (``now_ns``): the system clock in real runs, the
MockClock in tests. ``position()`` is the number of rows this subtask has emitted (over
every lap), so a checkpoint can rewind the replay exactly.
"""

from __future__ import annotations

import contextlib
import os
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import trio
import trio.testing

from weir.codec.batch import Batch, TupleColumns
from weir.codec.strings import Strings
from weir.common.typeinfo import TypeInformation, Types
from weir.core.connectors import Source
from weir.errors import UsageError
from weir.harness.steadiness import HostProbe
from weir.loop.ticker import sleep_until
from weir.operators.sources import DEFAULT_BATCH_SIZE, SourceReader
from weir.workloads import dataset

CHUNK_ROWS = 16_384
#: The most rows of one open-loop batch. A reader that fell behind (a stall, a burst) emits
#: everything that is due, but in batches of at most this many rows: the whole job runs in
#: one thread, and a 4,096-row batch of the keyed-shuffle query holds it for about 7 ms,
#: which every other record in flight then waits out. Measured at half the maximum
#: throughput (keyed-shuffle, 1 ms buffer timeout, median p99 of four 5 s runs): 19.0 ms with
#: 4,096 rows, 14.4 ms with 1,024, 13.8 ms with 512. Throughput mode keeps the source's
#: batch size, and so does a reader further behind than ``CATCH_UP_BEHIND_MS``.
OPEN_LOOP_BATCH_ROWS = 1_024
#: The same for a query written with ``weir.columnar``: the source's whole batch. Its rows
#: cost the thread about a tenth of a per-record query's (4,096 rows of the columnar keyed
#: shuffle take about 1 ms), while a batch's fixed cost along the path stays: in 1,024-row
#: batches the columnar keyed shuffle at half its maximum (2.1 M records/s, 1 ms timeout)
#: paid it so often that its readers fell behind until ``CATCH_UP_BEHIND_MS`` gave them full
#: batches, p50 51 ms and p99 56 ms, against 3-4 ms and 7-12 ms in 4,096-row batches.
COLUMNAR_OPEN_LOOP_BATCH_ROWS = DEFAULT_BATCH_SIZE
#: How far behind its schedule (ms) an open-loop reader goes back to the source's full
#: batches (``DEFAULT_BATCH_SIZE``): rows that late are past any latency target already, and
#: a reader that far behind is overloaded or in a long stall, where what counts is how fast
#: the job works off the backlog. Every batch pays a fixed cost along the whole path (poll,
#: emit, route, encode, flush, decode, sink). Offered 125% of its maximum (keyed shuffle,
#: 1 ms timeout, 4 alternating triples of 2 s runs), the job took records at 88% of the
#: maximum in 1,024-row batches and at 97% in 4,096-row ones. A real source that is behind
#: reads its largest batches too (Kafka's ``max.poll.records``).
CATCH_UP_BEHIND_MS = 50.0
#: The open-loop batch period by default (ms): readers emit at the multiples of it on the
#: clock, so a due row waits at most this long for later rows to share its batch. Measured
#: at half the maximum rate (keyed shuffle, 1 ms timeout, 212 k records/s, 7 alternating
#: pairs of 3 s runs in one process), a 3 ms period took 0.65 of the thread against 0.75
#: for batches every 2 ms, and gave a median p99 of 5.8 ms against 7.6 ms. Every reader's
#: batch of a point is on the same tick (docs/harness.md).
DEFAULT_BATCH_WAIT_MS = 3.0
#: Rows converted from Arrow to Python values at a time (see ``_Chunk``).
PIECE_ROWS = 1_024


def now_ns() -> int:
    """Trio's clock in integer nanoseconds (the replay's and the latency sink's one clock)."""
    return int(trio.current_time() * 1e9)


def arrow_type_info(arrow_type: str) -> TypeInformation:
    mapping = {
        "int64": Types.LONG(),
        "int32": Types.INT(),
        "double": Types.DOUBLE(),
        "float": Types.FLOAT(),
        "bool": Types.BOOLEAN(),
        "string": Types.STRING(),
        "large_string": Types.STRING(),
    }
    if arrow_type not in mapping:
        raise UsageError(f"cannot replay a Parquet column of type {arrow_type}; supported: {sorted(mapping)}")
    return mapping[arrow_type]


@dataclass
class SubtaskProgress:
    emitted: int = 0
    emitted_measured: int = 0  # rows whose intended time is after the warm-up
    emitted_after_warmup: int = 0  # rows emitted after the warm-up, whenever they were due
    first_measured_ns: int | None = None
    last_emit_ns: int = 0
    max_behind_ns: int = 0  # open loop: how late the source emitted a row, at worst


@dataclass
class ReplayRun:
    """What the readers of one run share: the schedule and their progress. One per job run.

    ``schedule_rate``: schedule units per second (rows/s when the schedule is the row
    number); None replays as fast as possible. ``batch_wait_ns``: the open-loop batch
    period: readers emit at its multiples on the clock, the same points for every reader of
    the run, so a due row waits at most this long for later rows to share its batch (its
    latency counts the wait); 0 emits every row when it is due. ``open_loop_batch_rows``:
    the most rows an open-loop batch holds, also when the reader has fallen behind (see
    ``OPEN_LOOP_BATCH_ROWS``) while it is at most ``catch_up_behind_ns`` behind; further
    behind, the source's batch size (None: never; see ``CATCH_UP_BEHIND_MS``). ``schedule_limit``: rows whose schedule
    value is at or past it are not replayed (None: all). ``max_duration_s``: readers stop
    once this long after the anchor (None: no limit). ``host_probe``: timed in the job's
    thread from the anchor to the end of the run (None: not probed). ``lap_schedule_units``:
    the schedule units one pass over the data set covers; set, the readers replay their
    splits again and again until the limit or the duration ends the run, each lap's schedule
    values ``lap_schedule_units`` and its event times ``lap_event_time_ms`` past the lap's
    before (None: every row once).
    """

    schedule_rate: float | None = None
    warmup_s: float = 0.0
    batch_wait_ns: int = 0
    open_loop_batch_rows: int = OPEN_LOOP_BATCH_ROWS
    catch_up_behind_ns: int | None = int(CATCH_UP_BEHIND_MS * 1e6)
    schedule_limit: int | None = None
    max_duration_s: float | None = None
    anchor_ns: int | None = None
    host_probe: HostProbe | None = None
    lap_schedule_units: int | None = None
    lap_event_time_ms: int = 0
    subtasks: dict[tuple[str, int], SubtaskProgress] = field(default_factory=dict)
    _probing: HostProbe | None = field(default=None, init=False, repr=False)  # on the Trio loop

    def __post_init__(self) -> None:
        if self.schedule_rate is not None and self.schedule_rate <= 0:
            raise UsageError(f"replay rate must be positive, got {self.schedule_rate!r}")
        if self.warmup_s < 0:
            raise UsageError(f"warm-up must not be negative, got {self.warmup_s!r} s")
        if self.open_loop_batch_rows < 1:
            raise UsageError(f"open-loop batches need at least one row, got {self.open_loop_batch_rows!r}")
        if self.lap_schedule_units is not None and self.lap_schedule_units < 1:
            raise UsageError(
                f"a lap must cover at least one schedule unit, got lap_schedule_units={self.lap_schedule_units!r}"
            )
        if self.lap_event_time_ms < 0:
            raise UsageError(
                f"a lap cannot move event time backwards, got lap_event_time_ms={self.lap_event_time_ms!r}"
            )

    def anchor(self, now: int) -> int:
        """The intended time of schedule position 0: fixed by the first reader that starts."""
        if self.anchor_ns is None:
            self.anchor_ns = now
            if self.host_probe is not None:
                self.host_probe.start()
                trio.lowlevel.add_instrument(self.host_probe)
                self._probing = self.host_probe
        return self.anchor_ns

    def end_probe(self) -> None:
        """Take the host probe off the Trio loop the run ran on; call it on that loop. A job
        run by ``execute()`` ends its loop and the probe with it, but a run awaited on a loop
        that outlives it (``Run.execute_async``) would go on timing the host into whatever
        the loop runs next, and its summary would count that."""
        probe, self._probing = self._probing, None
        if probe is not None:
            with contextlib.suppress(KeyError):  # Trio drops an instrument that raised
                trio.lowlevel.remove_instrument(probe)

    def batch_point(self, due_ns: int) -> int:
        """When a row due at ``due_ns`` is emitted, unless its batch fills first: the first
        multiple of ``batch_wait_ns`` on the clock at or after it. Every reader of the run
        emits on the same points, so the batches of all of them leave with one flush and
        reach a consumer in one wake-up (readers that each waited from their own first
        row drifted into phases of their own, and a consumer woke for each one's batch)."""
        period = self.batch_wait_ns
        if period <= 0:
            return due_ns
        return -(-due_ns // period) * period

    @property
    def warmup_end_ns(self) -> int | None:
        return None if self.anchor_ns is None else self.anchor_ns + int(self.warmup_s * 1e9)

    def progress(self, table: str, subtask: int) -> SubtaskProgress:
        return self.subtasks.setdefault((table, subtask), SubtaskProgress())

    # -- totals over all readers ---------------------------------------------------------------
    @property
    def emitted(self) -> int:
        return sum(p.emitted for p in self.subtasks.values())

    @property
    def emitted_measured(self) -> int:
        return sum(p.emitted_measured for p in self.subtasks.values())

    @property
    def emitted_after_warmup(self) -> int:
        return sum(p.emitted_after_warmup for p in self.subtasks.values())

    @property
    def first_measured_ns(self) -> int | None:
        firsts = [p.first_measured_ns for p in self.subtasks.values() if p.first_measured_ns is not None]
        return min(firsts) if firsts else None

    @property
    def max_behind_ns(self) -> int:
        return max((p.max_behind_ns for p in self.subtasks.values()), default=0)


class ReplaySource(Source):
    """Replays ``table`` of the data set in ``directory``; records are (columns…, intended_ns).
    ``event_time_column`` (one of ``columns``) is the column a lap moves on in event time."""

    def __init__(
        self,
        directory: str | Path,
        table: str,
        columns: list[str],
        run: ReplayRun,
        schedule_column: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        event_time_column: str | None = None,
    ) -> None:
        self.directory = Path(directory)
        manifest = dataset.load_manifest(self.directory)
        self.table = table
        self.files = dataset.table_files(self.directory, manifest, table)
        schema = {c["name"]: c["type"] for c in manifest["tables"][table]["schema"]}
        missing = [c for c in [*columns, *([schedule_column] if schedule_column else [])] if c not in schema]
        if missing:
            raise UsageError(
                f"table '{table}' of data set '{directory}' has no column(s) {missing}; it has {sorted(schema)}"
            )
        if schedule_column is not None and schema[schedule_column] not in ("int64", "int32"):
            raise UsageError(f"schedule column '{schedule_column}' must be an integer column")
        if batch_size < 1:
            raise UsageError(f"replay batch size must be positive, got {batch_size}")
        if event_time_column is not None and (
            event_time_column not in columns or schema[event_time_column] not in ("int64", "int32")
        ):
            raise UsageError(
                f"event time column '{event_time_column}' must be one of the replayed integer columns {columns}"
            )
        self.event_time_column = event_time_column
        self.columns = list(columns)
        self.column_types = [arrow_type_info(schema[c]) for c in columns]
        self.schedule_column = schedule_column
        self.run = run
        self.batch_size = batch_size

    def produced_type(self) -> TypeInformation:
        return Types.TUPLE([*self.column_types, Types.LONG()])

    def default_name(self) -> str:
        return f"Replay {self.table}"

    def describe(self) -> dict[str, Any]:
        return {"class": "ReplaySource", "table": self.table, "columns": self.columns}

    def create_reader(self, subtask: int, parallelism: int) -> ReplayReader:
        return ReplayReader(self, subtask, parallelism)

    @property
    def read_columns(self) -> list[str]:
        return list(dict.fromkeys([*self.columns, *([self.schedule_column] if self.schedule_column else [])]))

    def split_key(self, parallelism: int) -> tuple[Any, ...]:
        """What a split in ``SPLITS`` is kept under: the files as they are now (a data set
        generated again has other sizes or times), the columns, the parallelism and the
        chunk size."""
        stats = [(f, os.stat(f)) for f in self.files]
        files = tuple((str(Path(f).resolve()), st.st_size, st.st_mtime_ns) for f, st in stats)
        return (files, tuple(self.read_columns), self.schedule_column, parallelism, CHUNK_ROWS)

    def preload(self, parallelism: int, cache: SplitCache | None = None) -> bool:
        """Decode the table and split it for ``parallelism`` subtasks into ``cache`` (``SPLITS``)
        now, before the job runs, unless it is there already or too large for the cache (its
        uncompressed size in the Parquet footers). True when the readers will find it."""
        import pyarrow.parquet as pq

        cache = SPLITS if cache is None else cache
        key = self.split_key(parallelism)
        if cache.get(key, 0) is not None:
            return True
        columns = set(self.read_columns)
        expected = 0
        for path in self.files:
            meta = pq.ParquetFile(path).metadata
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                expected += sum(
                    group.column(c).total_uncompressed_size
                    for c in range(group.num_columns)
                    if group.column(c).path_in_schema in columns
                )
        if expected > cache.max_bytes:
            return False
        splits: list[list[Piece]] = [[] for _ in range(parallelism)]
        size = 0
        for pieces in _split_pieces(self, parallelism):
            for subtask, piece in enumerate(pieces):
                if len(piece[1]):
                    splits[subtask].append(piece)
                    size += piece[0].nbytes + piece[1].nbytes
        return cache.put(key, splits, size)


class _Chunk:
    """This subtask's rows of one Parquet chunk, still in Arrow, and their schedule values.

    Rows become Python values a piece (``PIECE_ROWS``) at a time, ahead of the batches that
    need them: converting a whole chunk at once would stall the Trio loop (the first version
    converted 64 k-row chunks and showed 20-30 ms stalls), and converting each batch on its
    own pays Arrow's per-call cost for every small open-loop batch (24 us for 130 rows,
    against 10 us for slicing lists converted ahead)."""

    __slots__ = (
        "arrays", "intended", "intended_array", "lap", "lists", "next", "rows", "schedule",
        "shift", "size", "strings",
    )  # fmt: skip

    def __init__(
        self, rows: Any, schedule: np.ndarray, lap: int = 0, shift: tuple[str, int] | None = None
    ) -> None:
        self.rows = rows
        self.schedule = schedule
        self.lap = lap
        self.shift = shift  # (column, ms) added to that column's values: the lap's event time
        self.size = len(schedule)
        self.next = 0
        self.lists: dict[str, list[Any]] = {}
        self.arrays: dict[str, np.ndarray | None] = {}
        self.strings: dict[str, Strings | None] = {}
        # open loop: every row's intended time (ns), and rows [0, len(intended)) of it as ints
        self.intended_array: np.ndarray | None = None
        self.intended: list[int] = []

    def intended_ns(self, anchor: int, ns_per_unit: float, stop: int) -> list[int]:
        """The rows' intended emission times, at least rows [0, stop), as a list: a batch
        takes a slice of it (numpy calls on a few hundred rows cost more than the rows). The
        arithmetic runs once per chunk (per batch, over a batch-size window, it cost more
        than the rows that were due); the list grows a piece at a time like the values (a
        whole chunk's 8 k ints at once took 0.16 ms of the loop, when both readers of a
        parallelism-2 job switch chunks at the same moment)."""
        if self.intended_array is None:
            self.intended_array = anchor + (self.schedule * ns_per_unit).astype(np.int64)
        intended = self.intended
        have = len(intended)
        if stop > have:
            intended.extend(self.intended_array[have : min(self.size, max(stop, have + PIECE_ROWS))].tolist())
        return intended

    def values(self, start: int, end: int, columns: list[str], intended: np.ndarray) -> TupleColumns:
        """Rows [start, end) as columns, ``intended`` the last: numbers as numpy arrays (views
        of one conversion per chunk, no Python object per value), strings as ``Strings`` over
        Arrow's bytes (as lists, converted a piece at a time, where they hold nulls). A
        per-record query builds its tuples from them when it reads them."""
        out: list[Any] = []
        for c in columns:
            array = self._array(c)
            if array is not None:
                out.append(array[start:end])
                continue
            strings = self._strings(c)
            if strings is not None:
                out.append(strings[start:end])
            else:
                out.append(self._list(c, end)[start:end])
        out.append(intended)
        return TupleColumns(out)

    def _array(self, c: str) -> np.ndarray | None:
        """Column ``c`` of the whole chunk as a numpy array, or None for a column of strings
        (or one with nulls), which stays Python values."""
        arrays = self.arrays
        if c not in arrays:
            column = self.rows.column(c)
            array = None
            if column.null_count == 0 and (
                pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
            ):
                array = column.to_numpy()
                if self.shift is not None and self.shift[0] == c:
                    array = array + self.shift[1]
            arrays[c] = array
        return arrays[c]

    def _strings(self, c: str) -> Strings | None:
        """Column ``c`` of the whole chunk as ``Strings`` sharing Arrow's bytes (a batch takes a
        slice: no ``str`` is built unless the query reads records), or None for a column that
        is not of strings without nulls."""
        strings = self.strings
        if c not in strings:
            column = self.rows.column(c)
            found = Strings.from_arrow(
                column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            )
            if found is not None:
                found.has_no_nul()  # once per chunk: slices know it
            strings[c] = found
        return strings[c]

    def _list(self, c: str, end: int) -> list[Any]:
        """Column ``c`` as Python values, at least rows [0, end), a piece at a time."""
        values = self.lists.setdefault(c, [])
        have = len(values)
        if end > have:
            stop = min(self.size, max(end, have + PIECE_ROWS))
            column = self.rows.slice(have, stop - have).column(c)
            if self.shift is not None and self.shift[0] == c:
                import pyarrow.compute as pc

                column = pc.add(column, self.shift[1])
            values.extend(column.to_pylist())
        return values


class _Prefetch:
    """The next chunk of a reader, read in a worker thread while the reader replays the
    current one. Decoding and taking a 16 k-row chunk holds the Trio thread for 2 to 8 ms
    (pyarrow releases the GIL, so in a thread it runs beside the loop); at half the maximum
    rate such a stall in the one thread took 100 ms and more to drain, and set the p99.
    A system task runs the read (a reader has no nursery of its own); the reader awaits
    the result when it needs the chunk."""

    def __init__(self, chunks: Iterator[_Chunk]) -> None:
        self._done = trio.Event()
        self._chunk: _Chunk | None = None
        self._error: BaseException | None = None
        trio.lowlevel.spawn_system_task(self._read, chunks, name="replay chunk prefetch")

    async def _read(self, chunks: Iterator[_Chunk]) -> None:
        try:
            self._chunk = await trio.to_thread.run_sync(next, chunks, None)
        except Exception as exc:  # handed to the reader: a system task must not raise
            self._error = exc
        except BaseException:  # the run is ending: nobody waits for the chunk
            self._error = trio.ClosedResourceError("the replay prefetch was cancelled")
            raise
        finally:
            self._done.set()

    async def result(self) -> _Chunk | None:
        """The chunk (None after the last). Cancellation: the read goes on; its chunk is
        still there for the next call."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._chunk


class _Inline:
    """The next chunk, read in the Trio thread when the reader needs it: what a reader uses
    under a ``MockClock``, where a worker thread's real time would let the mock clock jump
    ahead while the reader waits (tests would see latency that depends on the machine)."""

    def __init__(self, chunks: Iterator[_Chunk]) -> None:
        self._chunks = chunks

    async def result(self) -> _Chunk | None:
        return next(self._chunks, None)


#: Read chunks ahead in a worker thread: True, False, or None for "unless the Trio clock is a
#: MockClock" (see ``_Inline``).
READ_AHEAD: bool | None = None

#: The most bytes of decoded Arrow data ``SPLITS`` keeps, over every table it holds.
SPLIT_CACHE_BYTES = 1 << 30

#: One piece of a subtask's split: its rows of one Parquet chunk, and their schedule values.
Piece = tuple[Any, np.ndarray]


class SplitCache:
    """Tables decoded ahead of a run, split by subtask, kept for the runs after it.

    Reading Parquet while a job is measured competes with the job: the decoding runs on the
    machine's other CPU (``_Prefetch``), which on these virtual machines slows the event
    loop's CPU while it runs (a busy neighbour made a fixed Python loop 1.6 times slower).
    A run that loads its tables before the job starts (``ReplaySource.preload``) replays
    from memory and reads nothing while it is measured; the next run of a suite over the
    same table finds it here. Least recently used tables go first once the decoded bytes
    pass ``max_bytes``; a table larger than that is not kept, and its readers read Parquet
    as the job runs."""

    def __init__(self, max_bytes: int = SPLIT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._tables: dict[tuple[Any, ...], tuple[list[list[Piece]], int]] = {}

    def __len__(self) -> int:
        return len(self._tables)

    @property
    def size_bytes(self) -> int:
        return sum(size for _, size in self._tables.values())

    def get(self, key: tuple[Any, ...], subtask: int) -> list[Piece] | None:
        entry = self._tables.pop(key, None)
        if entry is None:
            return None
        self._tables[key] = entry  # now the most recently used
        return entry[0][subtask]

    def put(self, key: tuple[Any, ...], splits: list[list[Piece]], size_bytes: int) -> bool:
        """Keep ``splits`` (one list of pieces per subtask) unless it alone is over the budget."""
        self._tables.pop(key, None)
        if size_bytes > self.max_bytes:
            return False
        while self._tables and self.size_bytes + size_bytes > self.max_bytes:
            del self._tables[next(iter(self._tables))]
        self._tables[key] = (splits, size_bytes)
        return True

    def clear(self) -> None:
        self._tables.clear()


#: The harness's process-wide cache of preloaded tables.
SPLITS = SplitCache()


def _reads_ahead() -> bool:
    if READ_AHEAD is not None:
        return READ_AHEAD
    return not isinstance(trio.lowlevel.current_clock(), trio.testing.MockClock)


def _split_pieces(
    source: ReplaySource, parallelism: int, subtask: int | None = None
) -> Iterator[list[Piece]]:
    """The table's Parquet chunks split between ``parallelism`` subtasks, one list per chunk
    with a piece per subtask (only ``subtask``'s when given): subtask ``s`` takes the rows
    whose global row number is ``s`` modulo ``parallelism``, with their schedule values
    (the row numbers, or the schedule column's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    subtasks = range(parallelism) if subtask is None else [subtask]
    global_row = 0
    for path in source.files:
        parquet = pq.ParquetFile(path)
        for record_batch in parquet.iter_batches(batch_size=CHUNK_ROWS, columns=source.read_columns):
            n = record_batch.num_rows
            split = []
            for s in subtasks:
                mine = np.arange((s - global_row) % parallelism, n, parallelism, dtype=np.int64)
                if source.schedule_column is None:
                    schedule = global_row + mine
                else:
                    schedule = record_batch.column(source.schedule_column).to_numpy()[mine].astype(np.int64)
                split.append((record_batch.take(pa.array(mine)), schedule))
            global_row += n
            yield split


class ReplayReader(SourceReader):
    def __init__(self, source: ReplaySource, subtask: int, parallelism: int) -> None:
        self.source = source
        self.subtask = subtask
        self.parallelism = parallelism
        self.run = source.run
        self.stats = self.run.progress(source.table, subtask)
        self.emitted = 0  # rows of this subtask emitted: the checkpointed position
        self._skip = 0
        self._chunks: Iterator[_Chunk] | None = None
        self._chunk: _Chunk | None = None
        self._ahead: _Prefetch | _Inline | None = None
        self._in_memory = False
        self._done = False
        self._lap = 0  # the lap of the chunk replayed last, and when it began
        self._lap_start_ns: int | None = None

    def position(self) -> Any:
        return {"rows": self.emitted}

    def restore(self, position: Any) -> None:
        rows = int(position["rows"])
        if rows < 0:
            raise UsageError(f"replay position must be a non-negative row count, got {position!r}")
        self.emitted = rows
        self._skip = rows
        self._chunks = None
        self._chunk = None
        self._ahead = None  # a read of the old position still running is dropped
        self._done = False
        self._lap = 0
        self._lap_start_ns = None

    def close(self) -> None:
        self._chunks = None
        self._chunk = None
        self._ahead = None

    def _open_chunks(self) -> None:
        """Start replaying from ``_skip``: the split in ``SPLITS`` when the table was preloaded
        (read in the Trio thread: it is in memory), else the Parquet files."""
        cached = SPLITS.get(self.source.split_key(self.parallelism), self.subtask)
        self._in_memory = cached is not None
        self._chunks = self._read_chunks(self._laps(cached))

    def _split(self, cached: list[Piece] | None) -> Iterator[Piece]:
        """One pass over this subtask's split."""
        if cached is not None:
            return iter(cached)
        return (split[0] for split in _split_pieces(self.source, self.parallelism, self.subtask))

    def _laps(self, cached: list[Piece] | None) -> Iterator[tuple[int, Piece]]:
        """The split's pieces with their lap: once, or again and again when the run laps
        (``ReplayRun.lap_schedule_units``), each lap's schedule values moved on by a lap."""
        units = self.run.lap_schedule_units
        lap = 0
        while True:
            empty = True
            for rows, schedule in self._split(cached):
                empty = False
                yield lap, (rows, schedule if not lap or units is None else schedule + lap * units)
            if units is None or empty:
                return
            lap += 1

    def _read_chunks(self, pieces: Iterator[tuple[int, Piece]]) -> Iterator[_Chunk]:
        """This subtask's chunks from ``pieces``: the first ``_skip`` rows left out, and the
        rows at or past the run's schedule limit."""
        skip = self._skip
        limit = self.run.schedule_limit
        column = self.source.event_time_column
        for lap, (rows, schedule) in pieces:
            if skip >= len(schedule):
                skip -= len(schedule)
                continue
            if skip:
                rows, schedule = rows.slice(skip), schedule[skip:]
                skip = 0
            truncated = False
            if limit is not None:  # schedule values grow with the row number
                keep = int(np.searchsorted(schedule, limit, side="left"))
                truncated = keep < len(schedule)
                rows, schedule = rows.slice(0, keep), schedule[:keep]
            if len(schedule):
                shift = self.run.lap_event_time_ms * lap
                yield _Chunk(rows, schedule, lap, (column, shift) if column is not None and shift else None)
            if truncated:
                return

    def _read_next(self) -> _Prefetch | _Inline:
        assert self._chunks is not None
        return _Prefetch(self._chunks) if _reads_ahead() and not self._in_memory else _Inline(self._chunks)

    async def _current(self) -> _Chunk | None:
        """The chunk being replayed; the next one is read by a worker thread meanwhile
        (in the Trio thread when it is needed, under a MockClock)."""
        while self._chunk is None or self._chunk.next >= self._chunk.size:
            if self._chunks is None:
                self._open_chunks()
            if self._ahead is None:
                self._ahead = self._read_next()
            # kept until its chunk is taken: a poll cancelled here finds the same read next time
            self._chunk = await self._ahead.result()
            self._ahead = None
            if self._chunk is None:
                return None
            self._ahead = self._read_next()
        return self._chunk

    async def next_batch(self) -> Batch | None:
        """Cancellation: nothing is lost; rows not yet returned are emitted after a restart."""
        if self._done:
            return None
        chunk = await self._current()
        now = now_ns()
        run = self.run
        anchor = run.anchor(now)
        if (
            chunk is None
            or (run.max_duration_s is not None and now - anchor >= run.max_duration_s * 1e9)
            or self._lapped_in_no_time(chunk, now)
        ):
            self._done = True
            return None
        start = chunk.next
        # Python lists, not numpy, for the batch's own intended times: open-loop batches hold
        # a few hundred rows, where a numpy call costs more than the rows it looks at
        if run.schedule_rate is None:
            n = min(self.source.batch_size, chunk.size - start)
            intended = [now] * n
        else:
            stop = min(start + min(self.source.batch_size, run.open_loop_batch_rows), chunk.size)
            times = chunk.intended_ns(anchor, 1e9 / run.schedule_rate, stop)
            due_first = times[start]
            catch_up = run.catch_up_behind_ns
            if catch_up is not None and now - due_first > catch_up:  # far behind: full batches
                stop = min(start + self.source.batch_size, chunk.size)
                times = chunk.intended_ns(anchor, 1e9 / run.schedule_rate, stop)
            # wait for the first batch point at or after the first row is due (the last row
            # of a full batch, if that comes first), and emit every row due by then
            wake = min(run.batch_point(due_first), times[stop - 1])
            if wake > now:
                await sleep_until(max(wake, due_first) / 1e9)
                now = now_ns()
            n = max(1, bisect_right(times, now, start, stop) - start)
            intended = times[start : start + n]
            behind = now - intended[0]
            if behind > self.stats.max_behind_ns:
                self.stats.max_behind_ns = behind
        end = start + n
        chunk.next = end
        # the intended times as a column: a view of the chunk's array (the list is for bisect)
        if chunk.intended_array is None:  # throughput mode: all now
            column = np.full(n, now, np.int64)
        else:
            column = chunk.intended_array[start:end]
        values = chunk.values(start, end, self.source.columns, column)
        self.emitted += n
        stats = self.stats
        stats.emitted += n
        stats.last_emit_ns = now
        warm = run.warmup_end_ns
        if warm is not None:
            if now >= warm:
                stats.emitted_after_warmup += n
            measured = n - bisect_left(intended, warm)
            if measured:
                stats.emitted_measured += measured
                if stats.first_measured_ns is None:
                    stats.first_measured_ns = max(warm, intended[n - measured])
        return Batch(values)

    def _lapped_in_no_time(self, chunk: _Chunk, now: int) -> bool:
        """True when ``chunk`` begins a lap and the lap before took no time on the clock: in
        throughput mode, laps would never fill the run (a MockClock whose job costs nothing)."""
        if self._lap_start_ns is None:  # the first chunk since the start or a restore
            self._lap, self._lap_start_ns = chunk.lap, now
        if chunk.lap == self._lap:
            return False
        ended_in_no_time = self.run.schedule_rate is None and now == self._lap_start_ns
        self._lap, self._lap_start_ns = chunk.lap, now
        return ended_in_no_time

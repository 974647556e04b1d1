"""``Batch``: how records move inside weir.

Users write per-record functions; inside, records travel in batches. A batch holds its
records either as a Python list (any type), or, for a stream of one basic fixed-width type
(LONG, INT, DOUBLE, ...), as a 1-D numpy array, or, for tuples an operator computed column
by column (a vectorized window's ``count()``), as ``TupleColumns``, which builds the tuples
only when something reads records; plus an optional int64 array of event timestamps
(Flink's StreamRecord timestamp), one per record.

A batch is immutable by convention: operators build new batches instead of changing one
they received, so a batch may be handed to several consumers (e.g. chained successors).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any

import numpy as np

from weir.codec.strings import Strings

NO_TIMESTAMP = np.iinfo(np.int64).min  # a record without an event timestamp

#: Tuples of at least this many records are built with the garbage collector paused (a
#: collection is due every 700 new containers; below that, pausing costs more than it saves).
_GC_PAUSE_RECORDS = 700


class TupleColumns(Sequence[tuple[Any, ...]]):
    """Records that are tuples, held as one column per field (numpy arrays, ``Strings`` or lists).

    A sequence of tuples to whoever reads records (iteration, indexing, ``len``); the
    tuples are built once, the first time records are read. A serializer or a sink that
    only needs the columns never builds them: one fired window of ``count()`` over 10,000
    keys is 10,000 tuples (about 0.7 ms) that a discarding sink or the typed codec does
    not need.
    """

    __slots__ = ("_records", "columns")

    def __init__(self, columns: Sequence[np.ndarray | Strings | list[Any]]) -> None:
        if not columns or len({len(c) for c in columns}) != 1:
            raise ValueError(
                f"TupleColumns needs one or more columns of one length, got lengths {[len(c) for c in columns]}"
            )
        self.columns = tuple(columns)
        self._records: list[tuple[Any, ...]] | None = None

    def records(self) -> list[tuple[Any, ...]]:
        """The records as tuples of Python values (numpy scalars become ints/floats/bools)."""
        if self._records is None:
            columns = [c.tolist() if isinstance(c, np.ndarray | Strings) else c for c in self.columns]
            if len(columns[0]) < _GC_PAUSE_RECORDS:
                self._records = list(zip(*columns))
            else:  # many new tuples: a collection would walk them all for nothing
                enabled = gc.isenabled()
                gc.disable()
                try:
                    self._records = list(zip(*columns))
                finally:
                    if enabled:
                        gc.enable()
        return self._records

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return TupleColumns([c[index] for c in self.columns])
        return self.records()[index]

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.records())

    def take(self, indices: np.ndarray) -> TupleColumns:
        """The records at ``indices``, still as columns."""
        picked = indices.tolist()
        return TupleColumns(
            [
                c[indices]
                if isinstance(c, np.ndarray)
                else c.take(indices)
                if isinstance(c, Strings)
                else [c[i] for i in picked]
                for c in self.columns
            ]
        )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TupleColumns):
            return self.records() == other.records()
        if isinstance(other, list | tuple):
            return self.records() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TupleColumns({self.records()!r})"


class Batch:
    __slots__ = ("timestamps", "values")

    def __init__(self, values: Sequence[Any] | np.ndarray, timestamps: np.ndarray | None = None) -> None:
        self.values = values
        if timestamps is not None and len(timestamps) != len(values):
            raise ValueError(f"batch has {len(values)} values but {len(timestamps)} timestamps")
        self.timestamps = timestamps

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.as_list())

    def as_list(self) -> list[Any]:
        """The records as Python objects (numpy scalars become ints/floats/bools)."""
        values = self.values
        if isinstance(values, np.ndarray):
            return values.tolist()
        if isinstance(values, list):
            return values
        if isinstance(values, TupleColumns):
            return values.records()
        return list(values)

    def timestamp_list(self) -> list[int | None]:
        if self.timestamps is None:
            return [None] * len(self.values)
        return [None if t == NO_TIMESTAMP else int(t) for t in self.timestamps.tolist()]

    def take(self, indices: np.ndarray) -> Batch:
        """The records at ``indices`` (in that order), with their timestamps."""
        values = self.values
        if isinstance(values, np.ndarray):
            picked: Any = values[indices]
        elif isinstance(values, TupleColumns):
            picked = values.take(indices)
        else:
            as_list = values if isinstance(values, list) else list(values)
            picked = [as_list[i] for i in indices.tolist()]
        ts = None if self.timestamps is None else self.timestamps[indices]
        return Batch(picked, ts)

    @staticmethod
    def empty() -> Batch:
        return Batch([])

    @staticmethod
    def concat(batches: Sequence[Batch]) -> Batch:
        if len(batches) == 1:
            return batches[0]
        if not batches:
            return Batch([])
        if all(isinstance(b.values, np.ndarray) for b in batches):
            values: Any = np.concatenate([b.values for b in batches])
        else:
            values = list(chain.from_iterable(b.as_list() for b in batches))
        if all(b.timestamps is None for b in batches):
            ts = None
        else:
            ts = np.concatenate(
                [
                    b.timestamps if b.timestamps is not None else np.full(len(b), NO_TIMESTAMP, np.int64)
                    for b in batches
                ]
            )
        return Batch(values, ts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Batch):
            return NotImplemented
        same_ts = (self.timestamps is None and other.timestamps is None) or (
            self.timestamps is not None
            and other.timestamps is not None
            and np.array_equal(self.timestamps, other.timestamps)
        )
        return same_ts and self.as_list() == other.as_list()

    def __repr__(self) -> str:
        head = self.as_list()[:5]
        more = "" if len(self) <= 5 else f", … {len(self)} records"
        return f"Batch({head}{more})"

"""``Batch``: how records move inside weir.

Users write per-record functions; inside, records travel in batches. A batch holds its
records either as a Python list (any type) or, for a stream of one basic fixed-width type
(LONG, INT, DOUBLE, ...), as a 1-D numpy array, plus an optional int64 array of event
timestamps (Flink's StreamRecord timestamp), one per record.

A batch is immutable by convention: operators build new batches instead of changing one
they received, so a batch may be handed to several consumers (e.g. chained successors).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

NO_TIMESTAMP = np.iinfo(np.int64).min  # a record without an event timestamp


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
            values = [v for b in batches for v in b.as_list()]
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

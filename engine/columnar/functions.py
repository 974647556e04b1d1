"""Functions over a batch's columns, numba-compiled scalar functions, and fields read as columns.

Each is a PyFlink function class as well (``MapFunction``, ``FilterFunction``, ``KeySelector``,
``TimestampAssigner``), so wherever weir cannot hand it columns it runs record by record with
the same results. On a typed stream of tuples (or of one basic type) weir hands it the batch's
columns: numpy arrays for numbers and booleans, lists for other fields, and for strings a list
or a ``weir.codec.strings.Strings`` (UTF-8 bytes that read as a sequence of ``str``).

- ``batch_map(f)``: ``f(*columns)`` returns the output's columns (a tuple of arrays, or one
  array for a stream of one basic type), all as long as the input. PyFlink's pandas UDFs
  and Ray's ``map_batches`` work this way.
- ``batch_filter(f)``: ``f(*columns)`` returns a boolean mask.
- ``scalar_map(f)``, ``scalar_filter(f)``: ``f(*fields)`` of one record, compiled with numba
  and run over the columns in one compiled loop; numeric fields only.
- ``field(i)``: a key selector that reads field ``i`` (a column on a columnar batch).
- ``timestamp_field(i)``: a timestamp assigner that reads field ``i``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from weir.common.watermark_strategy import TimestampAssigner
from weir.core import functions as fn
from weir.errors import UsageError


def _check_callable(api: str, f: Any, expected: str) -> None:
    if not callable(f):
        raise UsageError(f"{api} needs a callable {expected}, got {f!r}")


def columns_of(values: Any) -> tuple[Any, ...] | None:
    """The columns of a batch's values when they are held as columns (``TupleColumns`` or a
    numpy array of one basic type), else None."""
    cols = getattr(values, "columns", None)
    if cols is not None:
        return tuple(cols)
    if isinstance(values, np.ndarray):
        return (values,)
    return None


class BatchMapFunction(fn.MapFunction):
    """``f(*columns) -> columns``; see the module docstring."""

    vectorized = True

    def __init__(self, f: Callable[..., Any]) -> None:
        _check_callable("batch_map", f, "f(*columns) -> columns")
        self.f = f

    def map_columns(self, columns: Sequence[Any]) -> Any:
        return self.f(*columns)

    def map(self, value: Any) -> Any:
        """One record: columns of length one in, the first row of the result out."""
        fields = value if isinstance(value, tuple) else (value,)
        out = self.f(*(np.asarray([v]) if isinstance(v, int | float | bool) else [v] for v in fields))
        if isinstance(out, tuple):
            return tuple(_scalar(c[0]) for c in out)
        return _scalar(out[0])

    def __repr__(self) -> str:
        return f"batch_map({getattr(self.f, '__name__', self.f)!r})"


class BatchFilterFunction(fn.FilterFunction):
    """``f(*columns) -> mask``; see the module docstring."""

    vectorized = True

    def __init__(self, f: Callable[..., Any]) -> None:
        _check_callable("batch_filter", f, "f(*columns) -> boolean mask")
        self.f = f

    def filter_columns(self, columns: Sequence[Any]) -> np.ndarray:
        return np.asarray(self.f(*columns), dtype=np.bool_)

    def filter(self, value: Any) -> bool:
        fields = value if isinstance(value, tuple) else (value,)
        return bool(
            np.asarray(
                self.f(*(np.asarray([v]) if isinstance(v, int | float | bool) else [v] for v in fields))
            )[0]
        )

    def __repr__(self) -> str:
        return f"batch_filter({getattr(self.f, '__name__', self.f)!r})"


def _scalar(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


class ScalarMapFunction(fn.MapFunction):
    """``f(*fields)`` of one record, compiled with numba and looped over the columns."""

    vectorized = True

    def __init__(self, f: Callable[..., Any]) -> None:
        _check_callable("scalar_map", f, "f(*fields) -> value or tuple")
        self.f = f
        self._loops: dict[Any, Any] = {}

    def map_columns(self, columns: Sequence[Any]) -> Any:
        from weir.columnar.compile import scalar_loop

        return scalar_loop(self, self.f, columns, "map")

    def map(self, value: Any) -> Any:
        return self.f(*value) if isinstance(value, tuple) else self.f(value)

    def __getstate__(self) -> dict[str, Any]:
        return {"f": self.f, "_loops": {}}

    def __repr__(self) -> str:
        return f"scalar_map({getattr(self.f, '__name__', self.f)!r})"


class ScalarFilterFunction(fn.FilterFunction):
    """``f(*fields) -> bool`` of one record, compiled with numba and looped over the columns."""

    vectorized = True

    def __init__(self, f: Callable[..., Any]) -> None:
        _check_callable("scalar_filter", f, "f(*fields) -> bool")
        self.f = f
        self._loops: dict[Any, Any] = {}

    def filter_columns(self, columns: Sequence[Any]) -> np.ndarray:
        from weir.columnar.compile import scalar_loop

        return np.asarray(scalar_loop(self, self.f, columns, "filter"), dtype=np.bool_)

    def filter(self, value: Any) -> bool:
        return bool(self.f(*value) if isinstance(value, tuple) else self.f(value))

    def __getstate__(self) -> dict[str, Any]:
        return {"f": self.f, "_loops": {}}

    def __repr__(self) -> str:
        return f"scalar_filter({getattr(self.f, '__name__', self.f)!r})"


class FieldKeySelector(fn.KeySelector):
    """The key is field ``index`` of the record (position), read as a column when it can be."""

    def __init__(self, index: int) -> None:
        if isinstance(index, bool) or not isinstance(index, int):
            raise UsageError(f"field(index): index must be a field position (int), got {index!r}")
        self.index = index

    def get_key(self, value: Any) -> Any:
        return value[self.index]

    def key_column(self, values: Any) -> Any:
        """The keys of a columnar batch (an array or list), or None for a batch of records."""
        cols = getattr(values, "columns", None)
        if cols is None:
            return None
        return cols[self.index]

    def __repr__(self) -> str:
        return f"field({self.index})"


class FieldTimestampAssigner(TimestampAssigner):
    """The event timestamp is field ``index`` of the record (epoch ms), read as a column when it can be."""

    def __init__(self, index: int) -> None:
        if isinstance(index, bool) or not isinstance(index, int):
            raise UsageError(f"timestamp_field(index): index must be a field position (int), got {index!r}")
        self.index = index

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return value[self.index]

    def timestamp_column(self, values: Any) -> np.ndarray | None:
        cols = getattr(values, "columns", None)
        if cols is None:
            return None
        column = cols[self.index]
        if isinstance(column, np.ndarray) and column.dtype.kind in "iu":
            return column.astype(np.int64, copy=False)
        return None

    def __repr__(self) -> str:
        return f"timestamp_field({self.index})"


def batch_map(f: Callable[..., Any]) -> BatchMapFunction:
    return BatchMapFunction(f)


def batch_filter(f: Callable[..., Any]) -> BatchFilterFunction:
    return BatchFilterFunction(f)


def scalar_map(f: Callable[..., Any]) -> ScalarMapFunction:
    return ScalarMapFunction(f)


def scalar_filter(f: Callable[..., Any]) -> ScalarFilterFunction:
    return ScalarFilterFunction(f)


def field(index: int) -> FieldKeySelector:
    return FieldKeySelector(index)


def timestamp_field(index: int) -> FieldTimestampAssigner:
    return FieldTimestampAssigner(index)

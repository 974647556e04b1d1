"""Map and filter over a batch's columns: ``weir.columnar``'s batch and compiled scalar functions.

One call of the user's function per batch. A batch that arrives as records (a stream that is
not columnar up to here: a collection source, an untyped map) is turned into columns first, by
the input's type where it is known (numpy arrays of the field's dtype, lists otherwise), so the
function always sees columns and gives the same results either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from weir.codec.batch import Batch, TupleColumns
from weir.codec.strings import Strings
from weir.columnar.functions import columns_of
from weir.common.typeinfo import BasicTypeInfo, RowTypeInfo, TupleTypeInfo, TypeInformation
from weir.errors import UsageError
from weir.operators.base import StreamOperator


def to_columns(records: list[Any], input_type: TypeInformation | None) -> tuple[Any, ...]:
    """The columns of a batch held as records."""
    if isinstance(input_type, TupleTypeInfo | RowTypeInfo):
        types = input_type.get_field_types()
        arity = len(types)
        fields: list[Any] = [list(c) for c in zip(*records)] if records else [[] for _ in range(arity)]
        return tuple(_column(f, t) for f, t in zip(fields, types))
    if input_type is not None and not isinstance(input_type, BasicTypeInfo):
        return (list(records),)
    if records and isinstance(records[0], tuple) and input_type is None:
        return tuple(_column(list(c), None) for c in zip(*records))
    return (_column(records, input_type),)


def _column(values: list[Any], t: TypeInformation | None) -> Any:
    dtype = getattr(t, "numpy_dtype", None) if isinstance(t, BasicTypeInfo) else None
    if dtype is not None and dtype != "uint16":
        return np.asarray(values, dtype=dtype)
    if t is None and values and all(type(v) in (int, float, bool) for v in values[:1]):
        array = np.asarray(values)
        return array if array.dtype.kind in "biuf" else values
    return values


def _batch_columns(batch: Batch, input_type: TypeInformation | None) -> tuple[Any, ...]:
    columns = columns_of(batch.values)
    return columns if columns is not None else to_columns(batch.as_list(), input_type)


class _ColumnOperator(StreamOperator):
    """One call of a weir.columnar function per batch, over the batch's columns."""

    def __init__(self, name: str, function: Any, input_type: TypeInformation | None) -> None:
        super().__init__(name)
        self.function = function
        self.input_type = input_type

    def open(self) -> None:
        self.function.open(self.context.runtime_context())

    def close(self) -> None:
        self.function.close()

    def process_batch(self, batch: Batch) -> None:
        n = len(batch)
        self.metrics.records_in += n
        if n:
            self._process_columns(batch, _batch_columns(batch, self.input_type), n)

    def _process_columns(self, batch: Batch, columns: tuple[Any, ...], n: int) -> None:
        raise NotImplementedError


class ColumnMapOperator(_ColumnOperator):
    """``map(batch_map(f))`` / ``map(scalar_map(f))``: the function's columns are the output."""

    def _process_columns(self, batch: Batch, columns: tuple[Any, ...], n: int) -> None:
        out = self.function.map_columns(columns)
        if isinstance(out, tuple | list) and out and not isinstance(out[0], int | float | bool | str):
            output = [c if isinstance(c, np.ndarray | list | Strings) else np.asarray(c) for c in out]
            self._check_lengths(output, n)
            values: Any = TupleColumns(output)
        else:
            values = out if isinstance(out, np.ndarray | list) else np.asarray(out)
            self._check_lengths([values], n)
        self._emit(Batch(values, batch.timestamps))

    def _check_lengths(self, columns: list[Any], n: int) -> None:
        lengths = [len(c) for c in columns]
        if any(length != n for length in lengths):
            raise UsageError(
                f"operator '{self.name}': {self.function!r} returned columns of lengths {lengths} "
                f"for a batch of {n} records; a batch map returns one value per record in every column"
            )


class ColumnFilterOperator(_ColumnOperator):
    """``filter(batch_filter(f))`` / ``filter(scalar_filter(f))``: the records whose mask is true."""

    def _process_columns(self, batch: Batch, columns: tuple[Any, ...], n: int) -> None:
        mask = self.function.filter_columns(columns)
        if mask.shape != (n,):
            raise UsageError(
                f"operator '{self.name}': {self.function!r} returned a mask of shape {mask.shape} "
                f"for a batch of {n} records; a batch filter returns one boolean per record"
            )
        self._emit(batch if mask.all() else batch.take(np.flatnonzero(mask)))

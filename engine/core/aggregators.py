"""The built-in aggregations: ``sum``/``min``/``max``/``min_by``/``max_by`` of a field, and a
window's ``count`` and ``mean``.

The API builds them into reduce and aggregate transformations; the keyed and window
operators recognise them to take their vectorized paths. Both sides import them from here.
"""

from __future__ import annotations

from typing import Any

from weir.common.types import Row
from weir.core import functions as fn
from weir.errors import UsageError

__all__ = ["Count", "FieldAggregator", "Mean", "WithKey"]


class FieldAggregator(fn.ReduceFunction):
    """sum/min/max/min_by/max_by of one field, with Flink's semantics: the other fields come
    from the first record (sum/min/max) or from the selected record (min_by/max_by)."""

    def __init__(self, aggregation: str, field: int | str) -> None:
        self.aggregation = aggregation
        self.field = field

    def _get(self, value: Any) -> Any:
        if isinstance(value, (tuple, list, Row)):
            try:
                return value[self.field]  # type: ignore[index]
            except (IndexError, KeyError, TypeError):
                raise UsageError(
                    f"{self.aggregation}({self.field!r}) cannot read that field of {value!r}"
                ) from None
        if self.field not in (0, "f0"):
            raise UsageError(f"{self.aggregation}({self.field!r}) needs tuple or Row records, got {value!r}")
        return value

    def _index(self, value: Any) -> int:
        if isinstance(self.field, int):
            return self.field
        if isinstance(value, Row) and value.get_field_names() is not None:
            return value.get_field_names().index(self.field)  # type: ignore[union-attr]
        return int(str(self.field).lstrip("f"))

    def _set(self, value: Any, new: Any) -> Any:
        if isinstance(value, tuple):
            i = self._index(value)
            return (*value[:i], new, *value[i + 1 :])
        if isinstance(value, list):
            copy = list(value)
            copy[self._index(value)] = new
            return copy
        if isinstance(value, Row):
            values = list(value)
            values[self._index(value)] = new
            row = Row(*values)
            names = value.get_field_names()
            if names is not None:
                row.set_field_names(names)
            return row
        return new

    def reduce(self, value1: Any, value2: Any) -> Any:
        a, b = self._get(value1), self._get(value2)
        kind = self.aggregation
        if kind == "sum":
            return self._set(value1, a + b)
        if kind == "min":
            return self._set(value1, b) if b < a else value1
        if kind == "max":
            return self._set(value1, b) if b > a else value1
        if kind == "min_by":
            return value2 if b < a else value1
        if kind == "max_by":
            return value2 if b > a else value1
        raise UsageError(f"unknown aggregation {kind!r}")


class Count(fn.AggregateFunction):
    """``count()`` of a window: the number of records."""

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + 1

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, acc_a: int, acc_b: int) -> int:
        return acc_a + acc_b


class Mean(fn.AggregateFunction):
    """``mean(field)`` of a window: the average of one field, as (sum, count)."""

    def __init__(self, field: int | str) -> None:
        self.getter = FieldAggregator("mean", field)

    def create_accumulator(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, value: Any, accumulator: tuple[float, int]) -> tuple[float, int]:
        return (accumulator[0] + self.getter._get(value), accumulator[1] + 1)

    def get_result(self, accumulator: tuple[float, int]) -> float:
        return accumulator[0] / accumulator[1]

    def merge(self, acc_a: tuple[float, int], acc_b: tuple[float, int]) -> tuple[float, int]:
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])


class WithKey(fn.WindowFunction):
    """Pairs each aggregate with its key: ``(key, value)``, the output of built-in window aggregations."""

    def apply(self, key: Any, window: Any, inputs: Any) -> Any:
        for value in inputs:
            yield (key, value)

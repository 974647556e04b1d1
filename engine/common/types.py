"""``Row`` and ``RowKind``, as in ``pyflink.common.types``."""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from typing import Any

from weir.errors import UsageError


class RowKind(Enum):
    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def short_string(self) -> str:
        return ("+I", "-U", "+U", "-D")[self.value]


class Row:
    """A row of values, positional (``Row(1, "a")``) or named (``Row(id=1, name="a")``).

    ``Row("id", "name")`` makes a row "class" that is called with the values, as in PyFlink.
    Named fields are reachable as attributes and by name: ``row.name``, ``row["name"]``.
    """

    __slots__ = ("_fields", "_row_kind", "_values")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise TypeError("Row takes positional values or named values, not both")
        object.__setattr__(self, "_row_kind", RowKind.INSERT)
        if kwargs:
            object.__setattr__(self, "_fields", list(kwargs))
            object.__setattr__(self, "_values", list(kwargs.values()))
        else:
            object.__setattr__(self, "_fields", None)
            object.__setattr__(self, "_values", list(args))

    def as_dict(self, recursive: bool = False) -> dict[str, Any]:
        if self._fields is None:
            raise TypeError("cannot convert a Row without field names to a dict")

        def conv(v: Any) -> Any:
            if isinstance(v, Row) and v._fields is not None:
                return v.as_dict(True)
            if isinstance(v, list):
                return [conv(x) for x in v]
            if isinstance(v, dict):
                return {k: conv(x) for k, x in v.items()}
            return v

        if recursive:
            return {k: conv(v) for k, v in zip(self._fields, self._values)}
        return dict(zip(self._fields, self._values))

    def set_field_names(self, field_names: list[str]) -> None:
        if len(field_names) != len(self._values):
            raise ValueError(f"Row has {len(self._values)} values, got {len(field_names)} field names")
        object.__setattr__(self, "_fields", list(field_names))

    def get_field_names(self) -> list[str] | None:
        return None if self._fields is None else list(self._fields)

    def get_fields_by_names(self, names: list[str]) -> list[Any]:
        """The values of the fields ``names``, in that order (all values for an unnamed row)."""
        if self._fields is None or names == self._fields:
            return list(self._values)
        unknown = [n for n in names if n not in self._fields]
        if unknown:
            raise UsageError(f"Row has no fields {unknown}; its fields are {self._fields}")
        return [self._values[self._fields.index(n)] for n in names]

    @staticmethod
    def of_kind(row_kind: RowKind, *args: Any, **kwargs: Any) -> Row:
        """A row of the given kind (``Row.of_kind(RowKind.DELETE, 1, "a")``)."""
        row = Row(*args, **kwargs)
        row.set_row_kind(row_kind)
        return row

    def get_row_kind(self) -> RowKind:
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        object.__setattr__(self, "_row_kind", row_kind)

    def __call__(self, *args: Any) -> Row:
        """``Row("a", "b")(1, 2)`` builds ``Row(a=1, b=2)``."""
        if self._fields is not None or not all(isinstance(v, str) for v in self._values):
            raise TypeError("only a Row of field names (e.g. Row('id', 'name')) can be called")
        if len(args) != len(self._values):
            raise ValueError(f"expected {len(self._values)} values, got {len(args)}")
        return Row(**dict(zip(self._values, args)))

    def __getitem__(self, item: int | str | slice) -> Any:
        if isinstance(item, str):
            if self._fields is None or item not in self._fields:
                raise KeyError(item)
            return self._values[self._fields.index(item)]
        return self._values[item]

    def __setitem__(self, index: int, value: Any) -> None:
        self._values[index] = value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        fields = object.__getattribute__(self, "_fields")
        if fields is None or name not in fields:
            raise AttributeError(name)
        return object.__getattribute__(self, "_values")[fields.index(name)]

    def __setattr__(self, name: str, value: Any) -> None:
        if self._fields is not None and name in self._fields:
            self._values[self._fields.index(name)] = value
            return
        raise AttributeError(f"Row has no field '{name}'")

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __contains__(self, item: object) -> bool:
        if self._fields is not None and isinstance(item, str):
            return item in self._fields
        return item in self._values

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Row):
            return NotImplemented
        if self._fields is not None and other._fields is not None and self._fields != other._fields:
            return False
        return self._row_kind == other._row_kind and self._values == other._values

    def __hash__(self) -> int:
        return hash((self._row_kind, tuple(self._values)))

    def __reduce__(self) -> Any:
        return (_make_row, (self._fields, self._values, self._row_kind.value))

    def __repr__(self) -> str:
        if self._fields is not None:
            return "Row(" + ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self._values)) + ")"
        return "<Row(" + ", ".join(repr(v) for v in self._values) + ")>"


def _make_row(fields: list[str] | None, values: list[Any], kind: int) -> Row:
    row = Row(*values)
    if fields is not None:
        row.set_field_names(fields)
    row.set_row_kind(RowKind(kind))
    return row

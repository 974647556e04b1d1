"""Reading which field a user's key selector or timestamp assigner returns, so that weir can
read that field as a column of a columnar batch instead of calling the function per record.

The function is called once with a stand-in record that notes the fields read; the answer is
checked against the real function on the first and last records of every batch
(``probe_agrees``), and a disagreement makes the caller call the function from then on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from weir.codec.strings import Strings
from weir.common.typeinfo import RowTypeInfo, TupleTypeInfo, TypeInformation


class _Field:
    __slots__ = ("name",)

    def __init__(self, name: Any) -> None:
        self.name = name


class _Probe:
    """A stand-in record: notes which fields a key selector reads."""

    def __init__(self) -> None:
        self.reads: list[Any] = []

    def __getitem__(self, item: Any) -> _Field:
        self.reads.append(item)
        return _Field(item)

    def __getattr__(self, name: str) -> _Field:
        if name.startswith("_"):
            raise AttributeError(name)
        self.reads.append(name)
        return _Field(name)


IDENTITY = -1  # the key is the record itself


def probe_key_field(key_of: Any, input_type: TypeInformation | None) -> int | None:
    """The field the key selector returns (``IDENTITY`` for the record itself), or None.

    Without type information only ``r[i]`` with ``i >= 0`` counts as a field. Callers check
    the answer against the real selector on real records (``probe_agrees``: the probe can be
    fooled)."""
    probe = _Probe()
    try:
        result = key_of(probe)
    except Exception:
        return None
    if result is probe and not probe.reads:
        return IDENTITY
    if not isinstance(result, _Field) or probe.reads != [result.name]:
        return None
    name = result.name
    if isinstance(input_type, TupleTypeInfo | RowTypeInfo):
        arity = input_type.get_arity()
        if isinstance(name, int) and not isinstance(name, bool) and -arity <= name < arity:
            return name % arity
        if isinstance(input_type, RowTypeInfo) and isinstance(name, str) and name in input_type.field_names:
            return input_type.field_names.index(name)
    elif input_type is None and isinstance(name, int) and not isinstance(name, bool) and name >= 0:
        return name
    return None


def identity(value: Any) -> Any:
    return value


def probe_agrees(getter: Any, key_of: Any, values: Any) -> bool:
    """Whether ``getter`` (the probed field's reader) gives the key selector's key, of the same
    type, on the first and last of ``values`` (a non-empty list or numpy array)."""
    try:
        for i in (0, -1):
            record = values[i].item() if isinstance(values, np.ndarray) else values[i]
            got, expected = getter(record), key_of(record)
            if type(got) is not type(expected) or got != expected:
                return False
    except Exception:
        return False
    return True


def row_at(columns: Any, i: int) -> tuple[Any, ...]:
    """Record ``i`` of a columnar batch as Python values, without building the others."""
    return tuple(c[i].item() if isinstance(c, np.ndarray) else c[i] for c in columns)


class FieldColumn:
    """Reads the field a user's function returns as a column of columnar batches.

    ``function(record)`` is the user's function of one record. ``column(values)`` is that
    field's column when ``values`` is columnar, the probe found a field, the column is a numpy
    array or a list (strings), and the function agrees with it on the batch's first and last records; else None
    (the caller calls the function per record). After one disagreement it stays None."""

    def __init__(self, function: Any, whole_record: bool = True) -> None:
        self.function = function
        self.whole_record = whole_record  # may the field be the record itself (a LONG stream's value)
        self.field: int | None = None
        self._trusted: bool | None = None  # None: not probed yet (the probe waits for columns)

    def column(self, values: Any) -> np.ndarray | list[Any] | None:
        if self._trusted is None:
            if not (hasattr(values, "columns") or (self.whole_record and isinstance(values, np.ndarray))):
                return None  # records: the function runs per record anyway, no probe needed
            self.field = probe_key_field(self.function, None)
            self._trusted = self.field is not None and (self.whole_record or self.field != IDENTITY)
        if not self._trusted:
            return None
        field = self.field
        if field == IDENTITY:
            if not isinstance(values, np.ndarray) or not len(values):
                return None
            column = values
            first, last = values[0].item(), values[-1].item()
            agrees = all(_same(self.function(v), v) for v in (first, last))
        else:
            columns = getattr(values, "columns", None)
            assert field is not None
            if (
                columns is None
                or not field < len(columns)
                or not isinstance(columns[field], np.ndarray | list | Strings)
            ):
                return None
            column = columns[field]
            if not len(column):
                return None
            agrees = all(
                _same(self.function(row_at(columns, i)), _item(column[i])) for i in (0, len(column) - 1)
            )
        if not agrees:
            self._trusted = False
            return None
        return column


def _item(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _same(expected: Any, got: Any) -> bool:
    return type(expected) is type(got) and expected == got

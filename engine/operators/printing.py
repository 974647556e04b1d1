"""How ``DataStream.print()`` writes a record: the line PyFlink's print sink writes.

PyFlink prints in one of three ways, by the stream's type information:

* no type (pickled records): Python's ``str(value)``; an unnamed ``Row`` shows as
  ``<Row('a', 2)>`` (its ``repr``), a tuple as ``('a', 2)``;
* ``Types.ROW``/``ROW_NAMED``: ``+I[a,2]``: the row kind, then ``str`` of each field
  joined by ``,`` (PyFlink formats these in Python before the Java sink);
* any other type: Java's ``toString`` of the value the Java sink receives: a tuple is
  ``(hi,0,5,4)``, a boolean ``true``, a double ``1.0E10``, a list ``[1, 2]``, a map
  ``{k=1}``, a nested row ``+I[1, a]``, a missing value ``null``.

Pure: no I/O.
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from weir.common.time import Instant
from weir.common.typeinfo import (
    BasicArrayTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    ObjectArrayTypeInfo,
    PickledBytesTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
    TypeInformation,
)
from weir.common.types import Row, RowKind


def formatter_for(type_info: TypeInformation | None) -> Callable[[Any], str]:
    """The function that turns one record of a stream of ``type_info`` into its printed line."""
    if type_info is None or isinstance(type_info, PickledBytesTypeInfo):
        return _python_str
    if isinstance(type_info, RowTypeInfo):
        row_type = type_info
        return lambda value: _python_row(value, row_type)
    return lambda value: java_string(value, type_info)


def _python_str(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _python_row(value: Any, type_info: RowTypeInfo) -> str:
    kind = value.get_row_kind() if isinstance(value, Row) else RowKind.INSERT
    fields = (str(_named(v, t)) for v, t in zip(value, type_info.get_field_types()))
    return f"{kind.short_string()}[{','.join(fields)}]"


def _named(value: Any, type_info: TypeInformation) -> Any:
    """A nested row as PyFlink hands it over: named by its type (``Row(f0=1, f1='z')``)."""
    if not isinstance(type_info, RowTypeInfo) or not isinstance(value, Row | tuple):
        return value
    fields = [_named(v, t) for v, t in zip(value, type_info.get_field_types())]
    named = Row(**dict(zip(type_info.get_field_names(), fields)))
    if isinstance(value, Row):
        named.set_row_kind(value.get_row_kind())
    return named


def java_string(value: Any, type_info: TypeInformation | None) -> str:
    """Java's ``toString`` of ``value`` as Flink holds a value of ``type_info``."""
    if value is None:
        return "null"
    if isinstance(type_info, TupleTypeInfo):
        types = type_info.get_field_types()
        return "(" + ",".join(java_string(v, t) for v, t in zip(value, types)) + ")"
    if isinstance(type_info, RowTypeInfo):
        kind = value.get_row_kind() if isinstance(value, Row) else RowKind.INSERT
        fields = ", ".join(java_string(v, t) for v, t in zip(value, type_info.get_field_types()))
        return f"{kind.short_string()}[{fields}]"
    if isinstance(
        type_info, ListTypeInfo | BasicArrayTypeInfo | ObjectArrayTypeInfo | PrimitiveArrayTypeInfo
    ):
        if isinstance(value, bytes | bytearray):
            return (
                "[" + ", ".join(str(b - 256 if b > 127 else b) for b in value) + "]"
            )  # Java bytes are signed
        return "[" + ", ".join(java_string(v, type_info.element_type) for v in value) + "]"
    if isinstance(type_info, MapTypeInfo):
        entries = (
            f"{java_string(k, type_info.key_type)}={java_string(v, type_info.value_type)}"
            for k, v in value.items()
        )
        return "{" + ", ".join(entries) + "}"
    if isinstance(type_info, BasicTypeInfo):
        return _java_basic(value, type_info.name)
    return _python_str(value)


def _java_basic(value: Any, name: str) -> str:
    if name == "Boolean":
        return "true" if value else "false"
    if name == "Double":
        return java_double(float(value))
    if name == "Float":
        return java_double(float(value), single=True)
    if name == "SqlTimestamp" and isinstance(value, datetime.datetime):
        fraction = f"{value.microsecond:06d}".rstrip("0") or "0"
        return value.strftime("%Y-%m-%d %H:%M:%S") + "." + fraction
    if name == "SqlTime" and isinstance(value, datetime.time):
        return value.strftime("%H:%M:%S")
    if name == "Instant" and isinstance(value, Instant):
        return java_instant(value)
    return _python_str(value)  # strings, integers, Decimal (same notation as Java's BigDecimal), dates


def java_instant(value: Instant) -> str:
    """Java's ``Instant.toString``: ISO 8601 in UTC, the fraction in groups of three digits."""
    moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=value.seconds)
    nanos = value.nanos
    if nanos == 0:
        fraction = ""
    elif nanos % 1_000_000 == 0:
        fraction = f".{nanos // 1_000_000:03d}"
    elif nanos % 1_000 == 0:
        fraction = f".{nanos // 1_000:06d}"
    else:
        fraction = f".{nanos:09d}"
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def java_double(value: float, single: bool = False) -> str:
    """Java's ``Double.toString`` (``Float.toString`` when ``single``): plain decimal between
    10^-3 and 10^7, else ``d.dddE±n``; the shortest digits that read back as the value."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    text = str(np.float32(value)) if single else repr(value)
    sign, digits, exponent = decimal.Decimal(text).normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, digits))
    point = len(mantissa) + exponent  # digits before the decimal point
    minus = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{minus}0.{'0' * -point}{mantissa}"
        if point >= len(mantissa):
            return f"{minus}{mantissa}{'0' * (point - len(mantissa))}.0"
        return f"{minus}{mantissa[:point]}.{mantissa[point:]}"
    return f"{minus}{mantissa[0]}.{mantissa[1:] or '0'}E{point - 1}"

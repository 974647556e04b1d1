"""Typed values to and from the plain values of text formats (JSON, CSV), shared by the row
serialization schemas: each field is converted by its ``TypeInformation``."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from weir.common.typeinfo import BasicTypeInfo, MapTypeInfo, RowTypeInfo, TupleTypeInfo, TypeInformation
from weir.common.types import Row
from weir.errors import UsageError

_INTEGRAL = ("Byte", "Short", "Integer", "Long", "BigInteger")
_FLOATING = ("Float", "Double")


def check_row_type(what: str, type_info: Any) -> RowTypeInfo:
    if not isinstance(type_info, RowTypeInfo):
        raise UsageError(
            f"{what} needs a row type such as Types.ROW_NAMED(['id', 'name'], [Types.INT(), Types.STRING()]), "
            f"got {type_info!r}"
        )
    return type_info


def from_plain(value: Any, t: TypeInformation, field: str) -> Any:
    """A value read from text (str, number, bool, list, dict) as ``t`` says."""
    if value is None:
        return None
    if isinstance(t, RowTypeInfo):
        if not isinstance(value, dict):
            raise ValueError(f"field {field!r}: expected an object for {t!r}, got {value!r}")
        return Row(
            **{n: from_plain(value.get(n), ft, f"{field}.{n}") for n, ft in zip(t.field_names, t.field_types)}
        )
    element = getattr(t, "element_type", None)
    if element is not None:
        if not isinstance(value, list):
            raise ValueError(f"field {field!r}: expected an array, got {value!r}")
        return [from_plain(v, element, field) for v in value]
    if isinstance(t, MapTypeInfo):
        return {
            from_plain(k, t.key_type, field): from_plain(v, t.value_type, field) for k, v in value.items()
        }
    if isinstance(t, TupleTypeInfo):
        return tuple(from_plain(v, ft, field) for v, ft in zip(value, t.field_types))
    if not isinstance(t, BasicTypeInfo):
        return value
    name = t.name
    if name == "String":
        return value if isinstance(value, str) else str(value)
    if name == "Boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValueError(f"field {field!r}: expected true or false, got {value!r}")
    if name in _INTEGRAL:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(f"field {field!r}: expected an integer, got {value!r}")
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"field {field!r}: expected an integer, got {value!r}") from None
    if name in _FLOATING:
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"field {field!r}: expected a number, got {value!r}") from None
    if name == "BigDecimal":
        return decimal.Decimal(str(value))
    if name == "SqlDate":
        return datetime.date.fromisoformat(str(value))
    if name == "SqlTime":
        return datetime.time.fromisoformat(str(value))
    if name == "SqlTimestamp":
        return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return value


def to_plain(value: Any, t: TypeInformation) -> Any:
    """A typed value as JSON's values: rows become objects, dates ISO 8601 text."""
    if value is None:
        return None
    if isinstance(t, RowTypeInfo):
        values = value.get_fields_by_names(t.field_names) if isinstance(value, Row) else list(value)
        return {n: to_plain(v, ft) for n, ft, v in zip(t.field_names, t.field_types, values)}
    element = getattr(t, "element_type", None)
    if element is not None:
        return [to_plain(v, element) for v in value]
    if isinstance(t, MapTypeInfo):
        return {str(to_plain(k, t.key_type)): to_plain(v, t.value_type) for k, v in value.items()}
    if isinstance(t, TupleTypeInfo):
        return [to_plain(v, ft) for v, ft in zip(value, t.field_types)]
    if isinstance(value, decimal.Decimal):  # a JSON number (at double precision when fractional)
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return value

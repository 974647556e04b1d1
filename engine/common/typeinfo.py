"""Type information: PyFlink's ``Types`` and the TypeInformation classes behind it.

A stream's type information decides how its records are serialized between tasks:
a typed stream gets a compiled columnar serializer, an untyped one (or
``Types.PICKLED_BYTE_ARRAY()``) falls back to pickle, as Flink falls back to Kryo.
"""

from __future__ import annotations

import calendar
import datetime
import decimal
import enum
import time
from collections.abc import Sequence
from typing import Any

from weir.common.time import Instant
from weir.errors import UsageError


class TypeInformation:
    """Describes the values of a stream. Immutable, comparable, hashable."""

    def _key(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def is_basic_type(self) -> bool:
        return False

    # PyFlink's conversion between a Python value and the internal value its coders write;
    # types whose values are written as they are need none.
    def need_conversion(self) -> bool:
        return False

    def to_internal_type(self, obj: Any) -> Any:
        return obj

    def from_internal_type(self, obj: Any) -> Any:
        return obj

    def to_json(self) -> Any:
        """A JSON-friendly description, used in plans."""
        return repr(self)


class BasicType(enum.Enum):
    """The basic types by Java's class name, as ``pyflink.common.typeinfo.BasicType``."""

    STRING = "String"
    BYTE = "Byte"
    BOOLEAN = "Boolean"
    SHORT = "Short"
    INT = "Integer"
    LONG = "Long"
    FLOAT = "Float"
    DOUBLE = "Double"
    CHAR = "Char"
    BIG_INT = "BigInteger"
    BIG_DEC = "BigDecimal"
    INSTANT = "Instant"


class BasicTypeInfo(TypeInformation):
    """A scalar type. ``fixed_size`` is its width in bytes on the wire, or None if variable."""

    def __init__(self, name: str, python_type: type, fixed_size: int | None, numpy_dtype: str | None) -> None:
        self.name = name
        self.python_type = python_type
        self.fixed_size = fixed_size
        self.numpy_dtype = numpy_dtype

    def _key(self) -> tuple[Any, ...]:
        return (self.name,)

    def is_basic_type(self) -> bool:
        return True

    def __repr__(self) -> str:
        return self.name

    # PyFlink's constants, each the same object as the matching ``Types`` method returns
    @staticmethod
    def STRING_TYPE_INFO() -> BasicTypeInfo:
        return _STRING

    @staticmethod
    def BOOLEAN_TYPE_INFO() -> BasicTypeInfo:
        return _BOOLEAN

    @staticmethod
    def BYTE_TYPE_INFO() -> BasicTypeInfo:
        return _BYTE

    @staticmethod
    def SHORT_TYPE_INFO() -> BasicTypeInfo:
        return _SHORT

    @staticmethod
    def INT_TYPE_INFO() -> BasicTypeInfo:
        return _INT

    @staticmethod
    def LONG_TYPE_INFO() -> BasicTypeInfo:
        return _LONG

    @staticmethod
    def FLOAT_TYPE_INFO() -> BasicTypeInfo:
        return _FLOAT

    @staticmethod
    def DOUBLE_TYPE_INFO() -> BasicTypeInfo:
        return _DOUBLE

    @staticmethod
    def CHAR_TYPE_INFO() -> BasicTypeInfo:
        return _CHAR

    @staticmethod
    def BIG_INT_TYPE_INFO() -> BasicTypeInfo:
        return _BIG_INT

    @staticmethod
    def BIG_DEC_TYPE_INFO() -> BasicTypeInfo:
        return _BIG_DEC

    @staticmethod
    def INSTANT_TYPE_INFO() -> BasicTypeInfo:
        return _INSTANT


class PickledBytesTypeInfo(TypeInformation):
    """Any picklable Python object; the fallback serializer."""

    def _key(self) -> tuple[Any, ...]:
        return ()

    def __repr__(self) -> str:
        return "PickledByteArray"


class PrimitiveArrayTypeInfo(TypeInformation):
    def __init__(self, element_type: TypeInformation) -> None:
        if not isinstance(element_type, BasicTypeInfo) or (
            element_type.fixed_size is None and element_type.name != "Boolean"
        ):
            raise UsageError(
                f"Types.PRIMITIVE_ARRAY needs a fixed-width basic element type "
                f"(BYTE, SHORT, INT, LONG, FLOAT, DOUBLE, BOOLEAN, CHAR), got {element_type!r}"
            )
        self.element_type = element_type

    def _key(self) -> tuple[Any, ...]:
        return (self.element_type,)

    def __repr__(self) -> str:
        return f"{self.element_type!r}[]"


class BasicArrayTypeInfo(TypeInformation):
    def __init__(self, element_type: TypeInformation) -> None:
        if not isinstance(element_type, BasicTypeInfo):
            raise UsageError(f"Types.BASIC_ARRAY needs a basic element type, got {element_type!r}")
        self.element_type = element_type

    def _key(self) -> tuple[Any, ...]:
        return (self.element_type,)

    def __repr__(self) -> str:
        return f"BasicArray<{self.element_type!r}>"


class ObjectArrayTypeInfo(TypeInformation):
    def __init__(self, element_type: TypeInformation) -> None:
        _require_type_info("Types.OBJECT_ARRAY element type", element_type)
        self.element_type = element_type

    def _key(self) -> tuple[Any, ...]:
        return (self.element_type,)

    def __repr__(self) -> str:
        return f"ObjectArray<{self.element_type!r}>"


class ListTypeInfo(TypeInformation):
    def __init__(self, element_type: TypeInformation) -> None:
        _require_type_info("Types.LIST element type", element_type)
        self.element_type = element_type

    def _key(self) -> tuple[Any, ...]:
        return (self.element_type,)

    def __repr__(self) -> str:
        return f"List<{self.element_type!r}>"


class MapTypeInfo(TypeInformation):
    def __init__(self, key_type: TypeInformation, value_type: TypeInformation) -> None:
        _require_type_info("Types.MAP key type", key_type)
        _require_type_info("Types.MAP value type", value_type)
        self.key_type = key_type
        self.value_type = value_type

    def _key(self) -> tuple[Any, ...]:
        return (self.key_type, self.value_type)

    def __repr__(self) -> str:
        return f"Map<{self.key_type!r}, {self.value_type!r}>"


class RowTypeInfo(TypeInformation):
    """A row of named fields (``Types.ROW`` names them f0, f1, ...)."""

    def __init__(
        self, field_types: Sequence[TypeInformation], field_names: Sequence[str] | None = None
    ) -> None:
        field_types = list(field_types)
        for i, t in enumerate(field_types):
            _require_type_info(f"Types.ROW field {i}", t)
        if field_names is None:
            field_names = [f"f{i}" for i in range(len(field_types))]
        field_names = list(field_names)
        if len(field_names) != len(field_types):
            raise UsageError(
                f"Types.ROW_NAMED got {len(field_names)} field names and {len(field_types)} field types; "
                f"they must be the same length"
            )
        if len(set(field_names)) != len(field_names):
            raise UsageError(f"Types.ROW_NAMED field names must be unique, got {field_names}")
        self.field_types = field_types
        self.field_names = field_names

    def _key(self) -> tuple[Any, ...]:
        return (tuple(self.field_names), tuple(self.field_types))

    def get_field_names(self) -> list[str]:
        return list(self.field_names)

    def get_field_types(self) -> list[TypeInformation]:
        return list(self.field_types)

    def get_field_index(self, name: str) -> int:
        try:
            return self.field_names.index(name)
        except ValueError:
            raise UsageError(f"row has no field '{name}'; its fields are {self.field_names}") from None

    def get_arity(self) -> int:
        return len(self.field_types)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}: {t!r}" for n, t in zip(self.field_names, self.field_types))
        return f"Row({inner})"

    def need_conversion(self) -> bool:
        return True

    def to_internal_type(self, obj: Any) -> Any:
        """PyFlink's internal row: ``(row kind, *field values)``, each field converted by its
        type; a dict, a named Row or an object's attributes are read by field name."""
        if obj is None:
            return None
        from weir.common.types import Row, RowKind

        names, types = self.field_names, self.field_types
        if isinstance(obj, dict):
            kind, values = RowKind.INSERT, [obj.get(n) for n in names]
        elif isinstance(obj, Row):
            named = obj.get_field_names() is not None
            kind, values = obj.get_row_kind(), [obj[n] for n in names] if named else list(obj)
        elif isinstance(obj, tuple | list):
            kind, values = RowKind.INSERT, list(obj)
        elif hasattr(obj, "__dict__"):
            kind, values = RowKind.INSERT, [vars(obj).get(n) for n in names]
        else:
            raise UsageError(f"cannot read {obj!r} ({type(obj).__name__}) as a row of {self!r}")
        return (kind.value, *(t.to_internal_type(v) for t, v in zip(types, values)))

    def from_internal_type(self, obj: Any) -> Any:
        """The field values of an internal row as a tuple, each converted back by its type."""
        if obj is None or isinstance(obj, tuple | list):
            return obj
        return tuple(t.from_internal_type(v) for t, v in zip(self.field_types, obj))


class TupleTypeInfo(TypeInformation):
    """A Python tuple of fixed arity (Flink's TupleN)."""

    def __init__(self, field_types: Sequence[TypeInformation]) -> None:
        field_types = list(field_types)
        for i, t in enumerate(field_types):
            _require_type_info(f"Types.TUPLE field {i}", t)
        if not field_types:
            raise UsageError("Types.TUPLE needs at least one field type")
        self.field_types = field_types

    def _key(self) -> tuple[Any, ...]:
        return tuple(self.field_types)

    def get_field_types(self) -> list[TypeInformation]:
        return list(self.field_types)

    def get_arity(self) -> int:
        return len(self.field_types)

    def __repr__(self) -> str:
        return f"Tuple{len(self.field_types)}<{', '.join(repr(t) for t in self.field_types)}>"

    def need_conversion(self) -> bool:
        return True

    def to_internal_type(self, obj: Any) -> Any:
        if obj is None:
            return None
        from weir.common.types import Row

        if not isinstance(obj, tuple | list | Row):
            raise UsageError(f"cannot read {obj!r} ({type(obj).__name__}) as a tuple of {self!r}")
        return tuple(t.to_internal_type(v) for t, v in zip(self.field_types, obj))

    def from_internal_type(self, obj: Any) -> Any:
        if obj is None or isinstance(obj, tuple | list):
            return obj
        return tuple(t.from_internal_type(v) for t, v in zip(self.field_types, obj))


class InstantTypeInfo(BasicTypeInfo):
    """``Types.INSTANT()``: internally microseconds since the epoch, at millisecond precision."""

    def __init__(self, basic_type: BasicType = BasicType.INSTANT) -> None:
        super().__init__(basic_type.value, Instant, None, None)

    def need_conversion(self) -> bool:
        return True

    def to_internal_type(self, obj: Any) -> Any:
        return None if obj is None else obj.to_epoch_milli() * 1000

    def from_internal_type(self, obj: Any) -> Any:
        return None if obj is None else Instant.of_epoch_milli(obj // 1000)


class DateTypeInfo(BasicTypeInfo):
    """``Types.SQL_DATE()``: ``datetime.date``, internally days since 1970-01-01."""

    EPOCH_ORDINAL = datetime.datetime(1970, 1, 1).toordinal()

    def __init__(self) -> None:
        super().__init__("SqlDate", datetime.date, None, None)

    def need_conversion(self) -> bool:
        return True

    def to_internal_type(self, d: Any) -> Any:
        return None if d is None else d.toordinal() - self.EPOCH_ORDINAL

    def from_internal_type(self, v: Any) -> Any:
        return None if v is None else datetime.date.fromordinal(v + self.EPOCH_ORDINAL)


class TimeTypeInfo(BasicTypeInfo):
    """``Types.SQL_TIME()``: ``datetime.time``, internally microseconds of the day; a naive time
    is taken in the local zone and an aware one by its offset, as PyFlink converts them."""

    EPOCH_ORDINAL = calendar.timegm(time.localtime(0)) * 10**6

    def __init__(self) -> None:
        super().__init__("SqlTime", datetime.time, None, None)

    def need_conversion(self) -> bool:
        return True

    def to_internal_type(self, t: Any) -> Any:
        if t is None:
            return None
        if t.tzinfo is not None:
            offset = t.utcoffset() or datetime.timedelta()
            offset_us = (offset.days * 86400 + offset.seconds) * 10**6 + offset.microseconds
        else:
            offset_us = self.EPOCH_ORDINAL
        return ((t.hour * 60 + t.minute) * 60 + t.second) * 10**6 + t.microsecond - offset_us

    def from_internal_type(self, t: Any) -> Any:
        if t is None:
            return None
        seconds, micros = divmod(t + self.EPOCH_ORDINAL, 10**6)
        minutes, seconds = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        return datetime.time(hours, minutes, seconds, micros)


class TimestampTypeInfo(BasicTypeInfo):
    """``Types.SQL_TIMESTAMP()``: ``datetime.datetime``, internally microseconds since the epoch
    (a naive value in the local zone, an aware one in its own)."""

    def __init__(self) -> None:
        super().__init__("SqlTimestamp", datetime.datetime, None, None)

    def need_conversion(self) -> bool:
        return True

    def to_internal_type(self, dt: Any) -> Any:
        if dt is None:
            return None
        seconds = calendar.timegm(dt.utctimetuple()) if dt.tzinfo else time.mktime(dt.timetuple())
        return int(seconds) * 10**6 + dt.microsecond

    def from_internal_type(self, ts: Any) -> Any:
        if ts is None:
            return None
        return datetime.datetime.fromtimestamp(ts // 10**6).replace(microsecond=ts % 10**6)


class SqlTimeTypeInfo(TypeInformation):
    """The SQL time types by Java's names: ``SqlTimeTypeInfo.DATE()`` is ``Types.SQL_DATE()``."""

    @staticmethod
    def DATE() -> DateTypeInfo:
        return _SQL_DATE

    @staticmethod
    def TIME() -> TimeTypeInfo:
        return _SQL_TIME

    @staticmethod
    def TIMESTAMP() -> TimestampTypeInfo:
        return _SQL_TIMESTAMP


class LocalTimeTypeInfo(TypeInformation):
    """Java's local date-time types (``LocalDate``, ``LocalTime``, ``LocalDateTime``): naive
    ``datetime.date``, ``datetime.time`` and ``datetime.datetime`` values, carried as they
    are (no time zone applies, unlike ``Types.SQL_*``)."""

    class TimeType(enum.Enum):
        LOCAL_DATE = 0
        LOCAL_TIME = 1
        LOCAL_DATE_TIME = 2

    def __init__(self, time_type: LocalTimeTypeInfo.TimeType) -> None:
        if not isinstance(time_type, LocalTimeTypeInfo.TimeType):
            raise UsageError(f"LocalTimeTypeInfo needs a LocalTimeTypeInfo.TimeType, got {time_type!r}")
        self.time_type = time_type
        self.python_type = {"LOCAL_DATE": datetime.date, "LOCAL_TIME": datetime.time}.get(
            time_type.name, datetime.datetime
        )

    def _key(self) -> tuple[Any, ...]:
        return (self.time_type,)

    def __repr__(self) -> str:
        return f"LocalTimeTypeInfo<{self.time_type.name}>"


class ExternalTypeInfo(TypeInformation):
    """The Table API's wrapper of a type (``ExternalTypeInfo(type_info)``): the same values as
    ``type_info``, converted the same way."""

    def __init__(self, type_info: TypeInformation) -> None:
        _require_type_info("ExternalTypeInfo", type_info)
        self.type_info = type_info

    def _key(self) -> tuple[Any, ...]:
        return (self.type_info,)

    def need_conversion(self) -> bool:
        return self.type_info.need_conversion()

    def to_internal_type(self, obj: Any) -> Any:
        return self.type_info.to_internal_type(obj)

    def from_internal_type(self, obj: Any) -> Any:
        return self.type_info.from_internal_type(obj)

    def __repr__(self) -> str:
        return f"ExternalTypeInfo<{self.type_info!r}>"


def _require_type_info(what: str, value: object) -> None:
    if not isinstance(value, TypeInformation):
        raise UsageError(
            f"{what} must be a TypeInformation such as Types.LONG(), got {value!r}"
            + (" (did you forget the parentheses, e.g. Types.LONG()?)" if callable(value) else "")
        )


_STRING = BasicTypeInfo("String", str, None, None)
_BYTE = BasicTypeInfo("Byte", int, 1, "int8")
_BOOLEAN = BasicTypeInfo("Boolean", bool, 1, "bool")
_SHORT = BasicTypeInfo("Short", int, 2, "int16")
_INT = BasicTypeInfo("Integer", int, 4, "int32")
_LONG = BasicTypeInfo("Long", int, 8, "int64")
_FLOAT = BasicTypeInfo("Float", float, 4, "float32")
_DOUBLE = BasicTypeInfo("Double", float, 8, "float64")
_CHAR = BasicTypeInfo("Character", str, 2, "uint16")
_PICKLED = PickledBytesTypeInfo()
# Values without a fixed width, carried as text (see weir.codec.columns.TextColumn).
_BIG_INT = BasicTypeInfo("BigInteger", int, None, None)
_BIG_DEC = BasicTypeInfo("BigDecimal", decimal.Decimal, None, None)
_SQL_DATE = DateTypeInfo()
_SQL_TIME = TimeTypeInfo()
_SQL_TIMESTAMP = TimestampTypeInfo()
_INSTANT = InstantTypeInfo()


class Types:
    """PyFlink's ``Types``: each method returns a TypeInformation."""

    @staticmethod
    def STRING() -> BasicTypeInfo:
        return _STRING

    @staticmethod
    def BYTE() -> BasicTypeInfo:
        return _BYTE

    @staticmethod
    def BOOLEAN() -> BasicTypeInfo:
        return _BOOLEAN

    @staticmethod
    def SHORT() -> BasicTypeInfo:
        return _SHORT

    @staticmethod
    def INT() -> BasicTypeInfo:
        return _INT

    @staticmethod
    def LONG() -> BasicTypeInfo:
        return _LONG

    @staticmethod
    def FLOAT() -> BasicTypeInfo:
        return _FLOAT

    @staticmethod
    def DOUBLE() -> BasicTypeInfo:
        return _DOUBLE

    @staticmethod
    def CHAR() -> BasicTypeInfo:
        return _CHAR

    @staticmethod
    def BIG_INT() -> BasicTypeInfo:
        """Python ``int`` of any size (Java's BigInteger)."""
        return _BIG_INT

    @staticmethod
    def BIG_DEC() -> BasicTypeInfo:
        """``decimal.Decimal`` (Java's BigDecimal)."""
        return _BIG_DEC

    @staticmethod
    def SQL_DATE() -> BasicTypeInfo:
        """``datetime.date`` (Java's java.sql.Date)."""
        return _SQL_DATE

    @staticmethod
    def SQL_TIME() -> BasicTypeInfo:
        """``datetime.time`` (Java's java.sql.Time)."""
        return _SQL_TIME

    @staticmethod
    def SQL_TIMESTAMP() -> BasicTypeInfo:
        """``datetime.datetime`` (Java's java.sql.Timestamp)."""
        return _SQL_TIMESTAMP

    @staticmethod
    def INSTANT() -> BasicTypeInfo:
        """``weir.common.Instant`` (Java's Instant)."""
        return _INSTANT

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> PickledBytesTypeInfo:
        return _PICKLED

    @staticmethod
    def BYTE_ARRAY() -> PrimitiveArrayTypeInfo:
        """weir's shorthand for ``Types.PRIMITIVE_ARRAY(Types.BYTE())`` (Python ``bytes``)."""
        return PrimitiveArrayTypeInfo(_BYTE)

    @staticmethod
    def ROW(field_types: list[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(field_names: list[str], field_types: list[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def TUPLE(field_types: list[TypeInformation]) -> TupleTypeInfo:
        return TupleTypeInfo(field_types)

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> PrimitiveArrayTypeInfo:
        return PrimitiveArrayTypeInfo(element_type)

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> BasicArrayTypeInfo:
        return BasicArrayTypeInfo(element_type)

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> ObjectArrayTypeInfo:
        return ObjectArrayTypeInfo(element_type)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> ListTypeInfo:
        return ListTypeInfo(element_type_info)

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> MapTypeInfo:
        return MapTypeInfo(key_type_info, value_type_info)


def check_type_info(what: str, value: object) -> TypeInformation | None:
    """Validate an optional ``output_type``/``type_info`` argument."""
    if value is None:
        return None
    _require_type_info(what, value)
    return value  # type: ignore[return-value]

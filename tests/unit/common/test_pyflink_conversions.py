"""PyFlink's value conversions on the type classes, serializers and user config options.

Expected figures were read off PyFlink 2.3 for the same inputs (its conversions need no JVM).
"""

from __future__ import annotations

import datetime
from io import BytesIO

import pytest

from weir.common import ConfigOptions, Configuration, Instant, Row, RowKind, Types, TypeSerializer
from weir.common.serializer import VoidNamespaceSerializer
from weir.common.typeinfo import (
    BasicType,
    DateTypeInfo,
    InstantTypeInfo,
    SqlTimeTypeInfo,
    TimestampTypeInfo,
    TimeTypeInfo,
)
from weir.errors import UsageError

UTC = datetime.UTC


def test_the_sql_types_are_pyflinks_classes_and_the_same_objects_as_types() -> None:
    assert isinstance(Types.SQL_DATE(), DateTypeInfo) and SqlTimeTypeInfo.DATE() is Types.SQL_DATE()
    assert isinstance(Types.SQL_TIME(), TimeTypeInfo) and SqlTimeTypeInfo.TIME() is Types.SQL_TIME()
    assert isinstance(Types.SQL_TIMESTAMP(), TimestampTypeInfo)
    assert SqlTimeTypeInfo.TIMESTAMP() is Types.SQL_TIMESTAMP()
    assert (
        isinstance(Types.INSTANT(), InstantTypeInfo) and InstantTypeInfo(BasicType.INSTANT) == Types.INSTANT()
    )
    assert BasicType.INT.value == "Integer"


def test_plain_types_need_no_conversion() -> None:
    assert not Types.INT().need_conversion()
    assert Types.STRING().to_internal_type("a") == "a" == Types.STRING().from_internal_type("a")


def test_a_date_is_days_since_the_epoch() -> None:
    date = Types.SQL_DATE()
    assert date.need_conversion()
    assert date.to_internal_type(datetime.date(1970, 1, 2)) == 1
    assert date.from_internal_type(18262) == datetime.date(2020, 1, 1)
    assert date.to_internal_type(None) is None


def test_a_time_is_microseconds_of_the_day_and_round_trips() -> None:
    time = Types.SQL_TIME()
    assert time.to_internal_type(datetime.time(1, 0, 0, 5, tzinfo=UTC)) == 3_600_000_005
    naive = datetime.time(12, 34, 56, 789)
    assert time.from_internal_type(time.to_internal_type(naive)) == naive


def test_a_timestamp_is_microseconds_since_the_epoch_and_round_trips() -> None:
    ts = Types.SQL_TIMESTAMP()
    assert ts.to_internal_type(datetime.datetime(1970, 1, 1, 0, 0, 1, 250, tzinfo=UTC)) == 1_000_250
    naive = datetime.datetime(2021, 1, 9, 12, 0, 0, 11000)
    assert ts.from_internal_type(ts.to_internal_type(naive)) == naive


def test_an_instant_is_microseconds_at_millisecond_precision() -> None:
    instant = Types.INSTANT()
    assert instant.to_internal_type(Instant.of_epoch_milli(1500)) == 1_500_000
    assert instant.from_internal_type(1_500_999) == Instant.of_epoch_milli(1500)


def test_a_row_becomes_its_kind_and_converted_fields_read_by_name() -> None:
    row_type = Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.SQL_DATE()])
    day = datetime.date(1970, 1, 2)
    assert row_type.need_conversion()
    assert row_type.to_internal_type(Row(b=day, a=1)) == (0, 1, 1)
    assert row_type.to_internal_type({"a": 1, "b": day}) == (0, 1, 1)
    deleted = Row.of_kind(RowKind.DELETE, 1, datetime.date(1970, 1, 3))
    assert row_type.to_internal_type(deleted) == (3, 1, 2)
    assert row_type.from_internal_type((0, 1, 1)) == (0, 1, 1)  # already Python values
    with pytest.raises(UsageError, match="cannot read 5 \\(int\\) as a row"):
        row_type.to_internal_type(5)


def test_a_tuple_converts_each_field() -> None:
    pair = Types.TUPLE([Types.INT(), Types.SQL_DATE()])
    assert pair.to_internal_type((1, datetime.date(1970, 1, 3))) == (1, 2)
    assert pair.from_internal_type((1, 2)) == (1, 2)


def test_a_users_serializer_writes_and_reads_a_stream() -> None:
    class PairSerializer(TypeSerializer[tuple[int, int]]):
        def serialize(self, element: tuple[int, int], stream: BytesIO) -> None:
            stream.write(bytes(element))

        def deserialize(self, stream: BytesIO) -> tuple[int, int]:
            return tuple(stream.read(2))  # type: ignore[return-value]

    out = BytesIO()
    PairSerializer().serialize((3, 4), out)
    assert PairSerializer().deserialize(BytesIO(out.getvalue())) == (3, 4)
    assert PairSerializer() == PairSerializer() and repr(PairSerializer()) == "PairSerializer()"
    with pytest.raises(TypeError):
        TypeSerializer()  # type: ignore[abstract]


def test_the_void_namespace_writes_nothing() -> None:
    out = BytesIO()
    VoidNamespaceSerializer().serialize(b"", out)
    assert out.getvalue() == b"" and VoidNamespaceSerializer().deserialize(BytesIO(b"")) == b""


def test_a_users_config_option_reads_typed_with_its_default() -> None:
    size = ConfigOptions.key("my.size").int_type().default_value(4)
    name = ConfigOptions.key("my.name").string_type().no_default_value()
    conf = Configuration()
    assert conf.get_option(size) == 4 and conf.get_option(name) is None
    conf.set_string("my.size", "9").set_string("my.name", "x")
    assert conf.get_option(size) == 9 and conf.get_option(name) == "x"
    with pytest.raises(UsageError, match=r"my\.flag"):
        ConfigOptions.key("my.flag").boolean_type().default_value("maybe")
    with pytest.raises(UsageError, match="non-empty string key"):
        ConfigOptions.key("")

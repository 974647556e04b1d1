"""Small ``pyflink.common`` names: schemas, Row helpers, Configuration extras, type constants."""

from __future__ import annotations

import pytest

from weir.common import ByteArraySchema, Configuration, Row, RowKind, SimpleStringSchema, Types
from weir.common.typeinfo import BasicTypeInfo
from weir.errors import UsageError


def test_simple_string_schema_round_trips_in_its_charset() -> None:
    schema = SimpleStringSchema("latin-1")
    assert schema.serialize("é") == b"\xe9"
    assert schema.deserialize(b"\xe9") == "é"
    with pytest.raises(UsageError, match="serializes strings, got 1"):
        schema.serialize(1)
    with pytest.raises(UsageError, match="unknown charset 'nope'"):
        SimpleStringSchema("nope")
    assert ByteArraySchema().deserialize(ByteArraySchema().serialize(b"\x00\x01")) == b"\x00\x01"


def test_row_of_kind_and_fields_by_names() -> None:
    row = Row.of_kind(RowKind.UPDATE_AFTER, a=1, b=2)
    assert row.get_row_kind() is RowKind.UPDATE_AFTER
    assert row.get_fields_by_names(["b", "a"]) == [2, 1]
    with pytest.raises(UsageError, match=r"Row has no fields \['c'\]"):
        row.get_fields_by_names(["c"])


def test_configuration_keeps_bytes_and_fills_a_dict() -> None:
    conf = Configuration().set_bytearray("k", b"\x00\xff")
    assert conf.get_bytearray("k") == bytearray(b"\x00\xff")
    assert conf.get_bytearray("missing", bytearray(b"x")) == bytearray(b"x")
    target: dict[str, str] = {}
    conf.add_all_to_dict(target)
    assert set(target) == {"k"}
    assert Configuration.parse_list_value("a;b") == ["a", "b"]
    assert Configuration.parse_list_value("[a, 'b']") == ["a", "b"]


def test_basic_type_constants_are_the_types() -> None:
    assert BasicTypeInfo.STRING_TYPE_INFO() is Types.STRING()
    assert BasicTypeInfo.BIG_DEC_TYPE_INFO() is Types.BIG_DEC()

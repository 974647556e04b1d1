"""JSON and CSV row (de)serialization schemas, as PyFlink's formats have them."""

from __future__ import annotations

import datetime
import decimal

import pytest

from weir.common import Row, Types
from weir.datastream.formats.csv import CsvRowDeserializationSchema, CsvRowSerializationSchema
from weir.datastream.formats.json import JsonRowDeserializationSchema, JsonRowSerializationSchema
from weir.errors import UsageError

PERSON = Types.ROW_NAMED(
    ["id", "name", "tags", "born", "address"],
    [
        Types.INT(),
        Types.STRING(),
        Types.LIST(Types.STRING()),
        Types.SQL_DATE(),
        Types.ROW_NAMED(["city", "zip"], [Types.STRING(), Types.LONG()]),
    ],
)


def test_json_writes_compact_objects_in_the_types_order_and_reads_them_back() -> None:
    row = Row(
        id=1,
        name="Ana",
        tags=["a", "b"],
        born=datetime.date(1990, 5, 17),
        address=Row(city="Oslo", zip=150),
    )
    ser = JsonRowSerializationSchema.builder().with_type_info(PERSON).build()
    data = ser.serialize(row)
    assert data == (
        b'{"id":1,"name":"Ana","tags":["a","b"],"born":"1990-05-17","address":{"city":"Oslo","zip":150}}'
    )
    back = JsonRowDeserializationSchema.builder().type_info(PERSON).build().deserialize(data)
    assert back == row and back.address.city == "Oslo"
    assert ser.serialize((2, "Bo", None, None, None)) == (
        b'{"id":2,"name":"Bo","tags":null,"born":null,"address":null}'
    )


def test_json_missing_fields_and_bad_messages_follow_the_builders_switches() -> None:
    lenient = JsonRowDeserializationSchema.builder().type_info(PERSON).build()
    assert lenient.deserialize(b'{"id": 3}') == Row(id=3, name=None, tags=None, born=None, address=None)
    with pytest.raises(UsageError, match="cannot read JSON message b'not json'"):
        lenient.deserialize(b"not json")
    with pytest.raises(UsageError, match="expected an integer"):
        lenient.deserialize(b'{"id": "x1"}')
    strict = JsonRowDeserializationSchema.builder().type_info(PERSON).fail_on_missing_field().build()
    with pytest.raises(UsageError, match=r"fields \['name', 'tags', 'born', 'address'\] are missing"):
        strict.deserialize(b'{"id": 3}')
    quiet = JsonRowDeserializationSchema.builder().type_info(PERSON).ignore_parse_errors().build()
    assert quiet.deserialize(b"not json") is None


def test_json_schemas_need_a_row_type() -> None:
    with pytest.raises(UsageError, match="needs a row type"):
        JsonRowSerializationSchema.builder().with_type_info(Types.INT())
    with pytest.raises(UsageError, match="needs type_info"):
        JsonRowDeserializationSchema.builder().build()


def test_json_writes_decimals_as_numbers() -> None:
    t = Types.ROW_NAMED(["p"], [Types.BIG_DEC()])
    ser = JsonRowSerializationSchema.builder().with_type_info(t).build()
    assert ser.serialize(Row(p=decimal.Decimal("2.5"))) == b'{"p":2.5}'
    back = JsonRowDeserializationSchema.builder().type_info(t).build().deserialize(b'{"p":2.5}')
    assert back.p == decimal.Decimal("2.5")


SALE = Types.ROW_NAMED(
    ["id", "item", "sizes", "paid"], [Types.LONG(), Types.STRING(), Types.LIST(Types.INT()), Types.BOOLEAN()]
)


def test_csv_writes_one_line_quoting_only_when_needed_and_reads_it_back() -> None:
    ser = CsvRowSerializationSchema.Builder(SALE).build()
    data = ser.serialize(Row(id=7, item="hat, red", sizes=[1, 2], paid=True))
    assert data == b'7,"hat, red",1;2;true\n'.replace(b";true", b",true")
    de = CsvRowDeserializationSchema.Builder(SALE).build()
    assert de.deserialize(data) == Row(id=7, item="hat, red", sizes=[1, 2], paid=True)
    assert ser.serialize((8, None, [], False)) == b"8,,,false\n"


def test_csv_delimiters_quote_and_null_literal_are_the_builders() -> None:
    ser = (
        CsvRowSerializationSchema.Builder(SALE)
        .set_field_delimiter("|")
        .set_array_element_delimiter("/")
        .set_quote_character("'")
        .set_null_literal("NULL")
        .set_line_delimiter("\r\n")
        .build()
    )
    data = ser.serialize((1, "a|b", [3, 4], None))
    assert data == b"1|'a|b'|3/4|NULL\r\n"
    de = (
        CsvRowDeserializationSchema.Builder(SALE)
        .set_field_delimiter("|")
        .set_array_element_delimiter("/")
        .set_quote_character("'")
        .set_null_literal("NULL")
        .build()
    )
    assert de.deserialize(data) == Row(id=1, item="a|b", sizes=[3, 4], paid=None)


def test_csv_comments_and_parse_errors() -> None:
    de = CsvRowDeserializationSchema.Builder(SALE).set_allow_comments(True).build()
    assert de.deserialize(b"# a comment") is None
    with pytest.raises(UsageError, match="expected one line of 4 fields"):
        de.deserialize(b"1,2")
    quiet = CsvRowDeserializationSchema.Builder(SALE).set_ignore_parse_errors(True).build()
    assert quiet.deserialize(b"x,a,1,true") is None
    with pytest.raises(UsageError, match="must be one character"):
        CsvRowSerializationSchema.Builder(SALE).set_field_delimiter("||")
    with pytest.raises(UsageError, match="line delimiter"):
        CsvRowSerializationSchema.Builder(SALE).set_line_delimiter(";")

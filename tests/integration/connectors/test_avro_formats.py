"""Avro in jobs and on its own: schemas, the Row serialization schemas, AvroInputFormat with
``env.create_input``, and part files written by AvroBulkWriters and AvroParquetWriters and
read back by fastavro, pyarrow and AvroParquetReaders."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest

from weir.common import Row, Types, WatermarkStrategy
from weir.common.io import InputFormat
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.file_system import BucketAssigner, FileSink, FileSource
from weir.datastream.formats.avro import (
    AvroBulkWriters,
    AvroInputFormat,
    AvroRowDeserializationSchema,
    AvroRowSerializationSchema,
    AvroSchema,
    GenericRecordAvroTypeInfo,
)
from weir.datastream.formats.parquet import AvroParquetReaders, AvroParquetWriters
from weir.errors import UsageError

USER = {
    "type": "record",
    "name": "User",
    "namespace": "example",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "scores", "type": {"type": "map", "values": "double"}},
        {
            "name": "address",
            "type": [
                "null",
                {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]},
            ],
            "default": None,
        },
    ],
}
SCHEMA = AvroSchema.parse_string(json.dumps(USER))


def user(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"u{i}",
        "tags": [f"t{i}"] * (i % 3),
        "scores": {"a": i / 2},
        "address": None if i % 2 else {"city": f"c{i}"},
    }


def test_a_schema_parses_from_a_string_and_a_file(tmp_path: Path) -> None:
    path = tmp_path / "user.avsc"
    path.write_text(json.dumps(USER, indent=2))
    from_file = AvroSchema.parse_file(str(path))
    assert from_file == SCHEMA
    assert json.loads(str(from_file)) == USER
    assert from_file.field_names() == ["id", "name", "tags", "scores", "address"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", "not JSON"),
        ('{"type": "record", "name": "X", "fields": [{"name": "a", "type": "nosuch"}]}', "not a valid Avro"),
    ],
)
def test_a_bad_schema_is_named(text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        AvroSchema.parse_string(text)


def test_rows_serialize_to_avros_binary_encoding_and_back() -> None:
    row = Row(7, "ann", ["x", "y"], {"m": 1.5}, Row(city="Oslo"))
    data = AvroRowSerializationSchema(avro_schema_string=json.dumps(USER)).serialize(row)
    # the bytes are Avro's own: fastavro reads them as the generic record
    assert fastavro.schemaless_reader(io.BytesIO(data), SCHEMA.parsed, None) == {
        "id": 7,
        "name": "ann",
        "tags": ["x", "y"],
        "scores": {"m": 1.5},
        "address": {"city": "Oslo"},
    }
    back = AvroRowDeserializationSchema(avro_schema_string=json.dumps(USER)).deserialize(data)
    assert back == Row(id=7, name="ann", tags=["x", "y"], scores={"m": 1.5}, address=Row(city="Oslo"))
    assert back.address.city == "Oslo"


def test_a_row_that_does_not_fit_the_schema_is_named() -> None:
    with pytest.raises(UsageError, match="has 5 fields, the row"):
        AvroRowSerializationSchema(avro_schema_string=json.dumps(USER)).serialize(Row(1, "x"))


def test_a_java_record_class_is_refused_with_what_to_use() -> None:
    with pytest.raises(UsageError, match="avro_schema_string"):
        AvroRowSerializationSchema(record_class="example.User")
    with pytest.raises(UsageError, match="should be specified"):
        AvroRowDeserializationSchema()


def write_container(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("wb") as f:
        fastavro.writer(f, SCHEMA.parsed, records)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_create_input_reads_every_container_file_under_a_directory(tmp_path: Path, parallelism: int) -> None:
    data = tmp_path / "in"
    data.mkdir()
    write_container(data / "a.avro", [user(i) for i in range(5)])
    write_container(data / "b.avro", [user(i) for i in range(5, 12)])
    write_container(data / ".hidden.avro", [user(99)])
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    input_format = AvroInputFormat(str(data), SCHEMA)
    ds = env.create_input(input_format)
    assert ds.get_type() == GenericRecordAvroTypeInfo(SCHEMA) == input_format.get_produced_type()
    with ds.map(lambda r: r["id"], output_type=Types.LONG()).execute_and_collect() as ids:
        assert sorted(ids) == list(range(12))
    with env.create_input(input_format).execute_and_collect() as records:
        assert sorted(records, key=lambda r: r["id"]) == [user(i) for i in range(12)]


def test_create_input_needs_an_input_format_with_a_reader() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(UsageError, match="InputFormat"):
        env.create_input("data.avro")
    with pytest.raises(UsageError, match="names no reader"):
        InputFormat().create_reader(0, 1)


def run_bulk_sink(tmp_path: Path, factory: Any) -> Path:
    out = tmp_path / "out"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    sink = FileSink.for_bulk_format(str(out), factory).with_bucket_assigner(
        BucketAssigner.base_path_bucket_assigner()
    )
    (
        env.from_collection(list(range(20)), type_info=Types.LONG())
        .map(user, output_type=GenericRecordAvroTypeInfo(SCHEMA))
        .sink_to(sink.build())
    )
    env.execute("avro files")
    return out


def finished(out: Path) -> list[Path]:
    return [p for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")]


def test_avro_bulk_writers_write_container_files(tmp_path: Path) -> None:
    out = run_bulk_sink(tmp_path, AvroBulkWriters.for_generic_record(SCHEMA))
    records: list[Any] = []
    for path in finished(out):
        with path.open("rb") as f:
            reader = fastavro.reader(f)
            assert reader.writer_schema["name"] == "example.User"
            records.extend(reader)
    assert sorted(records, key=lambda r: r["id"]) == [user(i) for i in range(20)]


def test_avro_parquet_writers_and_readers_round_trip(tmp_path: Path) -> None:
    out = run_bulk_sink(tmp_path, AvroParquetWriters.for_generic_record(SCHEMA))
    files = finished(out)
    assert files
    table = pq.read_table(files[0])
    assert table.schema.names == ["id", "name", "tags", "scores", "address"]
    env = StreamExecutionEnvironment.get_execution_environment()
    source = FileSource.for_record_stream_format(
        AvroParquetReaders.for_generic_record(SCHEMA), str(out)
    ).build()
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "parquet")
    assert ds.get_type() == GenericRecordAvroTypeInfo(SCHEMA)
    with ds.execute_and_collect() as records:
        got = sorted(records, key=lambda r: r["id"])
    # pyarrow gives maps as lists of pairs; the other fields are the records written
    assert [{**r, "scores": dict(r["scores"])} for r in got] == [user(i) for i in range(20)]


def test_avro_parquet_writers_refuse_a_union_parquet_cannot_hold() -> None:
    schema = AvroSchema.parse_string(
        json.dumps({"type": "record", "name": "X", "fields": [{"name": "v", "type": ["int", "string"]}]})
    )
    with pytest.raises(UsageError, match="unions of null and one type"):
        AvroParquetWriters.for_generic_record(schema)

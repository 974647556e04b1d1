"""CSV files through FileSink and FileSource with the schema's dialect, as PyFlink's csv format."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.common import Row, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.file_system import FileSink, FileSource
from weir.datastream.formats.csv import CsvBulkWriters, CsvReaderFormat, CsvSchema
from weir.errors import JobExecutionError

DIALECT = (
    CsvSchema.builder()
    .add_number_column("id", Types.INT())
    .add_string_column("name")
    .add_array_column("tags", "|")
    .set_column_separator(";")
    .set_quote_char("'")
    .set_null_value("N/A")
    .set_line_separator("\r\n")
    .set_use_header()
    .build()
)


def _read(path: Path, schema: CsvSchema) -> list[object]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    source = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(schema), str(path)).build()
    return list(env.from_source(source, WatermarkStrategy.no_watermarks(), "csv").execute_and_collect())


def test_a_schemas_dialect_writes_and_reads_back_the_same_rows(tmp_path: Path) -> None:
    rows = [(1, "ann; bo", ["a", "b"]), (2, None, []), (3, "c", ["x"])]
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    out = tmp_path / "out"
    env.from_collection(rows).sink_to(
        FileSink.for_bulk_format(str(out), CsvBulkWriters.for_schema(DIALECT)).build()
    )
    env.execute("write csv")
    parts = [p for p in out.rglob("part-*") if p.is_file()]
    assert len(parts) == 1
    assert parts[0].read_bytes() == b"id;name;tags\r\n1;'ann; bo';a|b\r\n2;N/A;\r\n3;c;x\r\n"
    back = _read(parts[0], DIALECT)
    assert back == [
        Row(id=1, name="ann; bo", tags=["a", "b"]),
        Row(id=2, name=None, tags=[]),
        Row(id=3, name="c", tags=["x"]),
    ]
    assert DIALECT.get_type_info() == Types.ROW_NAMED(
        ["id", "name", "tags"], [Types.INT(), Types.STRING(), Types.LIST(Types.STRING())]
    )


def test_comments_the_first_data_row_and_strict_headers(tmp_path: Path) -> None:
    data = tmp_path / "in.csv"
    data.write_text("id,name\n# a comment\n0,skipped\n1,a\n\n2,b\n")
    schema = (
        CsvSchema.builder()
        .add_number_column("id")
        .add_string_column("name")
        .set_use_header()
        .set_strict_headers()
        .set_allow_comments()
        .set_skip_first_data_row()
        .build()
    )
    assert _read(data, schema) == [Row(id=1, name="a"), Row(id=2, name="b")]
    wrong = CsvSchema.builder().add_number_column("id").add_string_column("title")
    with pytest.raises(JobExecutionError, match=r"line 1: the header is \['id', 'name'\]"):
        _read(data, wrong.set_use_header().set_strict_headers().set_allow_comments().build())


def test_a_line_that_does_not_fit_names_the_file_and_line(tmp_path: Path) -> None:
    data = tmp_path / "bad.csv"
    data.write_text("1,a\nx,b\n")
    schema = CsvSchema.builder().add_number_column("id").add_string_column("name").build()
    with pytest.raises(JobExecutionError, match=r"bad.csv' line 2: field 'id': expected an integer, got 'x'"):
        _read(data, schema)


def test_the_builders_column_operations() -> None:
    base = CsvSchema.builder().add_string_column("a").add_array_column("b").build()
    builder = CsvSchema.builder().add_columns_from(base).add_number_column("c")
    assert builder.size() == 3
    builder.set_array_element_separator("/").remove_array_element_separator(0)
    schema = builder.build()
    assert [c[2] for c in schema.columns] == [None, "/", None]
    assert builder.clear_columns().size() == 0
    other = CsvSchema.builder().add_array_column("x").disable_array_element_separator().build()
    assert other.columns[0][2] == ""
    plain = CsvSchema.builder().add_string_column("s").disable_quote_char().set_escape_char("\\").build()
    assert plain.options["quote_char"] is None and plain.options["escape_char"] == "\\"
    assert (
        CsvSchema.builder()
        .add_string_column("s")
        .set_escape_char("\\")
        .disable_escape_char()
        .build()
        .is_plain()
    )

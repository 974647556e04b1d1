"""PyFlink's legacy StreamingFileSink, added with add_sink, writes as the FileSink does."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.common import Types
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.file_system import (
    BucketAssigner,
    Encoder,
    OutputFileConfig,
    StreamingFileSink,
)
from weir.datastream.formats.csv import CsvBulkWriters, CsvSchema
from weir.errors import UsageError


def _part_lines(out: Path) -> list[str]:
    return sorted(line for p in out.rglob("*") if p.is_file() for line in p.read_text().splitlines())


def test_a_row_format_streaming_file_sink_writes_its_part_files(tmp_path: Path) -> None:
    out = tmp_path / "rows"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    sink = (
        StreamingFileSink.for_row_format(str(out), Encoder.simple_string_encoder())
        .with_output_file_config(OutputFileConfig.builder().with_part_prefix("legacy").build())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .build()
    )
    env.from_collection([f"line {i}" for i in range(10)], Types.STRING()).add_sink(sink)
    env.execute("streaming file sink")
    assert _part_lines(out) == sorted(f"line {i}" for i in range(10))
    assert all(p.name.startswith("legacy") for p in out.rglob("*") if p.is_file())
    assert sink.as_sink().describe()["class"] == "FileSink"


def test_a_bulk_format_streaming_file_sink_writes_csv(tmp_path: Path) -> None:
    out = tmp_path / "bulk"
    schema = CsvSchema.builder().add_number_column("id").add_string_column("name").build()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.from_collection([(1, "a"), (2, "b")]).add_sink(
        StreamingFileSink.for_bulk_format(str(out), CsvBulkWriters.for_schema(schema)).build()
    )
    env.execute("bulk streaming file sink")
    assert _part_lines(out) == ['1,"a"', '2,"b"']


def test_the_function_itself_is_not_called_per_record(tmp_path: Path) -> None:
    sink = StreamingFileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder()).build()
    with pytest.raises(UsageError, match="runs as a FileSink"):
        sink.invoke("v", None)

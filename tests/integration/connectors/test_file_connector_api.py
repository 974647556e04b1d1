"""The file connector's remaining PyFlink API: bulk formats read with
``FileSource.for_bulk_file_format`` (ParquetColumnarRowInputFormat), ORC part files,
file enumerators and split assigners, and sinks that preprocess their stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from weir.common import Configuration, Row, Types, WatermarkStrategy
from weir.common.serialization import RowDataBulkWriterFactory
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors import DeliveryGuarantee
from weir.datastream.connectors.base import StreamTransformer, SupportsPreprocessing
from weir.datastream.connectors.builtin import DiscardingSink
from weir.datastream.connectors.file_system import (
    BucketAssigner,
    FileEnumeratorProvider,
    FileSink,
    FileSource,
    FileSplitAssignerProvider,
    StreamFormat,
)
from weir.datastream.formats.orc import OrcBulkWriters
from weir.datastream.formats.parquet import ParquetBulkWriters, ParquetColumnarRowInputFormat
from weir.errors import UsageError

ROW_TYPE = Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()])


def write_parquet(path: Path, start: int, count: int, id_column: str = "id") -> None:
    ids = list(range(start, start + count))
    pq.write_table(pa.table({id_column: ids, "name": [f"n{i}" for i in ids], "extra": ids}), path)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_parquet_columnar_row_input_format_reads_rows_of_the_row_type(
    tmp_path: Path, parallelism: int
) -> None:
    write_parquet(tmp_path / "a.parquet", 0, 30)
    write_parquet(tmp_path / "b.parquet", 30, 25)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    source = FileSource.for_bulk_file_format(
        ParquetColumnarRowInputFormat(ROW_TYPE, batch_size=7), str(tmp_path)
    ).build()
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "parquet")
    assert ds.get_type() == ROW_TYPE
    with ds.execute_and_collect() as rows:
        got = sorted(rows, key=lambda r: r.id)
    assert got == [Row(id=i, name=f"n{i}") for i in range(55)]


def test_column_names_match_whatever_their_case_when_asked(tmp_path: Path) -> None:
    write_parquet(tmp_path / "a.parquet", 0, 3, id_column="ID")
    strict = ParquetColumnarRowInputFormat(ROW_TYPE)
    with pytest.raises(UsageError, match="has no column 'id'"):
        strict.read_file(tmp_path / "a.parquet")
    loose = ParquetColumnarRowInputFormat(ROW_TYPE, is_case_sensitive=False)
    assert loose.read_file(tmp_path / "a.parquet") == [Row(id=i, name=f"n{i}") for i in range(3)]


def test_for_bulk_file_format_needs_a_bulk_format() -> None:
    with pytest.raises(UsageError, match="BulkFormat"):
        FileSource.for_bulk_file_format(StreamFormat.text_line_format(), "/tmp")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="row type"):
        ParquetColumnarRowInputFormat(Types.LONG())


def test_orc_bulk_writers_write_orc_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    properties = Configuration().set_string("orc.compress", "zstd")
    factory = OrcBulkWriters.for_row_type(ROW_TYPE, writer_properties=properties)
    assert isinstance(factory, RowDataBulkWriterFactory) and factory.get_row_type() == ROW_TYPE
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_collection([Row(id=i, name=f"n{i}") for i in range(50)], type_info=ROW_TYPE).sink_to(
        FileSink.for_bulk_format(str(out), factory)
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .build()
    )
    env.execute("orc")
    rows: list[dict[str, Any]] = []
    for path in out.iterdir():
        if not path.name.startswith("."):
            reader = orc.ORCFile(path)
            assert reader.compression == "ZSTD"
            rows.extend(reader.read().to_pylist())
    assert sorted(rows, key=lambda r: r["id"]) == [{"id": i, "name": f"n{i}"} for i in range(50)]


def test_orc_writer_properties_weir_cannot_honour_are_refused() -> None:
    with pytest.raises(UsageError, match=r"orc\.bloom\.filter\.columns"):
        OrcBulkWriters.for_row_type(ROW_TYPE, Configuration().set_string("orc.bloom.filter.columns", "id"))
    with pytest.raises(UsageError, match=r"orc\.compress must be one of"):
        OrcBulkWriters.for_row_type(ROW_TYPE, Configuration().set_string("orc.compress", "brotli"))


def test_parquet_bulk_writers_keep_their_row_type() -> None:
    factory = ParquetBulkWriters.for_row_type(ROW_TYPE)
    assert isinstance(factory, RowDataBulkWriterFactory) and factory.get_row_type() is ROW_TYPE


@pytest.mark.parametrize(
    "enumerator",
    [
        FileEnumeratorProvider.default_splittable_file_enumerator(),
        FileEnumeratorProvider.default_non_splittable_file_enumerator(),
    ],
)
def test_both_enumerators_read_every_visible_file_once(
    tmp_path: Path, enumerator: FileEnumeratorProvider
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("a1\na2\n")
    (tmp_path / "sub" / "b.txt").write_text("b1\n")
    (tmp_path / ".c.txt").write_text("hidden\n")
    (tmp_path / "_d.txt").write_text("hidden\n")
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path))
        .set_file_enumerator(enumerator)
        .set_split_assigner(FileSplitAssignerProvider.locality_aware_split_assigner())
        .build()
    )
    assert source.describe()["file_enumerator"] == enumerator.kind
    assert source.describe()["split_assigner"] == "locality_aware"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    with env.from_source(source, WatermarkStrategy.no_watermarks(), "text").execute_and_collect() as lines:
        assert sorted(lines) == ["a1", "a2", "b1"]


def test_the_builder_names_a_wrong_enumerator_or_assigner() -> None:
    builder = FileSource.for_record_stream_format(StreamFormat.text_line_format(), "/tmp")
    with pytest.raises(UsageError, match="set_file_enumerator"):
        builder.set_file_enumerator("recursive")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="set_split_assigner"):
        builder.set_split_assigner(None)  # type: ignore[arg-type]


SEEN: list[int] = []


def double_and_note(x: int) -> int:
    SEEN.append(x * 2)
    return x * 2


class Doubling(StreamTransformer):
    def apply(self, ds: Any) -> Any:
        return ds.map(double_and_note, output_type=Types.LONG())


class PreprocessingSink(DiscardingSink, SupportsPreprocessing):
    def get_transformer(self) -> StreamTransformer | None:
        return Doubling()


class BrokenPreprocessingSink(DiscardingSink, SupportsPreprocessing):
    def get_transformer(self) -> StreamTransformer | None:
        class NotAStream(StreamTransformer):
            def apply(self, ds: Any) -> Any:
                return [1, 2]

        return NotAStream()


def test_sink_to_applies_the_transformer_of_a_sink_that_preprocesses() -> None:
    SEEN.clear()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2], type_info=Types.LONG()).sink_to(PreprocessingSink())
    env.execute("preprocessed")
    assert sorted(SEEN) == [2, 4]
    with pytest.raises(UsageError, match="must return a DataStream"):
        env.from_collection([1], type_info=Types.LONG()).sink_to(BrokenPreprocessingSink())


def test_file_sink_needs_no_preprocessing_and_delivery_guarantees_have_flinks_names() -> None:
    assert FileSink.for_row_format("out", _encoder()).build().get_transformer() is None
    assert [g.name for g in DeliveryGuarantee] == ["EXACTLY_ONCE", "AT_LEAST_ONCE", "NONE"]


def _encoder() -> Any:
    from weir.common import Encoder

    return Encoder.simple_string_encoder()

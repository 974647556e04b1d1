"""The columnar readers and part writers on their own: columns checked against the type,
positions snapshotted mid-file and restored exactly (also at another parallelism), and
what the bulk part writers write read back by pyarrow as the records that went in."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from weir.codec.batch import Batch, TupleColumns
from weir.codec.strings import Strings
from weir.columnar import ArrowFileSource, ColumnGeneratorSource
from weir.common import Types
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.formats.csv import CsvBulkWriters, CsvSchema
from weir.datastream.formats.parquet import ParquetBulkWriters
from weir.errors import UsageError
from weir.operators.columnar_io import ArrowPartWriter, checked_values, csv_part_writer, parquet_part_writer

TRIPLE = Types.TUPLE([Types.LONG(), Types.STRING(), Types.DOUBLE()])
ROWS = 1_000


def record(i: int) -> tuple[int, str, float]:
    """The per-record reference of every data set here."""
    return (i * 3 - 7, f"name-{i % 13}", i / 4)


def write_parquet(path: Path, lo: int, hi: int, row_group_size: int = 128) -> None:
    rows = [record(i) for i in range(lo, hi)]
    table = pa.table(
        {"id": [r[0] for r in rows], "name": [r[1] for r in rows], "score": [r[2] for r in rows]}
    )
    pq.write_table(table, path, row_group_size=row_group_size)


def write_csv(path: Path, lo: int, hi: int) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "name", "score"])
        w.writerows(record(i) for i in range(lo, hi))


@pytest.fixture(params=["parquet", "csv"])
def data_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """Three files of one data set (rows [0, ROWS)), in the fixture's format."""
    bounds = [0, 300, 310, ROWS]
    for k in range(3):
        path = tmp_path / f"part-{k}.{request.param}"
        (write_parquet if request.param == "parquet" else write_csv)(path, bounds[k], bounds[k + 1])
    return tmp_path


async def read_all(reader: Any, limit: int | None = None) -> list[Any]:
    out: list[Any] = []
    while limit is None or len(out) < limit:
        batch = await reader.next_batch()
        if batch is None:
            break
        out += batch.as_list()
    return out


async def test_an_arrow_file_source_reads_every_row_once_as_columns(data_dir: Path) -> None:
    source = ArrowFileSource(str(data_dir), batch_size=100)
    assert source.produced_type() == TRIPLE
    got: list[Any] = []
    for subtask in range(3):
        reader = source.create_reader(subtask, 3)
        batch = await reader.next_batch()
        assert isinstance(batch.values, TupleColumns)
        strings = batch.values.columns[1]
        assert batch.values.columns[0].dtype == np.int64 and isinstance(strings, Strings)
        assert strings._list is None  # Arrow's bytes: no str until something reads the records
        got += batch.as_list() + await read_all(reader)
    assert sorted(got) == [record(i) for i in range(ROWS)]


async def test_a_restored_reader_goes_on_exactly_where_the_snapshot_was(data_dir: Path) -> None:
    source = ArrowFileSource(str(data_dir), batch_size=64)
    for stop_after in (1, 64 * 3 + 5, 700):  # inside the first split, a later one, another file
        readers = [source.create_reader(s, 2) for s in range(2)]
        before = [await read_all(r, stop_after) for r in readers]
        splits = [r.snapshot_splits() for r in readers]
        # the job fails here: whatever was read after the snapshot is lost and replayed
        for r in readers:
            await read_all(r, 50)
        # restore at another parallelism: the old splits are dealt to the new subtasks
        new = [source.create_reader(s, 3) for s in range(3)]
        for s, r in enumerate(new):
            r.restore_splits([sp for i, sp in enumerate(splits[0] + splits[1]) if i % 3 == s])
        after = [await read_all(r) for r in new]
        got = [x for part in before + after for x in part]
        assert sorted(got) == [record(i) for i in range(ROWS)], stop_after


async def test_a_csv_and_a_parquet_file_of_one_data_set_read_the_same(tmp_path: Path) -> None:
    write_parquet(tmp_path / "a.parquet", 0, 200)
    write_csv(tmp_path / "a.csv", 0, 200)
    parquet = await read_all(ArrowFileSource(str(tmp_path / "a.parquet")).create_reader(0, 1))
    as_csv = await read_all(ArrowFileSource(str(tmp_path / "a.csv")).create_reader(0, 1))
    assert parquet == as_csv == [record(i) for i in range(200)]


async def test_columns_and_type_info_choose_and_cast_the_fields(tmp_path: Path) -> None:
    write_parquet(tmp_path / "a.parquet", 0, 50)
    one = ArrowFileSource(str(tmp_path / "a.parquet"), columns=["score"])
    assert one.produced_type() == Types.DOUBLE()
    batch = await one.create_reader(0, 1).next_batch()
    assert isinstance(batch.values, np.ndarray) and batch.as_list() == [record(i)[2] for i in range(50)]
    cast = ArrowFileSource(
        str(tmp_path / "a.parquet"),
        columns=["id", "name"],
        type_info=Types.TUPLE([Types.INT(), Types.STRING()]),
    )
    batch = await cast.create_reader(0, 1).next_batch()
    assert batch.values.columns[0].dtype == np.int32
    assert batch.as_list() == [record(i)[:2] for i in range(50)]


def test_bad_arrow_sources_get_clear_errors(tmp_path: Path) -> None:
    write_parquet(tmp_path / "a.parquet", 0, 5)
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(UsageError, match="no column 'nope'"):
        ArrowFileSource(str(tmp_path / "a.parquet"), columns=["nope"])
    with pytest.raises(UsageError, match="cannot tell the format"):
        ArrowFileSource(str(tmp_path / "a.txt"))
    with pytest.raises(UsageError, match="does not exist"):
        ArrowFileSource(str(tmp_path / "missing.parquet"))
    with pytest.raises(UsageError, match="is a ROW"):
        ArrowFileSource(str(tmp_path / "a.parquet"), type_info=Types.ROW([Types.LONG()] * 3))
    with pytest.raises(UsageError, match="has 2 field"):
        ArrowFileSource(str(tmp_path / "a.parquet"), type_info=Types.TUPLE([Types.LONG(), Types.STRING()]))


# -- the column generator ----------------------------------------------------------------------


def triple_columns(indexes: np.ndarray) -> tuple[Any, ...]:
    return (indexes * 3 - 7, [f"name-{i % 13}" for i in indexes.tolist()], indexes / 4)


async def test_the_column_generator_matches_its_per_record_reference_and_resumes() -> None:
    source = ColumnGeneratorSource(triple_columns, ROWS, TRIPLE, batch_size=100)
    readers = [source.create_reader(s, 2) for s in range(2)]
    first = [await read_all(r, 150) for r in readers]
    splits = [r.snapshot_splits() for r in readers]
    restored = [source.create_reader(s, 2) for s in range(2)]
    for r, sp in zip(restored, splits):
        r.restore_splits(sp)
    rest = [await read_all(r) for r in restored]
    assert sorted(x for part in first + rest for x in part) == [record(i) for i in range(ROWS)]


def test_generated_columns_are_checked_against_the_type() -> None:
    fields = [Types.LONG(), Types.STRING(), Types.DOUBLE()]
    ix = np.arange(4, dtype=np.int64)
    ok = checked_values("G", fields, False, (ix.astype(np.int32), np.array(["a"] * 4), ix / 2), 4)
    assert ok.columns[0].dtype == np.int64 and ok.columns[1] == ["a"] * 4  # lossless conversions
    with pytest.raises(
        UsageError, match=r"field 0 \(Long\) is a column of dtype float64; it needs int64 .*int32"
    ):
        checked_values("G", fields, False, (ix / 2, ["a"] * 4, ix / 2), 4)
    with pytest.raises(UsageError, match=r"field 2 \(Double\) has 3 values for 4 indexes"):
        checked_values("G", fields, False, (ix, ["a"] * 4, ix[:3] / 2), 4)
    with pytest.raises(UsageError, match="returned 2 columns; the type has 3 fields"):
        checked_values("G", fields, False, (ix, ["a"] * 4), 4)
    with pytest.raises(UsageError, match=r"field 0 \(Long\) is list; it needs a 1-D numpy array of int64"):
        checked_values("G", fields, False, ([1, 2, 3, 4], ["a"] * 4, ix / 2), 4)
    single = checked_values("G", [Types.LONG()], True, ix, 4)
    assert isinstance(single, np.ndarray)
    with pytest.raises(UsageError, match="type_info must be a basic type"):
        ColumnGeneratorSource(triple_columns, 4, None)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"field 0 of .* a column holds one of"):
        ColumnGeneratorSource(triple_columns, 4, Types.TUPLE([Types.PICKLED_BYTE_ARRAY()]))


async def test_the_number_sequence_emits_int64_arrays() -> None:
    reader = NumberSequenceSource(5, 20_000).create_reader(1, 2)
    batch = await reader.next_batch()
    assert isinstance(batch.values, np.ndarray) and batch.values.dtype == np.int64
    assert batch.values[0] == 5 + (20_000 - 5 + 1) // 2


# -- bulk part writers -------------------------------------------------------------------------


def write_parts(writer: ArrowPartWriter, batches: list[Batch]) -> None:
    for b in batches:
        writer.write_batch(b)
    writer.finish()


def columnar_and_record_batches() -> list[Batch]:
    """The same records as columns and as tuples: both kinds must be written alike."""
    ix = np.arange(0, 40, dtype=np.int64)
    return [
        Batch(TupleColumns(list(triple_columns(ix)))),
        Batch([record(i) for i in range(40, 55)]),
    ]


def test_the_parquet_part_writer_writes_columns_and_records() -> None:
    factory = ParquetBulkWriters.for_row_type(
        Types.ROW_NAMED(["id", "name", "score"], [Types.LONG(), Types.STRING(), Types.DOUBLE()])
    )
    buffer = io.BytesIO()
    write_parts(parquet_part_writer(factory, buffer), columnar_and_record_batches())
    table = pq.read_table(pa.BufferReader(buffer.getvalue()))
    assert table.column_names == ["id", "name", "score"]
    assert list(zip(*(c.to_pylist() for c in table.columns))) == [record(i) for i in range(55)]


def test_the_csv_part_writer_writes_columns_and_records() -> None:
    schema = (
        CsvSchema.builder()
        .add_number_column("id")
        .add_string_column("name")
        .add_number_column("score", Types.DOUBLE())
        .set_column_separator(";")
        .set_use_header()
        .build()
    )
    buffer = io.BytesIO()
    write_parts(csv_part_writer(CsvBulkWriters.for_schema(schema), buffer), columnar_and_record_batches())
    rows = list(csv.reader(io.StringIO(buffer.getvalue().decode()), delimiter=";"))
    assert rows[0] == ["id", "name", "score"]
    assert [(int(a), b, float(c)) for a, b, c in rows[1:]] == [record(i) for i in range(55)]


def test_bad_bulk_formats_get_clear_errors() -> None:
    with pytest.raises(UsageError, match="needs a row type"):
        ParquetBulkWriters.for_row_type(Types.LONG())
    with pytest.raises(UsageError, match="number_type must be"):
        CsvSchema.builder().add_number_column("x", Types.STRING())
    with pytest.raises(UsageError, match="column 'x' already"):
        CsvSchema.builder().add_string_column("x").add_boolean_column("x")
    with pytest.raises(UsageError, match="needs a CsvSchema"):
        CsvBulkWriters.for_schema("id,name")  # type: ignore[arg-type]
    factory = ParquetBulkWriters.for_row_type(Types.TUPLE([Types.LONG(), Types.STRING()]))
    writer = parquet_part_writer(factory, io.BytesIO())
    with pytest.raises(UsageError, match="has 3 fields; the schema has 2"):
        writer.write_batch(Batch([(1, "a", 2.0)]))

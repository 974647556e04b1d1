"""Columnar sources and sinks in jobs: the same records as the per-record path, and exactly
once through the bulk FileSink (Parquet, CSV) under seeded failures.

The references are per-record: ``DataGeneratorSource`` over ``record(i)`` for the sources,
a Python list for the files; the committed part files are read back with pyarrow.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
import trio

from weir.columnar import ArrowFileSource, BatchSinkFunction, ColumnGeneratorSource, field
from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.builtin import DiscardingSink
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.file_system import (
    BucketAssigner,
    Encoder,
    FileSink,
    OutputFileConfig,
)
from weir.datastream.formats.csv import CsvBulkWriters, CsvSchema
from weir.datastream.formats.parquet import ParquetBulkWriters
from weir.graph.job_graph import generate_job_graph

from .test_exactly_once import describe_difference, run_job

TRIPLE = Types.TUPLE([Types.LONG(), Types.STRING(), Types.DOUBLE()])
ROW_TYPE = Types.ROW_NAMED(["id", "name", "score"], [Types.LONG(), Types.STRING(), Types.DOUBLE()])


def record(i: int) -> tuple[int, str, float]:
    return (i * 3 - 7, f"name-{i % 13}", i / 4)


def triple_columns(indexes: np.ndarray) -> tuple[Any, ...]:
    return (indexes * 3 - 7, [f"name-{i % 13}" for i in indexes.tolist()], indexes / 4)


def make_env(parallelism: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    env.set_parallelism(parallelism)
    return env


def collect(env: StreamExecutionEnvironment, source: Any, shuffle: bool) -> list[Any]:
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "source")
    if shuffle:  # across the network: the typed codec carries the columns
        stream = stream.key_by(field(1), key_type=Types.STRING()).map(lambda r: r, output_type=TRIPLE)
    with stream.execute_and_collect() as out:
        return list(out)


def write_parquet_files(directory: Path, count: int) -> None:
    directory.mkdir()
    cut = count // 3
    for k, (lo, hi) in enumerate([(0, cut), (cut, count)]):
        rows = [record(i) for i in range(lo, hi)]
        columns = {"id": [r[0] for r in rows], "name": [r[1] for r in rows], "score": [r[2] for r in rows]}
        pq.write_table(pa.table(columns), directory / f"f{k}.parquet", row_group_size=500)


@pytest.mark.parametrize("shuffle", [False, True], ids=["chained", "shuffled"])
@pytest.mark.parametrize("parallelism", [1, 2])
def test_columnar_sources_give_the_records_of_the_per_record_source(
    parallelism: int, shuffle: bool, tmp_path: Path
) -> None:
    count = 3_000
    reference = collect(make_env(parallelism), DataGeneratorSource(record, count, type_info=TRIPLE), shuffle)
    assert sorted(reference) == [record(i) for i in range(count)]
    generated = collect(
        make_env(parallelism), ColumnGeneratorSource(triple_columns, count, TRIPLE, batch_size=700), shuffle
    )
    write_parquet_files(tmp_path / "in", count)
    from_files = collect(
        make_env(parallelism), ArrowFileSource(str(tmp_path / "in"), batch_size=700), shuffle
    )
    assert Counter(generated) == Counter(reference)
    assert Counter(from_files) == Counter(reference)


class ColumnsToFile(BatchSinkFunction):
    """Appends one JSON line per call: which path it came through and the records."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def open(self, runtime_context: Any) -> None:
        name = f"sink-{runtime_context.get_index_of_this_subtask()}.jsonl"
        self._file = open(Path(self.directory) / name, "a", encoding="utf-8")  # noqa: SIM115

    def invoke_batch(self, columns: tuple[Any, ...], timestamps: np.ndarray | None) -> None:
        lists = [c.tolist() if isinstance(c, np.ndarray) else list(c) for c in columns]
        self._file.write(json.dumps({"n": len(lists[0]), "records": [list(r) for r in zip(*lists)]}) + "\n")

    def close(self) -> None:
        self._file.close()


def sink_calls(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in directory.glob("sink-*.jsonl") for line in p.read_text().splitlines()]


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_batch_sink_function_gets_columns_and_falls_back_to_records(
    parallelism: int, tmp_path: Path
) -> None:
    count = 2_000
    env = make_env(parallelism)
    env.from_source(
        ColumnGeneratorSource(triple_columns, count, TRIPLE, batch_size=500),
        WatermarkStrategy.no_watermarks(),
        "g",
    ).add_sink(ColumnsToFile(str(tmp_path)))
    env.execute("columns")
    calls = sink_calls(tmp_path)
    assert max(c["n"] for c in calls) == 500  # whole batches, not records
    got = Counter(tuple(r) for c in calls for r in c["records"])
    assert got == Counter(record(i) for i in range(count))

    untyped = tmp_path / "untyped"
    untyped.mkdir()
    env = make_env(parallelism)
    env.from_collection([record(i) for i in range(50)]).add_sink(ColumnsToFile(str(untyped)))
    env.execute("records")
    calls = sink_calls(untyped)
    assert {c["n"] for c in calls} == {1}  # the per-record fallback
    assert Counter(tuple(r) for c in calls for r in c["records"]) == Counter(record(i) for i in range(50))


def test_discarding_and_row_format_sinks_take_columnar_batches(tmp_path: Path) -> None:
    count = 1_500
    env = make_env(2)
    stream = env.from_source(
        ColumnGeneratorSource(triple_columns, count, TRIPLE), WatermarkStrategy.no_watermarks(), "g"
    )
    stream.sink_to(DiscardingSink())
    stream.sink_to(
        FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .build()
    )
    env.execute("row format")
    lines = Counter(line for p in tmp_path.glob("part-*") for line in p.read_text().splitlines())
    assert lines == Counter(str(record(i)) for i in range(count))


# -- exactly once through the bulk FileSink ----------------------------------------------------------

RATE = 20_000.0
EVENTS = 12_000


def bulk_sink(out: Path, file_format: str) -> FileSink:
    if file_format == "parquet":
        factory: Any = ParquetBulkWriters.for_row_type(ROW_TYPE)
    else:
        schema = (
            CsvSchema.builder()
            .add_number_column("id")
            .add_string_column("name")
            .add_number_column("score", Types.DOUBLE())
            .set_use_header()
            .build()
        )
        factory = CsvBulkWriters.for_schema(schema)
    return (
        FileSink.for_bulk_format(str(out), factory)
        .with_output_file_config(OutputFileConfig.builder().with_part_suffix(f".{file_format}").build())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .build()
    )


def committed_records(out: Path, file_format: str) -> Counter[tuple[Any, ...]]:
    got: Counter[tuple[Any, ...]] = Counter()
    for path in out.iterdir():
        if path.name.startswith("."):
            continue
        table = pq.read_table(path) if file_format == "parquet" else pcsv.read_csv(path)
        got.update(zip(*(c.to_pylist() for c in table.columns)))
    return got


@pytest.mark.parametrize("file_format", ["parquet", "csv"])
@pytest.mark.parametrize("source_kind", ["generator", "files"])
@pytest.mark.parametrize("parallelism", [1, 2])
async def test_bulk_file_sink_is_exactly_once_under_failures(
    parallelism: int,
    source_kind: str,
    file_format: str,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
) -> None:
    if source_kind == "generator":
        source: Any = ColumnGeneratorSource(triple_columns, EVENTS, TRIPLE, rate_limit=RATE)
    else:
        write_parquet_files(tmp_path / "in", EVENTS)
        source = ArrowFileSource(str(tmp_path / "in"), rate_limit=RATE)
    per_checkpoint = int(RATE / parallelism * 0.05)  # records per subtask between checkpoints
    conf = Configuration()
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "100")
    conf.set_string("restart-strategy.fixed-delay.delay", "10 ms")
    conf.set_string(
        "weir.failure-injection.spec",
        f"raise:operator=sink,after={2 * per_checkpoint}..{5 * per_checkpoint},attempt=0..2,times=3;"
        "crash-before-metadata:checkpoint=3,attempt=1",
    )
    conf.set_string("weir.failure-injection.seed", "7")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(50)
    out = tmp_path / "out"
    # rebalance: the sink is a task of its own (failures are injected where records enter a
    # task), and its columns come through the network's typed codec
    env.from_source(source, WatermarkStrategy.no_watermarks(), "Source").rebalance().sink_to(
        bulk_sink(out, file_format)
    ).name("FileSink").uid("sink")
    job_graph = generate_job_graph(env.get_stream_graph("bulk exactly-once"))
    result, master = await run_job(env, job_graph)
    assert result.status.name == "FINISHED", result.failure
    assert master.restarts >= 3, result.accumulators.get("injected_failures")
    assert result.accumulators["checkpoints_completed"] >= 2
    want = Counter(record(i) for i in range(EVENTS))
    got = committed_records(out, file_format)
    assert describe_difference(Counter(map(str, got.elements())), Counter(map(str, want.elements()))) == ""
    assert not [p.name for p in out.rglob(".*")], "hidden in-progress files or manifests were left behind"

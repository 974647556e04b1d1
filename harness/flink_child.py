"""Runs the harness's queries on Apache Flink: the half of ``--engine flink`` in PyFlink's Python.

Theory of operation
-------------------
PyFlink cannot share weir's environment (docs/decisions.md, "PyFlink in its own
environment"), so weir.harness.flink_engine starts this file with the Python that has
PyFlink. It imports only the standard library, pyarrow (a dependency of apache-flink) and
PyFlink; it never imports weir.

Its one argument is a JSON spec written by the parent: the path of
weir.harness.portable_queries with the prefix swapped to ``pyflink`` (the queries' job
logic, the very text weir runs), and the runs, each a query, a parallelism, the Parquet
files and columns of each input, the data set's disorder bound, the Flink configuration
(checkpointing, state backend) and a file for the output. For each run it reads the
inputs in event order (the generator wrote the part files in event order), appends
``intended_ns = 0`` to each record (the shape the builders expect; this source is not
paced, so the field carries no latency), and reads them through ``env.from_collection``
with a bounded-out-of-orderness watermark of the data set's disorder, as weir's replay
source does. A flat-map at the end writes the query's output as JSON lines, one file per
subtask (collecting through the client costs about a millisecond a record); the clock runs
around ``env.execute()``. Before the runs, a one-record job measures what every job pays whatever its
size (a local MiniCluster starts per job). The results go to ``result`` as one JSON
document: PyFlink's version, that overhead, and per run its seconds or its error.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def _load_queries(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("weir_portable_queries", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the Python workers unpickle functions by module name
    spec.loader.exec_module(module)
    return module


def _environment(configuration: dict[str, str], parallelism: int) -> Any:
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment

    conf = Configuration()
    conf.set_string("python.executable", sys.executable)
    for key, value in configuration.items():
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    return env


def _read(inputs: dict[str, Any]) -> list[tuple[Any, ...]]:
    import pyarrow.parquet as pq

    columns = inputs["columns"]
    rows: list[tuple[Any, ...]] = []
    for file in inputs["files"]:
        table = pq.read_table(file, columns=columns)
        values = [table.column(c).to_pylist() for c in columns]
        rows.extend((*row, 0) for row in zip(*values))
    return rows


def _source(env: Any, inputs: dict[str, Any], rows: list[tuple[Any, ...]], disorder_ms: int) -> Any:
    from pyflink.common import Duration, Types, WatermarkStrategy
    from pyflink.common.watermark_strategy import TimestampAssigner

    index = inputs["columns"].index(inputs["event_time_column"])

    class EventTime(TimestampAssigner):
        def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
            return int(value[index])

    types = Types.TUPLE([getattr(Types, name)() for name in inputs["types"]])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(disorder_ms)
    ).with_timestamp_assigner(EventTime())
    return env.from_collection(rows, type_info=types).assign_timestamps_and_watermarks(strategy)


def _one_record_job() -> float:
    from pyflink.common import Types

    env = _environment({}, 1)
    started = time.monotonic()
    with (
        env.from_collection([(1,)], type_info=Types.TUPLE([Types.LONG()]))
        .map(lambda r: r, output_type=Types.TUPLE([Types.LONG()]))
        .execute_and_collect() as results
    ):
        list(results)
    return time.monotonic() - started


def _run(queries: Any, run: dict[str, Any]) -> dict[str, Any]:
    env = _environment(run["configuration"], run["parallelism"])
    tables = [_read(inputs) for inputs in run["inputs"]]
    streams = [_source(env, inputs, rows, run["disorder_ms"]) for inputs, rows in zip(run["inputs"], tables)]
    out = queries.BUILDERS[run["query"]](streams, run["params"])
    out.flat_map(_writer(run["out"])).name(
        "write output"
    ).print()  # prints nothing: the writer yields nothing
    started = time.monotonic()
    env.execute(f"weir bench {run['query']}")
    seconds = time.monotonic() - started
    return {"id": run["id"], "seconds": seconds, "rows_in": sum(len(t) for t in tables), "error": None}


def _writer_class() -> Any:
    from pyflink.datastream.functions import FlatMapFunction

    class Writer(FlatMapFunction):
        """Writes each record as a JSON line to ``<directory>/<subtask>.jsonl``: collecting
        through the client (execute_and_collect) costs about a millisecond a record."""

        def __init__(self, directory: str) -> None:
            self.directory = directory
            self.file: Any = None

        def open(self, runtime_context: Any) -> None:
            index = runtime_context.get_index_of_this_subtask()
            self.file = open(Path(self.directory) / f"{index}.jsonl", "w", encoding="utf-8")  # noqa: SIM115

        def flat_map(self, value: Any) -> Any:
            self.file.write(json.dumps(list(value)) + "\n")
            return iter(())

        def close(self) -> None:
            if self.file is not None:
                self.file.close()

    return Writer


def _writer(directory: str) -> Any:
    Path(directory).mkdir(parents=True, exist_ok=True)
    return _writer_class()(directory)


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    result: dict[str, Any] = {"version": importlib.metadata.version("apache-flink"), "runs": []}
    if spec.get("probe"):
        result["one_record_job_s"] = _one_record_job()
        Path(spec["result"]).write_text(json.dumps(result), encoding="utf-8")
        return 0
    queries = _load_queries(spec["queries"])
    result["one_record_job_s"] = _one_record_job()  # warm: what every job pays
    for run in spec["runs"]:
        try:
            result["runs"].append(_run(queries, run))
        except Exception as exc:  # one failed query is that query's verdict, not the suite's end
            detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
            result["runs"].append({"id": run["id"], "error": detail[-2000:]})
        Path(spec["result"]).write_text(json.dumps(result), encoding="utf-8")
    Path(spec["result"]).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""``weir bench suite --engine spark``: the suite's queries on Spark Structured Streaming, beside weir's.

Theory of operation
-------------------
Every correctness run of a suite whose query Spark Structured Streaming can express runs
there too, in one child process (this module run with ``python -m``, the Python weir runs
in: PySpark is in weir's lock), so the JVM is fresh and its start is measured apart from the
generator's. The queries are written here in Spark's DataFrame API (``QUERIES``): a Spark job
cannot be a PyFlink-shaped file, so the same job *logic*, not the same text, runs there.
Queries without a form here are listed with the reason (``NOT_EXPRESSED``).

Source: Spark's file stream source over the data set's own Parquet files (copied into a
directory per run, so that the source sees only them, with modification times in part
order: the source takes files oldest first, one per micro-batch). Sink: Spark's Parquet
file sink (exactly once, append mode). The trigger is ``availableNow``: the query reads
what is there in micro-batches and stops, which makes a bounded run of a streaming query.

Event time: windows need a watermark (``withWatermark`` at the data set's disorder bound)
and append mode emits a window once the watermark passes its end. A bounded Flink or weir
job ends with the maximal watermark, which fires every window; Spark has no such end, and
its last windows would never be emitted. So the windowed queries read one more file after
the data: one event far past the data's last event time (``SENTINEL_AHEAD_MS``), whose only
effect is to move the watermark past every real window; its own window stays open and
emits nothing. Its micro-batch and the no-data batch Spark runs after a watermark moves are
part of the timed run.

Configuration maps as far as Spark has it: ``spark.sql.shuffle.partitions`` is the run's
parallelism (Spark's tasks run on the machine's cores, ``local[*]``); the state store is
RocksDB for ``lmdb`` and Spark's HDFS-backed (in-memory map, files on checkpoint) store for
``heap``. Spark checkpoints every micro-batch (offsets, commits, state) whatever the run's
checkpointing: it has no interval to set.

Measured: throughput is input records over the wall seconds from ``start()`` to the end of
``awaitTermination()``: the end-to-end time of the whole bounded job, every micro-batch
(planning, state commits, the no-data batch) included, as the only figure a micro-batch
engine's run of a bounded input offers that is like Flink's and weir's. Start-up is the wall
time of a fresh process that builds the session and runs a one-record streaming query to
its end; the same one-record query in the warm child is what every query pays whatever its
size (given beside it). No latency: the file source is not paced.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from weir.harness.engine_child import run_child
from weir.harness.queries import PORTABLE_PARAMS, get_query
from weir.harness.runner import DataSet, RunConfig, compare_with_expected

#: how far past the data's last event time the end-of-input event lies (a day)
SENTINEL_AHEAD_MS = 86_400_000
STATE_STORES = {
    "lmdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "heap": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}
WEIR_ONLY_REASON = "written with weir.columnar (vectorized batches); the same answer as its per-record query"
#: query -> why it has no Spark form (every query of the harness has one now)
NOT_EXPRESSED: dict[str, str] = {}


# -- the queries in Spark's DataFrame API (run in the child) -----------------------------------------
def _event_time(df: Any, column: str, disorder_ms: int) -> Any:
    from pyspark.sql import functions as F

    return df.withColumn("_ts", F.timestamp_millis(F.col(column))).withWatermark(
        "_ts", f"{disorder_ms} milliseconds"
    )


def _keyed_window(streams: list[Any], params: dict[str, Any], disorder_ms: int) -> Any:
    from pyspark.sql import functions as F

    size = int(params["window_ms"])
    return (
        _event_time(streams[0], "event_time", disorder_ms)
        .groupBy("key", F.window("_ts", f"{size} milliseconds"))
        .agg(F.count(F.lit(1)).alias("count"), F.sum("value").alias("sum"))
        .select("key", F.unix_millis(F.col("window.start")).alias("window_start"), "count", "sum")
    )


def _keyed_shuffle(streams: list[Any], params: dict[str, Any], disorder_ms: int) -> Any:
    events = streams[0].select("key", "value", "event_time")
    return events.repartition(int(params["parallelism"]), "key").select("key", "value", "event_time")


def _q0(streams: list[Any], params: dict[str, Any], disorder_ms: int) -> Any:
    return streams[0].select("auction", "bidder", "price", "date_time")


def _q1(streams: list[Any], params: dict[str, Any], disorder_ms: int) -> Any:
    from pyspark.sql import functions as F

    price = (F.col("price") * F.lit(float(params["dollar_to_euro"]))).alias("price")
    return streams[0].select("auction", "bidder", price, "date_time")


def _q2(streams: list[Any], params: dict[str, Any], disorder_ms: int) -> Any:
    from pyspark.sql import functions as F

    modulus = int(params["q2_auction_modulus"])
    return streams[0].where(F.pmod(F.col("auction"), F.lit(modulus)) == 0).select("auction", "price")


def _q5(streams: list[Any], params: dict[str, Any], disorder_ms: int) -> Any:
    """Bids per auction in sliding windows, then per window end the auction(s) with the most: two
    chained windowed aggregations (the second over ``window_time`` of the first, Spark 3.4+)."""
    from pyspark.sql import functions as F

    size, slide = f"{int(params['q5_size_ms'])} milliseconds", f"{int(params['q5_slide_ms'])} milliseconds"
    counts = (
        _event_time(streams[0], "date_time", disorder_ms)
        .groupBy("auction", F.window("_ts", size, slide))
        .agg(F.count(F.lit(1)).alias("num"))
    )
    per_end = counts.groupBy(F.window(F.window_time("window"), slide)).agg(
        F.max("num").alias("top"), F.collect_list(F.struct("auction", "num")).alias("counts")
    )
    top = per_end.select(
        F.explode(F.filter("counts", lambda c: c["num"] == F.col("top"))).alias("c"),
        F.unix_millis(F.col("window.end")).alias("window_end"),
    )
    return top.select("c.auction", "window_end", "c.num")


def _q7(streams: list[Any], params: dict[str, Any], disorder_ms: int) -> Any:
    """The highest bid(s) of each tumbling window: one windowed aggregation keeping the window's
    bids and its top price, then the bids at that price."""
    from pyspark.sql import functions as F

    size = f"{int(params['window_ms'])} milliseconds"
    bid = F.struct("auction", "bidder", "price", "date_time")
    per_window = (
        _event_time(streams[0], "date_time", disorder_ms)
        .groupBy(F.window("_ts", size))
        .agg(F.max("price").alias("top"), F.collect_list(bid).alias("bids"))
    )
    highest = per_window.select(
        F.explode(F.filter("bids", lambda b: b["price"] == F.col("top"))).alias("b"),
        F.unix_millis(F.col("window.end")).alias("window_end"),
    )
    return highest.select("b.auction", "b.bidder", "b.price", "b.date_time", "window_end")


def _q8(streams: list[Any], params: dict[str, Any], disorder_ms: int) -> Any:
    from pyspark.sql import functions as F

    size = f"{int(params['window_ms'])} milliseconds"
    persons, auctions = streams
    people = _event_time(persons, "date_time", disorder_ms).select(
        F.col("id").alias("person_id"), "name", F.window("_ts", size).alias("window")
    )
    sellers = (
        _event_time(auctions, "date_time", disorder_ms)
        .select(F.col("seller").alias("person_id"), F.window("_ts", size).alias("window"))
        .dropDuplicates(["person_id", "window"])
    )
    return people.join(sellers, ["person_id", "window"]).select(
        "person_id", "name", F.unix_millis(F.col("window.start")).alias("window_start")
    )


#: query -> (builder, whether it needs the end-of-input event to fire its windows)
QUERIES: dict[str, tuple[Callable[[list[Any], dict[str, Any], int], Any], bool]] = {
    "keyed-window": (_keyed_window, True),
    "keyed-shuffle": (_keyed_shuffle, False),
    "q0": (_q0, False),
    "q1": (_q1, False),
    "q2": (_q2, False),
    "q5": (_q5, True),
    "q7": (_q7, True),
    "q8": (_q8, False),  # an inner join emits a match when both sides are in: no window to fire
}


# -- the child -------------------------------------------------------------------------------------
def _session() -> Any:
    from weir.workloads.spark import spark_session

    return spark_session("local[*]", "weir-bench-spark")


def _input_directory(table: dict[str, Any], directory: Path, sentinel: bool) -> Path:
    """The table's part files (and the end-of-input event) in a directory of their own, oldest first."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    directory.mkdir(parents=True)
    mtime = time.time() - 3600.0
    last_event_time: int | None = None
    for i, file in enumerate(table["files"]):
        target = directory / f"part-{i:05d}.parquet"
        shutil.copyfile(file, target)
        os.utime(target, (mtime + i, mtime + i))
        if sentinel:
            column = pq.read_table(file, columns=[table["event_time_column"]]).column(0)
            newest = pc.max(column).as_py()
            last_event_time = newest if last_event_time is None else max(last_event_time, newest)
    if sentinel and last_event_time is not None:
        first = pq.read_table(table["files"][0]).slice(0, 1)
        index = first.schema.get_field_index(table["event_time_column"])
        ahead = pa.array([last_event_time + SENTINEL_AHEAD_MS], first.schema.field(index).type)
        end = first.set_column(index, first.schema.field(index), ahead)
        target = directory / f"part-{len(table['files']):05d}-end.parquet"
        pq.write_table(end, target)
        os.utime(target, (mtime + len(table["files"]), mtime + len(table["files"])))
    return directory


def _one_record_query(spark: Any, work: Path) -> float:
    """Seconds of a one-record streaming query (file source, file sink, availableNow) to its end."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = work / "one-record-in"
    source.mkdir(parents=True)
    pq.write_table(pa.table({"x": pa.array([1], pa.int64())}), source / "part-00000.parquet")
    stream = spark.readStream.schema("x long").parquet(str(source))
    started = time.monotonic()
    query = (
        stream.writeStream.format("parquet")
        .option("path", str(work / "one-record-out"))
        .option("checkpointLocation", str(work / "one-record-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.monotonic() - started


def _run(spark: Any, run: dict[str, Any], work: Path) -> dict[str, Any]:
    build, sentinel = QUERIES[run["query"]]
    spark.conf.set("spark.sql.shuffle.partitions", str(run["parallelism"]))
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", STATE_STORES[run["backend"]])
    streams = []
    for table in run["inputs"]:
        directory = _input_directory(table, work / f"in-{run['id']}-{table['table']}", sentinel)
        schema = spark.read.parquet(table["files"][0]).schema
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(directory))
        streams.append(stream.select(*table["columns"]))
    frame = build(streams, {**run["params"], "parallelism": run["parallelism"]}, run["disorder_ms"])
    started = time.monotonic()
    query = (
        frame.writeStream.format("parquet")
        .option("path", run["out"])
        .option("checkpointLocation", str(work / f"checkpoint-{run['id']}"))
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.monotonic() - started
    progress = query.recentProgress
    return {"id": run["id"], "seconds": seconds, "micro_batches": len(progress),
            "rows_read": sum(int(p["numInputRows"]) for p in progress), "error": None}  # fmt: skip


def child_main(argv: list[str]) -> int:
    """The child: ``python -m weir.harness.spark_engine SPEC``; writes its results to ``spec["result"]``."""
    import pyspark

    spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    result: dict[str, Any] = {"version": pyspark.__version__, "runs": []}
    with tempfile.TemporaryDirectory(prefix="weir-spark-child-") as tmp:
        work = Path(tmp)
        spark = _session()
        result["one_record_query_s"] = _one_record_query(spark, work / "probe")
        for run in spec.get("runs", []):
            try:
                result["runs"].append(_run(spark, run, work))
            except Exception as exc:  # one failed query is that query's verdict, not the suite's end
                detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
                result["runs"].append({"id": run["id"], "error": detail[-2000:]})
            Path(spec["result"]).write_text(json.dumps(result), encoding="utf-8")
        spark.stop()
    Path(spec["result"]).write_text(json.dumps(result), encoding="utf-8")
    return 0


# -- the parent ------------------------------------------------------------------------------------
def _child(spec: dict[str, Any], work: Path, name: str) -> tuple[dict[str, Any], float, str]:
    """Run the child on ``spec``; (its result, wall seconds, the tail of its stderr)."""
    argv = [sys.executable, "-m", "weir.harness.spark_engine"]
    return run_child(argv, spec, work, name, "the Spark child")


def _inputs(ds: DataSet, query_name: str) -> list[dict[str, Any]]:
    from weir.workloads import dataset

    return [
        {"table": t.table, "files": [str(f) for f in dataset.table_files(ds.directory, ds.manifest, t.table)],
         "columns": list(t.columns), "event_time_column": t.event_time_column}
        for t in get_query(query_name).inputs
    ]  # fmt: skip


def _read_output(directory: Path) -> list[tuple[Any, ...]]:
    import pyarrow.dataset as pads

    if not directory.is_dir():
        return []
    table = pads.dataset(str(directory), format="parquet").to_table()  # skips _spark_metadata
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return list(zip(*columns))


def run_on_spark(correctness: list[tuple[str, DataSet, RunConfig]], log: Any = print) -> dict[str, Any]:
    """Every correctness run of the suite Spark can express, on Spark Structured Streaming: the
    report's ``engines.spark`` part."""
    queries = [c.query for _, _, c in correctness]
    weir_only = sorted({q for q in queries if get_query(q).columnar})
    not_expressed = sorted({q for q in queries if not get_query(q).columnar and q not in QUERIES})
    runs = [(name, ds, c) for name, ds, c in correctness if c.query in QUERIES]
    with tempfile.TemporaryDirectory(prefix="weir-bench-spark-") as tmp:
        work = Path(tmp)
        probe, startup_s, tail = _child({}, work, "probe")
        if not probe:
            raise RuntimeError(f"Spark could not run a one-record streaming query: {tail}")
        log(
            f"Spark {probe['version']}: a one-record streaming query in a fresh process took {startup_s:.1f} s"
        )
        spec_runs: list[dict[str, Any]] = []
        for i, (_name, ds, config) in enumerate(runs):
            spec_runs.append({
                "id": i, "query": config.query, "parallelism": config.parallelism, "backend": config.backend,
                "inputs": _inputs(ds, config.query), "disorder_ms": ds.disorder_ms,
                "params": {**PORTABLE_PARAMS, **ds.params}, "out": str(work / f"out-{i}"),
            })  # fmt: skip
        result, _, tail = _child({"runs": spec_runs}, work, "runs")
        overhead = result.get("one_record_query_s")
        by_id = {r["id"]: r for r in result.get("runs", [])}
        checks = []
        for i, (name, ds, config) in enumerate(runs):
            r = by_id.get(i) or {"error": f"Spark stopped before this run: {tail}"}
            entry: dict[str, Any] = {"query": config.query, "dataset": name, "key": config.key,
                                     "config": config.to_json(), "state_store": STATE_STORES[config.backend]}  # fmt: skip
            if r.get("error"):
                entry.update(matches=False, error=r["error"], throughput=None, throughput_net=None)
                log(f"Spark: {config.key} on {name}: FAILED: {r['error']}")
            else:
                rows_in = ds.replayed_rows(get_query(config.query))
                entry.update(compare_with_expected(ds, config.query, _read_output(Path(spec_runs[i]["out"]))))
                net = r["seconds"] - (overhead or 0.0)
                entry.update(
                    seconds=r["seconds"], rows_in=rows_in, micro_batches=r["micro_batches"],
                    throughput=rows_in / r["seconds"] if r["seconds"] > 0 else None,
                    throughput_net=rows_in / net if net > 0 else None, error=None,
                )  # fmt: skip
                log(f"Spark: {'match' if entry['matches'] else 'MISMATCH'}: {config.key} on {name} "
                    f"({rows_in:,} rows in {r['seconds']:.1f} s, {r['micro_batches']} micro-batches)")  # fmt: skip
            checks.append(entry)
    return {
        "engine": "Spark Structured Streaming",
        "version": probe["version"],
        "startup_s": startup_s,
        "one_record_job_s": overhead,
        "source": "Spark's file stream source over the data set's Parquet files, a file per micro-batch, "
        "trigger availableNow (not paced: no latency figures)",
        "measured": "input records over the wall time of the whole bounded streaming query, start() to its end",
        "correctness": checks,
        "weir_only": [{"query": q, "reason": WEIR_ONLY_REASON} for q in weir_only],
        "not_run": [
            {"query": q, "reason": NOT_EXPRESSED.get(q, "no Spark form written")} for q in not_expressed
        ],
    }


if __name__ == "__main__":
    sys.exit(child_main(sys.argv))

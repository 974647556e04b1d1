"""``weir bench suite --engine flink``: the suite's queries on Apache Flink, beside weir's.

Theory of operation
-------------------
Every correctness run of a suite (a query on a data set at a parallelism, with its
checkpointing and state backend) runs on Flink too, in one child process with PyFlink's
Python (weir.flink_bridge finds it; weir.harness.flink_child is the child). The job logic
is the same text on both engines: weir.harness.portable_queries, with the prefix swapped
to ``pyflink``. The data are the same Parquet files Spark wrote; Flink reads them through
``env.from_collection`` (PyFlink has no Parquet DataStream source without extra jars,
and the quick suite's data sets fit in memory), so its source cannot be paced and Flink
gets no latency figures: only the time to push the whole data set through. Its output is
checked against Spark's answer with the same comparison as weir's. Queries written with
weir.columnar have no Flink form and are listed as weir-only with that reason.

Configuration maps as ``weir run --target flink`` maps it: aligned or unaligned
checkpoints at the run's interval, ``lmdb`` as ``rocksdb``, ``heap`` as ``hashmap``.

Start-up is measured the same way for both engines: the wall time of a fresh process
that runs a one-record job to its end (for Flink: a JVM, a local MiniCluster and Python
workers). Flink's throughput is input rows over the seconds ``env.execute()`` takes (the
figure set against weir's); it is also given, and net of the seconds a one-record job takes
in the same warm process (each local job starts its own MiniCluster), when the run took
longer than that job. weir's correctness runs time the job from its source's start, so
the ratio flatters weir by Flink's per-job start on small data sets.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from weir.harness.engine_child import run_child
from weir.harness.queries import PORTABLE_PARAMS, get_query
from weir.harness.runner import DataSet, RunConfig, compare_with_expected

ENGINES = ("weir", "flink")
WEIR_ONLY_REASON = "written with weir.columnar (vectorized batches); PyFlink has no vectorized DataStream API"
_ARROW_TYPES = {
    "string": "STRING",
    "large_string": "STRING",
    "int64": "LONG",
    "int32": "INT",
    "double": "DOUBLE",
}


def flink_configuration(config: RunConfig) -> dict[str, str]:
    """The run's checkpointing and state backend as Flink's configuration keys."""
    conf = {"state.backend.type": "rocksdb" if config.backend == "lmdb" else "hashmap"}
    if config.checkpointing != "off":
        conf["execution.checkpointing.interval"] = f"{config.checkpoint_interval_ms} ms"
        conf["execution.checkpointing.unaligned.enabled"] = str(config.checkpointing == "unaligned").lower()
    return conf


def _inputs(ds: DataSet, query_name: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    from weir.workloads import dataset

    out = []
    for table_input in get_query(query_name).inputs:
        files = [str(f) for f in dataset.table_files(ds.directory, ds.manifest, table_input.table)]
        schema = pq.read_schema(files[0])
        types = []
        for column in table_input.columns:
            arrow = str(schema.field(column).type)
            if arrow not in _ARROW_TYPES:
                raise ValueError(
                    f"column {table_input.table}.{column} has type {arrow}; Flink runs know {sorted(_ARROW_TYPES)}"
                )
            types.append(_ARROW_TYPES[arrow])
        out.append({"files": files, "columns": list(table_input.columns),
                    "event_time_column": table_input.event_time_column, "types": [*types, "LONG"]})  # fmt: skip
    return out


def _child(python: str, spec: dict[str, Any], work: Path, name: str) -> tuple[dict[str, Any], float, str]:
    """Run the child on ``spec``; (its result, wall seconds, the tail of its stderr)."""
    from weir.flink_bridge import flink_environment

    child = str(Path(__file__).with_name("flink_child.py"))
    return run_child([python, child], spec, work, name, "PyFlink", env=flink_environment(python))


def weir_startup_s() -> float:
    """Wall seconds of a fresh Python process running a one-record weir job."""
    code = (
        "from weir.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "with env.from_collection([(1,)]).map(lambda r: r).execute_and_collect() as rows:\n"
        "    assert list(rows) == [(1,)]\n"
    )
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.monotonic() - started


def run_on_flink(correctness: list[tuple[str, DataSet, RunConfig]], log: Any = print) -> dict[str, Any]:
    """Every correctness run of the suite on Flink: the report's ``engines.flink`` part."""
    from weir import flink_runner
    from weir.flink_bridge import flink_python
    from weir.harness import portable_queries

    python = flink_python()
    weir_only = sorted({c.query for _, _, c in correctness if get_query(c.query).columnar})
    runs = [(name, ds, c) for name, ds, c in correctness if not get_query(c.query).columnar]
    with tempfile.TemporaryDirectory(prefix="weir-bench-flink-") as tmp:
        work = Path(tmp)
        probe, startup_s, tail = _child(python, {"probe": True}, work, "probe")
        if not probe:
            raise RuntimeError(f"PyFlink could not run a one-record job: {tail}")
        log(f"Apache Flink {probe['version']}: a one-record job in a fresh process took {startup_s:.1f} s")
        queries = work / "portable_queries.py"
        source = Path(portable_queries.__file__).read_text(encoding="utf-8")
        queries.write_text(flink_runner.swap_prefix(source, "weir", "pyflink"), encoding="utf-8")
        spec_runs: list[dict[str, Any]] = []
        for i, (_name, ds, config) in enumerate(runs):
            spec_runs.append({
                "id": i, "query": config.query, "parallelism": config.parallelism,
                "inputs": _inputs(ds, config.query), "disorder_ms": ds.disorder_ms,
                "params": {**PORTABLE_PARAMS, **ds.params}, "configuration": flink_configuration(config),
                "out": str(work / f"out-{i}"),
            })  # fmt: skip
        result, _, tail = _child(python, {"queries": str(queries), "runs": spec_runs}, work, "runs")
        overhead = result.get("one_record_job_s")
        by_id = {r["id"]: r for r in result.get("runs", [])}
        checks = []
        for i, (name, ds, config) in enumerate(runs):
            r = by_id.get(i) or {"error": f"PyFlink stopped before this run: {tail}"}
            entry: dict[str, Any] = {"query": config.query, "dataset": name, "key": config.key,
                                     "config": config.to_json(), "flink_configuration": flink_configuration(config)}  # fmt: skip
            if r.get("error"):
                entry.update(matches=False, error=r["error"], throughput=None, throughput_net=None)
                log(f"Flink: {config.key} on {name}: FAILED: {r['error']}")
            else:
                rows = [
                    tuple(json.loads(line)[:-1])
                    for part in sorted(Path(spec_runs[i]["out"]).glob("*.jsonl"))
                    for line in part.read_text(encoding="utf-8").splitlines()
                ]
                entry.update(compare_with_expected(ds, config.query, rows))
                net = r["seconds"] - (overhead or 0.0)
                entry.update(
                    seconds=r["seconds"], rows_in=r["rows_in"],
                    throughput=r["rows_in"] / r["seconds"] if r["seconds"] > 0 else None,
                    throughput_net=r["rows_in"] / net if net > 0 else None, error=None,
                )  # fmt: skip
                log(f"Flink: {'match' if entry['matches'] else 'MISMATCH'}: {config.key} on {name} "
                    f"({r['rows_in']:,} rows in {r['seconds']:.1f} s)")  # fmt: skip
            checks.append(entry)
    return {
        "engine": "Apache Flink",
        "version": probe["version"],
        "python": python,
        "startup_s": startup_s,
        "one_record_job_s": overhead,
        "source": "env.from_collection of the data set's Parquet rows (not paced: no latency figures)",
        "correctness": checks,
        "weir_only": [{"query": q, "reason": WEIR_ONLY_REASON} for q in weir_only],
    }

"""Start-up of jobs in tests: execute() → first record at the sink, and 100 tiny jobs (pytest-benchmark).

Not part of `make test`. Run with

    .venv/bin/pytest tests/bench/test_bench_testing.py -m bench -s

Columns, measured in the same run: weir on the session's shared cluster (real time and
mock time), weir with an embedded cluster per job (plain ``env.execute()``), and PyFlink's
local MiniCluster when ``pyflink`` is importable (skipped otherwise). A cold process is
measured in a subprocess: importing weir, loading the numba kernels, starting the shared
cluster, the first job.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from weir.datastream import SinkFunction, StreamExecutionEnvironment
from weir.graph.job_graph import generate_job_graph

pytestmark = pytest.mark.bench

RUNS = 20
TINY_JOBS = 100
TARGET_FIRST_RECORD_MS = 50
TARGET_TINY_JOBS_S = 10

_first_record_at: list[float] = []


class FirstRecord(SinkFunction):
    """Notes when the first record reaches the sink (each subtask's copy shares the module list)."""

    def invoke(self, value: Any, context: Any) -> None:
        if not _first_record_at:
            _first_record_at.append(time.perf_counter())


def trivial_job(env: Any) -> None:
    env.from_collection([1, 2, 3]).map(lambda x: x + 1).add_sink(FirstRecord())


def time_jobs(make_env: Callable[[], Any], runs: int) -> tuple[list[float], list[float]]:
    """(execute → first record, execute → return) in ms for ``runs`` trivial jobs."""
    first, total = [], []
    for _ in range(runs):
        env = make_env()
        trivial_job(env)
        _first_record_at.clear()
        started = time.perf_counter()
        env.execute("trivial")
        ended = time.perf_counter()
        first.append((_first_record_at[0] - started) * 1000)
        total.append((ended - started) * 1000)
    return first, total


def tiny_jobs_s(make_env: Callable[[], Any], jobs: int) -> float:
    started = time.perf_counter()
    for i in range(jobs):
        env = make_env()
        env.from_collection([i, i + 1]).map(lambda x: x * 2).add_sink(FirstRecord())
        env.execute("tiny")
    return time.perf_counter() - started


def pyflink_figures() -> tuple[float, float, float] | None:
    """(first record ms, return ms, 100 tiny jobs s) on PyFlink's local MiniCluster, or None."""
    if importlib.util.find_spec("pyflink") is None:
        return None
    from pyflink.datastream import StreamExecutionEnvironment as FlinkEnvironment  # pragma: no cover

    def run() -> tuple[float, float]:  # pragma: no cover - pyflink is not installed here
        env = FlinkEnvironment.get_execution_environment()
        stream = env.from_collection([1, 2, 3]).map(lambda x: x + 1)
        started = time.perf_counter()
        with stream.execute_and_collect() as records:
            first = next(iter(records))
            assert first is not None
            first_ms = (time.perf_counter() - started) * 1000
            for _ in records:
                pass
        return first_ms, (time.perf_counter() - started) * 1000

    firsts, totals = zip(*(run() for _ in range(5)))  # pragma: no cover
    started = time.perf_counter()  # pragma: no cover
    for _ in range(TINY_JOBS):  # pragma: no cover
        run()
    return (
        statistics.median(firsts),
        statistics.median(totals),
        time.perf_counter() - started,
    )  # pragma: no cover


COLD_PROCESS = r"""
import json, time
t0 = time.perf_counter()
import weir.testing.cluster as cluster
from weir.datastream import StreamExecutionEnvironment
t1 = time.perf_counter()
from weir.loop.warmup import warm_up
warm_up()
t2 = time.perf_counter()
shared = cluster.SharedCluster()
shared.start()
client = cluster.ClusterClient(shared, cluster.ClusterSize())
t3 = time.perf_counter()
env = cluster.TestEnvironment(client)
out = []
env.from_collection([1, 2, 3]).map(lambda x: x + 1).add_sink(out.append)
env.execute()
t4 = time.perf_counter()
env = cluster.TestEnvironment(client)
env.from_collection([1, 2, 3]).map(lambda x: x + 1).add_sink(out.append)
env.execute()
t5 = time.perf_counter()
shared.stop()
print(json.dumps({"import_s": t1 - t0, "numba_warm_up_s": t2 - t1, "cluster_start_s": t3 - t2,
                  "first_job_s": t4 - t3, "second_job_s": t5 - t4}))
"""


def test_start_up_of_trivial_and_tiny_jobs(benchmark, weir_env_factory, weir_cluster) -> None:  # type: ignore[no-untyped-def]
    embedded = StreamExecutionEnvironment.get_execution_environment
    time_jobs(weir_env_factory, 3)  # warm both paths up
    time_jobs(embedded, 3)

    shared_first, shared_total = time_jobs(weir_env_factory, RUNS)
    weir_cluster.set_mock_time(True)
    try:
        mock_first, mock_total = time_jobs(weir_env_factory, RUNS)
        mock_tiny_s = tiny_jobs_s(weir_env_factory, TINY_JOBS)
    finally:
        weir_cluster.set_mock_time(False)
    embedded_first, embedded_total = time_jobs(embedded, RUNS)

    shared_tiny_s = benchmark.pedantic(
        tiny_jobs_s, args=(weir_env_factory, TINY_JOBS), rounds=1, iterations=1
    )
    embedded_tiny_s = tiny_jobs_s(embedded, TINY_JOBS)

    # where one job's time goes, outside the cluster: compiling the graphs
    env = embedded()
    trivial_job(env)
    started = time.perf_counter()
    for _ in range(RUNS):
        generate_job_graph(env.get_stream_graph("trivial"))
    compile_ms = (time.perf_counter() - started) * 1000 / RUNS
    cold = json.loads(
        subprocess.run(
            [sys.executable, "-c", COLD_PROCESS], capture_output=True, text=True, check=True
        ).stdout
    )
    flink = pyflink_figures()

    median = statistics.median
    rows = [
        ("weir, shared cluster (real time)", median(shared_first), median(shared_total), shared_tiny_s),
        ("weir, shared cluster (mock time)", median(mock_first), median(mock_total), mock_tiny_s),
        ("weir, embedded cluster per job", median(embedded_first), median(embedded_total), embedded_tiny_s),
    ]
    lines = [
        "",
        f"start-up of a trivial job (median of {RUNS}) and {TINY_JOBS} tiny jobs:",
        f"  {'':36} {'execute→first record':>22} {'execute→return':>16} {f'{TINY_JOBS} jobs':>10}",
    ]
    for name, first, total, tiny in rows:
        lines.append(f"  {name:36} {first:19.1f} ms {total:13.1f} ms {tiny:8.2f} s")
    if flink is None:
        lines.append(f"  {'PyFlink local MiniCluster':36} {'skipped: pyflink is not installed':>52}")
    else:  # pragma: no cover - pyflink is not installed here
        lines.append(
            f"  {'PyFlink local MiniCluster':36} {flink[0]:19.1f} ms {flink[1]:13.1f} ms {flink[2]:8.2f} s"
        )
    lines += [
        f"  shared / embedded, {TINY_JOBS} jobs: {shared_tiny_s / embedded_tiny_s:.2f}×; "
        f"targets: first record < {TARGET_FIRST_RECORD_MS} ms, {TINY_JOBS} jobs < {TARGET_TINY_JOBS_S} s",
        f"  compiling the trivial job (stream graph + job graph): {compile_ms:.2f} ms",
        f"  cold process: import weir {cold['import_s'] * 1000:.0f} ms, numba warm-up "
        f"{cold['numba_warm_up_s'] * 1000:.0f} ms, shared cluster start {cold['cluster_start_s'] * 1000:.0f} ms, "
        f"first job {cold['first_job_s'] * 1000:.0f} ms, second job {cold['second_job_s'] * 1000:.1f} ms",
    ]
    print("\n".join(lines))
    benchmark.extra_info.update(
        shared_first_record_ms=median(shared_first),
        mock_first_record_ms=median(mock_first),
        embedded_first_record_ms=median(embedded_first),
        shared_tiny_jobs_s=shared_tiny_s,
        embedded_tiny_jobs_s=embedded_tiny_s,
        cold=cold,
        pyflink=flink,
    )
    assert len(shared_first) == RUNS and all(f <= t for f, t in zip(shared_first, shared_total))

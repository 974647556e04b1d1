"""``weir bench network``: records/s through source → key_by → discarding sink.

Every configuration (parallelism × buffer timeout × typed/untyped) runs in this process,
one after another, next to a plain-Python loop that generates and routes the same
records, so the printed ratios come from one run on one machine. Memory is measured in
fresh subprocesses at two sizes 10× apart: peak RSS must not grow with the records sent.
"""

from __future__ import annotations

import json
import platform
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.builtin import DiscardingSink
from weir.datastream.connectors.number_seq import NumberSequenceSource


@dataclass
class NetworkResult:
    parallelism: int
    buffer_timeout_ms: int
    typed: bool
    records: int
    seconds: float
    records_per_s: float


def build_job(
    records: int, parallelism: int, buffer_timeout_ms: int, typed: bool
) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", 1)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.set_buffer_timeout(buffer_timeout_ms)
    source = env.from_source(NumberSequenceSource(1, records), WatermarkStrategy.no_watermarks(), "numbers")
    stream = source if typed else source.map(lambda n: n)  # untyped: Python objects, pickled between tasks
    stream.key_by(lambda n: n, key_type=Types.LONG() if typed else None).sink_to(DiscardingSink())
    return env


def run_one(records: int, parallelism: int, buffer_timeout_ms: int, typed: bool) -> NetworkResult:
    env = build_job(records, parallelism, buffer_timeout_ms, typed)
    result = env.execute(f"network p{parallelism} t{buffer_timeout_ms} {'typed' if typed else 'untyped'}")
    seconds = max(result.get_net_runtime(), 1) / 1000
    return NetworkResult(parallelism, buffer_timeout_ms, typed, records, seconds, records / seconds)


def python_loop(records: int, parallelism: int) -> float:
    """The same work as plain Python: generate each number and route it by a hash (records/s)."""
    started = time.perf_counter()
    counts = [0] * parallelism
    for n in range(1, records + 1):
        counts[hash(n) * 0x9E3779B1 % 128 * parallelism // 128] += 1
    return records / (time.perf_counter() - started)


def peak_rss_mb(records: int) -> float:
    """Peak RSS of a fresh process that runs the typed job over ``records`` records."""
    code = (
        "import resource, sys; from weir.harness.network_bench import run_one; "
        f"run_one({records}, 2, 100, True); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024


def run_suite(
    records: int,
    parallelisms: tuple[int, ...] = (1, 2),
    timeouts: tuple[int, ...] = (0, 1, 10, 100),
    memory: bool = True,
    echo: Any = print,
) -> dict[str, Any]:
    run_one(10_000, 1, 100, True)  # warm up: numba kernels loaded, imports done
    results = []
    for parallelism in parallelisms:
        for typed in (True, False):
            for timeout in timeouts:
                r = run_one(records, parallelism, timeout, typed)
                results.append(r)
                echo(
                    f"p={parallelism} timeout={timeout:>3} ms {'typed  ' if typed else 'untyped'} "
                    f"{r.records_per_s:>14,.0f} records/s"
                )
    loop = {p: python_loop(min(records, 2_000_000), p) for p in parallelisms}
    for p, loop_rate in loop.items():
        echo(f"plain-Python loop p={p}: {loop_rate:,.0f} records/s")
    summary: dict[str, Any] = {"loop_records_per_s": loop}

    def rate(p: int, t: int, typed: bool) -> float:
        return next(
            r.records_per_s for r in results if (r.parallelism, r.buffer_timeout_ms, r.typed) == (p, t, typed)
        )

    if 1 in timeouts and 100 in timeouts:
        for p in parallelisms:
            ratio = rate(p, 1, True) / rate(p, 100, True)
            summary[f"p{p}_typed_1ms_over_100ms"] = ratio
            echo(f"p={p} typed: throughput at 1 ms is {ratio:.0%} of 100 ms")
    if 100 in timeouts:
        for p in parallelisms:
            summary[f"p{p}_typed_over_untyped_100ms"] = rate(p, 100, True) / rate(p, 100, False)
            summary[f"p{p}_typed_100ms_over_loop"] = rate(p, 100, True) / loop[p]
            echo(
                f"p={p}: typed is {summary[f'p{p}_typed_over_untyped_100ms']:.1f}x untyped and "
                f"{summary[f'p{p}_typed_100ms_over_loop']:.2f}x the plain-Python loop"
            )
    if memory:
        small, large = peak_rss_mb(records // 10), peak_rss_mb(records)
        summary["peak_rss_mb"] = {str(records // 10): small, str(records): large}
        echo(
            f"peak RSS: {small:.0f} MB at {records // 10:,} records, {large:.0f} MB at {records:,} records "
            f"(network memory configured: 64 MB per TaskManager)"
        )
    return {
        "benchmark": "network",
        "parameters": {"records": records, "parallelisms": parallelisms, "timeouts_ms": timeouts},
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": _cpus()},
        "results": [asdict(r) for r in results],
        "summary": summary,
        "self_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


def main(records: int, output: str | None) -> None:
    report = run_suite(records)
    if output:
        with open(output, "w") as f:
            json.dump(report, f, indent=2)

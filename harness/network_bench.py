"""``weir bench network``: records/s through source → key_by → discarding sink.

Every configuration (exchange × parallelism × buffer timeout × typed/untyped) runs in this
process, one after another, next to a plain-Python loop that generates and routes the same
records, so the printed ratios come from one run on one machine. Memory is measured in
fresh subprocesses at two sizes 10× apart: peak RSS must not grow with the records sent.

Exchanges (``EXCHANGES``): ``local`` -- one TaskManager, every channel local (no
transport); ``inprocess`` -- two TaskManagers, one slot each, the shuffle between them over
the in-process connection; ``tcp`` -- the same over loopback TCP
(``taskmanager.network.transport: tcp``).
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

#: exchange -> (TaskManagers, transport); the two-TaskManager ones get one slot per subtask pair
EXCHANGES: dict[str, tuple[int, str]] = {"local": (1, "local"), "inprocess": (2, "local"), "tcp": (2, "tcp")}


@dataclass
class NetworkResult:
    parallelism: int
    buffer_timeout_ms: int
    typed: bool
    records: int
    seconds: float
    records_per_s: float
    exchange: str = "local"


def build_job(
    records: int, parallelism: int, buffer_timeout_ms: int, typed: bool, exchange: str = "local"
) -> StreamExecutionEnvironment:
    if exchange not in EXCHANGES:
        raise ValueError(
            f"network bench: unknown exchange {exchange!r} (expected one of {', '.join(EXCHANGES)})"
        )
    taskmanagers, transport = EXCHANGES[exchange]
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", taskmanagers)
    conf.set_string("taskmanager.network.transport", transport)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.set_buffer_timeout(buffer_timeout_ms)
    source = env.from_source(NumberSequenceSource(1, records), WatermarkStrategy.no_watermarks(), "numbers")
    stream = source if typed else source.map(lambda n: n)  # untyped: Python objects, pickled between tasks
    stream.key_by(lambda n: n, key_type=Types.LONG() if typed else None).sink_to(DiscardingSink())
    return env


def run_one(
    records: int, parallelism: int, buffer_timeout_ms: int, typed: bool, exchange: str = "local"
) -> NetworkResult:
    env = build_job(records, parallelism, buffer_timeout_ms, typed, exchange)
    name = f"network {exchange} p{parallelism} t{buffer_timeout_ms} {'typed' if typed else 'untyped'}"
    result = env.execute(name)
    seconds = max(result.get_net_runtime(), 1) / 1000
    return NetworkResult(parallelism, buffer_timeout_ms, typed, records, seconds, records / seconds, exchange)


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
    exchanges: tuple[str, ...] = ("local",),
    rounds: int = 1,
) -> dict[str, Any]:
    run_one(10_000, 1, 100, True)  # warm up: numba kernels loaded, imports done
    for exchange in exchanges:
        if exchange != "local":
            run_one(10_000, 2, 100, True, exchange)  # warm up its transport
    configurations = [
        (exchange, parallelism, typed, timeout)
        for exchange in exchanges
        for parallelism in parallelisms
        for typed in (True, False)
        for timeout in timeouts
    ]
    runs: dict[tuple[str, int, bool, int], list[NetworkResult]] = {c: [] for c in configurations}
    for _ in range(rounds):  # interleaved, so that a slow minute of a shared machine hits them all
        for exchange, parallelism, typed, timeout in configurations:
            runs[(exchange, parallelism, typed, timeout)].append(
                run_one(records, parallelism, timeout, typed, exchange)
            )
    results = []
    for (exchange, parallelism, typed, timeout), done in runs.items():
        r = sorted(done, key=lambda x: x.records_per_s)[len(done) // 2]  # the median run
        results.append(r)
        echo(
            f"{exchange:<9} p={parallelism} timeout={timeout:>3} ms {'typed  ' if typed else 'untyped'} "
            f"{r.records_per_s:>14,.0f} records/s" + (f" (median of {rounds})" if rounds > 1 else "")
        )
    loop = {p: python_loop(min(records, 2_000_000), p) for p in parallelisms}
    for p, loop_rate in loop.items():
        echo(f"plain-Python loop p={p}: {loop_rate:,.0f} records/s")
    summary: dict[str, Any] = {"loop_records_per_s": loop}

    def rate(p: int, t: int, typed: bool, exchange: str) -> float:
        return next(
            r.records_per_s
            for r in results
            if (r.parallelism, r.buffer_timeout_ms, r.typed, r.exchange) == (p, t, typed, exchange)
        )

    for exchange in exchanges:
        prefix = "" if exchange == "local" else f"{exchange}_"  # the local keys keep their names
        said = "" if exchange == "local" else f"{exchange} "
        if 1 in timeouts and 100 in timeouts:
            for p in parallelisms:
                ratio = rate(p, 1, True, exchange) / rate(p, 100, True, exchange)
                summary[f"{prefix}p{p}_typed_1ms_over_100ms"] = ratio
                echo(f"{said}p={p} typed: throughput at 1 ms is {ratio:.0%} of 100 ms")
        if 100 in timeouts:
            for p in parallelisms:
                typed_rate = rate(p, 100, True, exchange)
                summary[f"{prefix}p{p}_typed_over_untyped_100ms"] = typed_rate / rate(p, 100, False, exchange)
                summary[f"{prefix}p{p}_typed_100ms_over_loop"] = typed_rate / loop[p]
                echo(
                    f"{said}p={p}: typed is {summary[f'{prefix}p{p}_typed_over_untyped_100ms']:.1f}x untyped and "
                    f"{summary[f'{prefix}p{p}_typed_100ms_over_loop']:.2f}x the plain-Python loop"
                )
    for exchange in exchanges:
        if exchange == "local":
            continue
        for other in ("local", "inprocess"):
            if other not in exchanges or other == exchange:
                continue
            for p in parallelisms:
                for typed in (True, False):
                    t = 100 if 100 in timeouts else timeouts[0]
                    kind = "typed" if typed else "untyped"
                    ratio = rate(p, t, typed, exchange) / rate(p, t, typed, other)
                    summary[f"{exchange}_over_{other}_p{p}_{kind}_{t}ms"] = ratio
                    echo(f"p={p} {kind} at {t} ms: {exchange} is {ratio:.2f}x {other}")
    if memory:
        small, large = peak_rss_mb(records // 10), peak_rss_mb(records)
        summary["peak_rss_mb"] = {str(records // 10): small, str(records): large}
        echo(
            f"peak RSS: {small:.0f} MB at {records // 10:,} records, {large:.0f} MB at {records:,} records "
            f"(network memory configured: 64 MB per TaskManager)"
        )
    return {
        "benchmark": "network",
        "parameters": {
            "records": records,
            "parallelisms": parallelisms,
            "timeouts_ms": timeouts,
            "exchanges": exchanges,
            "rounds": rounds,
        },
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

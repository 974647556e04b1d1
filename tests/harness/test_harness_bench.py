"""Micro-benchmarks the harness adds to ``make bench-micro``: buffer pool request/recycle and
latency recording, each next to its plain reference in the same run.

``make bench-micro`` runs these with the micro-benchmarks under tests/bench (key-group
hashing, serializers, state backends, the network emit→gate path) and saves pytest-benchmark
JSON under results/micro/ for comparison between revisions
(``.venv/bin/pytest-benchmark compare results/micro/A.json results/micro/B.json``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from weir.harness.latency import LatencyHistogram
from weir.network.buffer_pool import NetworkBufferPool

pytestmark = pytest.mark.bench

SEGMENT = 32 * 1024
ROUNDS = 10_000
LATENCIES = np.random.default_rng(3).integers(50, 20_000, size=4096)
_RATES: dict[str, float] = {}


def _report(benchmark: Any, capsys: pytest.CaptureFixture[str], name: str, items: int, unit: str) -> None:
    if benchmark.stats is None:
        return
    rate = items / benchmark.stats.stats.median
    _RATES[name] = rate
    with capsys.disabled():
        print(f"\n{name}: {rate:,.0f} {unit}/s")
        pairs = (("record batch", "record per value"), ("pool request+recycle", "bytearray alloc"))
        for fast, slow in pairs:
            if name in (fast, slow) and {fast, slow} <= _RATES.keys():
                print(f"{fast} / {slow}: {_RATES[fast] / _RATES[slow]:.1f}x")


def _pool_cycle(pool: Any) -> None:
    for _ in range(ROUNDS):
        pool.recycle_segment(pool.request_segment_nowait())


def _alloc_cycle() -> None:
    for _ in range(ROUNDS):
        bytearray(SEGMENT)


def test_buffer_pool_request_and_recycle(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    network = NetworkBufferPool(64 * SEGMENT, SEGMENT)
    pool = network.create_buffer_pool(2, 10)
    benchmark(_pool_cycle, pool)
    assert pool.used == 0
    _report(benchmark, capsys, "pool request+recycle", ROUNDS, "segments")


def test_allocating_a_fresh_segment_instead(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    benchmark(_alloc_cycle)
    _report(benchmark, capsys, "bytearray alloc", ROUNDS, "segments")


def test_latency_record_batch(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    h = LatencyHistogram()
    benchmark(h.record_array, LATENCIES)
    assert h.total_count % len(LATENCIES) == 0
    _report(benchmark, capsys, "record batch", len(LATENCIES), "values")


def test_latency_record_per_value(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    h = LatencyHistogram()
    values = LATENCIES.tolist()
    benchmark(h.record_reference, values)
    _report(benchmark, capsys, "record per value", len(values), "values")

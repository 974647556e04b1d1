"""Records/s of whole jobs through a key_by shuffle (pytest-benchmark). Not part of `make test`."""

from __future__ import annotations

import time

import pytest

from weir.harness.network_bench import build_job, python_loop

pytestmark = pytest.mark.bench

RECORDS = 1_000_000


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "untyped"])
@pytest.mark.parametrize("buffer_timeout_ms", [0, 1, 10, 100])
@pytest.mark.parametrize("parallelism", [1, 2])
def test_key_by_shuffle(benchmark, parallelism: int, buffer_timeout_ms: int, typed: bool) -> None:  # type: ignore[no-untyped-def]
    def run() -> None:
        build_job(RECORDS, parallelism, buffer_timeout_ms, typed).execute("bench")

    benchmark.extra_info.update(
        records=RECORDS, parallelism=parallelism, buffer_timeout_ms=buffer_timeout_ms, typed=typed
    )
    benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        median = stats.stats.median
    else:  # --benchmark-disable: time one run here
        started = time.perf_counter()
        run()
        median = time.perf_counter() - started
    rate = RECORDS / median
    loop = python_loop(RECORDS, parallelism)
    benchmark.extra_info.update(records_per_s=rate, python_loop_records_per_s=loop)
    print(
        f"\n{RECORDS:,} records p={parallelism} timeout={buffer_timeout_ms} ms typed={typed}: "
        f"{rate:,.0f} records/s (wall, with cluster start-up); plain-Python loop {loop:,.0f} records/s"
    )

"""weir's output equals Spark's expected answer, for every query the harness runs, at
parallelism 1 and 2. Runs under MockClock (throughput mode: no waiting on the wall clock)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio.testing

from weir.common import Types
from weir.harness import queries
from weir.harness.runner import DataSet, Run, RunConfig, compare_with_expected
from weir.workloads import nexmark


async def _check(directory: Path, config: RunConfig, rate: float | None = None) -> None:
    ds = DataSet(directory)
    run = Run(ds, config, rate=rate, collect=True)
    await run.execute_async()
    result = run.summarise()
    verdict = compare_with_expected(ds, config.query, result.rows)
    assert verdict["rows_expected"] > 0
    repeated = sorted(row for row, n in Counter(result.rows).items() if n > 1)
    if not verdict["matches"]:
        print("restarts:", *run.restart_log, sep="\n")
    assert verdict["matches"], (verdict, run.restart_log, f"repeated rows {repeated[:10]}")
    if config.checkpointing != "off":
        assert result.checkpoints_completed > 0
    assert result.host is not None  # every run probes the host, open loop or not


@pytest.mark.parametrize("query", ["keyed-window", "keyed-window-columnar"])
@pytest.mark.parametrize("parallelism", [1, 2])
async def test_the_reference_window_job_matches_spark(
    keyed_uniform: Path, parallelism: int, query: str
) -> None:
    """The shape of Flink's MyJob example with aligned checkpoints on LMDB, replayed for ~1 s of
    real time; written per record and with weir.columnar."""
    config = RunConfig(query, parallelism, checkpointing="aligned", backend="lmdb",
                       checkpoint_interval_ms=200)  # fmt: skip
    # one untimed run first, as fast as it goes: numba loads (or, on a fresh checkout, compiles)
    # the query's kernels there, not in the second of real time the checkpoints must fall in
    await Run(DataSet(keyed_uniform), RunConfig(query, parallelism)).execute_async()
    await _check(keyed_uniform, config, rate=20_000.0)  # checkpoints happen while it runs


@pytest.mark.parametrize("query", ["keyed-shuffle", "keyed-shuffle-columnar"])
async def test_the_keyed_shuffle_matches_spark(
    keyed_uniform: Path, autojump_clock: trio.testing.MockClock, query: str
) -> None:
    await _check(keyed_uniform, RunConfig(query, 2))


@pytest.mark.slow
@pytest.mark.parametrize("query", ["keyed-window", "keyed-shuffle"])
@pytest.mark.parametrize("parallelism", [1, 2])
async def test_keyed_queries_on_zipf_keys_match_spark(
    keyed_zipf: Path, query: str, parallelism: int, autojump_clock: trio.testing.MockClock
) -> None:
    await _check(keyed_zipf, RunConfig(query, parallelism))


@pytest.mark.slow
@pytest.mark.parametrize("query", nexmark.QUERIES)
@pytest.mark.parametrize("parallelism", [1, 2])
async def test_nexmark_queries_match_spark(
    nexmark_small: Path, query: str, parallelism: int, autojump_clock: trio.testing.MockClock
) -> None:
    await _check(nexmark_small, RunConfig(query, parallelism))


@pytest.mark.slow
async def test_a_mismatch_is_reported_not_hidden(keyed_uniform: Path) -> None:
    ds = DataSet(keyed_uniform)
    run = Run(ds, RunConfig("keyed-window", 1), collect=True)
    await run.execute_async()
    rows = run.summarise().rows
    verdict = compare_with_expected(ds, "keyed-window", [*rows[1:], ("ghost", 0, 1, 1)])
    assert not verdict["matches"] and verdict["missing"] == 1 and verdict["unexpected"] == 1


FAIL_ONCE = {"armed": False, "seen": 0}


def _fail_once_at(n: int) -> Any:
    def map_or_fail(e: tuple[Any, ...]) -> tuple[Any, ...]:
        FAIL_ONCE["seen"] += 1
        if FAIL_ONCE["armed"] and FAIL_ONCE["seen"] >= n:
            FAIL_ONCE["armed"] = False
            raise RuntimeError(f"injected failure at record {n}")
        return e

    return map_or_fail


@pytest.mark.parametrize("query", ["keyed-window", "keyed-window-columnar"])
async def test_after_a_failover_the_output_is_still_exactly_the_answer(
    keyed_uniform: Path, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    """A map fails once, mid-stream: the job restarts from its latest checkpoint, the sink
    drops what it had not committed, and the output is still exactly Spark's answer (written
    per record and with weir.columnar)."""
    base = queries.get_query(query)
    fail = _fail_once_at(12_000)

    def build(streams: list[Any], params: dict[str, Any]) -> Any:
        events = streams[0].map(
            fail, output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()])
        )
        return base.build([events], params)

    monkeypatch.setitem(
        queries.QUERIES,
        "keyed-window-failing",
        dataclasses.replace(base, name="keyed-window-failing", build=build),
    )
    FAIL_ONCE.update(armed=True, seen=0)
    ds = DataSet(keyed_uniform)
    config = RunConfig(
        "keyed-window-failing", 2, checkpointing="aligned", backend="lmdb", checkpoint_interval_ms=100
    )
    run = Run(ds, config, rate=20_000.0, collect=True)
    await run.execute_async()
    result = run.summarise()
    assert not FAIL_ONCE["armed"] and result.restarts == 1
    assert result.records_emitted > 20_000  # the sources rewound and replayed
    verdict = compare_with_expected(ds, "keyed-window", result.rows)
    assert verdict["matches"], verdict

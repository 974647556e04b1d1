"""Open-loop replay under Trio's MockClock: bounded latency below capacity, visible overload above it.

Processing is free under MockClock, so below capacity a record waits only for its
buffer's flush: latency is at most the buffer timeout. A map that advances the clock per
record gives the job a known capacity; offered twice that, the run must be marked not
sustained and its latency must grow over the run (the source never slows down to hide it).
The runs have no ``seconds``: each replays its data set once (runs of given seconds lap,
tests/harness/test_harness_laps.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from weir.common import Types
from weir.harness import queries
from weir.harness.queries import Query, TableInput
from weir.harness.report import markdown
from weir.harness.runner import DataSet, Run, RunConfig
from weir.workloads.testing import keyed_rows_dataset

EVENTS = 600
RATE = 1000.0  # records/s offered: 0.6 s of replay
OVERLOAD_EVENTS = 4000


def _keyed(directory: Path, events: int) -> Path:
    rows = [(f"k{i % 7}", i % 10, i) for i in range(events)]  # 1 event per ms of event time
    return keyed_rows_dataset(directory, rows, event_rate=1000)


@pytest.fixture
def keyed_dir(tmp_path: Path) -> Path:
    return _keyed(tmp_path / "keyed", EVENTS)


@pytest.mark.parametrize(("timeout_ms", "batch_wait_ms"), [(1, 0.0), (20, 1.0)])
async def test_below_capacity_latency_is_bounded_by_the_buffer_timeout(
    keyed_dir: Path, timeout_ms: int, batch_wait_ms: float, autojump_clock: trio.testing.MockClock
) -> None:
    config = RunConfig("keyed-shuffle", parallelism=2, buffer_timeout_ms=timeout_ms)
    run = Run(DataSet(keyed_dir), config, rate=RATE, seconds=None, warmup_s=0.2, batch_wait_ms=batch_wait_ms)
    await run.execute_async()
    result = run.summarise()
    assert result.records_out == EVENTS
    assert result.sustained is True
    assert result.throughput == pytest.approx(RATE, rel=0.05)
    p = result.latency.percentiles_us()
    bound_us = (timeout_ms + batch_wait_ms) * 1000  # the flusher's wait, plus the source's batching wait
    assert p["max"] <= bound_us * 1.002 + 1  # HdrHistogram keeps 3 digits
    if timeout_ms >= 10:
        assert p["p50"] > 0  # records do wait for the flusher: the measurement is not blind
    assert result.max_source_behind_ms <= batch_wait_ms + 0.001
    # the host was probed in the job's thread while it ran (real time: the loop is real work)
    assert result.host is not None and result.host["loop_us"] > 0
    assert result.to_json()["host"] == result.host


def _slow_query(cost_s: float) -> Query:
    def build(streams: list, params: dict) -> object:
        def costly(e: tuple) -> tuple:
            trio.lowlevel.current_clock().jump(cost_s)  # type: ignore[attr-defined]
            return e

        return (
            streams[0]
            .map(costly, output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()]))
            .key_by(lambda e: e[0], key_type=Types.STRING())
            .map(
                lambda e: e,
                output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()]),
            )
        )

    return Query("slow-map", "keyed", (TableInput("events", ("key", "value", "event_time"), "event_time"),),
                 build, True, "a map costing 1 ms of (mock) time per record")  # fmt: skip


async def test_above_capacity_the_run_is_not_sustained_and_latency_grows(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    keyed_dir = _keyed(tmp_path / "keyed", OVERLOAD_EVENTS)
    monkeypatch.setitem(queries.QUERIES, "slow-map", _slow_query(0.001))  # capacity: 1000 records/s
    run = Run(DataSet(keyed_dir), RunConfig("slow-map", parallelism=1, buffer_timeout_ms=5),
              rate=2 * 1000.0, seconds=None, warmup_s=0.2)  # fmt: skip
    await run.execute_async()
    result = run.summarise()
    assert result.records_out == OVERLOAD_EVENTS
    assert result.sustained is False
    assert result.throughput < 0.6 * 2000
    trend = [point["mean_ms"] for point in result.trend]
    assert len(trend) >= 4
    # The backlog shows up as latency: the last records were due when half the events had been
    # processed, so they wait for the other half (4 s of work for 2 s of offered events). The
    # curve in between grows in steps whose timing depends on Trio's randomised scheduling: a
    # source that is behind emits everything due as one batch, and its records arrive together.
    backlog_us = (OVERLOAD_EVENTS / 1000.0 - OVERLOAD_EVENTS / 2000.0) * 1e6
    latency = result.latency.percentiles_us()
    assert latency["max"] >= 0.9 * backlog_us and trend[-1] > 1000, (latency, trend)
    assert latency["p99"] > 1_000_000

    report = {
        "suite": "test", "correctness": [],
        "configurations": [{
            "key": result.config.key, "group": result.config.group, "config": result.config.to_json(),
            "dataset": "keyed", "record_level": True, "max_throughput": 1000.0,
            "runs": [{**result.to_json(), "fraction": None}, {**result.to_json(), "fraction": 2.0}],
        }],
    }  # fmt: skip
    text = markdown(report)
    assert "| **no** |" in text and "Runs that could not keep up" in text


async def test_a_run_awaited_on_a_longer_lived_loop_stops_probing_the_host_when_it_ends(
    keyed_dir: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = RunConfig("keyed-shuffle", parallelism=2, buffer_timeout_ms=1)
    first = Run(DataSet(keyed_dir), config, rate=RATE, seconds=None, warmup_s=0.2)
    await first.execute_async()
    probe = first.run.host_probe
    assert probe is not None and probe.samples
    kept = list(probe.samples)
    second = Run(DataSet(keyed_dir), config, rate=RATE, seconds=None, warmup_s=0.2)
    await second.execute_async()
    assert second.run.host_probe is not None and second.run.host_probe.samples
    assert probe.samples == kept  # the first run's probe took no loop during the second run

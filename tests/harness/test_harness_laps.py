"""Runs longer than their data set: the replay laps, so a run measures for its configured
seconds however fast the machine eats the data set; a run that measured nothing says so.

A machine twice as fast as the one a suite was sized on is simulated by a data set far
smaller than the run: under MockClock, a map that advances the clock per record gives the
job a known capacity.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from weir.common import Types
from weir.errors import UsageError
from weir.harness import queries
from weir.harness.queries import Query, TableInput
from weir.harness.replay import ReplayRun, ReplaySource
from weir.harness.runner import DataSet, Run, RunConfig
from weir.workloads.testing import keyed_rows_dataset


async def test_an_open_loop_replay_laps_with_its_schedule_and_event_times_moved_on(
    drain: Any, keyed_dir: Path, autojump_clock: trio.testing.MockClock
) -> None:
    run = ReplayRun(
        schedule_rate=1000.0, schedule_limit=2500, lap_schedule_units=1000, lap_event_time_ms=10_000
    )
    source = ReplaySource(keyed_dir, "events", ["value", "event_time"], run, event_time_column="event_time")
    rows = await drain(source.create_reader(0, 1))
    assert [r[0] for r in rows] == [i % 1000 for i in range(2500)]  # the data set, two and a half times
    assert [r[1] for r in rows] == [10 * i for i in range(2500)]  # event time goes on, never back
    assert [r[2] for r in rows] == [
        run.anchor_ns + i * 1_000_000 for i in range(2500)
    ]  # so does the schedule


async def test_a_restored_reader_resumes_inside_its_lap(
    drain: Any, keyed_dir: Path, autojump_clock: trio.testing.MockClock
) -> None:
    def source() -> ReplaySource:
        run = ReplayRun(
            schedule_rate=1000.0, schedule_limit=3000, lap_schedule_units=1000, lap_event_time_ms=10_000
        )
        return ReplaySource(keyed_dir, "events", ["value", "event_time"], run, event_time_column="event_time")

    first = source().create_reader(1, 2)
    head = await drain(first, limit=1200)  # into the third lap
    again = source().create_reader(1, 2)
    again.restore(first.position())
    tail = await drain(again)
    assert [(r[0], r[1]) for r in head + tail] == [(i % 1000, 10 * i) for i in range(1, 3000, 2)]


async def test_a_throughput_replay_laps_until_its_duration_and_not_when_a_lap_takes_no_time(
    drain: Any, keyed_dir: Path, autojump_clock: trio.testing.MockClock
) -> None:
    run = ReplayRun(max_duration_s=1.0, lap_schedule_units=1000, lap_event_time_ms=10_000)
    reader = ReplaySource(keyed_dir, "events", ["value"], run, batch_size=100).create_reader(0, 1)
    emitted = 0
    while (batch := await reader.next_batch()) is not None:
        emitted += len(batch)
        await trio.sleep(0.0005)  # the job takes 100 rows per 0.5 ms
    assert 199_900 <= emitted <= 200_100  # 1 s of it, about 200 laps (the clock adds up floats)
    # a job that costs no time would lap forever without filling a second: one lap, then the end
    free = ReplayRun(max_duration_s=1.0, lap_schedule_units=1000, lap_event_time_ms=10_000)
    assert len(await drain(ReplaySource(keyed_dir, "events", ["value"], free).create_reader(0, 1))) == 1000


def test_laps_and_their_event_time_column_are_checked(keyed_dir: Path) -> None:
    with pytest.raises(UsageError, match="at least one schedule unit"):
        ReplayRun(lap_schedule_units=0)
    with pytest.raises(UsageError, match="backwards"):
        ReplayRun(lap_event_time_ms=-1)
    with pytest.raises(UsageError, match="event time column 'key' must be one of the replayed integer"):
        ReplaySource(keyed_dir, "events", ["key", "value"], ReplayRun(), event_time_column="key")
    assert DataSet(keyed_dir).lap_event_time_ms == 10_000  # 1,000 events at 100 per second


def _costly_query(cost_s: float) -> Query:
    """keyed-shuffle with a map that costs ``cost_s`` of (mock) time per record."""

    def build(streams: list, params: dict) -> object:
        def costly(e: tuple) -> tuple:
            trio.lowlevel.current_clock().jump(cost_s)  # type: ignore[attr-defined]
            return e

        row = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()])
        return streams[0].map(costly, output_type=row).key_by(lambda e: e[0], key_type=Types.STRING())

    return Query("costly-map", "keyed", (TableInput("events", ("key", "value", "event_time"), "event_time"),),
                 build, True, "a map costing (mock) time per record")  # fmt: skip


async def test_a_max_throughput_run_over_a_small_data_set_measures_for_its_seconds(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 50 events take the job 50 ms: the data set is gone long before the 0.2 s warm-up ends
    directory = keyed_rows_dataset(tmp_path / "small", [(f"k{i % 3}", i, i) for i in range(50)])
    monkeypatch.setitem(queries.QUERIES, "costly-map", _costly_query(0.001))  # capacity 1,000 records/s
    run = Run(DataSet(directory), RunConfig("costly-map", parallelism=1, buffer_timeout_ms=1),
              seconds=1.0, warmup_s=0.2)  # fmt: skip
    await run.execute_async()
    result = run.summarise()
    assert result.error is None
    assert result.records_emitted >= 950  # the data set, lapped for the whole second
    assert result.throughput == pytest.approx(1000.0, rel=0.05)
    assert result.seconds == pytest.approx(0.8, abs=0.05)
    assert result.latency.total_count > 0


async def test_an_open_loop_run_longer_than_its_data_set_keeps_its_rate(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    directory = keyed_rows_dataset(tmp_path / "small", [(f"k{i % 3}", i, i) for i in range(200)])
    run = Run(DataSet(directory), RunConfig("keyed-shuffle", parallelism=2, buffer_timeout_ms=1),
              rate=1000.0, seconds=1.0, warmup_s=0.2)  # fmt: skip
    await run.execute_async()
    result = run.summarise()
    assert result.error is None
    assert result.records_out == 1001  # 1 s at 1,000 records/s from a data set of 200
    assert result.sustained is True
    assert result.throughput == pytest.approx(1000.0, rel=0.05)
    assert (
        result.latency.percentiles_us()["max"] <= 4_000 * 1.002 + 1
    )  # the 1 ms timeout, the 3 ms batch grid


async def test_a_run_that_measured_nothing_has_an_error_instead_of_figures(
    keyed_dir: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # a job that costs no time under MockClock: every record is emitted at once, in the warm-up
    run = Run(DataSet(keyed_dir), RunConfig("keyed-shuffle", parallelism=2), seconds=1.0, warmup_s=0.2)
    await run.execute_async()
    result = run.summarise()
    assert result.records_emitted == 1000 and result.records_after_warmup == 0
    assert result.error is not None and "measured nothing" in result.error and "0.2 s warm-up" in result.error
    assert result.to_json()["error"] == result.error


def _costly_after_shuffle(cost_s: float) -> Query:
    """keyed-shuffle whose keyed map costs ``cost_s`` of (mock) time per record."""

    def build(streams: list, params: dict) -> object:
        def costly(e: tuple) -> tuple:
            trio.lowlevel.current_clock().jump(cost_s)  # type: ignore[attr-defined]
            return e

        row = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()])
        return streams[0].key_by(lambda e: e[0], key_type=Types.STRING()).map(costly, output_type=row)

    return Query("costly-keyed-map", "keyed", (TableInput("events", ("key", "value", "event_time"), "event_time"),),
                 build, True, "a keyed map costing (mock) time per record")  # fmt: skip


async def test_under_overload_a_run_is_credited_with_what_the_job_took_while_measured(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # offered 125% of its capacity, the job takes records at its capacity throughout; the
    # backlog it carries out of the warm-up is work done in the measured time
    directory = keyed_rows_dataset(tmp_path / "small", [(f"k{i % 3}", i, i) for i in range(500)])
    monkeypatch.setitem(queries.QUERIES, "costly-keyed-map", _costly_after_shuffle(0.001))
    run = Run(DataSet(directory), RunConfig("costly-keyed-map", parallelism=1, buffer_timeout_ms=1),
              rate=1250.0, seconds=2.0, warmup_s=0.5)  # fmt: skip
    await run.execute_async()
    result = run.summarise()
    assert result.error is None and result.sustained is False
    assert result.records_out == 2501
    # counting only the records due after the warm-up, over the same time, credits it 94%
    # (records in flight between the tasks when the warm-up ends are not counted: ~3%)
    assert 950 <= result.throughput <= 1010

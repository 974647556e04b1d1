"""The replay source: interleaved splits, schedule, and rewinding to a checkpointed position."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio
import trio.testing

from weir.errors import UsageError
from weir.harness import replay
from weir.harness.queries import get_query
from weir.harness.replay import ReplayRun, ReplaySource
from weir.harness.runner import DataSet, RunConfig, schedule_for


async def test_subtasks_interleave_and_together_replay_every_row_once(
    keyed_rows: list[Any], drain: Any, keyed_dir: Path
) -> None:
    run = ReplayRun()
    source = ReplaySource(keyed_dir, "events", ["key", "value", "event_time"], run, batch_size=64)
    parts = [await drain(source.create_reader(s, 3)) for s in range(3)]
    for s, part in enumerate(parts):
        assert [r[1] for r in part] == list(range(s, 1000, 3))  # value == row number
    assert sorted(r[:3] for part in parts for r in part) == sorted(keyed_rows)
    assert run.emitted == 1000


async def test_a_restored_reader_continues_exactly_where_the_position_was(
    drain: Any, keyed_dir: Path
) -> None:
    source = ReplaySource(keyed_dir, "events", ["key", "value", "event_time"], ReplayRun(), batch_size=50)
    first = source.create_reader(1, 2)
    head = await drain(first, limit=200)
    position = first.position()
    assert position == {"rows": len(head)}
    again = source.create_reader(1, 2)
    again.restore(position)
    tail = await drain(again)
    assert [r[1] for r in head + tail] == list(range(1, 1000, 2))
    with pytest.raises(UsageError, match="non-negative"):
        again.restore({"rows": -1})


async def test_open_loop_emits_on_schedule_and_stamps_intended_times(
    drain: Any, keyed_dir: Path, autojump_clock: trio.testing.MockClock
) -> None:
    run = ReplayRun(schedule_rate=500.0, schedule_limit=100)  # 500 rows/s, first 100 rows
    reader = ReplaySource(keyed_dir, "events", ["value"], run).create_reader(0, 1)
    start = trio.current_time()
    rows = await drain(reader)
    assert [r[0] for r in rows] == list(range(100))
    intended = [r[-1] for r in rows]
    assert intended == [run.anchor_ns + i * 2_000_000 for i in range(100)]  # 2 ms apart
    assert trio.current_time() - start == pytest.approx(99 / 500)
    assert run.max_behind_ns == 0


async def test_intended_times_hold_across_chunks_and_pieces(
    keyed_rows: list[Any],
    drain: Any,
    keyed_dir: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # chunks of 37 rows converted 5 at a time: every boundary is crossed many times
    monkeypatch.setattr(replay, "CHUNK_ROWS", 37)
    monkeypatch.setattr(replay, "PIECE_ROWS", 5)
    run = ReplayRun(schedule_rate=500.0, schedule_limit=300)
    readers = [ReplaySource(keyed_dir, "events", ["value"], run).create_reader(s, 2) for s in range(2)]
    parts = [await drain(reader) for reader in readers]
    for s, rows in enumerate(parts):
        assert [r[0] for r in rows] == list(range(s, 300, 2))
        assert [r[-1] for r in rows] == [run.anchor_ns + i * 2_000_000 for i in range(s, 300, 2)]


def test_a_chunk_converts_its_intended_times_a_piece_at_a_time(
    keyed_rows: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "PIECE_ROWS", 10)
    chunk = replay._Chunk(None, np.arange(25, dtype=np.int64) * 3)
    times = chunk.intended_ns(1_000, 2.0, 1)
    assert times == [1_000 + 6 * i for i in range(10)]  # one piece, not the chunk
    assert chunk.intended_ns(1_000, 2.0, 12) == [1_000 + 6 * i for i in range(20)]
    assert chunk.intended_ns(1_000, 2.0, 25) == [1_000 + 6 * i for i in range(25)]
    assert chunk.intended_ns(1_000, 2.0, 3) is times  # the same list, grown in place


async def test_a_reader_that_fell_behind_catches_up_in_open_loop_batches(
    keyed_dir: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # 1 row per ms; never in full batches (below)
    run = ReplayRun(schedule_rate=1000.0, open_loop_batch_rows=30, catch_up_behind_ns=None)
    reader = ReplaySource(keyed_dir, "events", ["value"], run).create_reader(0, 1)
    first = await reader.next_batch()
    assert first is not None and len(first) == 1
    await trio.sleep(0.1)  # a stall: 100 rows are due
    sizes = []
    while sum(sizes) < 100:
        batch = await reader.next_batch()
        assert batch is not None
        sizes.append(len(batch))
    assert sizes[:4] == [30, 30, 30, 10]  # everything due, at most 30 rows at a time
    assert run.max_behind_ns >= 99_000_000
    with pytest.raises(UsageError, match="at least one row"):
        ReplayRun(open_loop_batch_rows=0)


async def test_a_reader_far_behind_catches_up_in_the_sources_full_batches(
    keyed_dir: Path, autojump_clock: trio.testing.MockClock
) -> None:
    run = ReplayRun(schedule_rate=1000.0, open_loop_batch_rows=30, catch_up_behind_ns=50_000_000)
    reader = ReplaySource(keyed_dir, "events", ["value"], run, batch_size=64).create_reader(0, 1)
    first = await reader.next_batch()
    assert first is not None and len(first) == 1
    await trio.sleep(0.1)  # a stall: rows 1..100 are due, the first of them 99 ms ago
    sizes = []
    while sum(sizes) < 100:
        batch = await reader.next_batch()
        assert batch is not None
        sizes.append(len(batch))
    # a full batch while more than 50 ms behind, then open-loop batches again
    assert sizes[:3] == [64, 30, 6]


@pytest.mark.parametrize(("query", "rows"), [("keyed-shuffle", 1_024), ("keyed-shuffle-columnar", 4_096)])
def test_a_columnar_query_replays_open_loop_in_the_sources_whole_batches(
    keyed_dir: Path, query: str, rows: int
) -> None:
    """Open-loop batches of a per-record query stop at ``OPEN_LOOP_BATCH_ROWS``; a columnar
    query's rows cost the thread a tenth as much and take the source's batch size."""
    from weir.harness.runner import Run, RunConfig

    run = Run(DataSet(keyed_dir), RunConfig(query, parallelism=1, buffer_timeout_ms=1), 1000.0, 1.0)
    assert run.run.open_loop_batch_rows == rows


def test_rates_are_records_per_second_of_the_replayed_tables(keyed_dir: Path) -> None:
    ds = DataSet(keyed_dir)
    rate, limit = schedule_for(ds, get_query("keyed-window"), 250.0, 2.0)
    assert rate == 250.0 and limit == 501
    assert schedule_for(ds, get_query("keyed-window"), None, 2.0) == (None, None)


def test_bad_sources_and_configurations_get_clear_errors(keyed_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no column"):
        ReplaySource(keyed_dir, "events", ["nope"], ReplayRun())
    with pytest.raises(UsageError, match="no table 'bids'"):
        ReplaySource(keyed_dir, "bids", ["auction"], ReplayRun())
    with pytest.raises(UsageError, match="not a weir data set"):
        DataSet(tmp_path)
    with pytest.raises(UsageError, match="rate must be positive"):
        ReplayRun(schedule_rate=0)
    with pytest.raises(UsageError, match="unknown query"):
        RunConfig("q99")
    with pytest.raises(UsageError, match="checkpointing must be one of"):
        RunConfig("q1", checkpointing="sometimes")


def test_a_batch_point_is_the_first_multiple_of_the_period_at_or_after_the_due_time() -> None:
    run = ReplayRun(schedule_rate=1.0, batch_wait_ns=3_000_000)
    assert [run.batch_point(t) for t in (0, 1, 2_999_999, 3_000_000, 3_000_001)] == [
        0, 3_000_000, 3_000_000, 3_000_000, 6_000_000,
    ]  # fmt: skip
    assert ReplayRun(schedule_rate=1.0).batch_point(1_234) == 1_234  # no period: when due


async def test_open_loop_readers_of_a_run_emit_their_batches_on_the_same_points(
    keyed_dir: Path, autojump_clock: trio.testing.MockClock
) -> None:
    period_ns = 3_000_000
    autojump_clock.jump(0.0123)  # the points are multiples on the clock, not from the anchor
    run = ReplayRun(schedule_rate=1000.0, schedule_limit=200, batch_wait_ns=period_ns)  # a row per ms
    source = ReplaySource(keyed_dir, "events", ["value"], run)
    emitted: dict[int, list[tuple[int, list[int]]]] = {0: [], 1: []}

    async def replay_subtask(subtask: int) -> None:
        reader = source.create_reader(subtask, 2)
        while (batch := await reader.next_batch()) is not None:
            emitted[subtask].append((replay.now_ns(), [r[-1] for r in batch.as_list()]))

    async with trio.open_nursery() as nursery:
        for subtask in (0, 1):
            nursery.start_soon(replay_subtask, subtask)
    # a reader's last batch leaves when its last row is due: no later row can join it
    points = [{round(t / period_ns) for t, _ in emitted[s][:-1]} for s in (0, 1)]
    for s in (0, 1):
        assert sum(len(rows) for _, rows in emitted[s]) == 100
        for t, _ in emitted[s][:-1]:
            assert abs(t - round(t / period_ns) * period_ns) < 1_000  # on a point
        for t, intended in emitted[s]:
            assert all(0 <= t - i <= period_ns for i in intended)  # no row waited past the period
    assert len(points[0]) >= 60 and points[0] == points[1]  # both readers, the same points
    assert run.max_behind_ns <= period_ns

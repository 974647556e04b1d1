"""Tables preloaded before a run: the same rows as reading Parquet, and nothing read during it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import trio
import trio.testing

from weir.harness import replay
from weir.harness.replay import ReplayReader, ReplayRun, ReplaySource, SplitCache
from weir.harness.runner import DataSet, Run, RunConfig
from weir.workloads.testing import keyed_rows_dataset

ROWS = [(f"k{i % 7}", i, 10 * i) for i in range(900)]
COLUMNS = ["key", "value", "event_time"]


@pytest.fixture
def keyed_dir(tmp_path: Path) -> Path:
    return keyed_rows_dataset(tmp_path / "keyed", ROWS, event_rate=100)


@pytest.fixture
def splits(monkeypatch: pytest.MonkeyPatch) -> SplitCache:
    """A cache of this test's own, in place of the process-wide one."""
    cache = SplitCache()
    monkeypatch.setattr(replay, "SPLITS", cache)
    return cache


async def _drain(reader: ReplayReader) -> list[Any]:
    out: list[Any] = []
    while (batch := await reader.next_batch()) is not None:
        out.extend(batch.as_list())
    return out


async def _replay(source: ReplaySource, parallelism: int, restore_rows: int = 0) -> list[list[Any]]:
    parts = []
    for s in range(parallelism):
        reader = source.create_reader(s, parallelism)
        if restore_rows:
            reader.restore({"rows": restore_rows})
        parts.append(await _drain(reader))
    return parts


@pytest.mark.parametrize("parallelism", [1, 2, 3])
async def test_a_preloaded_table_replays_the_rows_reading_parquet_replays(
    keyed_dir: Path, splits: SplitCache, monkeypatch: pytest.MonkeyPatch, parallelism: int
) -> None:
    monkeypatch.setattr(replay, "CHUNK_ROWS", 64)  # many chunks, and a last one cut short
    streamed = await _replay(
        ReplaySource(keyed_dir, "events", COLUMNS, ReplayRun(), batch_size=50), parallelism
    )
    assert len(splits) == 0
    source = ReplaySource(keyed_dir, "events", COLUMNS, ReplayRun(), batch_size=50)
    assert source.preload(parallelism)
    assert len(splits) == 1 and splits.size_bytes > 0
    preloaded = await _replay(source, parallelism)
    # the columns, in order, per subtask (the last field is the emission time: throughput mode)
    assert [[r[:3] for r in part] for part in preloaded] == [[r[:3] for r in part] for part in streamed]
    assert sorted(r[:3] for part in streamed for r in part) == sorted(ROWS)


async def test_a_restored_reader_of_a_preloaded_table_skips_exactly_its_position(
    keyed_dir: Path, splits: SplitCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "CHUNK_ROWS", 64)
    source = ReplaySource(keyed_dir, "events", COLUMNS, ReplayRun(), batch_size=40)
    assert source.preload(2)
    for skip in (0, 1, 31, 32, 33, 200, 449, 450):  # within, at and past the 32-row pieces
        parts = await _replay(source, 2, restore_rows=skip)
        for s, part in enumerate(parts):
            assert [r[1] for r in part] == list(range(s, 900, 2))[skip:]


async def test_an_open_loop_run_over_a_preloaded_table_keeps_its_schedule_and_limit(
    keyed_dir: Path, splits: SplitCache, autojump_clock: trio.testing.MockClock
) -> None:
    run = ReplayRun(schedule_rate=500.0, schedule_limit=301)
    source = ReplaySource(keyed_dir, "events", ["value"], run)
    assert source.preload(2)
    parts = await _replay(source, 2)
    for s, rows in enumerate(parts):
        assert [r[0] for r in rows] == list(range(s, 301, 2))
        assert [r[-1] for r in rows] == [run.anchor_ns + i * 2_000_000 for i in range(s, 301, 2)]


async def test_a_preloaded_reader_starts_no_read_ahead_thread(
    keyed_dir: Path, splits: SplitCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "READ_AHEAD", True)
    threads: list[object] = []
    original = trio.to_thread.run_sync

    async def counting(*args: Any, **kwargs: Any) -> Any:
        threads.append(args[0])
        return await original(*args, **kwargs)

    monkeypatch.setattr(trio.to_thread, "run_sync", counting)
    source = ReplaySource(keyed_dir, "events", COLUMNS, ReplayRun())
    assert len((await _replay(source, 1))[0]) == 900
    assert threads  # reading Parquet: chunks are read ahead in a thread
    threads.clear()
    assert source.preload(1)
    assert len((await _replay(source, 1))[0]) == 900
    assert threads == []


def test_a_table_over_the_budget_is_not_kept_and_its_readers_read_parquet(keyed_dir: Path) -> None:
    cache = SplitCache(max_bytes=100)
    source = ReplaySource(keyed_dir, "events", COLUMNS, ReplayRun())
    assert source.preload(2, cache) is False
    assert len(cache) == 0


def test_a_data_set_written_again_is_not_taken_for_the_one_before(
    keyed_dir: Path, splits: SplitCache
) -> None:
    source = ReplaySource(keyed_dir, "events", COLUMNS, ReplayRun())
    before = source.split_key(2)
    assert source.split_key(2) == before
    assert source.split_key(1) != before  # another split
    path = source.files[0]
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert source.split_key(2) != before


def test_the_cache_keeps_what_fits_and_drops_the_least_recently_used() -> None:
    def table(rows: int) -> list[list[replay.Piece]]:
        return [[(pa.record_batch({"v": list(range(rows))}), np.arange(rows))]]

    cache = SplitCache(max_bytes=1000)
    assert cache.put(("a",), table(1), 400) and cache.put(("b",), table(2), 400)
    assert cache.get(("a",), 0) is not None  # "a" is now more recent than "b"
    assert cache.put(("c",), table(3), 400)  # 1200 bytes: "b" goes
    assert cache.get(("b",), 0) is None
    assert cache.get(("a",), 0) is not None and cache.get(("c",), 0) is not None
    assert cache.size_bytes == 800
    assert cache.put(("huge",), table(4), 1001) is False  # alone over the budget
    assert cache.size_bytes == 800 and cache.get(("huge",), 0) is None
    cache.clear()
    assert len(cache) == 0


async def test_a_run_preloads_its_tables_before_the_job_starts(
    keyed_dir: Path, splits: SplitCache, autojump_clock: trio.testing.MockClock
) -> None:
    run = Run(DataSet(keyed_dir), RunConfig(query="keyed-shuffle", parallelism=2), rate=2000.0, seconds=0.2)
    assert len(splits) == 1  # when the job is built, before it runs
    result = (await run.execute_async()).summarise()
    assert result.records_out == result.records_emitted > 0

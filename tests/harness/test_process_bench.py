"""``weir bench processes --timeouts``: the paced source's schedule, the latency sink's files,
the command's refusals, and (slow) one small run on real TaskManager processes.

The run checks the report's shape and its own arithmetic, never a speed: the figures are
the benchmark's output, not something a test may expect.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio
from click.testing import CliRunner

from weir.cli import main
from weir.errors import UsageError
from weir.harness.process_bench import (
    TIMEOUTS_MS,
    _LatencyToFile,
    _PacedReader,
    _read_latencies,
    format_timeout_report,
    run_timeout_bench,
)
from weir.private_files import private_dir


async def _read_all(reader: _PacedReader) -> list[tuple[Any, ...]]:
    records: list[tuple[Any, ...]] = []
    while (batch := await reader.next_batch()) is not None:
        records.extend(batch.as_list())
    return records


async def test_the_paced_source_stamps_each_record_with_its_place_in_the_schedule(
    autojump_clock: trio.testing.MockClock,
) -> None:
    reader = _PacedReader(keys=7, count=3_000, rate=2_000.0, subtask=1, parallelism=2)  # 1,000/s here
    records: list[tuple[Any, ...]] = []
    while (batch := await reader.next_batch()) is not None:
        rows = batch.as_list()
        assert len(rows) <= 3  # 3 ms of schedule at most
        assert reader.started_at is not None and reader.anchor_ns is not None
        left_ns = (trio.current_time() - reader.started_at) * 1e9
        assert left_ns >= rows[-1][3] - reader.anchor_ns - 1  # no record leaves before its time
        records.extend(rows)
    assert [r[1] for r in records] == list(range(1_500, 3_000))  # subtask 1's half of the indexes
    assert all(r[0] == f"k{r[1] % 7}" for r in records)
    intended = np.array([r[3] for r in records], dtype=np.int64)
    assert set(np.diff(intended).tolist()) == {1_000_000}  # one record per ms of schedule
    assert [r[2] for r in records] == list(range(1_500))  # event time: its ms in the schedule
    assert reader.anchor_ns == intended[0]


async def test_an_unpaced_source_stamps_the_moment_it_made_the_batch() -> None:
    before = time.monotonic_ns()
    records = await _read_all(_PacedReader(keys=3, count=10, rate=None, subtask=0, parallelism=1))
    assert [r[:3] for r in records] == [(f"k{i % 3}", i, 0) for i in range(10)]
    assert before <= records[0][3] == records[-1][3] <= time.monotonic_ns()


class _Context:
    """The one thing the sink asks its runtime context."""

    def __init__(self, subtask: int) -> None:
        self.subtask = subtask

    def get_index_of_this_subtask(self) -> int:
        return self.subtask


def test_the_latency_sink_skips_the_warm_up_and_its_files_merge(tmp_path: Path) -> None:
    directory = private_dir(tmp_path / "latency")
    now = time.monotonic_ns()
    for subtask, count in ((0, 5), (1, 3)):
        sink = _LatencyToFile(str(directory), warmup_ms=500)
        sink.open(_Context(subtask))
        warm = np.full(10, 100, dtype=np.int64)  # in the warm-up: not measured
        sink.invoke_batch((["k"] * 10, np.arange(10), warm, np.full(10, now)), None)
        later = np.full(count - 1, 700, dtype=np.int64)
        sink.invoke_batch((["k"] * (count - 1), np.arange(count - 1), later, np.full(count - 1, now)), None)
        sink.invoke(("k", 1, 900, now), None)  # one record that arrives alone
        sink.close()
        mode = stat.S_IMODE(os.stat(directory / f"latency-{subtask}.hdr").st_mode)
        assert mode == 0o600
    _LatencyToFile(str(directory), warmup_ms=0).close()  # a task that failed before open: no file
    assert sorted(p.name for p in directory.iterdir()) == ["latency-0.hdr", "latency-1.hdr"]
    merged = _read_latencies(directory, 2)
    assert merged.total_count == 5 + 3
    assert merged.value_at(100.0) > 0  # now minus a moment in the past
    with pytest.raises(UsageError, match=r"subtask 2 wrote no histogram .*latency-2\.hdr is missing"):
        _read_latencies(directory, 3)


def test_the_command_refuses_a_job_choice_and_a_run_shorter_than_its_warm_up() -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["bench", "processes", "--timeouts", "--job", "columnar"])
    assert result.exit_code == 2 and "--timeouts runs the keyed-shuffle query" in result.output
    result = runner.invoke(main, ["bench", "processes", "--timeouts", "--seconds", "0.4"])
    assert result.exit_code == 2 and "--seconds" in result.output
    with pytest.raises(UsageError, match=r"longer than its 0.5 s warm-up, got 0.5 s"):
        run_timeout_bench(10_000, 10, 2, seconds=0.5)
    with pytest.raises(UsageError, match=r"fraction of the maximum must be within \(0, 1\], got 1.5"):
        run_timeout_bench(10_000, 10, 2, fraction=1.5)


@pytest.mark.slow
def test_one_small_run_on_taskmanager_processes_reports_both_timeouts() -> None:
    report = run_timeout_bench(events=100_000, keys=100, parallelism=2, seconds=1.0, fraction=0.25)
    assert report["parameters"]["buffer_timeouts_ms"] == list(TIMEOUTS_MS) == [100, 1]
    assert set(report["max_eps"]) == set(report["latency"]) == {"100", "1"}
    assert report["ratio_1ms_to_100ms"] == report["max_eps"]["1"] / report["max_eps"]["100"]
    for timeout, latency in report["latency"].items():
        assert latency["rate_eps"] == 0.25 * report["max_eps"][timeout]
        # every record after the half-second warm-up was measured, in both sink subtasks' files
        scheduled_after_warm_up = latency["events"] * (1.0 - 0.5) / 1.0
        assert abs(latency["records_measured"] - scheduled_after_warm_up) <= 2 * 100
        assert 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["p99.9_ms"] <= latency["max_ms"]
    text = format_timeout_report(report)
    assert "100 ms" in text and "1 ms / 100 ms max throughput" in text

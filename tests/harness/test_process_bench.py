"""``weir bench processes --timeouts``: the paced source's schedule, the latency sink's files,
the command's refusals, and (slow) one small run on real TaskManager processes.

The run checks the report's shape and its own arithmetic, never a speed: the figures are
the benchmark's output, not something a test may expect.
"""

from __future__ import annotations

import json
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
from weir.codec.batch import Batch, TupleColumns
from weir.errors import UsageError
from weir.harness import process_bench as pb
from weir.harness.process_bench import (
    BATCH_WAIT_MS,
    CATCH_UP_BEHIND_MS,
    OPEN_LOOP_BATCH_ROWS,
    TIMEOUTS_MS,
    _LatencyToFile,
    _PacedReader,
    _read_latencies,
    format_timeout_report,
    run_timeout_bench,
)
from weir.operators.base import OperatorContext, Output
from weir.operators.sources import DEFAULT_BATCH_SIZE
from weir.private_files import private_dir, write_private


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


async def test_paced_batches_leave_at_the_shared_batch_points(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Every reader emits at the multiples of BATCH_WAIT_MS on CLOCK_MONOTONIC (which all
    processes share), with every record due by then, so the readers of every process emit
    at the same moments (the last batch of a split leaves when its last record is due)."""
    period_ns = int(BATCH_WAIT_MS * 1e6)
    readers = [_PacedReader(keys=5, count=4_000, rate=20_000.0, subtask=s, parallelism=2) for s in (0, 1)]
    emitted: list[list[tuple[int, list[tuple[Any, ...]]]]] = [[], []]

    async def read(s: int) -> None:
        reader = readers[s]
        while (batch := await reader.next_batch()) is not None:
            assert reader.started_at is not None and reader.anchor_ns is not None
            now_ns = reader.anchor_ns + round((trio.current_time() - reader.started_at) * 1e9)
            emitted[s].append((now_ns, batch.as_list()))

    async with trio.open_nursery() as nursery:
        for s in (0, 1):
            nursery.start_soon(read, s)
    per_record_ns = 1e9 / 10_000
    for batches in emitted:
        for now_ns, rows in batches[:-1]:
            assert abs((now_ns + period_ns // 2) % period_ns - period_ns // 2) <= 1_000  # a batch point
            # every record due by then, and the next one not yet (both within the 1 us that
            # now_ns, rebuilt from Trio's clock, may be off by)
            assert rows[-1][3] <= now_ns + 1_000 and now_ns - 1_000 < rows[-1][3] + per_record_ns
        assert [rows[0][3] for _, rows in batches[1:]] == [
            rows[-1][3] + per_record_ns for _, rows in batches[:-1]
        ]
    points = [[round(now_ns / period_ns) for now_ns, _ in batches[:-1]] for batches in emitted]
    assert points[0] == points[1]  # both readers emit at the same points, one after the other
    assert all(b - a == 1 for a, b in zip(points[0], points[0][1:], strict=False))


async def test_a_reader_far_behind_catches_up_in_full_batches(
    autojump_clock: trio.testing.MockClock,
) -> None:
    reader = _PacedReader(keys=5, count=100_000, rate=100_000.0, subtask=0, parallelism=1)
    assert 0 < len(await reader.next_batch() or []) <= 300  # at most 3 ms of schedule
    await trio.sleep(0.030)  # 30 ms behind: open-loop batches
    assert len(await reader.next_batch() or []) == OPEN_LOOP_BATCH_ROWS
    await trio.sleep(0.080)  # now more than CATCH_UP_BEHIND_MS behind: full batches
    assert CATCH_UP_BEHIND_MS < 80
    assert len(await reader.next_batch() or []) == DEFAULT_BATCH_SIZE


async def test_an_unpaced_source_stamps_the_moment_it_made_the_batch() -> None:
    before = time.monotonic_ns()
    records = await _read_all(_PacedReader(keys=3, count=10, rate=None, subtask=0, parallelism=1))
    assert [r[:3] for r in records] == [(f"k{i % 3}", i, 0) for i in range(10)]
    assert before <= records[0][3] == records[-1][3] <= time.monotonic_ns()


class _NoOutput(Output):
    """A sink emits nothing."""


def _sink_operator(sink: _LatencyToFile, subtask: int) -> Any:
    operator = sink.create_operator("Latency Sink")
    operator.setup(
        OperatorContext(
            task_name="test", operator_name="Latency Sink", operator_id="0" * 32,
            subtask_index=subtask, parallelism=2, max_parallelism=128, attempt_number=0,
            batch_mode=False, processing_time_ms=lambda: 0,
        ),
        _NoOutput(),
    )  # fmt: skip
    operator.open()
    return operator


def test_the_latency_sink_skips_the_warm_up_and_its_files_merge(tmp_path: Path) -> None:
    directory = private_dir(tmp_path / "latency")
    now = time.monotonic_ns()
    for subtask, count in ((0, 5), (1, 3)):
        operator = _sink_operator(_LatencyToFile(str(directory), warmup_ms=500), subtask)
        warm = [("k", i, 100, now) for i in range(10)]  # in the warm-up: not measured
        operator.process_batch(Batch(warm + [("k", i, 700, now) for i in range(count - 1)]))
        columns = TupleColumns((["k"], np.arange(1), np.full(1, 900), np.full(1, now)))
        operator.process_batch(Batch(columns))  # a batch held as columns
        operator.close()
        mode = stat.S_IMODE(os.stat(directory / f"latency-{subtask}.hdr").st_mode)
        assert mode == 0o600
    _LatencyToFile(str(directory), warmup_ms=0).create_operator("x").close()  # failed before open: no file
    assert sorted(p.name for p in directory.iterdir()) == ["latency-0.hdr", "latency-1.hdr"]
    merged = _read_latencies(directory, 2)
    assert merged.total_count == 5 + 3
    assert merged.value_at(100.0) > 0  # now minus a moment in the past
    with pytest.raises(UsageError, match=r"subtask 2 wrote no histogram .*latency-2\.hdr is missing"):
        _read_latencies(directory, 3)


def test_the_latency_sink_reads_the_clock_once_per_batch(tmp_path: Path) -> None:
    """Every record of a batch arrives when the batch reaches the sink, as in the suite's sink."""
    directory = private_dir(tmp_path / "latency")
    operator = _sink_operator(_LatencyToFile(str(directory), warmup_ms=0), 0)
    now = time.monotonic_ns()
    operator.process_batch(Batch([("k", 0, 0, now - 5_000_000), ("k", 1, 0, now - 2_000_000)]))
    (arrival,) = operator._arrivals
    operator.close()
    merged = _read_latencies(directory, 1)
    assert merged.total_count == 2
    assert merged.value_at(0.0) // 1000 == (arrival - now + 2_000_000) // 1_000_000
    assert merged.value_at(100.0) // 1000 == (arrival - now + 5_000_000) // 1_000_000


async def test_the_latency_sink_probes_its_event_loop_from_the_first_measured_record(tmp_path: Path) -> None:
    directory = private_dir(tmp_path / "latency")
    operator = _sink_operator(_LatencyToFile(str(directory), warmup_ms=500, probe_host=True), 0)
    probe = operator.probe
    now = time.monotonic_ns()
    operator.process_batch(Batch([("k", 0, 100, now)]))  # the warm-up: not probed yet
    await trio.sleep(0.005)
    assert probe is not None and probe.started is None and probe.samples == []
    operator.process_batch(Batch([("k", 1, 100, now), ("k", 2, 600, now)]))  # one measured record
    for _ in range(20):  # the loop waits in epoll: the probe times its loop there
        await trio.sleep(0.003)
    sampled = len(probe.samples)
    assert sampled >= 5
    operator.close()
    for _ in range(5):
        await trio.sleep(0.003)
    assert len(probe.samples) == sampled  # closed: the probe left the loop
    assert stat.S_IMODE(os.stat(directory / "host-0.json").st_mode) == 0o600
    (summary,) = pb._read_host(directory, 1)
    assert summary["loop_us"] > 0 and 0 <= summary["slow_share"] <= 1
    assert len(summary["windows_us"].split()) >= 1


def test_a_host_probe_file_is_read_as_numbers_or_refused_by_name(tmp_path: Path) -> None:
    directory = private_dir(tmp_path / "latency")
    with pytest.raises(UsageError, match=r"subtask 0 wrote no host probe .*host-0\.json is missing"):
        pb._read_host(directory, 1)
    good = {
        "seconds": 4.5,
        "loop_us": 7.9,
        "slow_share": 0.05,
        "longest_slow_ms": 40.0,
        "windows_us": "7.9 8.0",
    }
    bad = [
        (b"not json", "is not JSON"),
        (b"[1, 2]", "is not a host probe's summary"),
        (json.dumps({**good, "loop_us": "__import__('os')"}).encode(), "is not a host probe's summary"),
        (json.dumps({**good, "slow_share": float("nan")}).encode(), "is not a host probe's summary"),
        (json.dumps({**good, "windows_us": "7.9 eight"}).encode(), "is not a host probe's summary"),
        (json.dumps({**good, "extra": 1}).encode(), "is not a host probe's summary"),
    ]
    for data, message in bad:
        write_private(directory / "host-0.json", data)
        with pytest.raises(UsageError, match=message):
            pb._read_host(directory, 1)
    write_private(directory / "host-0.json", json.dumps({**good, "loop_us": None}).encode())
    assert pb._read_host(directory, 1) == [{**good, "loop_us": None}]


def test_the_timeout_report_gives_each_latency_run_its_slow_windows_by_subtask() -> None:
    def host(windows: list[float]) -> dict[str, Any]:
        return {"seconds": 1.0, "loop_us": sorted(windows)[len(windows) // 2], "slow_share": 0.0,
                "longest_slow_ms": 0.0, "windows_us": " ".join(map(str, windows))}  # fmt: skip

    steady = {"seconds": 3.0, "loop_us": 136.0, "slow_share": 0.02, "longest_slow_ms": 40.0}
    latency = {"rate_eps": 500.0, "p50_ms": 1.0, "p99_ms": 2.0, "p99.9_ms": 3.0, "max_ms": 4.0}
    report = {
        "parameters": {"events": 1000, "keys": 10, "processes": True, "taskmanagers": 2, "fraction": 0.5,
                       "seconds": 5.0, "warmup_s": 0.5, "buffer_timeouts_ms": [100, 1]},
        "machine": {"cpus": 2, "load_average_before": [0.1], "load_average": [0.2],
                    "steadiness": {"start": steady, "end": steady}},
        "max_eps": {"100": 1000.0, "1": 900.0},
        "latency": {"100": {**latency, "host": [host([8.0] * 4), host([8.0, 8.0, 12.0, 12.0])]},
                    "1": {**latency, "host": [host([10.0] * 4), host([8.0] * 3 + [20.0])]}},
        "ratio_1ms_to_100ms": 0.9,
    }  # fmt: skip
    text = format_timeout_report(report)
    # against the calmer run's 8.0 us: over 11.2 us is slow
    assert "8.0 / 12.0 us  0% / 50%" in text and "10.0 / 8.0 us  0% / 25%" in text
    assert "over 1.4x the calmer run's median, 8.0 us" in text
    assert "at start 136 us a loop, 2.0% of 20 ms windows" in text
    del report["latency"]["1"]["host"], report["latency"]["100"]["host"]  # a report of an older build
    older = format_timeout_report(report)
    assert "2.0ms    3.0ms    4.0ms              –  –" in older and "calmer run" not in older


def test_the_command_refuses_a_job_choice_and_a_run_shorter_than_its_warm_up() -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["bench", "processes", "--timeouts", "--job", "columnar"])
    assert result.exit_code == 2 and "--timeouts runs the keyed-shuffle query" in result.output
    result = runner.invoke(main, ["bench", "processes", "--timeouts", "--seconds", "0.4"])
    assert result.exit_code == 2 and "--seconds" in result.output
    result = runner.invoke(main, ["bench", "processes", "--one-process"])
    assert result.exit_code == 2 and "--one-process goes with --timeouts" in result.output
    with pytest.raises(UsageError, match=r"longer than its 0.5 s warm-up, got 0.5 s"):
        run_timeout_bench(10_000, 10, 2, seconds=0.5)
    with pytest.raises(UsageError, match=r"fraction of the maximum must be within \(0, 1\], got 1.5"):
        run_timeout_bench(10_000, 10, 2, fraction=1.5)


@pytest.mark.slow
@pytest.mark.parametrize("processes", [True, False])
def test_one_small_run_on_taskmanager_processes_reports_both_timeouts(processes: bool) -> None:
    report = run_timeout_bench(
        events=100_000, keys=100, parallelism=2, seconds=1.0, fraction=0.25, processes=processes,
        steadiness_seconds=0.1,
    )  # fmt: skip
    p = report["parameters"]
    assert (p["processes"], p["taskmanagers"], p["slots_per_taskmanager"]) == (
        (True, 2, 1) if processes else (False, 1, 2)
    )
    assert report["parameters"]["buffer_timeouts_ms"] == list(TIMEOUTS_MS) == [100, 1]
    assert set(report["max_eps"]) == set(report["latency"]) == {"100", "1"}
    assert report["ratio_1ms_to_100ms"] == report["max_eps"]["1"] / report["max_eps"]["100"]
    for timeout, latency in report["latency"].items():
        assert latency["rate_eps"] == 0.25 * report["max_eps"][timeout]
        # every record after the half-second warm-up was measured, in both sink subtasks' files
        scheduled_after_warm_up = latency["events"] * (1.0 - 0.5) / 1.0
        assert abs(latency["records_measured"] - scheduled_after_warm_up) <= 2 * 100
        assert 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["p99.9_ms"] <= latency["max_ms"]
        # each sink subtask probed its TaskManager's loop through the measured half second
        assert [h["loop_us"] > 0 and 0.2 < h["seconds"] <= 1.0 for h in latency["host"]] == [True, True]
    assert set(report["machine"]["steadiness"]) == {"start", "end"}
    text = format_timeout_report(report)
    assert "100 ms" in text and "1 ms / 100 ms max throughput" in text
    assert ("2 TaskManager processes" if processes else "one process (1 TaskManager, 2 slots)") in text


def test_rounds_alternate_one_process_and_processes_and_report_medians(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each round runs both; a figure is the median of a job's runs, the ratio of medians."""
    order: list[bool] = []
    rates = {False: iter([100.0, 300.0, 200.0]), True: iter([150.0, 180.0, 900.0])}

    async def fake(ways: Any, events: int, keys: int, parallelism: int, processes: bool) -> dict[str, float]:
        order.append(processes)
        return {"columnar": next(rates[processes])}

    monkeypatch.setattr(pb, "_run_on_one_cluster", fake)
    report = pb.run_process_bench(10_000, 10, 2, ("columnar",), repeat=3, steadiness_seconds=0.05)
    assert order == [False, True] * 3
    assert report["one_process"] == {"columnar": 200.0} and report["processes"] == {"columnar": 180.0}
    assert report["one_process_runs"] == {"columnar": [100.0, 300.0, 200.0]}
    assert report["ratio"] == {"columnar": 0.9}
    text = pb.format_process_report(report)
    assert "median of 3 rounds" in text and "columnar by round: 1.50x, 0.60x, 4.50x" in text
    assert set(report["machine"]["steadiness"]) == {"start", "end"}
    assert report["machine"]["steadiness"]["start"]["loop_us"] > 0
    assert "machine steadiness (a fixed loop timed back to back): at start" in text
    del report["machine"]["steadiness"]  # a report of an older build
    assert "machine steadiness" not in pb.format_process_report(report)
    with pytest.raises(UsageError, match="--repeat must be at least 1"):
        pb.run_process_bench(10_000, 10, 2, ("columnar",), repeat=0)

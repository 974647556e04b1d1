"""The latency sink's flush: arrivals per 100 ms and the latency trend per 250 ms of intended
time, counted from the batches it kept."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from weir.harness.replay import ReplayRun, now_ns
from weir.harness.sink import LatencySink
from weir.testing.harness import OneInputStreamOperatorTestHarness


@pytest.mark.parametrize("flush_records", [5, 8192], ids=["a-flush-per-bucket", "one-flush"])
async def test_a_flush_counts_arrivals_and_trend_per_bucket(
    autojump_clock: trio.testing.MockClock, flush_records: int
) -> None:
    run = ReplayRun()
    anchor = run.anchor(now_ns())
    sink = LatencySink(run)
    operator = sink.create_operator("latency sink")
    operator.FLUSH_RECORDS = flush_records  # 5: the first two batches flush together
    h = OneInputStreamOperatorTestHarness(operator)
    h.open()
    # batches arriving at 10, 60 and 260 ms: 5 records in the first 100 ms, none in the
    # second, 4 in the third; the last batch's records are in the second trend bucket
    for at_ms, n, late_ms in ((10, 3, 1), (60, 2, 3), (260, 4, 2)):
        autojump_clock.jump(anchor / 1e9 + at_ms / 1000 - trio.current_time())
        h.process_elements([(i, now_ns() - late_ms * 1_000_000) for i in range(n)])
    h.close()
    assert sink.records == 9
    assert sink.arrivals_per_s() == [50.0, 0.0, 40.0]  # per second, from 100 ms buckets
    trend = sink.trend()
    assert [p["t_s"] for p in trend] == [0.0, 0.25]
    assert [p["mean_ms"] for p in trend] == pytest.approx([1.8, 2.0])  # (3 x 1 + 2 x 3) / 5
    assert [p["max_ms"] for p in trend] == [3.0, 2.0]


async def test_a_restored_checkpoint_commits_the_rows_it_pre_committed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The failure came after checkpoint 1 completed but before its completion reached the
    sink: recovery from checkpoint 1 commits its rows, and drops the rows after it."""
    run = ReplayRun()
    run.anchor(now_ns())
    sink = LatencySink(run, collect=True)
    h = OneInputStreamOperatorTestHarness(sink.create_operator("latency sink"))
    h.open()
    h.process_elements([("a", now_ns()), ("b", now_ns())])
    snapshot = h.snapshot(1)  # pre-committed, never notified
    h.process_elements([("c", now_ns())])  # after the checkpoint: replayed by the sources
    again = OneInputStreamOperatorTestHarness(sink.create_operator("latency sink"))
    again.restore(snapshot)
    again.open()
    assert sorted(sink.rows()) == [("a",), ("b",)]
    fresh = OneInputStreamOperatorTestHarness(sink.create_operator("latency sink"))
    fresh.open()  # a start without a checkpoint commits nothing more
    assert sorted(sink.rows()) == [("a",), ("b",)]


async def test_rows_after_the_last_checkpoint_are_final_only_when_the_job_finished(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The sink's input ended, then the job restarted from the beginning (a checkpoint failed
    while other tasks ran): the first attempt's rows are not part of the output, the rows of
    the attempt that finished are, once."""
    run = ReplayRun()
    run.anchor(now_ns())
    sink = LatencySink(run, collect=True)
    first = OneInputStreamOperatorTestHarness(sink.create_operator("latency sink"))
    first.open()
    first.process_elements([("a", now_ns()), ("b", now_ns())])
    first.end_input()  # finish: the end of the input
    first.close()
    assert sink.rows() == []
    second = OneInputStreamOperatorTestHarness(sink.create_operator("latency sink"))
    second.open()
    second.process_elements([("a", now_ns()), ("b", now_ns())])
    second.end_input()
    second.close()
    sink.commit_finished()
    assert sorted(sink.rows()) == [("a",), ("b",)]

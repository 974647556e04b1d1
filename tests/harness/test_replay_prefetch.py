"""The replay's chunk read-ahead under cancellation."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from weir.harness import replay
from weir.harness.replay import ReplayRun, ReplaySource
from weir.workloads import dataset


async def test_a_poll_cancelled_while_a_chunk_is_read_loses_no_rows(
    tmp_path: Path, monkeypatch: object, autojump_clock: trio.testing.MockClock
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 3 * 50
    (tmp_path / "t").mkdir()
    pq.write_table(pa.table({"k": list(range(rows))}), tmp_path / "t" / "part-0.parquet")
    manifest = {"tables": {"t": {"schema": [{"name": "k", "type": "int64"}]}}}
    monkeypatch.setattr(replay, "CHUNK_ROWS", 50)  # type: ignore[attr-defined]
    monkeypatch.setattr(replay, "READ_AHEAD", True)  # type: ignore[attr-defined]  # the thread, under MockClock too
    monkeypatch.setattr(dataset, "load_manifest", lambda d: manifest)  # type: ignore[attr-defined]
    monkeypatch.setattr(dataset, "table_files", lambda d, m, t: [tmp_path / "t" / "part-0.parquet"])  # type: ignore[attr-defined]
    reader = ReplaySource(tmp_path, "t", ["k"], ReplayRun()).create_reader(0, 1)
    seen: list[int] = []
    cancelled = 0
    while True:
        with trio.CancelScope() as scope:
            if len(seen) % 50 == 0 and cancelled < 3:
                scope.cancel()  # cancelled at its first checkpoint: while the chunk is awaited
            batch = await reader.next_batch()
            if batch is None:
                break
            seen.extend(v[0] for v in batch.as_list())
        cancelled += scope.cancelled_caught
    assert cancelled == 3
    assert seen == list(range(rows))


async def test_under_a_mock_clock_chunks_are_read_in_the_trio_thread(
    autojump_clock: trio.testing.MockClock, monkeypatch: object
) -> None:
    # a worker thread's real time would let the mock clock jump while a reader waits
    assert replay._reads_ahead() is False
    monkeypatch.setattr(replay, "READ_AHEAD", True)  # type: ignore[attr-defined]
    assert replay._reads_ahead() is True


def test_on_the_system_clock_chunks_are_read_ahead() -> None:
    assert trio.run(lambda: _async_value(replay._reads_ahead)) is True


async def _async_value(fn: object) -> object:
    return fn()  # type: ignore[operator]

"""The data generator's reader: splits and rate limiting on the TaskManager's ticker."""

from __future__ import annotations

import trio
import trio.testing

from weir.loop.ticker import Ticker, use_ticker
from weir.operators.sources import DataGeneratorReader


async def test_a_rate_limited_reader_waits_on_the_taskmanagers_ticker(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The wait for a batch is a sleeper of the ticker, so it ends on the tick whose flush
    sends the batch, and needs no Trio deadline of its own."""
    ticker = Ticker()
    reader = DataGeneratorReader(lambda i: i, 300, rate_limit=1000.0, subtask=0, parallelism=1)
    assert reader.batch_size == 10  # a hundredth of a second of records
    woke: list[float] = []

    async def read() -> None:
        use_ticker(ticker)
        while (batch := await reader.next_batch()) is not None:
            woke.append(trio.current_time())
            assert len(batch) == 10

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        assert ticker.statistics().sleepers == 1  # the second batch's wait
        await trio.sleep(1.0)
        nursery.cancel_scope.cancel()
    assert len(woke) == 30
    assert [round(t - start, 6) for t in woke[:3]] == [0.0, 0.01, 0.02]
    assert ticker.statistics().wakeups == 29  # every wait but the first batch's went through it


async def test_without_a_ticker_the_reader_waits_on_trio(autojump_clock: trio.testing.MockClock) -> None:
    reader = DataGeneratorReader(lambda i: i, 30, rate_limit=1000.0, subtask=0, parallelism=1)
    start = trio.current_time()
    batches = []
    while (batch := await reader.next_batch()) is not None:
        batches.append((round(trio.current_time() - start, 6), len(batch)))
    assert batches == [(0.0, 10), (0.01, 10), (0.02, 10)]

"""Buffer timeout: the pure policy and the timer task on the Trio clock."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from weir.errors import UsageError
from weir.loop.ticker import Ticker
from weir.network.buffer_pool import NetworkBufferPool
from weir.network.flusher import FlushPolicy, SharedFlusher, run_output_flusher
from weir.network.partition import ResultPartition


def test_policy_meanings() -> None:
    assert FlushPolicy(0).flush_after_every_emit and not FlushPolicy(0).uses_timer
    assert not FlushPolicy(-1).flush_after_every_emit and FlushPolicy(-1).interval_s is None
    assert FlushPolicy(100).uses_timer and FlushPolicy(100).interval_s == pytest.approx(0.1)


@pytest.mark.parametrize("bad", [-2, 1.5, True, "100"])
def test_policy_rejects_bad_timeouts(bad: object) -> None:
    with pytest.raises(UsageError, match=r"execution\.buffer-timeout\.interval"):
        FlushPolicy(bad)  # type: ignore[arg-type]


def test_ticks_are_the_multiples_of_the_interval_on_the_clock() -> None:
    policy = FlushPolicy(100)
    assert policy.tick_after(0.0) == pytest.approx(0.1)
    assert policy.tick_after(1.03) == pytest.approx(1.1)
    assert policy.tick_after(1.1) == pytest.approx(1.2)  # a flush at a tick: the next one
    assert policy.tick_after(1.1 - 1e-12) == pytest.approx(1.2)  # read back a hair early
    with pytest.raises(UsageError):
        FlushPolicy(0).tick_after(1.0)


def test_ticks_stay_on_the_tickers_grid_on_a_long_running_clock() -> None:
    """Counted, not summed: on a clock near 1e5 s (Trio's clocks start at a large random
    offset) every tick is a point of the ticker's 1 ms grid. Adding 1 ms to the last
    deadline instead leaves the grid within a few hundred ticks."""
    policy, ticker = FlushPolicy(1), Ticker()
    now = 123_456.0004
    for _ in range(10_000):
        tick = policy.tick_after(now)
        assert ticker.on_grid(tick) == pytest.approx(tick, abs=1e-9)
        assert now < tick <= now + 0.001
        now = tick + 1e-7


def test_next_flush_is_fixed_rate_without_bursts() -> None:
    policy = FlushPolicy(100)
    assert policy.next_flush_at(1.0, now=1.0) == pytest.approx(1.1)
    assert policy.next_flush_at(1.0, now=1.55) == pytest.approx(1.65)  # missed ticks are skipped
    # back from a lazy sleep that no expiry ended in time: the next tick, not an interval on
    assert policy.next_flush_at(1.0, now=1.55, resumed=True) == pytest.approx(1.6)
    with pytest.raises(UsageError):
        FlushPolicy(-1).next_flush_at(0, 0)


def make_partition() -> ResultPartition:
    network = NetworkBufferPool(16 * 1024, 1024)
    return ResultPartition("p", 2, network.create_buffer_pool(3, 8))


async def test_the_flusher_flushes_every_interval(autojump_clock: trio.testing.MockClock) -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(1)
    seen: list[float] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_output_flusher, partition, 100)
        await trio.sleep(0.01)
        partition.emit_nowait(1, b"a")
        await view.wait_available()
        seen.append(trio.current_time())
        item = view.poll_next()
        assert item is not None
        item.recycle()
        partition.emit_nowait(1, b"b")
        await view.wait_available()
        seen.append(trio.current_time())
        await partition.finish()
    assert seen == [pytest.approx(0.1), pytest.approx(0.2)]


@pytest.mark.parametrize("timeout_ms", [0, -1])
async def test_no_timer_for_zero_and_minus_one(
    timeout_ms: int, autojump_clock: trio.testing.MockClock
) -> None:
    partition = make_partition()
    start = trio.current_time()
    await run_output_flusher(partition, timeout_ms)
    assert trio.current_time() == start


async def test_the_flusher_stops_when_the_partition_is_released(
    autojump_clock: trio.testing.MockClock,
) -> None:
    partition = make_partition()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_output_flusher, partition, 50)
        await trio.sleep(0.12)
        partition.release()
    assert trio.current_time() == pytest.approx(0.15)


def _shared(nursery: trio.Nursery) -> tuple[SharedFlusher, list[str]]:
    started: list[str] = []

    def spawn(fn: object, name: str) -> None:
        started.append(name)
        nursery.start_soon(fn)  # type: ignore[arg-type]

    return SharedFlusher(spawn), started


def test_a_write_marks_the_partition_unflushed_until_the_next_flush_all() -> None:
    partition = make_partition()
    heard: list[bool] = []
    partition.on_unflushed = lambda: heard.append(partition.unflushed)
    assert not partition.unflushed
    partition.emit_nowait(0, b"a")
    partition.emit_nowait(1, b"b")
    assert partition.unflushed and heard == [True]  # once per change, not per write
    partition.flush_all()
    assert not partition.unflushed
    partition.emit_nowait(0, b"")  # nothing written
    assert not partition.unflushed and heard == [True]
    partition.emit_nowait(0, b"c")
    assert heard == [True, True]


async def test_an_async_emit_marks_the_partition_unflushed() -> None:
    partition = make_partition()
    await partition.emit(1, b"x")
    assert partition.unflushed


async def test_a_lazy_shared_timer_wakes_only_for_something_to_flush(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With the TaskManager's ticker, a 1 ms timer with nothing to flush causes no expiry at
    all; a write between ticks still leaves at the next tick; records written by a task the
    ticker wakes at a tick leave at that same tick."""
    ticker = Ticker()
    partition = make_partition()
    view = partition.create_subpartition_view(1)
    seen: list[float] = []

    async def writer(deadline: float, data: bytes) -> None:
        await ticker.sleep_until(deadline)  # an open-loop source, woken at a grid point
        partition.emit_nowait(1, data)

    async def read() -> None:
        with trio.fail_after(5.0):  # a write nobody flushes would wait forever
            await view.wait_available()
        seen.append(trio.current_time())
        item = view.poll_next()
        assert item is not None
        item.recycle()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        flusher = SharedFlusher(lambda fn, name: nursery.start_soon(fn), ticker=ticker)  # type: ignore[arg-type]
        flusher.register(partition, 1)
        await trio.sleep(1.0)
        assert ticker.statistics().expiries == 0  # a thousand ticks, none with anything to do
        await trio.sleep(0.0004)
        partition.emit_nowait(1, b"between ticks")
        await read()
        nursery.start_soon(writer, 2.0005, b"at a tick")  # woken at the grid point 2.001
        await read()
        await partition.finish()
        nursery.cancel_scope.cancel()
    assert seen == [pytest.approx(1.001), pytest.approx(2.001)]
    assert ticker.statistics().expiries == 2  # the flush after the write, the writer's tick


async def test_partitions_of_one_timeout_share_a_timer_and_are_flushed_at_the_same_tick(
    autojump_clock: trio.testing.MockClock,
) -> None:
    first, second = make_partition(), make_partition()
    views = [first.create_subpartition_view(0), second.create_subpartition_view(1)]
    seen: list[float] = []
    async with trio.open_nursery() as nursery:
        flusher, started = _shared(nursery)
        flusher.register(first, 100)
        await trio.sleep(0.03)  # the second registers a third of an interval later
        flusher.register(second, 100)
        first.emit_nowait(0, b"a")
        second.emit_nowait(1, b"b")
        for view in views:
            await view.wait_available()
            seen.append(trio.current_time())
        assert started == ["output flusher 100 ms"]  # one timer for both
        assert flusher.partitions(100) == [first, second]
        for partition in (first, second):
            await partition.finish()
    assert seen == [pytest.approx(0.1), pytest.approx(0.1)]  # the first tick of the shared timer
    assert flusher.partitions(100) == []  # finished partitions leave; the timer ended with the last


async def test_a_shared_timer_per_timeout_and_none_for_zero_or_minus_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        flusher, started = _shared(nursery)
        a, b, c = make_partition(), make_partition(), make_partition()
        flusher.register(a, 0)
        flusher.register(b, -1)
        assert started == [] and flusher.partitions(0) == [] and flusher.partitions(-1) == []
        flusher.register(a, 10)
        flusher.register(c, 50)
        assert started == ["output flusher 10 ms", "output flusher 50 ms"]
        await trio.sleep(0.2)
        flusher.unregister(a, 10)
        c.release()
        await trio.sleep(0.2)
        assert flusher.partitions(10) == [] and flusher.partitions(50) == []
        flusher.register(b, 10)  # a new timer once the old one ended
        assert started[-1] == "output flusher 10 ms" and len(started) == 3
        flusher.unregister(b, 10)

"""NetworkBufferPool and LocalBufferPool: limits, fair share, clear errors, listeners, no trio."""

from __future__ import annotations

import subprocess
import sys

import pytest

from weir.errors import ProtocolViolation, UsageError
from weir.network.buffer_pool import NetworkBufferPool, WouldBlock, format_bytes

SEG = 1024


def test_segments_are_counted_from_the_memory_budget() -> None:
    network = NetworkBufferPool(64 << 20, 32 << 10)
    assert network.total_segments == 2048
    assert network.available_segments == 2048


def test_a_pool_serves_up_to_its_limit() -> None:
    network = NetworkBufferPool(10 * SEG, SEG)
    pool = network.create_buffer_pool(1, 3)
    assert pool.limit == 3
    buffers = [pool.request_buffer_nowait() for _ in range(3)]
    assert [b.capacity for b in buffers] == [SEG] * 3
    with pytest.raises(WouldBlock):
        pool.request_buffer_nowait()
    assert not pool.is_available()
    buffers[0].recycle()
    assert pool.is_available()
    assert pool.request_buffer_nowait().size == 0
    assert network.available_segments == 7


def test_segments_are_reused_and_buffers_are_fresh() -> None:
    network = NetworkBufferPool(SEG, SEG)
    pool = network.create_buffer_pool(1, 1)
    first = pool.request_buffer_nowait()
    first.append(b"abc")
    segment = first.segment
    first.recycle()
    second = pool.request_buffer_nowait()
    assert second.segment is segment and second is not first and second.size == 0
    with pytest.raises(ProtocolViolation):
        first.recycle()  # the stale wrapper cannot recycle the segment handed out again


def test_the_global_pool_running_dry_blocks_pools_below_their_limit() -> None:
    network = NetworkBufferPool(2 * SEG, SEG)
    a = network.create_buffer_pool(0, 2)
    b = network.create_buffer_pool(0, 2)
    assert (a.limit, b.limit) == (1, 1)
    held = a.request_buffer_nowait()
    b.request_buffer_nowait()
    with pytest.raises(WouldBlock):
        a.request_buffer_nowait()
    held.recycle()
    a.request_buffer_nowait()


def test_fair_share_is_proportional_to_excess_capacity() -> None:
    network = NetworkBufferPool(20 * SEG, SEG)
    a = network.create_buffer_pool(2, 12)  # excess 10
    assert a.limit == 12
    b = network.create_buffer_pool(2, 22)  # excess 20
    # 16 segments beyond the required 4 split 10:20 → 5.33 and 10.67
    assert (a.limit, b.limit) == (8, 12)
    b.destroy()
    assert a.limit == 12


def test_each_pool_keeps_its_required_buffers_when_short() -> None:
    network = NetworkBufferPool(10 * SEG, SEG)
    pools = [network.create_buffer_pool(3, 30) for _ in range(3)]
    limits = [p.limit for p in pools]
    assert all(limit >= 3 for limit in limits)
    assert sum(limits) == 10
    assert max(limits) - min(limits) <= 1


def test_a_shrunk_pool_gets_nothing_until_it_is_back_under_its_limit() -> None:
    network = NetworkBufferPool(4 * SEG, SEG)
    a = network.create_buffer_pool(1, 4)
    held = [a.request_buffer_nowait() for _ in range(4)]
    b = network.create_buffer_pool(1, 4)
    assert (a.limit, b.limit) == (2, 2)
    with pytest.raises(WouldBlock):
        b.request_buffer_nowait()  # a still holds every segment
    fired: list[str] = []
    b.notify_when_available(lambda: fired.append("b"))
    held.pop().recycle()
    assert fired == ["b"]
    b.request_buffer_nowait()
    held.pop().recycle()
    with pytest.raises(WouldBlock):
        a.request_buffer_nowait()  # a holds 2 = its limit


def test_too_little_network_memory_is_a_usage_error_naming_the_numbers() -> None:
    network = NetworkBufferPool(64 << 20, 32 << 10)
    with pytest.raises(UsageError) as error:
        network.create_buffer_pool(2100, 2200, name="result partition 'p'")
    message = str(error.value)
    assert "network memory of 64 MiB (2048 buffers of 32 KiB) is too small: 2100 required" in message
    assert "result partition 'p'" in message
    assert "raise taskmanager.memory.network.max" in message
    assert network.statistics().pools == ()


def test_pool_arguments_are_checked() -> None:
    network = NetworkBufferPool(4 * SEG, SEG)
    with pytest.raises(UsageError, match="num_required=3, max_buffers=2"):
        network.create_buffer_pool(3, 2)
    with pytest.raises(UsageError, match="smaller than one segment"):
        NetworkBufferPool(100, SEG)


def test_listeners_fire_once_and_can_be_removed() -> None:
    network = NetworkBufferPool(SEG, SEG)
    pool = network.create_buffer_pool(1, 1)
    held = pool.request_buffer_nowait()
    calls: list[int] = []

    def first() -> None:
        calls.append(1)

    def second() -> None:
        calls.append(2)

    pool.notify_when_available(first)
    pool.notify_when_available(second)
    pool.remove_listener(second)
    held.recycle()
    assert calls == [1]
    pool.request_buffer_nowait().recycle()
    assert calls == [1]
    pool.notify_when_available(lambda: calls.append(3))  # available now: called at once
    assert calls == [1, 3]


def test_a_listener_may_request_inside_the_callback() -> None:
    network = NetworkBufferPool(SEG, SEG)
    pool = network.create_buffer_pool(1, 1)
    held = pool.request_buffer_nowait()
    got = []
    pool.notify_when_available(lambda: got.append(pool.request_buffer_nowait()))
    held.recycle()
    assert len(got) == 1 and pool.used == 1


def test_destroy_keeps_accounting_for_buffers_still_out() -> None:
    network = NetworkBufferPool(4 * SEG, SEG)
    pool = network.create_buffer_pool(1, 4)
    held = pool.request_buffer_nowait()
    woken: list[bool] = []
    pool.request_buffer_nowait()
    pool.request_buffer_nowait()
    pool.request_buffer_nowait()
    pool.notify_when_available(lambda: woken.append(True))
    pool.destroy()
    assert woken == [True]
    with pytest.raises(UsageError, match="destroyed"):
        pool.request_buffer_nowait()
    assert network.available_segments == 0
    held.recycle()
    assert network.available_segments == 1
    assert network.statistics().required_segments == 0


def test_recycling_more_than_was_taken_is_a_protocol_violation() -> None:
    network = NetworkBufferPool(2 * SEG, SEG)
    pool = network.create_buffer_pool(1, 2)
    with pytest.raises(ProtocolViolation, match="holds none"):
        pool.recycle_segment(bytearray(SEG))
    pool.request_segment_nowait()
    with pytest.raises(ProtocolViolation, match="expected 1024"):
        pool.recycle_segment(bytearray(10))


def test_statistics() -> None:
    network = NetworkBufferPool(8 * SEG, SEG)
    pool = network.create_buffer_pool(2, 4, name="gate 0")
    pool.request_buffer_nowait()
    stats = network.statistics()
    assert (stats.total_segments, stats.available_segments, stats.used_segments) == (8, 7, 1)
    assert stats.required_segments == 2
    (p,) = stats.pools
    assert (p.name, p.used, p.limit) == ("gate 0", 1, 4)
    assert (p.num_required, p.max_buffers, p.destroyed) == (2, 4, False)


def test_format_bytes() -> None:
    assert format_bytes(64 << 20) == "64 MiB"
    assert format_bytes(32 << 10) == "32 KiB"
    assert format_bytes(1000) == "1000 bytes"


def test_pure_modules_do_not_import_trio() -> None:
    code = (
        "import sys\n"
        "import weir.network.buffer, weir.network.buffer_pool, weir.network.credit, weir.network.events\n"
        "assert 'trio' not in sys.modules, 'trio imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

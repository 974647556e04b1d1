"""ResourceManager on Trio's clock (MockClock with autojump): slot requests, waiting, heartbeats, loss."""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing

from weir.cluster.resource_manager import ResourceManager, SlotRequestTimeout
from weir.cluster.slot_manager import JobId, NotEnoughSlots, SlotId, SlotState, SlotStatus, TaskManagerId
from weir.errors import ProtocolViolation, UsageError


class Lost:
    """A listener that records (time, tm_id, lost slots per job)."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, TaskManagerId, dict[JobId, list[SlotId]]]] = []

    def __call__(self, tm_id: TaskManagerId, lost: dict[JobId, list[SlotId]]) -> None:
        self.calls.append((trio.current_time(), tm_id, lost))


def watched(interval_ms: float, timeout_ms: float) -> tuple[ResourceManager, Lost]:
    """A ResourceManager with these heartbeat settings, and a listener that records its losses."""
    rm = ResourceManager(heartbeat_interval_ms=interval_ms, heartbeat_timeout_ms=timeout_ms)
    lost = Lost()
    rm.add_listener(lost)
    return rm, lost


async def test_request_is_met_at_once_and_taskmanagers_are_told(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rm = ResourceManager()
    told: list[tuple[SlotId, JobId]] = []
    rm.register_task_executor("tm0", 2, on_slot_request=lambda s, j: told.append((s, j)))
    rm.register_task_executor("tm1", 2)
    start = trio.current_time()
    slots = await rm.request_slots("job", 3)
    assert trio.current_time() == start
    assert slots == [SlotId("tm0", 0), SlotId("tm0", 1), SlotId("tm1", 0)]
    assert told == [(SlotId("tm0", 0), "job"), (SlotId("tm0", 1), "job")]


@pytest.mark.parametrize("taskmanagers", [1, 2])
async def test_preferred_slots_from_a_plan(taskmanagers: int, autojump_clock: trio.testing.MockClock) -> None:
    rm = ResourceManager()
    for tm in range(taskmanagers):
        rm.register_task_executor(tm, 2)
    preferred = [SlotId(taskmanagers - 1, 1)]
    assert await rm.request_slots("job", 1, preferred=preferred) == preferred
    rm.activate_slot(preferred[0], "job")
    assert rm.slot_manager.status(preferred[0]) == SlotStatus(SlotState.ACTIVE, "job")


async def test_malformed_request_fails_at_once(autojump_clock: trio.testing.MockClock) -> None:
    rm = ResourceManager()
    with pytest.raises(UsageError, match="n must be a positive integer, got 0"):
        await rm.request_slots("job", 0)
    with pytest.raises(UsageError, match="timeout_ms must be a non-negative number"):
        await rm.request_slots("job", 1, timeout_ms=-1)
    assert rm.statistics().pending_requests == 0


async def test_waiting_request_completes_when_a_taskmanager_registers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rm = ResourceManager()
    rm.register_task_executor("tm0", 2)
    result: list[SlotId] = []
    told: list[SlotId] = []

    async def request() -> None:
        result.extend(await rm.request_slots("job", 4))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(request)
        await trio.sleep(5)
        assert result == []
        assert rm.statistics().pending_requests == 1
        assert rm.statistics().pending_slots == 4
        rm.register_task_executor("tm1", 2, on_slot_request=lambda s, j: told.append(s))
    assert result == [SlotId("tm0", 0), SlotId("tm0", 1), SlotId("tm1", 0), SlotId("tm1", 1)]
    assert told == [SlotId("tm1", 0), SlotId("tm1", 1)]
    assert rm.statistics().pending_requests == 0


async def test_waiting_request_completes_when_slots_are_released_or_freed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rm = ResourceManager()
    rm.register_task_executor("tm0", 2)
    first = await rm.request_slots("first", 2)
    got: dict[str, list[SlotId]] = {}

    async def request(job: str, n: int) -> None:
        got[job] = await rm.request_slots(job, n)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(request, "second", 2)
        await trio.testing.wait_all_tasks_blocked()
        rm.mark_slot_releasing(first[0])
        rm.free_slot(first[0])  # one free: not enough yet
        await trio.testing.wait_all_tasks_blocked()
        assert "second" not in got
        assert rm.release_slots("first") == [first[1]]
    assert got["second"] == [SlotId("tm0", 0), SlotId("tm0", 1)]


async def test_waiting_requests_are_served_first_fit_in_arrival_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rm = ResourceManager()
    rm.register_task_executor("tm0", 1)
    await rm.request_slots("holder", 1)
    got: dict[str, list[SlotId]] = {}

    async def request(job: str, n: int) -> None:
        got[job] = await rm.request_slots(job, n)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(request, "big", 3)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(request, "small-1", 1)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(request, "small-2", 1)
        await trio.testing.wait_all_tasks_blocked()
        rm.register_task_executor("tm1", 1)  # one free slot: big does not fit, small-1 does
        await trio.testing.wait_all_tasks_blocked()
        assert got == {"small-1": [SlotId("tm1", 0)]}
        rm.register_task_executor("tm2", 3)  # big fits first, small-2 is left waiting
        await trio.testing.wait_all_tasks_blocked()
        assert got["big"] == [SlotId("tm2", 0), SlotId("tm2", 1), SlotId("tm2", 2)]
        assert "small-2" not in got
        rm.release_slots("holder")
    assert got["small-2"] == [SlotId("tm0", 0)]


async def test_waiting_request_times_out_with_a_clear_error(autojump_clock: trio.testing.MockClock) -> None:
    rm = ResourceManager()
    rm.register_task_executor("tm0", 3)
    await rm.request_slots("other", 1)
    start = trio.current_time()
    with pytest.raises(SlotRequestTimeout) as info:
        await rm.request_slots("X", 4)
    assert trio.current_time() - start == pytest.approx(300.0)
    assert str(info.value).startswith(
        "could not acquire 4 slots for job 'X' within 300000 ms: 2 free of 3 registered on 1 TaskManager;"
    )
    assert isinstance(info.value, NotEnoughSlots)
    assert (info.value.needed, info.value.free, info.value.total, info.value.timeout_ms) == (4, 2, 3, 300_000)
    assert rm.slot_manager.slots_of("X") == []
    assert rm.statistics().pending_requests == 0


async def test_zero_timeout_fails_at_once(autojump_clock: trio.testing.MockClock) -> None:
    rm = ResourceManager()
    start = trio.current_time()
    with pytest.raises(
        SlotRequestTimeout, match="could not acquire 1 slot for job 'j' within 0 ms: 0 free of 0"
    ):
        await rm.request_slots("j", 1, timeout_ms=0)
    assert trio.current_time() == start


async def test_cancelled_request_is_withdrawn(autojump_clock: trio.testing.MockClock) -> None:
    rm = ResourceManager()
    with trio.move_on_after(10):
        await rm.request_slots("job", 1, timeout_ms=math.inf)
    assert rm.statistics().pending_requests == 0
    rm.register_task_executor("tm0", 1)
    assert rm.slot_manager.free_slots == 1


async def test_taskmanager_loss_releases_its_slots_and_notifies_with_the_right_jobs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rm = ResourceManager()
    lost = Lost()
    rm.add_listener(lost)
    rm.register_task_executor("tm0", 2)
    rm.register_task_executor("tm1", 2)
    await rm.request_slots("j1", 3)  # tm0/0, tm0/1, tm1/0
    await rm.request_slots("j2", 1)  # tm1/1
    assert rm.unregister_task_executor("tm1") == {"j1": [SlotId("tm1", 0)], "j2": [SlotId("tm1", 1)]}
    assert lost.calls == [(trio.current_time(), "tm1", {"j1": [SlotId("tm1", 0)], "j2": [SlotId("tm1", 1)]})]
    assert rm.slot_manager.slots_of("j1") == [SlotId("tm0", 0), SlotId("tm0", 1)]
    stats = rm.statistics()
    assert (stats.slots.total, stats.task_managers_lost) == (2, 1)
    assert list(stats.heartbeats.deadlines_ms) == ["tm0"]
    with pytest.raises(ProtocolViolation, match="heartbeat from TaskManager 'tm1', which is not registered"):
        rm.heartbeat_from_task_executor("tm1")


async def test_heartbeat_timeout_fires_once_at_the_timeout_not_before(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rm, lost = watched(10_000, 50_000)
    async with trio.open_nursery() as nursery:
        await nursery.start(rm.run)
        start = trio.current_time()
        rm.register_task_executor("tm0", 2)
        await rm.request_slots("job", 1)
        await trio.sleep_until(start + 49.999)
        assert lost.calls == []
        assert rm.slot_manager.is_registered("tm0")
        await trio.sleep_until(start + 50.001)
        assert lost.calls == [(start + 50.0, "tm0", {"job": [SlotId("tm0", 0)]})]
        assert not rm.slot_manager.is_registered("tm0")
        await trio.sleep(600)
        assert len(lost.calls) == 1
        nursery.cancel_scope.cancel()
    assert not rm.statistics().running


async def test_heartbeating_taskmanager_stays_alive_and_dies_timeout_after_its_last_heartbeat(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rm, lost = watched(1_000, 5_000)

    async def task_executor(beats: int) -> None:
        rm.register_task_executor("tm-beating", 1)
        for _ in range(beats):
            await trio.sleep(rm.heartbeat_interval_ms / 1000)
            rm.heartbeat_from_task_executor("tm-beating")

    async with trio.open_nursery() as nursery:
        await nursery.start(rm.run)
        start = trio.current_time()
        rm.register_task_executor("tm-silent", 1)
        nursery.start_soon(task_executor, 600)  # heartbeats until start + 600 s
        await trio.sleep(604.999)
        assert [(t - start, tm) for t, tm, _ in lost.calls] == [(pytest.approx(5.0), "tm-silent")]
        await trio.sleep(0.002)
        assert [(t - start, tm) for t, tm, _ in lost.calls] == [
            (pytest.approx(5.0), "tm-silent"),
            (pytest.approx(605.0), "tm-beating"),
        ]
        nursery.cancel_scope.cancel()


async def test_dead_taskmanager_may_register_again(autojump_clock: trio.testing.MockClock) -> None:
    rm = ResourceManager(heartbeat_interval_ms=1_000, heartbeat_timeout_ms=2_000)
    async with trio.open_nursery() as nursery:
        await nursery.start(rm.run)
        rm.register_task_executor("tm0", 2)
        await trio.sleep(3)
        assert not rm.slot_manager.is_registered("tm0")
        with pytest.raises(ProtocolViolation, match="expected it to register again"):
            rm.heartbeat_from_task_executor("tm0")
        rm.register_task_executor("tm0", 2)
        assert await rm.request_slots("job", 2) == [SlotId("tm0", 0), SlotId("tm0", 1)]
        nursery.cancel_scope.cancel()


async def test_loss_wakes_nobody_and_later_registration_serves_the_waiter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rm, lost = watched(1_000, 2_000)
    got: list[SlotId] = []

    async def request() -> None:
        got.extend(await rm.request_slots("job", 2))

    async with trio.open_nursery() as nursery:
        await nursery.start(rm.run)
        rm.register_task_executor("tm0", 1)
        nursery.start_soon(request)
        await trio.sleep(2.5)
        assert [tm for _, tm, _ in lost.calls] == ["tm0"]
        assert got == []
        rm.register_task_executor("tm1", 2)
        await trio.testing.wait_all_tasks_blocked()
        assert got == [SlotId("tm1", 0), SlotId("tm1", 1)]
        nursery.cancel_scope.cancel()


async def test_only_one_run_at_a_time(autojump_clock: trio.testing.MockClock) -> None:
    rm = ResourceManager()
    async with trio.open_nursery() as nursery:
        await nursery.start(rm.run)
        assert rm.statistics().running
        with pytest.raises(UsageError, match="already running"):
            await rm.run()
        nursery.cancel_scope.cancel()


async def test_removed_listener_is_not_called(autojump_clock: trio.testing.MockClock) -> None:
    rm = ResourceManager()
    lost = Lost()
    rm.add_listener(lost)
    rm.remove_listener(lost)
    rm.register_task_executor("tm0", 1)
    rm.unregister_task_executor("tm0")
    assert lost.calls == []
    with pytest.raises(UsageError, match="was never added"):
        rm.remove_listener(lost)
    with pytest.raises(UsageError, match="cannot unregister TaskManager 'tm0': not registered"):
        rm.unregister_task_executor("tm0")


def test_heartbeat_settings_are_validated_and_read_from_config() -> None:
    with pytest.raises(UsageError, match=r"must not be shorter than heartbeat\.interval"):
        ResourceManager(heartbeat_interval_ms=10_000, heartbeat_timeout_ms=1_000)
    rm = ResourceManager.from_config({"heartbeat.interval": "1 s", "heartbeat.timeout": "5 s"})
    assert (rm.heartbeat_interval_ms, rm.heartbeat_timeout_ms) == (1_000, 5_000)


async def test_a_loop_blocked_past_the_timeout_does_not_count_against_a_taskmanager_of_the_process(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # a jump of the clock with no task run in between is a blocked loop (a task's long
    # synchronous step): the TaskManager could not send, nor the ResourceManager read, a heartbeat
    rm, lost = watched(1_000, 5_000)
    rm.register_task_executor("tm0", 1)  # at 0 s

    async def beat(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            while True:
                await trio.sleep(1)
                rm.heartbeat_from_task_executor("tm0")

    async with trio.open_nursery() as nursery:
        await nursery.start(rm.run)
        beating = await nursery.start(beat)
        await trio.sleep(2.5)  # heartbeats at 1 s and 2 s: deadline 7 s
        beating.cancel()  # its next heartbeat would come after the ResourceManager's check
        autojump_clock.jump(60)  # the loop is blocked for 12 timeouts
        await trio.sleep(0.001)  # the ResourceManager runs first: it woke 59.5 s late
        assert lost.calls == [] and rm.slot_manager.is_registered("tm0")
        await trio.sleep(10)  # silent after the stall: dead 5 s after its deadline, moved by the delay
        assert [(round(t), tm) for t, tm, _ in lost.calls] == [(66, "tm0")]
        nursery.cancel_scope.cancel()


async def test_waiting_for_slots_ends_when_registrations_offer_them_held_or_free(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A job too big for the registered TaskManagers waits for more to join (Flink's
    slot.request.timeout); held slots count, as a plan is made for all of them."""
    rm = ResourceManager()
    rm.register_task_executor("tm0", 1)
    await rm.request_slots("other job", 1)  # held: still counts toward the total
    joined: list[float] = []

    async def join_later() -> None:
        await trio.sleep(3)
        rm.register_task_executor("tm1", 1)  # 2 in all: not enough yet
        await trio.sleep(4)
        rm.register_task_executor("tm1", 1)  # a reconnect adds nothing
        await trio.sleep(1)
        joined.append(trio.current_time())
        rm.register_task_executor("tm2", 2)

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(join_later)
        assert await rm.wait_for_slots(3, timeout_ms=60_000)
    assert trio.current_time() - start == 8 == joined[0] - start
    assert await rm.wait_for_slots(4, timeout_ms=0)  # already there: no wait


async def test_waiting_for_slots_gives_up_after_the_timeout(autojump_clock: trio.testing.MockClock) -> None:
    rm = ResourceManager()
    rm.register_task_executor("tm0", 2)
    start = trio.current_time()
    assert not await rm.wait_for_slots(3, timeout_ms=5_000)
    assert trio.current_time() - start == pytest.approx(5)

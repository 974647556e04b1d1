"""SlotManager: slot reports, allocation order, preferred slots, the slot lifecycle, TaskManager loss."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.cluster.slot_manager import (
    NotEnoughSlots,
    SlotId,
    SlotManager,
    SlotState,
    SlotStatus,
    TaskManagerSlots,
)
from weir.errors import IllegalStateTransition, ProtocolViolation, UsageError


def manager(**task_managers: int) -> SlotManager:
    sm = SlotManager()
    for tm_id, slot_count in task_managers.items():
        sm.register_task_manager(tm_id, slot_count)
    return sm


# -- slot reports ----------------------------------------------------------------------


def test_slot_report_registers_free_slots() -> None:
    sm = SlotManager()
    assert sm.register_task_manager("tm0", 2) == [SlotId("tm0", 0), SlotId("tm0", 1)]
    assert sm.task_managers == ["tm0"]
    assert sm.total_slots == 2
    assert sm.free_slots == 2
    assert sm.status(SlotId("tm0", 1)) == SlotStatus(SlotState.FREE)
    assert str(SlotId("tm0", 1)) == "tm0/slot1"


def test_reregistration_with_same_count_keeps_slot_states() -> None:
    sm = manager(tm0=2)
    sm.request_slots("job", 1)
    assert sm.register_task_manager("tm0", 2) == []
    assert sm.status(SlotId("tm0", 0)) == SlotStatus(SlotState.ALLOCATED, "job")
    assert sm.total_slots == 2


def test_reregistration_with_different_count_is_a_protocol_violation() -> None:
    sm = manager(tm0=2)
    with pytest.raises(ProtocolViolation, match=r"'tm0' re-registered with 3 slots, expected the 2"):
        sm.register_task_manager("tm0", 3)
    assert sm.total_slots == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_slot_count_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(UsageError, match=r"TaskManager 'tm0': slot_count must be a positive integer"):
        SlotManager().register_task_manager("tm0", bad)  # type: ignore[arg-type]


def test_plan_positions_map_to_slot_ids_when_taskmanagers_register_by_index() -> None:
    sm = manager()
    sm.register_task_manager(0, 2)
    sm.register_task_manager(1, 2)
    # A SlotPlan's Slot(taskmanager=1, index=0) -> SlotId(1, 0)
    assert sm.request_slots("job", 1, preferred=[SlotId(1, 0)]) == [SlotId(1, 0)]


# -- allocation ------------------------------------------------------------------------


def test_allocation_fills_taskmanagers_in_registration_order() -> None:
    sm = manager(tm_b=2, tm_a=3)
    assert sm.request_slots("j1", 3) == [SlotId("tm_b", 0), SlotId("tm_b", 1), SlotId("tm_a", 0)]
    assert sm.request_slots("j2", 2) == [SlotId("tm_a", 1), SlotId("tm_a", 2)]
    assert sm.free_slots == 0
    assert sm.slots_of("j1") == [SlotId("tm_b", 0), SlotId("tm_b", 1), SlotId("tm_a", 0)]
    assert sm.status(SlotId("tm_a", 2)) == SlotStatus(SlotState.ALLOCATED, "j2")
    assert str(sm.status(SlotId("tm_a", 2))) == "ALLOCATED('j2')"


def test_allocation_reuses_released_holes_in_order() -> None:
    sm = manager(tm0=2, tm1=2)
    sm.request_slots("j1", 1)
    sm.request_slots("j2", 2)
    sm.release_slots("j1")
    assert sm.request_slots("j3", 2) == [SlotId("tm0", 0), SlotId("tm1", 1)]


def test_preferred_slots_are_taken_when_all_free() -> None:
    sm = manager(tm0=2, tm1=2)
    preferred = [SlotId("tm1", 1), SlotId("tm0", 1)]
    assert sm.request_slots("job", 2, preferred=preferred) == preferred


def test_preferred_slots_are_topped_up_when_fewer_than_n() -> None:
    sm = manager(tm0=2, tm1=2)
    assert sm.request_slots("job", 3, preferred=[SlotId("tm1", 0)]) == [
        SlotId("tm1", 0),
        SlotId("tm0", 0),
        SlotId("tm0", 1),
    ]


def test_preferred_slots_fall_back_to_any_free_when_one_is_taken() -> None:
    sm = manager(tm0=2, tm1=2)
    sm.request_slots("other", 1, preferred=[SlotId("tm1", 1)])
    got = sm.request_slots("job", 2, preferred=[SlotId("tm1", 0), SlotId("tm1", 1)])
    assert got == [SlotId("tm0", 0), SlotId("tm0", 1)]


def test_preferred_slots_on_an_unknown_taskmanager_fall_back() -> None:
    sm = manager(tm0=2)
    assert sm.request_slots("job", 1, preferred=[SlotId("gone", 0)]) == [SlotId("tm0", 0)]


def test_malformed_preferred_slots_are_usage_errors() -> None:
    sm = manager(tm0=4)
    with pytest.raises(UsageError, match="preferred slots must be distinct"):
        sm.request_slots("job", 2, preferred=[SlotId("tm0", 0), SlotId("tm0", 0)])
    with pytest.raises(UsageError, match="3 preferred slots for a request of 2; expected at most 2"):
        sm.request_slots("job", 2, preferred=[SlotId("tm0", i) for i in range(3)])
    with pytest.raises(UsageError, match="preferred slots must be SlotId, got 'tm0/slot0'"):
        sm.request_slots("job", 1, preferred=["tm0/slot0"])  # type: ignore[list-item]
    assert sm.free_slots == 4


@pytest.mark.parametrize("bad", [0, -2, 1.0, None])
def test_request_size_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(UsageError, match=r"slot request of job 'job': n must be a positive integer"):
        manager(tm0=1).request_slots("job", bad)  # type: ignore[arg-type]


def test_not_enough_slots_names_needed_free_and_total() -> None:
    sm = manager(tm0=2, tm1=1)
    sm.request_slots("other", 1)
    with pytest.raises(NotEnoughSlots) as info:
        sm.request_slots("job", 4)
    assert str(info.value) == (
        "job 'job' needs 4 slots but only 2 of 3 registered slots are free (on 2 TaskManagers)"
    )
    assert (info.value.needed, info.value.free, info.value.total) == (4, 2, 3)
    assert isinstance(info.value, UsageError)
    assert sm.slots_of("job") == []  # all or nothing
    assert sm.free_slots == 2


def test_try_request_returns_none_and_changes_nothing() -> None:
    sm = manager(tm0=2)
    assert sm.try_request("job", 3) is None
    assert sm.free_slots == 2
    assert sm.try_request("job", 2) == [SlotId("tm0", 0), SlotId("tm0", 1)]


def test_a_job_may_request_more_slots() -> None:
    sm = manager(tm0=3)
    sm.request_slots("job", 1)
    sm.request_slots("job", 2)
    assert sm.slots_of("job") == [SlotId("tm0", i) for i in range(3)]
    assert sm.jobs() == ["job"]


# -- slot lifecycle --------------------------------------------------------------------


def test_lifecycle_allocated_active_releasing_free() -> None:
    sm = manager(tm0=1)
    (slot,) = sm.request_slots("job", 1)
    sm.activate(slot, "job")
    assert sm.status(slot) == SlotStatus(SlotState.ACTIVE, "job")
    sm.mark_releasing(slot)
    assert sm.status(slot) == SlotStatus(SlotState.RELEASING, "job")
    assert sm.slots_of("job") == [slot]
    sm.free(slot)
    assert sm.status(slot) == SlotStatus(SlotState.FREE)
    assert sm.slots_of("job") == []


def test_allocated_slot_can_go_releasing_directly() -> None:
    sm = manager(tm0=1)
    (slot,) = sm.request_slots("job", 1)
    sm.mark_releasing(slot)
    sm.free(slot)
    assert sm.free_slots == 1


def test_release_slots_frees_every_state_of_that_job_only() -> None:
    sm = manager(tm0=4)
    a, b, c = sm.request_slots("job", 3)
    (other,) = sm.request_slots("other", 1)
    sm.activate(b, "job")
    sm.activate(c, "job")
    sm.mark_releasing(c)
    assert sm.release_slots("job") == [a, b, c]
    assert sm.free_slots == 3
    assert sm.status(other) == SlotStatus(SlotState.ALLOCATED, "other")
    assert sm.release_slots("job") == []


def test_illegal_transitions_name_slot_state_and_event() -> None:
    sm = manager(tm0=2)
    slot = SlotId("tm0", 0)
    with pytest.raises(
        IllegalStateTransition, match=r"slot tm0/slot0: illegal transition FREE -> \? on event 'activate'"
    ):
        sm.activate(slot, "job")
    with pytest.raises(IllegalStateTransition, match=r"FREE -> \? on event 'free'"):
        sm.free(slot)
    with pytest.raises(IllegalStateTransition, match=r"FREE -> \? on event 'mark_releasing'"):
        sm.mark_releasing(slot)
    sm.request_slots("job", 1)
    with pytest.raises(IllegalStateTransition, match=r"ALLOCATED\('job'\) -> \? on event 'free'"):
        sm.free(slot)
    sm.activate(slot, "job")
    with pytest.raises(IllegalStateTransition, match=r"ACTIVE\('job'\) -> \? on event 'activate'"):
        sm.activate(slot, "job")
    sm.mark_releasing(slot)
    with pytest.raises(IllegalStateTransition, match=r"RELEASING\('job'\) -> \? on event 'mark_releasing'"):
        sm.mark_releasing(slot)
    assert sm.status(slot) == SlotStatus(SlotState.RELEASING, "job")


def test_activate_by_another_job_is_a_protocol_violation() -> None:
    sm = manager(tm0=1)
    (slot,) = sm.request_slots("job", 1)
    with pytest.raises(
        ProtocolViolation,
        match=r"slot tm0/slot0: event 'activate' for job 'intruder', but the slot is ALLOCATED\('job'\)",
    ):
        sm.activate(slot, "intruder")
    assert sm.status(slot) == SlotStatus(SlotState.ALLOCATED, "job")


def test_events_for_unknown_slots_are_protocol_violations() -> None:
    sm = manager(tm0=2)
    with pytest.raises(ProtocolViolation, match=r"slot tm0/slot5: event 'activate' .* offers slots 0..1"):
        sm.activate(SlotId("tm0", 5), "job")
    with pytest.raises(ProtocolViolation, match=r"slot gone/slot0: event 'free' .* 'gone' is not registered"):
        sm.free(SlotId("gone", 0))


# -- TaskManager loss ------------------------------------------------------------------


def test_unregister_returns_lost_allocations_per_job() -> None:
    sm = manager(tm0=2, tm1=3)
    sm.request_slots("j1", 3)  # tm0/0, tm0/1, tm1/0
    sm.request_slots("j2", 1)  # tm1/1
    sm.activate(SlotId("tm1", 1), "j2")
    lost = sm.unregister_task_manager("tm1")
    assert lost == {"j1": [SlotId("tm1", 0)], "j2": [SlotId("tm1", 1)]}
    assert sm.task_managers == ["tm0"]
    assert sm.total_slots == 2
    assert sm.slots_of("j1") == [SlotId("tm0", 0), SlotId("tm0", 1)]
    assert sm.slots_of("j2") == []


def test_unregister_of_an_idle_taskmanager_loses_nothing() -> None:
    sm = manager(tm0=2)
    assert sm.unregister_task_manager("tm0") == {}
    assert sm.total_slots == 0


def test_unregister_unknown_taskmanager_is_a_usage_error() -> None:
    with pytest.raises(
        UsageError, match=r"cannot unregister TaskManager 'tm9': not registered \(registered: \['tm0'\]\)"
    ):
        manager(tm0=1).unregister_task_manager("tm9")


def test_reregistered_taskmanager_goes_to_the_end_of_the_fill_order() -> None:
    sm = manager(tm0=1, tm1=1)
    sm.unregister_task_manager("tm0")
    sm.register_task_manager("tm0", 2)
    assert sm.task_managers == ["tm1", "tm0"]
    assert sm.request_slots("job", 2) == [SlotId("tm1", 0), SlotId("tm0", 0)]


def test_statistics_per_taskmanager() -> None:
    sm = manager(tm0=3, tm1=2)
    a, b, _ = sm.request_slots("j1", 3)
    sm.activate(a, "j1")
    sm.activate(b, "j1")
    sm.mark_releasing(b)
    stats = sm.statistics()
    assert stats.task_managers == {
        "tm0": TaskManagerSlots(total=3, free=0, allocated=1, active=1, releasing=1),
        "tm1": TaskManagerSlots(total=2, free=2, allocated=0, active=0, releasing=0),
    }
    assert (stats.total, stats.free, stats.allocated, stats.active, stats.releasing, stats.jobs) == (
        5,
        2,
        1,
        1,
        1,
        1,
    )


def test_pure_cores_do_not_import_trio_or_read_a_clock() -> None:
    import weir.cluster.heartbeat as heartbeat
    import weir.cluster.slot_manager as slot_manager

    for module in (slot_manager, heartbeat):
        source = Path(module.__file__ or "").read_text()
        for forbidden in ("import trio", "import time", "from time", "datetime"):
            assert forbidden not in source, f"{module.__name__} contains {forbidden!r}"

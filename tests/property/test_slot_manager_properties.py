"""Random register/request/release/unregister/lifecycle sequences against SlotManager and a model.

For any sequence: every registered slot is in exactly one state, a slot belongs to at most
one job (exactly one unless FREE), counts are conserved, allocation is all or nothing, and
a refused call changes nothing.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from weir.cluster.slot_manager import JobId, NotEnoughSlots, SlotId, SlotManager, SlotState, TaskManagerId
from weir.errors import ProtocolViolation

TASK_MANAGERS = ["tm0", "tm1", "tm2"]
JOBS = ["j0", "j1", "j2"]
SLOT_IDS = [SlotId(tm, i) for tm in TASK_MANAGERS for i in range(4)]

task_managers = st.sampled_from(TASK_MANAGERS)
jobs = st.sampled_from(JOBS)
slot_ids = st.sampled_from(SLOT_IDS)


class SlotManagerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sm = SlotManager()
        self.slot_counts: dict[TaskManagerId, int] = {}  # model: registered TaskManagers
        self.owner: dict[SlotId, JobId] = {}  # model: non-FREE slots and their job

    def _snapshot(self) -> object:
        return (self.sm.task_managers, self.sm.slots())

    def _free(self) -> list[SlotId]:
        return [
            SlotId(tm, i)
            for tm, n in self.slot_counts.items()
            for i in range(n)
            if SlotId(tm, i) not in self.owner
        ]

    @rule(tm=task_managers, slot_count=st.integers(1, 4))
    def register(self, tm: str, slot_count: int) -> None:
        before = self._snapshot()
        if tm in self.slot_counts and self.slot_counts[tm] != slot_count:
            try:
                self.sm.register_task_manager(tm, slot_count)
            except ProtocolViolation:
                assert self._snapshot() == before
                return
            raise AssertionError("re-registration with a different slot count was accepted")
        added = self.sm.register_task_manager(tm, slot_count)
        if tm in self.slot_counts:
            assert added == []
            assert self._snapshot() == before
        else:
            assert added == [SlotId(tm, i) for i in range(slot_count)]
            self.slot_counts[tm] = slot_count

    @rule(
        job=jobs,
        n=st.integers(1, 6),
        preferred=st.none() | st.lists(slot_ids, unique=True, max_size=3),
        raising=st.booleans(),
    )
    def request(self, job: str, n: int, preferred: list[SlotId] | None, raising: bool) -> None:
        if preferred is not None:
            preferred = preferred[:n]
        free_before = self._free()
        before = self._snapshot()
        if raising:
            try:
                got: list[SlotId] | None = self.sm.request_slots(job, n, preferred)
            except NotEnoughSlots as e:
                assert (e.needed, e.free, e.total) == (n, len(free_before), sum(self.slot_counts.values()))
                got = None
        else:
            got = self.sm.try_request(job, n, preferred)
        if len(free_before) < n:
            assert got is None
            assert self._snapshot() == before
            return
        assert got is not None
        assert len(got) == n == len(set(got))
        assert set(got) <= set(free_before)
        if preferred and set(preferred) <= set(free_before):
            assert got[: len(preferred)] == preferred
        elif not preferred:
            assert got == free_before[:n]  # fill order: registration order, then index
        for slot_id in got:
            self.owner[slot_id] = job

    @rule(job=jobs)
    def release(self, job: str) -> None:
        released = self.sm.release_slots(job)
        expected = [s for s in self.owner if self.owner[s] == job]
        assert set(released) == set(expected)
        for slot_id in expected:
            del self.owner[slot_id]

    @rule(tm=task_managers)
    def unregister(self, tm: str) -> None:
        if tm not in self.slot_counts:
            return
        lost = self.sm.unregister_task_manager(tm)
        expected: dict[JobId, set[SlotId]] = {}
        for slot_id, job in list(self.owner.items()):
            if slot_id.tm_id == tm:
                expected.setdefault(job, set()).add(slot_id)
                del self.owner[slot_id]
        assert {job: set(slots) for job, slots in lost.items()} == expected
        del self.slot_counts[tm]

    @rule(slot_id=slot_ids, job=jobs, event=st.sampled_from(["activate", "mark_releasing", "free"]))
    def lifecycle(self, slot_id: SlotId, job: str, event: str) -> None:
        before = self._snapshot()
        try:
            if event == "activate":
                self.sm.activate(slot_id, job)
            elif event == "mark_releasing":
                self.sm.mark_releasing(slot_id)
            else:
                self.sm.free(slot_id)
        except ProtocolViolation:
            assert self._snapshot() == before
            return
        if event == "free":
            del self.owner[slot_id]
        else:
            assert self.owner[slot_id] == self.sm.status(slot_id).job_id

    @invariant()
    def every_slot_has_exactly_one_state_and_at_most_one_job(self) -> None:
        slots = self.sm.slots()
        expected_ids = {SlotId(tm, i) for tm, n in self.slot_counts.items() for i in range(n)}
        assert set(slots) == expected_ids
        for status in slots.values():
            assert isinstance(status.state, SlotState)
            assert (status.state is SlotState.FREE) == (status.job_id is None)
        assert {
            s: status.job_id for s, status in slots.items() if status.state is not SlotState.FREE
        } == self.owner
        held = [self.sm.slots_of(job) for job in JOBS]
        flat = [s for slots_of_job in held for s in slots_of_job]
        assert len(flat) == len(set(flat)) == len(self.owner)

    @invariant()
    def counts_are_conserved(self) -> None:
        stats = self.sm.statistics()
        assert list(stats.task_managers) == list(self.slot_counts)
        for tm, per_tm in stats.task_managers.items():
            assert per_tm.total == self.slot_counts[tm]
            assert per_tm.free + per_tm.allocated + per_tm.active + per_tm.releasing == per_tm.total
        assert stats.total == sum(self.slot_counts.values()) == self.sm.total_slots
        assert stats.free + stats.allocated + stats.active + stats.releasing == stats.total
        assert stats.free == len(self._free()) == self.sm.free_slots
        assert stats.jobs == len(set(self.owner.values()))


SlotManagerMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
TestSlotManagerProperties = SlotManagerMachine.TestCase

"""Job status and execution state machines: the paths of seeds 000/004, then every (state, event) pair."""

from __future__ import annotations

from enum import Enum

import pytest

from weir.errors import IllegalStateTransition, ProtocolViolation
from weir.graph.status import (
    EXECUTION_STATE_EVENTS,
    EXECUTION_STATE_TRANSITIONS,
    JOB_STATUS_EVENTS,
    JOB_STATUS_TRANSITIONS,
    ExecutionState,
    ExecutionStateMachine,
    JobStatus,
    JobStatusMachine,
    Transition,
)

J = JobStatus
E = ExecutionState


def drive(machine: JobStatusMachine | ExecutionStateMachine, *events: str) -> list[Enum]:
    return [machine.on_event(event) for event in events]


# --- the states themselves ---------------------------------------------------------------


def test_job_terminal_states_follow_seed_004() -> None:
    assert {s for s in J if s.is_globally_terminal} == {J.FINISHED, J.CANCELED, J.FAILED}
    assert {s for s in J if s.is_terminal} == {J.FINISHED, J.CANCELED, J.FAILED, J.SUSPENDED}
    assert J.SUSPENDED.is_terminal and not J.SUSPENDED.is_globally_terminal


def test_execution_terminal_states() -> None:
    assert {s for s in E if s.is_terminal} == {E.FINISHED, E.CANCELED, E.FAILED}


def test_flink_spellings_are_kept() -> None:
    assert J.CANCELLING.name == "CANCELLING"
    assert E.CANCELING.name == "CANCELING"


@pytest.mark.parametrize(
    ("table", "states"),
    [(JOB_STATUS_TRANSITIONS, list(J)), (EXECUTION_STATE_TRANSITIONS, list(E))],
    ids=["job", "execution"],
)
def test_tables_leave_terminal_states_alone_and_reach_every_state(table, states) -> None:
    assert not [key for key in table if key[0].is_terminal]
    assert {target for target in table.values()} | {source for source, _ in table} == set(states)


def test_table_sizes() -> None:
    assert len(JOB_STATUS_TRANSITIONS) == 23
    # 5 forward + 5 cancel + 1 canceled + 2 cancel_unscheduled + 6 fail
    assert len(EXECUTION_STATE_TRANSITIONS) == 19


# --- job status paths --------------------------------------------------------------------


def test_job_happy_path() -> None:
    job = JobStatusMachine()
    assert job.state is J.INITIALIZING
    assert drive(job, "initialized", "schedule", "all_finished") == [J.CREATED, J.RUNNING, J.FINISHED]
    assert job.history == [
        Transition(J.INITIALIZING, "initialized", J.CREATED),
        Transition(J.CREATED, "schedule", J.RUNNING),
        Transition(J.RUNNING, "all_finished", J.FINISHED),
    ]
    assert job.is_terminal


def test_job_failure_path() -> None:
    job = JobStatusMachine(J.RUNNING)
    assert drive(job, "fail", "all_terminal") == [J.FAILING, J.FAILED]
    assert job.state.is_globally_terminal


def test_job_cancel_path() -> None:
    job = JobStatusMachine(J.RUNNING)
    assert drive(job, "cancel", "all_terminal") == [J.CANCELLING, J.CANCELED]


def test_job_restart_path() -> None:
    job = JobStatusMachine(J.RUNNING)
    assert drive(job, "restart", "restarted") == [J.RESTARTING, J.RUNNING]


def test_job_failing_then_restart_then_finish() -> None:
    job = JobStatusMachine(J.RUNNING)
    assert drive(job, "fail", "restart", "restarted", "all_finished") == [
        J.FAILING,
        J.RESTARTING,
        J.RUNNING,
        J.FINISHED,
    ]


def test_job_restart_through_created_as_seed_004_describes() -> None:
    job = JobStatusMachine(J.FAILING)
    assert drive(job, "restart", "reset", "schedule") == [J.RESTARTING, J.CREATED, J.RUNNING]


def test_job_restarts_exhausted_while_restarting() -> None:
    job = JobStatusMachine(J.RESTARTING)
    assert job.on_event("fail") is J.FAILED


@pytest.mark.parametrize("state", [J.CREATED, J.RUNNING, J.FAILING, J.RESTARTING, J.CANCELLING])
def test_job_suspension_is_only_locally_terminal(state: JobStatus) -> None:
    job = JobStatusMachine(state)
    assert job.on_event("suspend") is J.SUSPENDED
    assert job.is_terminal and not job.state.is_globally_terminal
    assert job.allowed_events() == ()
    with pytest.raises(IllegalStateTransition):
        job.on_event("restarted")


def test_job_cancelled_before_initialized() -> None:
    job = JobStatusMachine()
    assert job.on_event("cancel") is J.CANCELED


# --- execution state paths ---------------------------------------------------------------


def test_execution_happy_path() -> None:
    attempt = ExecutionStateMachine()
    assert attempt.state is E.CREATED
    assert drive(attempt, "schedule", "deploy", "initialize", "run", "finish") == [
        E.SCHEDULED,
        E.DEPLOYING,
        E.INITIALIZING,
        E.RUNNING,
        E.FINISHED,
    ]
    assert [t.event for t in attempt.history] == ["schedule", "deploy", "initialize", "run", "finish"]


def test_execution_cancel_waits_for_acknowledgement() -> None:
    attempt = ExecutionStateMachine(E.RUNNING)
    assert drive(attempt, "cancel", "canceled") == [E.CANCELING, E.CANCELED]


@pytest.mark.parametrize("state", [E.CREATED, E.SCHEDULED])
def test_execution_cancel_unscheduled_skips_canceling(state: ExecutionState) -> None:
    assert ExecutionStateMachine(state).on_event("cancel_unscheduled") is E.CANCELED


@pytest.mark.parametrize("state", [E.DEPLOYING, E.INITIALIZING, E.RUNNING, E.CANCELING])
def test_execution_cancel_unscheduled_refused_once_deployed(state: ExecutionState) -> None:
    with pytest.raises(IllegalStateTransition):
        ExecutionStateMachine(state).on_event("cancel_unscheduled")


def test_execution_fails_while_canceling() -> None:
    attempt = ExecutionStateMachine(E.CANCELING)
    assert attempt.on_event("fail") is E.FAILED


# --- every (state, event) pair -----------------------------------------------------------

PAIRS = [
    pytest.param(JobStatusMachine, JOB_STATUS_TRANSITIONS, state, event, id=f"job-{state.name}-{event}")
    for state in J
    for event in [*sorted(JOB_STATUS_EVENTS), "no_such_event"]
] + [
    pytest.param(
        ExecutionStateMachine, EXECUTION_STATE_TRANSITIONS, state, event, id=f"execution-{state.name}-{event}"
    )
    for state in E
    for event in [*sorted(EXECUTION_STATE_EVENTS), "no_such_event"]
]


@pytest.mark.parametrize(("machine_type", "table", "state", "event"), PAIRS)
def test_every_state_event_pair(machine_type, table, state, event) -> None:
    machine = machine_type(state, name=f"{machine_type.__name__}-under-test")
    expected = table.get((state, event))
    if expected is not None:
        assert machine.on_event(event) is expected
        assert machine.state is expected
        assert machine.history == [(state, event, expected)]
        return
    with pytest.raises(IllegalStateTransition) as raised:
        machine.on_event(event)
    message = str(raised.value)
    assert state.name in message
    assert f"'{event}'" in message
    assert machine.name in message
    assert raised.value.from_state is state and raised.value.event == event and raised.value.to_state == "?"
    assert isinstance(raised.value, ProtocolViolation)
    assert machine.state is state and machine.history == []


@pytest.mark.parametrize(
    ("machine_type", "state"),
    [(JobStatusMachine, s) for s in J if s.is_terminal]
    + [(ExecutionStateMachine, s) for s in E if s.is_terminal],
    ids=str,
)
def test_terminal_states_reject_every_event(machine_type, state) -> None:
    machine = machine_type(state)
    events = JOB_STATUS_EVENTS if machine_type is JobStatusMachine else EXECUTION_STATE_EVENTS
    assert machine.allowed_events() == () and machine.allowed_targets() == ()
    for event in sorted(events):
        with pytest.raises(IllegalStateTransition):
            machine.on_event(event)
    for target in type(state):
        with pytest.raises(IllegalStateTransition):
            machine.transition_to(target)
    assert machine.state is state and machine.history == []


# --- transition_to, allowed_events, allowed_targets --------------------------------------

TARGET_PAIRS = [
    pytest.param(JobStatusMachine, JOB_STATUS_TRANSITIONS, s, t, id=f"job-{s.name}-{t.name}")
    for s in J
    for t in J
] + [
    pytest.param(ExecutionStateMachine, EXECUTION_STATE_TRANSITIONS, s, t, id=f"execution-{s.name}-{t.name}")
    for s in E
    for t in E
]


@pytest.mark.parametrize(("machine_type", "table", "state", "target"), TARGET_PAIRS)
def test_transition_to_every_target(machine_type, table, state, target) -> None:
    events = [event for (source, event), to in table.items() if source is state and to is target]
    machine = machine_type(state)
    if events:
        assert machine.transition_to(target) is target
        assert machine.history == [(state, events[0], target)]
        return
    with pytest.raises(IllegalStateTransition) as raised:
        machine.transition_to(target)
    message = str(raised.value)
    assert state.name in message and target.name in message and machine.name in message
    assert machine.state is state and machine.history == []


def test_transition_to_with_event_records_that_event() -> None:
    job = JobStatusMachine(J.RUNNING)
    assert job.transition_to(J.FAILING, event="fail") is J.FAILING
    assert job.history == [Transition(J.RUNNING, "fail", J.FAILING)]


def test_transition_to_with_an_event_that_leads_elsewhere_is_refused() -> None:
    job = JobStatusMachine(J.RUNNING)
    with pytest.raises(IllegalStateTransition, match=r"RUNNING -> FINISHED on event 'cancel'"):
        job.transition_to(J.FINISHED, event="cancel")
    assert job.state is J.RUNNING and job.history == []


def test_allowed_events_and_targets_follow_the_table() -> None:
    job = JobStatusMachine(J.RESTARTING)
    assert job.allowed_events() == ("restarted", "reset", "cancel", "fail", "suspend")
    assert job.allowed_targets() == (J.RUNNING, J.CREATED, J.CANCELED, J.FAILED, J.SUSPENDED)
    attempt = ExecutionStateMachine(E.CREATED)
    assert set(attempt.allowed_events()) == {"schedule", "cancel", "cancel_unscheduled", "fail"}
    assert set(attempt.allowed_targets()) == {E.SCHEDULED, E.CANCELING, E.CANCELED, E.FAILED}


def test_a_restart_means_a_new_attempt() -> None:
    first = ExecutionStateMachine(name="map (1/4) #0")
    drive(first, "schedule", "deploy", "initialize", "run", "fail")
    second = ExecutionStateMachine(name="map (1/4) #1")
    assert first.state is E.FAILED and second.state is E.CREATED and second.history == []
    with pytest.raises(IllegalStateTransition, match=r"map \(1/4\) #0"):
        first.on_event("schedule")

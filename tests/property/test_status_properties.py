"""Random event sequences against the job and execution machines, with "skip illegal" semantics."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir.errors import IllegalStateTransition
from weir.graph.status import (
    EXECUTION_STATE_EVENTS,
    EXECUTION_STATE_TRANSITIONS,
    JOB_STATUS_EVENTS,
    JOB_STATUS_TRANSITIONS,
    ExecutionState,
    ExecutionStateMachine,
    JobStatus,
    JobStatusMachine,
)

MACHINES = [
    pytest.param(JobStatusMachine, JobStatus, JOB_STATUS_TRANSITIONS, JOB_STATUS_EVENTS, id="job"),
    pytest.param(
        ExecutionStateMachine,
        ExecutionState,
        EXECUTION_STATE_TRANSITIONS,
        EXECUTION_STATE_EVENTS,
        id="execution",
    ),
]


def events_of(events: frozenset[str]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from([*sorted(events), "no_such_event"]), max_size=40)


@pytest.mark.parametrize(("machine_type", "states", "table", "events"), MACHINES)
@given(data=st.data())
def test_random_events_keep_every_invariant(
    machine_type: Callable[..., JobStatusMachine | ExecutionStateMachine],
    states: type[JobStatus] | type[ExecutionState],
    table: dict,
    events: frozenset[str],
    data: st.DataObject,
) -> None:
    start = data.draw(st.sampled_from(list(states)), label="start")
    sequence = data.draw(events_of(events), label="events")
    machine = machine_type(start)
    seen = [machine.state]
    taken = 0
    for event in sequence:
        before = machine.state
        try:
            after = machine.on_event(event)
        except IllegalStateTransition as error:
            assert (before, event) not in table
            assert error.from_state is before and error.event == event
            assert machine.state is before
        else:
            assert table[(before, event)] is after is machine.state
            taken += 1
        assert machine.state in states
        seen.append(machine.state)

    # history chains from the start state to the current state, and only through table entries
    assert len(machine.history) == taken
    previous = start
    for entry in machine.history:
        assert entry.from_state is previous
        assert table[(entry.from_state, entry.event)] is entry.to_state
        previous = entry.to_state
    assert previous is machine.state

    # once terminal, the state never changes again
    first_terminal = next((i for i, state in enumerate(seen) if state.is_terminal), None)
    if first_terminal is not None:
        assert all(state is seen[first_terminal] for state in seen[first_terminal:])


@pytest.mark.parametrize(("machine_type", "states", "table", "events"), MACHINES)
@given(data=st.data())
def test_random_targets_move_only_along_table_edges(
    machine_type: Callable[..., JobStatusMachine | ExecutionStateMachine],
    states: type[JobStatus] | type[ExecutionState],
    table: dict,
    events: frozenset[str],
    data: st.DataObject,
) -> None:
    start = data.draw(st.sampled_from(list(states)), label="start")
    targets = data.draw(st.lists(st.sampled_from(list(states)), max_size=30), label="targets")
    machine = machine_type(start)
    for target in targets:
        before = machine.state
        allowed = machine.allowed_targets()
        try:
            machine.transition_to(target)
        except IllegalStateTransition:
            assert target not in allowed
            assert machine.state is before
        else:
            assert target in allowed and not before.is_terminal
            assert machine.state is target
    previous = start
    for entry in machine.history:
        assert entry.from_state is previous and table[(entry.from_state, entry.event)] is entry.to_state
        previous = entry.to_state
    assert previous is machine.state

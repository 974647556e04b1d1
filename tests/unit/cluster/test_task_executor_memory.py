"""A TaskExecutor frees what its ended tasks held before the next job allocates."""

from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from weir.cluster import task_executor as te


class _Network:
    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep_forever()


@dataclass
class _Deployment:
    execution_id: str
    name_with_subtask: str


_TASKS: list[weakref.ref[Any]] = []


class _CyclicTask:
    """A task whose operators and state refer to one another, as a real task's do."""

    def __init__(self, deployment: Any, network: Any) -> None:
        self.operators = {"window": self}
        self.state = bytearray(1 << 20)
        _TASKS.append(weakref.ref(self))

    async def run(self, on_running: Any) -> None:
        on_running()
        await trio.sleep(0.01)


@pytest.fixture
def collector_off() -> Any:
    was_enabled = gc.isenabled()
    gc.disable()  # only the executor's own collection may free the tasks
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


async def test_in_a_taskmanager_process_the_last_task_to_end_frees_the_cycles_of_every_ended_task(
    monkeypatch: pytest.MonkeyPatch, collector_off: None
) -> None:
    monkeypatch.setattr(te, "Task", _CyclicTask)
    _TASKS.clear()
    events: list[tuple[str, str]] = []
    executor = te.TaskExecutor("tm-0", 2, _Network(), None, collect_when_idle=True)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(executor.run)
        report = lambda e, what, exc: events.append((e, what))  # noqa: E731
        # a TaskManager process keeps no handle: only their events are kept here
        ended = [
            executor.submit_task(_Deployment(e, f"{e} ({i + 1}/2)"), report).done for i, e in enumerate("ab")
        ]  # type: ignore[arg-type]
        for done in ended:
            await done.wait()
        await trio.sleep(0)
        assert ("a", "finish") in events and ("b", "finish") in events
        assert len(_TASKS) == 2 and all(ref() is None for ref in _TASKS), (
            "an ended task's cycle outlived the executor's last task"
        )
        nursery.cancel_scope.cancel()

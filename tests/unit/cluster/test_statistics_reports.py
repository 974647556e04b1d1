"""A TaskManager process's statistics reports hold no task past its end."""

from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass, field
from typing import Any

import trio

from weir.cluster import entrypoint


class _Task:
    def __init__(self) -> None:
        self.state = bytearray(1 << 20)  # stands for a window's panes

    def statistics(self) -> Any:
        raise RuntimeError("not reported here")  # statistics_payload gives b"": nothing is sent


@dataclass
class _Handle:
    task: _Task | None


@dataclass
class _Executor:
    tasks: dict[str, _Handle] = field(default_factory=dict)


class _Connection:
    def send_nowait(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a task whose statistics fail sends nothing")


async def test_a_task_that_ended_is_not_held_while_the_reporter_sleeps(autojump_clock: Any) -> None:
    executor = _Executor()
    task = _Task()
    executor.tasks["e1"] = _Handle(task)
    gone = weakref.ref(task)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(entrypoint._report_statistics, executor, _Connection(), 1.0)
        await trio.sleep(1.5)  # one round has seen the task
        del executor.tasks["e1"]  # the task ended: the executor lets it go
        del task
        gc.collect()
        assert gone() is None, "the statistics reporter still holds the ended task during its sleep"
        await trio.sleep(1.0)  # the next round runs on an empty executor
        nursery.cancel_scope.cancel()

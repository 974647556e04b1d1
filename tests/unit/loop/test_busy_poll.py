"""Busy polling: the policy's windows, the clock, and how execute() chooses it."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
import trio

from weir.cluster.client import loop_clock
from weir.common import Configuration
from weir.common.typeinfo import Types
from weir.datastream import StreamExecutionEnvironment
from weir.errors import UsageError
from weir.loop.busy_poll import BusyPollClock, BusyPollPolicy

MS = 1e-3
US = 1e-6


def _drive(policy: BusyPollPolicy, steps: list[tuple[float, float]], start: float = 0.0) -> list[bool]:
    """Feed ``(wall seconds later, CPU seconds spent)`` idle moments; the answers."""
    now, cpu, answers = start, 0.0, []
    for dt, spent in steps:
        now += dt
        cpu += spent
        answers.append(policy.on_idle(now, cpu))
    return answers


def _rounds(ms: int, busy_us: float) -> list[tuple[float, float]]:
    """One round a millisecond for ``ms`` ms, each working ``busy_us``."""
    return [(MS, busy_us * US)] * ms


def test_a_loaded_loop_polls_from_the_end_of_its_first_window() -> None:
    policy = BusyPollPolicy(min_load=0.5, window_s=10 * MS)
    answers = _drive(policy, [(0.0, 0.0), *_rounds(25, busy_us=700)])
    assert answers[:10] == [False] * 10  # the first window is measured, not guessed
    assert all(answers[10:])
    assert policy.polling


def test_a_lightly_loaded_loop_keeps_blocking() -> None:
    policy = BusyPollPolicy(min_load=0.5, window_s=10 * MS)
    assert not any(_drive(policy, [(0.0, 0.0), *_rounds(50, busy_us=400)]))


def test_empty_polls_are_not_work_so_polling_stops_one_window_after_the_load() -> None:
    policy = BusyPollPolicy(min_load=0.5, window_s=10 * MS, work_min_s=25 * US)
    _drive(policy, [(0.0, 0.0), *_rounds(20, busy_us=800)])
    assert policy.polling
    # the load stops: the loop polls every 5 us, each poll costing 4 us of CPU
    idle = [(5 * US, 4 * US)] * 4000  # 20 ms
    answers = _drive(policy, idle, start=20 * MS)
    assert not answers[-1]
    first_block = answers.index(False)
    assert first_block * 5 * US <= 10 * MS + 5 * US  # within one window


def test_the_answer_changes_only_at_the_end_of_a_window() -> None:
    policy = BusyPollPolicy(min_load=0.5, window_s=10 * MS)
    answers = _drive(policy, [(0.0, 0.0), *_rounds(10, busy_us=900), *_rounds(9, busy_us=0), (MS, 0.0)])
    assert answers[10:20] == [True] * 10  # idle millisecond after idle millisecond, still polling
    assert answers[20] is False  # the second window ends (at 20 ms) with none of it busy


def test_work_in_steps_below_the_threshold_does_not_count() -> None:
    policy = BusyPollPolicy(min_load=0.5, window_s=10 * MS, work_min_s=25 * US)
    # 20 us of CPU every 30 us: two thirds busy, but in pieces no larger than an empty poll's
    assert not any(_drive(policy, [(0.0, 0.0), *[(30 * US, 20 * US)] * 1000]))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_load": 0.0}, "minimum load"),
        ({"min_load": 1.5}, "minimum load"),
        ({"min_load": 0.5, "window_s": 0.0}, "window"),
        ({"min_load": 0.5, "work_min_s": -1.0}, "smallest work"),
    ],
)
def test_a_policy_with_impossible_settings_is_refused(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BusyPollPolicy(**kwargs)


class _Fixed(BusyPollPolicy):
    def __init__(self, answer: bool) -> None:
        super().__init__(min_load=0.5)
        self.answer = answer

    def on_idle(self, now_s: float, cpu_s: float) -> bool:
        return self.answer


def test_the_clock_polls_when_the_policy_says_so_and_otherwise_sleeps_until_the_deadline() -> None:
    polling, blocking = BusyPollClock(_Fixed(True)), BusyPollClock(_Fixed(False))
    for clock in (polling, blocking):
        clock.start_clock()
    deadline = blocking.current_time() + 0.5
    assert polling.deadline_to_sleep_time(polling.current_time() + 0.5) == 0.0
    assert 0.49 < blocking.deadline_to_sleep_time(deadline) <= 0.5
    assert blocking.deadline_to_sleep_time(math.inf) == math.inf
    assert polling.current_time() > 10_000  # an arbitrary origin, like Trio's own clock


def test_without_a_policy_the_clock_never_polls() -> None:
    clock = BusyPollClock(None)
    clock.start_clock()
    deadline = clock.current_time() + 0.5
    assert 0.49 < clock.deadline_to_sleep_time(deadline) <= 0.5


def test_the_clock_counts_whole_seconds_from_clock_monotonic() -> None:
    """So a grid of whole milliseconds on it has the same instants in every process."""
    for _ in range(5):
        clock = BusyPollClock(None)
        before = time.perf_counter()
        now = clock.current_time()
        after = time.perf_counter()
        assert now - after - 1e-9 <= round(now - before) <= now - before + 1e-9
    assert time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"


def test_a_job_runs_on_the_polling_clock_unless_it_is_turned_off() -> None:
    def clock_of_a_job(conf: Configuration) -> list[str]:
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(1)
        seen: list[str] = []

        def record(x: Any) -> Any:
            seen.append(type(trio.lowlevel.current_clock()).__name__)
            return x

        env.from_collection([1, 2, 3], Types.LONG()).map(record, Types.LONG()).print()
        env.execute("which clock")
        return seen

    assert set(clock_of_a_job(Configuration())) == {"BusyPollClock"}
    off = Configuration()
    off.set_string("execution.busy-poll.enabled", "false")
    assert set(clock_of_a_job(off)) == {"SystemClock"}


def test_the_minimum_load_is_read_from_the_configuration_and_checked() -> None:
    conf = Configuration()
    conf.set_string("execution.busy-poll.min-load", "0.8")
    clock = loop_clock(StreamExecutionEnvironment.get_execution_environment(conf))
    assert isinstance(clock, BusyPollClock) and clock.policy.min_load == 0.8
    with pytest.raises(UsageError, match=r"execution.busy-poll.min-load: must be within \(0, 1\], got '0'"):
        Configuration().set_string("execution.busy-poll.min-load", "0")

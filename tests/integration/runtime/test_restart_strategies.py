"""``env.set_restart_strategy(RestartStrategies...)``: the JobMaster restarts a failing job
as the configuration says, because the setter writes Flink's ``restart-strategy.*`` keys."""

from __future__ import annotations

import pytest

from weir.common import RestartStrategies, Types
from weir.datastream import StreamExecutionEnvironment

ARMED = {"failures_left": 0}


def fail_while_armed(n: int) -> int:
    if n == 3 and ARMED["failures_left"] > 0:
        ARMED["failures_left"] -= 1
        raise RuntimeError("injected failure at record 3")
    return n


def run_with(strategy: object, failures: int, checkpointing: bool = True) -> list[int]:
    """The job's records through ``execute_and_collect``, exactly once across its restarts
    (with checkpointing: without it, a restart ends the iterator, as Flink's)."""
    ARMED["failures_left"] = failures
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_restart_strategy(strategy)
    if checkpointing:
        env.enable_checkpointing(60_000)  # none completes: the restarts start from the beginning
    ds = env.from_collection(list(range(6)), type_info=Types.LONG()).map(
        fail_while_armed, output_type=Types.LONG()
    )
    with ds.execute_and_collect() as results:
        return sorted(results)


def test_fixed_delay_restart_recovers_from_as_many_failures_as_it_allows() -> None:
    assert run_with(RestartStrategies.fixed_delay_restart(2, 0), failures=2) == list(range(6))


def test_fixed_delay_restart_gives_up_after_its_attempts() -> None:
    with pytest.raises(Exception, match="injected failure"):
        run_with(RestartStrategies.fixed_delay_restart(1, 0), failures=2)


def test_no_restart_fails_the_job_on_the_first_failure() -> None:
    with pytest.raises(Exception, match="injected failure"):
        run_with(RestartStrategies.no_restart(), failures=1)


def test_failure_rate_restart_recovers_within_its_rate() -> None:
    assert run_with(RestartStrategies.failure_rate_restart(3, 60_000, 0), failures=2) == list(range(6))


def test_without_checkpointing_a_restart_ends_the_collect_iterator_with_an_error() -> None:
    with pytest.raises(Exception, match="the job restarted, and without checkpointing"):
        run_with(RestartStrategies.fixed_delay_restart(2, 0), failures=1, checkpointing=False)

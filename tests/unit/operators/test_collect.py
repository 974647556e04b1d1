"""``execute_and_collect``'s guarantees (``weir.operators.collect``): what the client returns,
and when, for each of Flink's three cases; the sink's offsets, commits and restarts."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from weir.codec.batch import Batch
from weir.errors import JobExecutionError, ProtocolViolation
from weir.operators.base import OperatorContext, Output
from weir.operators.collect import CollectResults, CollectSinkOperator, check_message


def feed(results: CollectResults, *messages: tuple[Any, ...]) -> list[Any]:
    out: list[Any] = []
    for message in messages:
        out.extend(results.take(message))
    return out


def test_exactly_once_returns_records_when_a_commit_covers_them() -> None:
    results = CollectResults("exactly_once")
    assert feed(results, ("records", 0, ["a", "b"]), ("records", 2, ["c"])) == []
    assert feed(results, ("commit", 2)) == ["a", "b"]
    assert feed(results, ("records", 3, ["d"]), ("commit", 4)) == ["c", "d"]
    assert feed(results, ("commit", 4)) == []  # a repeated commit returns nothing twice


def test_exactly_once_across_a_restart_neither_repeats_nor_loses_a_record() -> None:
    results = CollectResults("exactly_once")
    out = feed(results, ("records", 0, [0, 1, 2]), ("commit", 2), ("records", 3, [3, 4]))
    assert out == [0, 1]
    # checkpoint at offset 4 completed but the sink failed before it learnt so: the restart
    # commits 4 (record 2 and 3 were in that checkpoint) and drops 4 (sent again)
    out += feed(results, ("restart", 4), ("records", 4, [4, 5]), ("commit", 6))
    assert out == [0, 1, 2, 3, 4, 5]


def test_exactly_once_restored_from_an_older_checkpoint_skips_what_it_returned() -> None:
    results = CollectResults("exactly_once")
    out = feed(results, ("records", 0, [0, 1, 2, 3]), ("commit", 4))
    out += feed(results, ("restart", 2), ("records", 2, [2, 3, 4]), ("commit", 5))
    assert out == [0, 1, 2, 3, 4]


def test_exactly_once_never_returns_what_no_commit_covered() -> None:
    results = CollectResults("exactly_once")
    assert feed(results, ("records", 0, [0, 1]), ("commit", 1), ("records", 2, [2])) == [0]


def test_at_least_once_returns_records_as_they_come_and_accepts_a_restart() -> None:
    results = CollectResults("at_least_once")
    assert feed(results, ("records", 0, [0, 1]), ("restart", 1), ("records", 1, [1, 2])) == [0, 1, 1, 2]


def test_without_checkpointing_records_come_at_once_and_a_restart_is_an_error() -> None:
    results = CollectResults("none")
    assert feed(results, ("records", 0, [0, 1]), ("commit", 2)) == [0, 1]
    with pytest.raises(JobExecutionError, match="the job restarted, and without checkpointing"):
        results.take(("restart", 0))


@pytest.mark.parametrize(
    "message",
    [["records", 0, []], ("records", -1, []), ("records", 0, (1,)), ("commit",), ("restart", True), ("x", 1)],
)
def test_a_malformed_collect_message_is_a_protocol_violation(message: Any) -> None:
    with pytest.raises(ProtocolViolation, match="TaskManager tm sent collect message"):
        check_message(message, "TaskManager tm")


class _NoOutput(Output):
    """A sink emits nothing."""


def sink(attempt: int = 0, restored_offset: int | None = None) -> tuple[CollectSinkOperator, list[Any]]:
    sent: list[Any] = []

    class Channel:
        async def send(self, message: Any) -> None:
            sent.append(message)

    operator = CollectSinkOperator("collect", Channel())
    context = OperatorContext(
        task_name="t", operator_name="collect", operator_id="0" * 32, subtask_index=0, parallelism=1,
        max_parallelism=128, attempt_number=attempt, batch_mode=False, processing_time_ms=lambda: 0,
        is_restored=restored_offset is not None,
    )  # fmt: skip
    if restored_offset is not None:
        from weir.common.typeinfo import Types
        from weir.core.state import ListStateDescriptor

        state = context.operator_state().get_list_state(ListStateDescriptor("collect-offset", Types.LONG()))
        state.update([restored_offset])
    operator.setup(context, _NoOutput())
    operator.initialize_state()
    operator.open()
    return operator, sent


def test_the_sink_numbers_its_records_and_commits_at_completed_checkpoints_and_at_the_end() -> None:
    operator, sent = sink()
    operator.process_batch(Batch(["a", "b"]))
    operator.snapshot_state(1)
    operator.process_batch(Batch(["c"]))
    operator.snapshot_state(2)
    operator.notify_checkpoint_aborted(2)
    operator.notify_checkpoint_complete(1)
    operator.finish()
    trio.run(operator.drain)
    assert sent == [("records", 0, ["a", "b"]), ("records", 2, ["c"]), ("commit", 2), ("commit", 3)]
    assert operator._state.get() == [3]  # what checkpoint 2 holds: the offset at its barrier


def test_a_restarted_sink_says_so_first_and_goes_on_from_its_restored_offset() -> None:
    operator, sent = sink(attempt=2, restored_offset=5)
    operator.process_batch(Batch(["f"]))
    trio.run(operator.drain)
    assert sent == [("restart", 5), ("records", 5, ["f"])]
    fresh, first = sink(attempt=1)
    trio.run(fresh.drain)
    assert first == [("restart", 0)]  # restarted without a checkpoint: from the beginning

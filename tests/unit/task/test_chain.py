"""The operator chain's pieces that need no running task: guards and chained-edge type checks."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from weir.codec.batch import Batch
from weir.common.typeinfo import Types
from weir.errors import OperatorFailure, UsageError
from weir.task.chain import OperatorGuard, type_checked


def _guard(process: Any) -> OperatorGuard:
    operator: Any = SimpleNamespace(name="parse", process_batch=process)
    return OperatorGuard(operator, subtask=1, parallelism=4)


def test_a_failing_operator_is_named_with_its_subtask() -> None:
    def process(batch: Batch) -> None:
        raise ValueError("bad record")

    with pytest.raises(OperatorFailure) as info:
        _guard(process).process(Batch([1]))
    assert info.value.operator == "parse" and info.value.subtask_index == 1
    assert "subtask 2/4" in str(info.value) and isinstance(info.value.cause, ValueError)


def test_an_operator_failure_from_further_down_the_chain_keeps_its_name() -> None:
    downstream = OperatorFailure("sink", 1, 4, RuntimeError("disk full"))

    def process(batch: Batch) -> None:
        raise downstream

    with pytest.raises(OperatorFailure) as info:
        _guard(process).process(Batch([1]))
    assert info.value is downstream


def test_a_typed_chained_edge_rejects_a_record_of_another_type() -> None:
    seen: list[Batch] = []
    checked = type_checked(seen.append, Types.LONG())
    checked(Batch([1, 2]))
    assert seen == [Batch([1, 2])]
    with pytest.raises(UsageError):
        checked(Batch(["three"]))
    assert len(seen) == 1


def test_an_untyped_or_pickled_edge_is_not_checked() -> None:
    seen: list[Batch] = []
    assert type_checked(seen.append, None) == seen.append
    checked = type_checked(seen.append, Types.PICKLED_BYTE_ARRAY())
    checked(Batch([object()]))
    assert len(seen) == 1

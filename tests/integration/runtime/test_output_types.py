"""A declared ``output_type`` holds where the records go: inside a chain and across an exchange,
and a record that does not fit names the operator that produced it."""

from __future__ import annotations

import pytest

from weir.common import Types
from weir.datastream import StreamExecutionEnvironment
from weir.errors import JobExecutionError


def _run_mistyped_map(exchange: bool) -> str:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    printed: list[object] = []
    mapped = env.from_collection([1, 2, 3], Types.LONG()).map(lambda x: "s", output_type=Types.LONG())
    mapped = mapped.name("stringify")
    if exchange:
        mapped = mapped.rebalance()
    mapped.map(lambda x: x).name("after").add_sink(printed.append)
    with pytest.raises(JobExecutionError) as info:
        env.execute("mistyped")
    assert printed == []
    return str(info.value)


@pytest.mark.parametrize("exchange", [False, True], ids=["chained", "exchange"])
def test_a_record_that_does_not_fit_output_type_names_its_operator(exchange: bool) -> None:
    message = _run_mistyped_map(exchange)
    assert "operator 'stringify' (subtask 1/1) failed: UsageError" in message
    assert "record 0 does not match Types.LONG(): got 's' (str)" in message


def test_rows_of_the_declared_type_pass_the_chain() -> None:
    row = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.LONG()])
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    seen: list[object] = []
    env.from_collection([1, 2], Types.LONG()).map(
        lambda x: (f"w{x}", None if x == 2 else x), output_type=row
    ).add_sink(seen.append)
    env.execute("typed")
    assert seen == [("w1", 1), ("w2", None)]

"""A declared ``output_type`` holds where the records go: inside a chain and across an exchange,
and a record that does not fit names the operator that produced it."""

from __future__ import annotations

from typing import Any

import pytest

from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.errors import JobExecutionError
from weir.task.chain import passes_checked_records


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


def _typed_chain(stringify: object) -> tuple[StreamExecutionEnvironment, list[object]]:
    """LONG source → map → filter → assign timestamps → map → sink, all chained."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    seen: list[object] = []
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda x, ts: 7)
    (
        env.from_collection([1, 2, 3], Types.LONG())
        .map(stringify, output_type=Types.LONG())
        .name("stringify")
        .filter(lambda x: True)
        .name("keep")
        .assign_timestamps_and_watermarks(strategy)
        .name("stamp")
        .map(lambda x: x, output_type=Types.LONG())
        .name("after")
        .add_sink(seen.append)
    )
    return env, seen


def test_a_filter_and_a_timestamp_assignment_pass_on_records_checked_before_them() -> None:
    env, _ = _typed_chain(lambda x: x)
    graph = env.get_stream_graph()
    checked = {
        graph.node(e.source_id).name: type_checked_on(graph, e)
        for n in graph.nodes.values()
        for e in n.out_edges
    }
    assert checked == {
        "Source: Collection Source": True,
        "stringify": True,
        "keep": False,
        "stamp": False,
        "after": True,
    }


def type_checked_on(graph: Any, edge: Any) -> bool:
    """Whether the chain checks the records of ``edge`` (as ``OperatorChain.build`` decides)."""
    from weir.operators.factory import create_operator

    node = graph.node(edge.source_id)
    if node.is_source:
        return True
    return not passes_checked_records(graph, edge, create_operator(node, {}, 0))


def test_a_mistyped_record_before_a_filter_names_the_operator_that_made_it() -> None:
    env, seen = _typed_chain(lambda x: "s" if x == 2 else x)
    with pytest.raises(JobExecutionError) as info:
        env.execute("mistyped before a filter")
    assert seen == []
    assert "operator 'stringify' (subtask 1/1) failed: UsageError" in str(info.value)
    assert "record 1 does not match Types.LONG(): got 's' (str)" in str(info.value)


def test_records_through_a_filter_and_a_timestamp_assignment_arrive_unchanged() -> None:
    env, seen = _typed_chain(lambda x: x * 10)
    env.execute("typed chain")
    assert seen == [10, 20, 30]

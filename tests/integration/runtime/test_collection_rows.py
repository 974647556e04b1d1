"""``from_collection`` with a ROW type hands Rows to the next operator, chained or not, as
PyFlink's collection source does (Flink's ``basic_operations.py`` example relies on it)."""

from __future__ import annotations

import json

import pytest

from weir.common import Row, Types
from weir.datastream import StreamExecutionEnvironment

PEOPLE = Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()])


def _update_tel(data: Row) -> tuple[int, str]:
    info = json.loads(data.info)
    info["tel"] += 1
    return data.id, json.dumps(info)


@pytest.mark.parametrize("exchange", [False, True], ids=["chained", "exchange"])
def test_basic_operations_example_reads_fields_by_name(exchange: bool) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    ds = env.from_collection(
        [(1, '{"name": "Flink", "tel": 123}'), (2, '{"name": "hello", "tel": 135}')], PEOPLE
    )
    if exchange:
        ds = ds.rebalance()
    out = ds.map(_update_tel).execute_and_collect(limit=2)
    assert out == [(1, '{"name": "Flink", "tel": 124}'), (2, '{"name": "hello", "tel": 136}')]


def test_rows_at_the_source_are_what_an_exchange_delivers() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    seen: list[object] = []
    positional = Types.ROW([Types.LONG(), Types.STRING()])
    env.from_collection([(1, "a"), [2, "b"], Row(3, "c")], positional).map(
        lambda r: (type(r).__name__, r.get_field_names(), r[0], r[1])
    ).add_sink(seen.append)
    env.execute("rows")
    assert seen == [("Row", None, 1, "a"), ("Row", None, 2, "b"), ("Row", None, 3, "c")]


def test_tuple_types_stay_tuples() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    pair = Types.TUPLE([Types.LONG(), Types.STRING()])
    assert env.from_collection([(1, "a")], pair).map(lambda t: type(t).__name__).execute_and_collect(
        limit=1
    ) == ["tuple"]

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


@pytest.mark.parametrize("exchange", [False, True], ids=["chained", "exchange"])
def test_rows_of_types_row_are_named_f0_f1_as_pyflink_names_them(exchange: bool) -> None:
    """PyFlink's row coder names the fields of a ``Types.ROW`` f0, f1, ...: a function sees
    ``Row(f0=1, f1='a')`` whether the record came straight from the source or over an exchange."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    seen: list[object] = []
    positional = Types.ROW([Types.LONG(), Types.STRING()])
    ds = env.from_collection([(1, "a"), [2, "b"], Row(3, "c")], positional)
    if exchange:
        ds = ds.rebalance()
    ds.map(lambda r: (r.get_field_names(), r.f1, str(r))).add_sink(seen.append)
    env.execute("rows")
    assert seen == [
        (["f0", "f1"], "a", "Row(f0=1, f1='a')"),
        (["f0", "f1"], "b", "Row(f0=2, f1='b')"),
        (["f0", "f1"], "c", "Row(f0=3, f1='c')"),
    ]


def test_a_row_made_by_a_function_stays_positional() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    out = (
        env.from_collection([(1, "a")], Types.ROW([Types.LONG(), Types.STRING()]))
        .map(lambda r: Row(r[1], r[0]))
        .rebalance()
        .map(str)
        .execute_and_collect(limit=1)
    )
    assert out == ["<Row('a', 1)>"]


def test_tuple_types_stay_tuples() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    pair = Types.TUPLE([Types.LONG(), Types.STRING()])
    assert env.from_collection([(1, "a")], pair).map(lambda t: type(t).__name__).execute_and_collect(
        limit=1
    ) == ["tuple"]

"""``print()`` writes what PyFlink 2.3's print sink writes; the expected lines below are the
ones a PyFlink job printed for the same records and types."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest

from weir.common import Instant, Row, Types
from weir.common.typeinfo import TypeInformation
from weir.operators.printing import formatter_for, java_double

TUPLE4 = Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG(), Types.LONG()])


@pytest.mark.parametrize(
    ("value", "type_info", "line"),
    [
        (("hi", 0, 5, 4), TUPLE4, "(hi,0,5,4)"),
        (
            (1.5, 1e10, 1e-5, 123456789.0, True, ("a", 1)),
            Types.TUPLE([Types.DOUBLE()] * 4 + [Types.BOOLEAN(), Types.TUPLE([Types.STRING(), Types.INT()])]),
            "(1.5,1.0E10,1.0E-5,1.23456789E8,true,(a,1))",
        ),
        (
            ([1, 2], {"k": 1}, Row(1, "a")),
            Types.TUPLE(
                [
                    Types.LIST(Types.INT()),
                    Types.MAP(Types.STRING(), Types.INT()),
                    Types.ROW([Types.INT(), Types.STRING()]),
                ]
            ),
            "([1, 2],{k=1},+I[1, a])",
        ),
        (
            (
                decimal.Decimal("1.50"),
                datetime.date(2020, 1, 2),
                datetime.time(3, 4, 5),
                datetime.datetime(2020, 1, 2, 3, 4, 5, 600000),
                datetime.datetime(2020, 1, 2, 3, 4, 5),
            ),
            Types.TUPLE(
                [
                    Types.BIG_DEC(),
                    Types.SQL_DATE(),
                    Types.SQL_TIME(),
                    Types.SQL_TIMESTAMP(),
                    Types.SQL_TIMESTAMP(),
                ]
            ),
            "(1.50,2020-01-02,03:04:05,2020-01-02 03:04:05.6,2020-01-02 03:04:05.0)",
        ),
        (Row("a", 2), None, "<Row('a', 2)>"),
        (Row(x=1, y="b"), None, "Row(x=1, y='b')"),
        (("a", 1), None, "('a', 1)"),
        (None, None, "None"),
        ("s", None, "s"),
        (1.5, None, "1.5"),
        (("t", None), None, "('t', None)"),
        (Row(x=1, y="b"), Types.ROW_NAMED(["x", "y"], [Types.INT(), Types.STRING()]), "+I[1,b]"),
        (
            Row("a", 2, None, Row(1, "z"), 1.5),
            Types.ROW(
                [
                    Types.STRING(),
                    Types.INT(),
                    Types.STRING(),
                    Types.ROW([Types.INT(), Types.STRING()]),
                    Types.DOUBLE(),
                ]
            ),
            "+I[a,2,None,Row(f0=1, f1='z'),1.5]",
        ),
        (True, Types.BOOLEAN(), "true"),
        (1e7, Types.DOUBLE(), "1.0E7"),
        (0.001, Types.DOUBLE(), "0.001"),
        (0.0001, Types.DOUBLE(), "1.0E-4"),
        (2.5, Types.FLOAT(), "2.5"),
        (Instant.of_epoch_milli(1_500), Types.INSTANT(), "1970-01-01T00:00:01.500Z"),
    ],
)
def test_a_record_prints_as_in_pyflink(value: Any, type_info: TypeInformation | None, line: str) -> None:
    assert formatter_for(type_info)(value) == line


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.0, "0.0"), (-0.0, "-0.0"), (100.0, "100.0"), (9999999.0, "9999999.0"), (-2.5e-7, "-2.5E-7"),
     (float("nan"), "NaN"), (float("-inf"), "-Infinity"), (0.1, "0.1"), (1e22, "1.0E22")],
)  # fmt: skip
def test_doubles_print_in_java_notation(value: float, text: str) -> None:
    assert java_double(value) == text


def test_a_float_prints_its_shortest_single_precision_digits() -> None:
    assert java_double(0.1, single=True) == "0.1"

"""weir.columnar's functions over columns give what the same job written per record gives: on a
columnar stream (a number sequence, decoded tuples after an exchange) and on a stream of records
(a collection), at parallelism 1, 2 and 4."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir import columnar as col
from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.errors import JobExecutionError, UsageError

L, D = Types.LONG, Types.DOUBLE
TRIPLE = Types.TUPLE([L(), L(), L()])


def _env(parallelism: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    return env


def _run(build: Any, parallelism: int) -> list[Any]:
    env = _env(parallelism)
    return sorted(build(env).execute_and_collect())


def _triples(i: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return i % 7, i * 3 - 50, i // 10


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_a_columnar_chain_gives_what_the_per_record_chain_gives(parallelism: int) -> None:
    """source -> batch_map -> scalar_filter -> key_by(field) -> scalar_map -> batch_filter."""

    def columnar(env: StreamExecutionEnvironment) -> Any:
        numbers = env.from_source(NumberSequenceSource(0, 4_999), WatermarkStrategy.no_watermarks(), "n")
        return (
            numbers.map(col.batch_map(_triples), output_type=TRIPLE)
            .filter(col.scalar_filter(lambda k, v, t: v % 4 != 0))
            .key_by(col.field(0))
            .map(col.scalar_map(lambda k, v, t: (k, v * 0.5 + t)), output_type=Types.TUPLE([L(), D()]))
            .filter(col.batch_filter(lambda k, x: x > 10.0))
        )

    def per_record(env: StreamExecutionEnvironment) -> Any:
        numbers = env.from_source(NumberSequenceSource(0, 4_999), WatermarkStrategy.no_watermarks(), "n")
        return (
            numbers.map(lambda i: (i % 7, i * 3 - 50, i // 10), output_type=TRIPLE)
            .filter(lambda r: r[1] % 4 != 0)
            .key_by(lambda r: r[0], key_type=L())
            .map(lambda r: (r[0], r[1] * 0.5 + r[2]), output_type=Types.TUPLE([L(), D()]))
            .filter(lambda r: r[1] > 10.0)
        )

    got = _run(columnar, parallelism)
    assert got == _run(per_record, parallelism)
    assert len(got) > 1_000


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(
        st.tuples(st.integers(-1000, 1000), st.integers(-(2**40), 2**40), st.floats(-1e6, 1e6)),
        min_size=1,
        max_size=60,
    ),
    parallelism=st.sampled_from([1, 2]),
)
def test_functions_over_columns_agree_with_python_on_a_collection(
    records: list[Any], parallelism: int
) -> None:
    """A collection arrives as records: the operators turn them into columns by the input type."""
    row = Types.TUPLE([L(), L(), D()])

    def build(mapper: Any, keep: Any) -> Any:
        def job(env: StreamExecutionEnvironment) -> Any:
            return env.from_collection(records, type_info=row).filter(keep).map(mapper, output_type=row)

        return job

    columnar = build(
        col.scalar_map(lambda a, b, c: (a * 2, b - a, c * 0.25)), col.scalar_filter(lambda a, b, c: a > b)
    )
    python = build(lambda r: (r[0] * 2, r[1] - r[0], r[2] * 0.25), lambda r: r[0] > r[1])
    assert _run(columnar, parallelism) == _run(python, parallelism)


def test_a_batch_map_that_returns_too_few_values_names_its_operator() -> None:
    env = _env(1)
    numbers = env.from_source(NumberSequenceSource(0, 99), WatermarkStrategy.no_watermarks(), "n")
    numbers.map(col.batch_map(lambda i: (i[:-1], i[:-1])), output_type=Types.TUPLE([L(), L()])).name(
        "short"
    ).add_sink(lambda v: None)
    with pytest.raises(JobExecutionError, match=r"'short'.*lengths \[99, 99\] for a batch of 100"):
        env.execute("short")


def test_a_compiled_scalar_function_of_strings_is_refused_with_the_field() -> None:
    env = _env(1)
    words = env.from_collection([("a", 1), ("b", 2)], type_info=Types.TUPLE([Types.STRING(), L()]))
    words.map(col.scalar_map(lambda w, n: n), output_type=L()).add_sink(lambda v: None)
    with pytest.raises(JobExecutionError, match="field 0 is not a numeric column"):
        env.execute("strings")


def test_column_functions_need_callables() -> None:
    with pytest.raises(UsageError, match="batch_map needs a callable"):
        col.batch_map(3)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"field\(index\): index must be a field position"):
        col.field("a")  # type: ignore[arg-type]

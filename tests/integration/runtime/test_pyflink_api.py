"""PyFlink's behaviour where weir used to differ: printed lines, collect order, the plan as a
Python literal, partition_custom, project, force_non_parallel, refusals on a KeyedStream,
and the typed BIG_DEC / SQL_* values across the network."""

from __future__ import annotations

import ast
import datetime
import decimal
from typing import Any

import pytest

from weir.common import Configuration, Instant, Row, Types
from weir.datastream import MapFunction, StreamExecutionEnvironment
from weir.datastream.functions import Partitioner
from weir.errors import JobExecutionError, UsageError


def make_env(parallelism: int) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", 1)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    return env


def test_print_writes_pyflink_lines(capsys: pytest.CaptureFixture[str]) -> None:
    env = make_env(1)
    env.from_collection(
        [("hi", 0, 5, 4)], type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG(), Types.LONG()])
    ).print()
    env.from_collection([Row("a", 2)]).print()
    env.from_collection(
        [Row(x=1, y="b")], type_info=Types.ROW_NAMED(["x", "y"], [Types.INT(), Types.STRING()])
    ).print()
    env.execute("print")
    assert sorted(capsys.readouterr().out.splitlines()) == sorted(["(hi,0,5,4)", "<Row('a', 2)>", "+I[1,b]"])


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_execute_and_collect_keeps_the_order_of_a_non_parallel_upstream(parallelism: int) -> None:
    env = make_env(parallelism)
    words = [f"w{i}" for i in range(50)]
    assert env.from_collection(words).execute_and_collect(limit=3) == words[:3]
    with env.from_collection(words).execute_and_collect() as everything:
        assert list(everything) == words


def test_the_execution_plan_reads_as_a_python_literal_without_absent_fields() -> None:
    env = make_env(2)
    env.from_collection([1, 2]).map(lambda x: x).uid("m").print()
    plan = ast.literal_eval(env.get_execution_plan())
    by_type = {node["type"]: node for node in plan["nodes"]}
    assert by_type["Map"]["uid"] == "m"
    assert "uid" not in by_type["Source: Collection Source"]
    assert all(value is not None for node in plan["nodes"] for value in node.values())


class ModuloPartitioner(Partitioner):
    def partition(self, key: Any, num_partitions: int) -> int:
        return key % num_partitions


def test_partition_custom_sends_each_key_where_the_partitioner_says() -> None:
    from weir.datastream import MapFunction

    class Tag(MapFunction):
        def open(self, runtime_context: Any) -> None:
            self.index = runtime_context.get_index_of_this_subtask()

        def map(self, value: Any) -> Any:
            return value, self.index

    env = make_env(3)
    out = (
        env.from_collection(list(range(30)), type_info=Types.LONG())
        .partition_custom(ModuloPartitioner(), lambda v: v)
        .map(Tag())
        .execute_and_collect(limit=100)
    )
    assert sorted(out) == [(v, v % 3) for v in range(30)]
    # a plain callable works as the partitioner too
    env = make_env(2)
    out = (
        env.from_collection([1, 2, 3])
        .partition_custom(lambda k, n: 0, lambda v: v)
        .map(Tag())
        .execute_and_collect(limit=10)
    )
    assert sorted(out) == [(1, 0), (2, 0), (3, 0)]


def test_a_partitioner_returning_an_unknown_partition_fails_the_job_naming_it() -> None:
    env = make_env(2)
    stream = env.from_collection([1]).partition_custom(lambda k, n: n, lambda v: v).map(lambda v: v)
    with pytest.raises(
        JobExecutionError, match="partition_custom: the partitioner returned 2 for 2 partitions"
    ):
        stream.execute_and_collect(limit=10)


def test_project_keeps_the_named_fields_in_order() -> None:
    env = make_env(2)
    source = env.from_collection(
        [("a", 1, 2.5), ("b", 2, 3.5)], type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.DOUBLE()])
    )
    projected = source.project(2, 0)
    assert projected.get_type() == Types.TUPLE([Types.DOUBLE(), Types.STRING()])
    assert sorted(projected.execute_and_collect(limit=10)) == [(2.5, "a"), (3.5, "b")]
    with pytest.raises(UsageError, match="Only Tuple DataStreams can be projected"):
        env.from_collection([1]).project(0)
    with pytest.raises(UsageError, match="field index 3 is out of range"):
        source.project(3)


def test_force_non_parallel_pins_parallelism_one() -> None:
    env = make_env(4)
    mapped = env.from_collection([1]).map(lambda v: v).force_non_parallel()
    assert (mapped.get_transformation().parallelism, mapped.get_transformation().max_parallelism) == (1, 1)
    with pytest.raises(UsageError, match="non-parallel"):
        mapped.set_parallelism(2)


@pytest.mark.parametrize("call", ["shuffle", "rebalance", "rescale", "forward", "broadcast", "global_"])
def test_a_keyed_stream_refuses_to_be_repartitioned(call: str) -> None:
    keyed = make_env(2).from_collection([1]).key_by(lambda v: v)
    with pytest.raises(UsageError, match="Cannot override partitioning for KeyedStream"):
        getattr(keyed, call)()
    with pytest.raises(UsageError, match="Cannot override partitioning for KeyedStream"):
        keyed.partition_custom(lambda k, n: 0, lambda v: v)
    with pytest.raises(UsageError, match="force_non_parallel"):
        keyed.force_non_parallel()


def test_sql_and_big_decimal_values_cross_the_network_typed() -> None:
    row_type = Types.TUPLE(
        [
            Types.BIG_DEC(),
            Types.BIG_INT(),
            Types.SQL_DATE(),
            Types.SQL_TIME(),
            Types.SQL_TIMESTAMP(),
            Types.INSTANT(),
        ]
    )
    records = [
        (
            decimal.Decimal("1.50"),
            2**70,
            datetime.date(2020, 1, 2),
            datetime.time(3, 4, 5, 6),
            datetime.datetime(2020, 1, 2, 3, 4, 5, 600000),
            Instant.of_epoch_milli(1_500),
        ),
        (
            decimal.Decimal("-1E-9"),
            -3,
            datetime.date(1969, 12, 31),
            datetime.time(0),
            datetime.datetime(1, 1, 1),
            Instant(-5, 999_999_999),
        ),
    ]
    env = make_env(2)
    out = (
        env.from_collection(records, type_info=row_type)
        .rebalance()
        .map(lambda r: r, output_type=row_type)
        .execute_and_collect(limit=10)
    )
    assert sorted(out, key=repr) == sorted(records, key=repr)
    assert {type(v) for r in out for v in r} == {
        decimal.Decimal,
        int,
        datetime.date,
        datetime.time,
        datetime.datetime,
        Instant,
    }


def test_a_value_of_the_wrong_class_for_a_sql_type_is_refused_naming_it() -> None:
    env = make_env(2)
    stream = (
        env.from_collection([datetime.datetime(2020, 1, 2)], type_info=Types.SQL_DATE())
        .rebalance()
        .map(lambda v: v)
    )
    with pytest.raises(JobExecutionError, match=r"datetime\.date"):
        stream.execute_and_collect(limit=10)


class CountingMap(MapFunction):
    def open(self, runtime_context: Any) -> None:
        group = runtime_context.get_metrics_group()
        self.seen = group.add_group("user").counter("seen")
        self.sizes = group.distribution("sizes")
        self.rate = group.meter("rate")
        self.last = 0
        group.gauge("last", lambda: self.last)

    def map(self, value: Any) -> Any:
        self.seen.inc()
        self.sizes.update(value)
        self.rate.mark_event()
        self.last = value
        return value


def test_user_metrics_are_reported_in_the_job_result() -> None:
    env = make_env(2)
    env.from_collection(list(range(1, 11)), type_info=Types.LONG()).map(CountingMap()).name("counted").print()
    result = env.execute("metrics")
    per_subtask = result.get_user_metrics()
    assert len(per_subtask) == 2  # both subtasks of the map registered metrics
    metrics = [m["counted"] for m in per_subtask.values()]
    assert sum(m["user.seen"] for m in metrics) == 10
    assert sum(m["sizes"]["sum"] for m in metrics) == 55
    assert sum(m["rate"]["count"] for m in metrics) == 10
    assert {m["last"] for m in metrics} <= set(range(1, 11))


def test_tuples_of_a_named_row_collection_read_as_rows_by_field_name() -> None:
    # PyFlink's basic_operations.py: tuples given with Types.ROW_NAMED arrive as Rows
    env = make_env(1)
    row_type = Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.ROW_NAMED(["tel"], [Types.LONG()])])
    ds = env.from_collection([(1, (123,)), (2, (135,))], type_info=row_type)
    assert ds.map(lambda data: (data.id, data.info.tel + 1)).execute_and_collect(limit=10) == [
        (1, 124),
        (2, 136),
    ]


def test_a_job_client_reports_status_and_its_result_through_futures() -> None:
    from weir.common import JobID, JobStatus

    env = make_env(1)
    env.from_collection([1, 2, 3]).map(lambda v: v).print()
    client = env.execute_async("async")
    result = client.get_job_execution_result().result(60)
    assert result.get_job_status() is JobStatus.FINISHED
    status = client.get_job_status().result()
    assert status is JobStatus.FINISHED and status.is_globally_terminal_state()
    assert isinstance(client.get_job_id(), JobID) and client.get_job_id() == result.get_job_id()


def test_an_unlimited_collect_is_a_closeable_iterator_with_pyflink_s_next() -> None:
    from weir.core.execution import CloseableIterator

    env = make_env(1)
    with env.from_collection([1, 2, 3]).execute_and_collect() as records:
        assert isinstance(records, CloseableIterator)
        assert records.next() == 1
        assert list(records) == [2, 3]

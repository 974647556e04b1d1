"""Jobs end to end on the embedded cluster: answers equal a plain Python loop."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import MapFunction, RuntimeExecutionMode, StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.errors import JobExecutionError
from weir.keys import assign_key_to_parallel_operator

PAIR = Types.TUPLE([Types.STRING(), Types.LONG()])


def make_env(parallelism: int, taskmanagers: int, transport: str = "local") -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", taskmanagers)
    conf.set_string("taskmanager.network.transport", transport)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    return env


@pytest.mark.parametrize(
    ("taskmanagers", "transport"), [(1, "local"), (2, "local"), (2, "tcp")], ids=["1tm", "2tm", "2tm-tcp"]
)
@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_keyed_running_sum_matches_a_python_loop(parallelism: int, taskmanagers: int, transport: str) -> None:
    events = 5_000
    env = make_env(parallelism, taskmanagers, transport)
    out = (
        env.from_source(NumberSequenceSource(1, events), WatermarkStrategy.no_watermarks(), "numbers")
        .map(lambda n: (f"k{n % 7}", n), output_type=PAIR)
        .key_by(lambda p: p[0], key_type=Types.STRING())
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .execute_and_collect(limit=None)
    )
    with out:
        results = list(out)
    expected_final: dict[str, int] = defaultdict(int)
    expected_count: Counter[str] = Counter()
    for n in range(1, events + 1):
        expected_final[f"k{n % 7}"] += n
        expected_count[f"k{n % 7}"] += 1
    assert Counter(k for k, _ in results) == expected_count
    final = {}
    for k, v in results:
        final[k] = max(final.get(k, 0), v)
    assert final == expected_final


class RecordSubtask(MapFunction):
    def open(self, runtime_context):  # type: ignore[no-untyped-def]
        self.index = runtime_context.get_index_of_this_subtask()
        self.max_parallelism = runtime_context.get_max_number_of_parallel_subtasks()

    def map(self, value):  # type: ignore[no-untyped-def]
        return (value, self.index, self.max_parallelism)


@pytest.mark.parametrize("parallelism", [2, 4])
def test_every_key_arrives_at_the_subtask_the_formula_names(parallelism: int) -> None:
    env = make_env(parallelism, 2)
    keys = list(range(200)) + [f"s{i}" for i in range(200)]
    results = (
        env.from_collection(keys).key_by(lambda k: k).map(RecordSubtask()).execute_and_collect(limit=10_000)
    )
    assert len(results) == len(keys)
    for key, subtask, max_parallelism in results:
        assert subtask == assign_key_to_parallel_operator(key, max_parallelism, parallelism), key


@pytest.mark.parametrize("transport", ["local", "tcp"])
def test_a_record_larger_than_a_buffer_arrives_intact(transport: str) -> None:
    env = make_env(2, 2, transport)
    big = ["x" * 100_000, "y" * 70_000, "small"]
    results = (
        env.from_collection(big, type_info=Types.STRING())
        .rebalance()
        .map(lambda s: s, output_type=Types.STRING())
        .execute_and_collect(limit=10)
    )
    assert sorted(results) == sorted(big)


def test_a_user_exception_names_operator_and_subtask() -> None:
    env = make_env(2, 1)

    def explode(n: int) -> int:
        if n == 77:
            raise ZeroDivisionError("boom at 77")
        return n

    env.from_source(NumberSequenceSource(1, 1000), WatermarkStrategy.no_watermarks(), "numbers").map(
        explode
    ).name("exploding map").print()
    with pytest.raises(JobExecutionError) as info:
        env.execute("failing")
    message = str(info.value)
    assert "operator 'exploding map'" in message
    assert "subtask 1/2" in message
    assert "ZeroDivisionError: boom at 77" in message
    assert isinstance(info.value.__cause__.cause, ZeroDivisionError)  # type: ignore[union-attr]


def test_batch_mode_reduce_emits_only_final_values() -> None:
    env = make_env(2, 1)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    results = (
        env.from_collection([("a", 1), ("b", 2), ("a", 3), ("b", 4), ("a", 5)], type_info=PAIR)
        .key_by(lambda p: p[0])
        .reduce(lambda x, y: (x[0], x[1] + y[1]))
        .execute_and_collect(limit=100)
    )
    assert sorted(results) == [("a", 9), ("b", 6)]


def test_union_side_outputs_and_every_partitioner() -> None:
    from weir.datastream import OutputTag

    env = make_env(3, 2)
    odd = OutputTag("odd", Types.LONG())

    def split(value, ctx):  # type: ignore[no-untyped-def]
        if value % 2:
            ctx.output(odd, value)
        else:
            yield value

    source = env.from_source(NumberSequenceSource(1, 600), WatermarkStrategy.no_watermarks(), "n")
    evens = source.process(split, output_type=Types.LONG())
    odds = evens.get_side_output(odd)
    merged = (
        evens.rebalance()
        .map(lambda x: x)
        .union(
            odds.shuffle().map(lambda x: x),
            odds.rescale().map(lambda x: -x),
            evens.global_().map(lambda x: x * 1000),
        )
    )
    results = merged.execute_and_collect(limit=10_000)
    expected = (
        [n for n in range(1, 601) if n % 2 == 0]
        + [n for n in range(1, 601) if n % 2]
        + [-n for n in range(1, 601) if n % 2]
        + [n * 1000 for n in range(1, 601) if n % 2 == 0]
    )
    assert sorted(results) == sorted(expected)


def test_broadcast_reaches_every_subtask() -> None:
    env = make_env(3, 2)
    results = (
        env.from_collection([1, 2, 3])
        .broadcast()
        .map(lambda x: x)
        .set_parallelism(3)
        .execute_and_collect(limit=100)
    )
    assert sorted(results) == [1, 1, 1, 2, 2, 2, 3, 3, 3]


def test_collect_iterator_can_stop_an_unbounded_job_early() -> None:
    from weir.datastream.connectors.datagen import DataGeneratorSource

    env = make_env(1, 1)
    stream = env.from_source(
        DataGeneratorSource(lambda i: i, None), WatermarkStrategy.no_watermarks(), "forever"
    )
    with stream.map(lambda x: x * 2).execute_and_collect() as records:
        first = [next(records) for _ in range(5)]
    assert first == [0, 2, 4, 6, 8]


def test_execute_returns_a_job_execution_result() -> None:
    env = make_env(2, 2)
    seen: list[int] = []
    env.from_collection(list(range(10))).add_sink(seen.append)
    result = env.execute("sink to list")
    assert result.get_job_status().name == "FINISHED"
    assert len(result.get_job_id()) == 32 and result.get_net_runtime() >= 0
    assert sorted(seen) == list(range(10))


def test_statistics_report_records_buffers_and_channels() -> None:
    env = make_env(2, 2)
    env.from_source(NumberSequenceSource(1, 20_000), WatermarkStrategy.no_watermarks(), "n").key_by(
        lambda n: n % 5
    ).map(lambda n: n).add_sink(lambda v: None)
    result = env.execute("stats")
    by_name = {s.name: s for s in result.statistics}
    sources = [s for name, s in by_name.items() if name.startswith("Source")]
    consumers = [s for name, s in by_name.items() if name.startswith("Map")]
    assert sum(s.records_out for s in sources) == 20_000
    assert sum(s.records_in for s in consumers) == 20_000
    assert all(s.buffers_out > 0 for s in sources) and all(s.buffers_in > 0 for s in consumers)
    assert all(len(s.partitions[0].subpartitions) == 2 for s in sources)
    assert all(len(s.gate.channels) == 2 for s in consumers)
    assert {c.kind for s in consumers for c in s.gate.channels} == {"local", "remote"}
    assert all(0.0 <= s.backpressured_fraction <= 1.0 for s in result.statistics)

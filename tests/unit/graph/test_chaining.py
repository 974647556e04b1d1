"""Operator chaining: the seeds' examples and one test per condition of Flink's isChainable."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from weir.common import Configuration, WatermarkStrategy
from weir.datastream import DataStream, StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.graph import partitioners as parts
from weir.graph.job_graph import JobGraph, chaining_blockers, generate_job_graph, is_chainable
from weir.graph.transformations import ChainingStrategy, ExchangeMode, PartitionTransformation

from .jobs import my_job, window_word_count


def chains(job: JobGraph) -> list[list[str]]:
    return [[op.name for op in v.operators] for v in job.vertices]


def test_seed_000_my_job_four_operators_three_vertices() -> None:
    job = generate_job_graph(my_job(2).get_stream_graph())
    assert chains(job) == [
        ["Source: source", "Map"],
        [job.vertices[1].operators[0].name],
        ["Sink: Print to Std. Out"],
    ]
    assert job.vertices[1].operators[0].name.startswith("Window(TumblingEventTimeWindows(10000, 0)")
    assert [v.parallelism for v in job.vertices] == [2, 2, 1]
    assert [str(e.partitioner) for e in job.edges] == ["HASH", "REBALANCE"]
    assert all(e.result_partition_type.value == "PIPELINED_BOUNDED" for e in job.edges)


def test_seed_003_window_word_count_chains_the_sink_into_the_window() -> None:
    job = generate_job_graph(window_word_count().get_stream_graph())
    assert len(job.vertices) == 3
    source, flat_map, window = job.vertices
    assert [op.name for op in source.operators] == ["Source: file-source"]
    assert [op.name for op in flat_map.operators] == ["Flat Map"]
    assert window.operators[0].name.startswith("Window(CountSlidingWindowAssigner(10, 5)")
    assert window.operators[1].name == "Sink: Print to Std. Out"
    assert (source.slot_sharing_group, flat_map.slot_sharing_group, window.slot_sharing_group) == (
        "default",
        "flatMap_sg",
        "sum_sg",
    )
    assert (flat_map.parallelism, window.parallelism) == (4, 3)
    # the source and the flat_map stay apart even at equal parallelism: their groups differ
    same_parallelism = generate_job_graph(window_word_count(source_parallelism=4).get_stream_graph())
    assert len(same_parallelism.vertices) == 3


# -- one test per condition: start from a chain of three and break exactly one condition ------------


def _pipeline(
    env: StreamExecutionEnvironment, tweak: Callable[[DataStream], DataStream] = lambda s: s
) -> JobGraph:
    env.set_parallelism(2)
    source = env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "s")
    mapped = source.map(lambda x: x).name("m")
    tweak(mapped).filter(bool).name("f").print()
    return generate_job_graph(env.get_stream_graph())


def test_baseline_chains_everything(env: StreamExecutionEnvironment) -> None:
    assert chains(_pipeline(env)) == [["Source: s", "m", "f", "Sink: Print to Std. Out"]]


def test_downstream_with_two_inputs_is_not_chained(env: StreamExecutionEnvironment) -> None:
    env.set_parallelism(2)
    a = env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "a")
    b = env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "b")
    a.union(b).filter(bool).name("f").print()
    assert chains(generate_job_graph(env.get_stream_graph())) == [
        ["Source: a"],
        ["Source: b"],
        ["f", "Sink: Print to Std. Out"],
    ]


def test_different_slot_sharing_group_breaks_the_chain(env: StreamExecutionEnvironment) -> None:
    env.set_parallelism(2)
    s = env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "s")
    s.map(lambda x: x).name("m").filter(bool).name("f").slot_sharing_group("other").print()
    assert chains(generate_job_graph(env.get_stream_graph())) == [
        ["Source: s", "m"],
        ["f", "Sink: Print to Std. Out"],  # the sink inherits "other"
    ]


def test_downstream_start_new_chain_breaks_only_before_it(env: StreamExecutionEnvironment) -> None:
    env.set_parallelism(2)
    s = env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "s")
    s.map(lambda x: x).name("m").filter(bool).name("f").start_new_chain().print()
    assert chains(generate_job_graph(env.get_stream_graph())) == [
        ["Source: s", "m"],
        ["f", "Sink: Print to Std. Out"],
    ]


def test_downstream_never_breaks_both_sides(env: StreamExecutionEnvironment) -> None:
    env.set_parallelism(2)
    s = env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "s")
    s.map(lambda x: x).name("m").filter(bool).name("f").disable_chaining().print()
    assert chains(generate_job_graph(env.get_stream_graph())) == [
        ["Source: s", "m"],
        ["f"],
        ["Sink: Print to Std. Out"],
    ]


def test_upstream_never_is_not_chained_to_its_successor(env: StreamExecutionEnvironment) -> None:
    assert chains(_pipeline(env, lambda m: m.disable_chaining())) == [
        ["Source: s"],
        ["m"],
        ["f", "Sink: Print to Std. Out"],
    ]


def test_non_forward_partitioner_breaks_the_chain(env: StreamExecutionEnvironment) -> None:
    assert chains(_pipeline(env, lambda m: m.rebalance())) == [
        ["Source: s", "m"],
        ["f", "Sink: Print to Std. Out"],
    ]


def test_batch_exchange_breaks_the_chain(env: StreamExecutionEnvironment) -> None:
    def batch_forward(m: DataStream) -> DataStream:
        t = PartitionTransformation(
            id=env._new_id(),
            name="Partition",
            output_type=None,
            inputs=[m.get_transformation()],
            partitioner=parts.FORWARD,
            exchange_mode=ExchangeMode.BATCH,
        )
        return DataStream(env, t)

    job = _pipeline(env, batch_forward)
    assert chains(job) == [["Source: s", "m"], ["f", "Sink: Print to Std. Out"]]
    assert job.edges[0].result_partition_type.value == "BLOCKING"


def test_parallelism_difference_alone_breaks_the_chain(env: StreamExecutionEnvironment) -> None:
    # Through the API a parallelism change always brings a non-forward partitioner too, so the
    # condition is checked on the predicate with everything else equal.
    graph = (
        env.from_collection([1]).map(lambda x: x).name("m").filter(bool).name("f").get_execution_environment()
    )
    graph.from_collection([1]).print()
    stream_graph = graph.get_stream_graph()
    m_to_f = next(e for e in stream_graph.edges if stream_graph.target_of(e).name == "f")
    assert is_chainable(m_to_f, stream_graph)
    stream_graph.target_of(m_to_f).parallelism = 3
    assert not is_chainable(m_to_f, stream_graph)
    assert chaining_blockers(m_to_f, stream_graph) == ["parallelism differs (1 vs 3)"]


def test_max_parallelism_difference_chains_by_default_as_in_flink(env: StreamExecutionEnvironment) -> None:
    assert chains(_pipeline(env, lambda m: m.set_max_parallelism(64))) == [
        ["Source: s", "m", "f", "Sink: Print to Std. Out"]
    ]


def test_max_parallelism_difference_breaks_the_chain_when_configured() -> None:
    conf = Configuration()
    conf.set_boolean("pipeline.operator-chaining.chain-operators-with-different-max-parallelism", False)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_max_parallelism(128)
    assert chains(_pipeline(env, lambda m: m.set_max_parallelism(64))) == [
        ["Source: s"],
        ["m"],
        ["f", "Sink: Print to Std. Out"],
    ]


def test_disabled_chaining_chains_nothing(env: StreamExecutionEnvironment) -> None:
    env.disable_operator_chaining()
    assert chains(_pipeline(env)) == [["Source: s"], ["m"], ["f"], ["Sink: Print to Std. Out"]]


@pytest.mark.parametrize(("after_source", "chained"), [(True, True), (False, False)])
def test_head_with_sources_chains_only_after_a_source(
    env: StreamExecutionEnvironment, after_source: bool, chained: bool
) -> None:
    env.set_parallelism(2)
    s = env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "s")
    upstream = s if after_source else s.map(lambda x: x).name("m")
    target = upstream.filter(bool).name("f")
    target.get_transformation().chaining_strategy = ChainingStrategy.HEAD_WITH_SOURCES
    target.print()
    job = generate_job_graph(env.get_stream_graph())
    f_vertex = next(v for v in job.vertices if any(op.name == "f" for op in v.operators))
    assert (f_vertex.operators[0].name != "f") == chained


def test_a_node_can_chain_to_several_successors(env: StreamExecutionEnvironment) -> None:
    env.set_parallelism(2)
    m = env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "s").map(lambda x: x)
    m.filter(bool).name("a").print()
    m.filter(bool).name("b").print()
    job = generate_job_graph(env.get_stream_graph())
    assert len(job.vertices) == 1
    assert job.vertices[0].name == (
        "Source: s -> Map -> (a -> Sink: Print to Std. Out, b -> Sink: Print to Std. Out)"
    )


def test_batch_mode_makes_every_exchange_blocking() -> None:
    from weir.datastream import RuntimeExecutionMode

    env = my_job(2)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    job = generate_job_graph(env.get_stream_graph())
    assert len(job.vertices) == 3  # forward edges still chain in BATCH mode, as in Flink
    assert {e.result_partition_type.value for e in job.edges} == {"BLOCKING"}

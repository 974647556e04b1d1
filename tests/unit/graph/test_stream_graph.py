from __future__ import annotations

import json

import pytest

from weir.common import Types, WatermarkStrategy
from weir.datastream import OutputTag, RuntimeExecutionMode, StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.errors import UsageError
from weir.graph.stream_graph import default_max_parallelism

from .jobs import my_job


def _names(graph):  # type: ignore[no-untyped-def]
    return [n.name for n in graph.nodes.values()]


def _edge(graph, source_name, target_name):  # type: ignore[no-untyped-def]
    for e in graph.edges:
        if graph.source_of(e).name == source_name and graph.target_of(e).name == target_name:
            return e
    raise AssertionError(f"no edge {source_name} -> {target_name} in {graph.edges}")


def test_my_job_has_four_nodes_and_a_virtual_key_by(env: StreamExecutionEnvironment) -> None:
    graph = my_job(2).get_stream_graph()
    assert len(graph.nodes) == 4  # key_by is a virtual node, not a StreamNode
    assert [n.kind for n in graph.nodes.values()] == ["source", "operator", "operator", "sink"]
    names = _names(graph)
    assert str(_edge(graph, names[0], names[1]).partitioner) == "FORWARD"
    assert str(_edge(graph, names[1], names[2]).partitioner) == "HASH"
    assert str(_edge(graph, names[2], names[3]).partitioner) == "REBALANCE"  # parallelism 2 -> 1


def test_edge_without_partitioner_is_forward_or_rebalance(env: StreamExecutionEnvironment) -> None:
    env.set_parallelism(2)
    env.from_collection([1, 2]).map(lambda x: x).filter(bool).print()
    graph = env.get_stream_graph()
    src, m, f, sink = _names(graph)
    assert graph.node(1).parallelism == 1  # from_collection is non-parallel, as in Flink
    assert str(_edge(graph, src, m).partitioner) == "REBALANCE"
    assert str(_edge(graph, m, f).partitioner) == "FORWARD"
    assert str(_edge(graph, f, sink).partitioner) == "FORWARD"


def test_forward_between_different_parallelisms_is_an_error(env: StreamExecutionEnvironment) -> None:
    env.set_parallelism(2)
    env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "s").forward().map(
        lambda x: x
    ).set_parallelism(3).print()
    with pytest.raises(
        UsageError, match=r"forward partitioning does not allow a change of parallelism.*2.*3"
    ):
        env.get_stream_graph()


def test_partitioner_closest_to_the_consumer_wins(env: StreamExecutionEnvironment) -> None:
    env.from_collection([1]).rebalance().shuffle().map(lambda x: x).print()
    graph = env.get_stream_graph()
    assert str(graph.edges[0].partitioner) == "SHUFFLE"


@pytest.mark.parametrize(
    ("call", "expected"),
    [("rebalance", "REBALANCE"), ("rescale", "RESCALE"), ("shuffle", "SHUFFLE"), ("broadcast", "BROADCAST"),
     ("global_", "GLOBAL"), ("forward", "FORWARD")],
)  # fmt: skip
def test_every_partitioning_call_sets_the_edge(
    env: StreamExecutionEnvironment, call: str, expected: str
) -> None:
    s = env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "s")
    getattr(s, call)().map(lambda x: x).print()
    graph = env.get_stream_graph()
    assert str(graph.edges[0].partitioner) == expected


def test_slot_sharing_group_is_inherited_when_inputs_agree(env: StreamExecutionEnvironment) -> None:
    a = env.from_collection([1]).map(lambda x: x).slot_sharing_group("g")
    b = env.from_collection([2]).map(lambda x: x).slot_sharing_group("g")
    c = env.from_collection([3]).map(lambda x: x).slot_sharing_group("h")
    a.filter(bool).name("inherits").print()
    a.union(b).filter(bool).name("agree").print()
    a.union(c).filter(bool).name("disagree").print()
    groups = {n.name: n.slot_sharing_group for n in env.get_stream_graph().nodes.values()}
    assert groups["inherits"] == "g"
    assert groups["agree"] == "g"
    assert groups["disagree"] == "default"
    assert groups["Source: Collection Source"] == "default"


def test_union_gives_one_edge_per_input(env: StreamExecutionEnvironment) -> None:
    a = env.from_collection([1])
    b = env.from_collection([2])
    c = env.from_collection([3])
    a.union(b, c).map(lambda x: x).name("m").print()
    graph = env.get_stream_graph()
    m = next(n for n in graph.nodes.values() if n.name == "m")
    assert len(m.in_edges) == 3


def test_union_of_different_types_is_an_error(env: StreamExecutionEnvironment) -> None:
    a = env.from_collection([1], type_info=Types.LONG())
    b = env.from_collection(["x"], type_info=Types.STRING())
    with pytest.raises(UsageError, match="one type"):
        a.union(b)


def test_side_output_edge_carries_its_tag(env: StreamExecutionEnvironment) -> None:
    tag = OutputTag("late", Types.LONG())
    main = env.from_collection([1]).process(lambda v, ctx: [v])
    main.get_side_output(tag).map(lambda x: x).name("side").print()
    graph = env.get_stream_graph()
    side = next(n for n in graph.nodes.values() if n.name == "side")
    assert side.in_edges[0].side_output_tag == tag
    assert graph.source_of(side.in_edges[0]).name == "Process"


@pytest.mark.parametrize(
    ("parallelism", "expected"), [(1, 128), (2, 128), (100, 256), (1000, 2048), (30000, 32768)]
)
def test_default_max_parallelism_follows_flink(parallelism: int, expected: int) -> None:
    assert default_max_parallelism(parallelism) == expected


def test_max_parallelism_resolution(env: StreamExecutionEnvironment) -> None:
    env.set_parallelism(2)
    s = env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "s")
    s.map(lambda x: x).name("own").set_max_parallelism(16).print()
    s.map(lambda x: x).name("derived").print()
    nodes = {n.name: n for n in env.get_stream_graph().nodes.values()}
    assert nodes["own"].max_parallelism == 16
    assert nodes["derived"].max_parallelism == 128
    env2 = StreamExecutionEnvironment.get_execution_environment()
    env2.set_max_parallelism(64)
    env2.from_collection([1]).map(lambda x: x).name("env").print()
    assert {n.name: n.max_parallelism for n in env2.get_stream_graph().nodes.values()}["env"] == 64


def test_parallelism_above_environment_max_parallelism_names_the_operator(
    env: StreamExecutionEnvironment,
) -> None:
    env.set_max_parallelism(4)
    env.from_collection([1]).map(lambda x: x).name("window").set_parallelism(8).print()
    with pytest.raises(UsageError, match=r"parallelism 8 exceeds max_parallelism 4 for operator 'window'"):
        env.get_stream_graph()


def test_empty_job_is_an_error(env: StreamExecutionEnvironment) -> None:
    env.from_collection([1])  # a source alone is not a job, as in Flink
    with pytest.raises(UsageError, match="no operators"):
        env.get_stream_graph()


def test_batch_mode_rejects_an_unbounded_source(env: StreamExecutionEnvironment) -> None:
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.from_source(DataGeneratorSource(lambda i: i, None), WatermarkStrategy.no_watermarks(), "gen").print()
    with pytest.raises(UsageError, match="unbounded"):
        env.get_stream_graph()


def test_automatic_mode_picks_batch_only_for_bounded_sources() -> None:
    bounded = StreamExecutionEnvironment.get_execution_environment()
    bounded.set_runtime_mode(RuntimeExecutionMode.AUTOMATIC)
    bounded.from_collection([1]).print()
    assert bounded.get_stream_graph().runtime_mode == "BATCH"
    unbounded = StreamExecutionEnvironment.get_execution_environment()
    unbounded.set_runtime_mode(RuntimeExecutionMode.AUTOMATIC)
    unbounded.from_source(
        DataGeneratorSource(lambda i: i, None), WatermarkStrategy.no_watermarks(), "g"
    ).print()
    assert unbounded.get_stream_graph().runtime_mode == "STREAMING"


def test_execution_plan_json_mirrors_flink() -> None:
    plan = json.loads(my_job(2).get_execution_plan())
    nodes = plan["nodes"]
    assert [n["pact"] for n in nodes] == ["Data Source", "Operator", "Operator", "Data Sink"]
    assert nodes[0]["type"] == "Source: source" and "predecessors" not in nodes[0]
    assert nodes[1]["predecessors"] == [{"id": nodes[0]["id"], "ship_strategy": "FORWARD", "side": "second"}]
    assert nodes[2]["predecessors"][0]["ship_strategy"] == "HASH"
    assert [n["parallelism"] for n in nodes] == [2, 2, 2, 1]
    assert all(len(n["operator_id"]) == 32 for n in nodes)


def test_transformation_ids_follow_api_calls_as_in_seed_003() -> None:
    # readTextFile -> 1, flatMap -> 2, keyBy -> 3, window -> 4, sink -> 5
    from .jobs import window_word_count

    graph = window_word_count().get_stream_graph()
    assert sorted(graph.nodes) == [1, 2, 4, 5]

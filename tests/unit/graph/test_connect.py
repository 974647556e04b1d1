"""connect(): a two-input StreamNode, its input numbers, chaining and the errors of bad use."""

from __future__ import annotations

import pytest

from weir.common import Types
from weir.datastream import (
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedCoProcessFunction,
    StreamExecutionEnvironment,
)
from weir.errors import UsageError
from weir.graph.job_graph import chaining_blockers, generate_job_graph


class Tag(CoMapFunction):
    def map1(self, value):  # type: ignore[no-untyped-def]
        return ("left", value)

    def map2(self, value):  # type: ignore[no-untyped-def]
        return ("right", value)


class Join(KeyedCoProcessFunction):
    def process_element1(self, value, ctx):  # type: ignore[no-untyped-def]
        return None

    def process_element2(self, value, ctx):  # type: ignore[no-untyped-def]
        return None


def two_sources(env: StreamExecutionEnvironment):  # type: ignore[no-untyped-def]
    return env.from_collection([1, 2, 3]).name("ints"), env.from_collection(["a", "b"]).name("strs")


def test_a_connected_map_is_one_node_with_input_1_and_input_2(env: StreamExecutionEnvironment) -> None:
    env.set_parallelism(2)
    ints, strs = two_sources(env)
    ints.map(lambda x: x).name("m").connect(strs).map(Tag()).name("tag").print()
    graph = env.get_stream_graph()
    node = next(n for n in graph.nodes.values() if n.name == "tag")
    assert node.is_two_input
    inputs = {graph.source_of(e).name: (e.type_number, str(e.partitioner)) for e in node.in_edges}
    # "ints" feeds "m" (parallelism 2 after a parallelism-1 source: REBALANCE), "m" feeds input 1
    assert inputs == {"m": (1, "FORWARD"), "Source: strs": (2, "REBALANCE")}
    assert node.state_key_selector is None and node.state_key_selector2 is None


def test_a_two_input_operator_heads_its_chain_but_chains_what_follows(
    env: StreamExecutionEnvironment,
) -> None:
    env.set_parallelism(2)
    ints, strs = two_sources(env)
    ints.map(lambda x: x).name("m").connect(strs.map(lambda s: s).name("n")).map(Tag()).name("tag").map(
        lambda x: x
    ).name("after").print()
    graph = env.get_stream_graph()
    job = generate_job_graph(graph)
    chains = [[op.name for op in v.operators] for v in job.vertices]
    assert ["tag", "after", "Sink: Print to Std. Out"] in chains
    edge = next(e for e in graph.edges if graph.target_of(e).name == "tag" and graph.source_of(e).name == "m")
    assert "'tag' has 2 inputs" in chaining_blockers(edge, graph)


def test_a_stream_connected_to_itself_has_two_edges(env: StreamExecutionEnvironment) -> None:
    ints, _ = two_sources(env)
    ints.connect(ints).map(Tag()).name("tag").print()
    graph = env.get_stream_graph()
    node = next(n for n in graph.nodes.values() if n.name == "tag")
    assert sorted(e.type_number for e in node.in_edges) == [1, 2]
    job = generate_job_graph(graph)
    # the Co-Map is not chained to its input (two edges), only to the sink after it
    assert [[op.name for op in v.operators] for v in job.vertices] == [
        ["Source: ints"],
        ["tag", "Sink: Print to Std. Out"],
    ]
    assert len(job.vertices[1].inputs) == 2  # one JobEdge per input


def test_keyed_connected_streams_hash_both_inputs_and_keep_both_key_selectors(
    env: StreamExecutionEnvironment,
) -> None:
    env.set_parallelism(2)
    ints, strs = two_sources(env)
    keyed = ints.connect(strs).key_by(lambda i: str(i), lambda s: s, key_type=Types.STRING())
    keyed.process(Join()).name("join").print()
    graph = env.get_stream_graph()
    node = next(n for n in graph.nodes.values() if n.name == "join")
    assert {str(e.partitioner) for e in node.in_edges} == {"HASH"}
    assert node.operator is not None and node.operator.keyed and node.operator.kind == "keyed_co_process"
    assert node.state_key_selector.get_key(7) == "7"
    assert node.state_key_selector2.get_key("x") == "x"


def test_streams_keyed_before_connect_are_keyed_connected_streams(env: StreamExecutionEnvironment) -> None:
    ints, strs = two_sources(env)
    ints.key_by(lambda i: str(i)).connect(strs.key_by(lambda s: s)).process(Join()).name("join").print()
    node = next(n for n in env.get_stream_graph().nodes.values() if n.name == "join")
    assert node.operator is not None and node.operator.keyed


def test_a_keyed_co_process_function_needs_keyed_inputs(env: StreamExecutionEnvironment) -> None:
    ints, strs = two_sources(env)
    with pytest.raises(UsageError, match="KeyedCoProcessFunction needs keyed connected streams"):
        ints.connect(strs).process(Join())
    with pytest.raises(UsageError, match="KeyedCoProcessFunction needs keyed connected streams"):
        ints.key_by(lambda i: i).connect(strs).process(Join())  # only one input keyed


def test_a_co_process_function_on_keyed_inputs_runs_keyed(env: StreamExecutionEnvironment) -> None:
    class Plain(CoProcessFunction):
        pass

    ints, strs = two_sources(env)
    ints.connect(strs).key_by(str, str).process(Plain()).name("p").print()
    node = next(n for n in env.get_stream_graph().nodes.values() if n.name == "p")
    assert node.operator is not None and node.operator.kind == "keyed_co_process"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.map(lambda x: x), "needs a CoMapFunction"),
        (lambda c: c.flat_map(Tag()), "needs a CoFlatMapFunction"),
        (lambda c: c.process(Tag()), "needs a CoProcessFunction"),
    ],
)
def test_the_wrong_function_is_named_in_the_error(env: StreamExecutionEnvironment, call, message) -> None:  # type: ignore[no-untyped-def]
    ints, strs = two_sources(env)
    with pytest.raises(UsageError, match=message):
        call(ints.connect(strs))


def test_connect_takes_a_data_stream_of_the_same_environment(env: StreamExecutionEnvironment) -> None:
    ints, _ = two_sources(env)
    with pytest.raises(UsageError, match="connect\\(\\) takes a DataStream"):
        ints.connect([1, 2])  # type: ignore[arg-type]
    other = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(UsageError, match="different StreamExecutionEnvironments"):
        ints.connect(other.from_collection([1]))


def test_key_types_of_the_two_inputs_must_agree(env: StreamExecutionEnvironment) -> None:
    ints, strs = two_sources(env)
    connected = ints.key_by(lambda i: i, key_type=Types.LONG()).connect(
        strs.key_by(lambda s: s, key_type=Types.STRING())
    )
    with pytest.raises(UsageError, match="key types of the connected KeyedStreams differ"):
        connected.process(Join())


def test_co_flat_map_output_type_is_the_streams_type(env: StreamExecutionEnvironment) -> None:
    class Both(CoFlatMapFunction):
        def flat_map1(self, value):  # type: ignore[no-untyped-def]
            yield value

        def flat_map2(self, value):  # type: ignore[no-untyped-def]
            yield value

    ints, strs = two_sources(env)
    out = ints.connect(strs).flat_map(Both(), output_type=Types.STRING())
    assert out.get_type() == Types.STRING()

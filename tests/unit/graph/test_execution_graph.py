"""ExecutionGraph: Flink's MyJob example expanded by parallelism, pointwise rescaling, attempts, regions."""

from __future__ import annotations

import pytest

from weir.common import Time, WatermarkStrategy
from weir.datastream import DataStream, RuntimeExecutionMode, StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.window import TumblingEventTimeWindows
from weir.errors import IllegalStateTransition, UsageError
from weir.graph.execution_graph import (
    ExecutionGraph,
    ExecutionVertex,
    build_execution_graph,
    pointwise_consumed_partitions,
)
from weir.graph.job_graph import ResultPartitionType, generate_job_graph
from weir.graph.partitioners import DistributionPattern
from weir.graph.status import ExecutionState, JobStatus


def source(env: StreamExecutionEnvironment) -> DataStream:
    return env.from_source(NumberSequenceSource(1, 100), WatermarkStrategy.no_watermarks(), "source")


def my_job(parallelism: int, batch: bool = False) -> ExecutionGraph:
    """Flink's MyJob example: source -> map at ``parallelism``, key_by, 10 s window, sink at 1."""
    env = StreamExecutionEnvironment.get_execution_environment()
    if batch:
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(parallelism)
    (
        source(env)
        .map(lambda n: (n % 10, n))
        .key_by(lambda t: t[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .reduce(lambda a, b: a)
        .print()
        .set_parallelism(1)
    )
    return build_execution_graph(generate_job_graph(env.get_stream_graph("MyJob")))


def rescaled(producers: int, consumers: int) -> ExecutionGraph:
    """source+map at ``producers`` -rescale-> map at ``consumers``."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(producers)
    source(env).map(lambda n: n).rescale().map(lambda n: n).name("rescaled").set_parallelism(consumers)
    return build_execution_graph(generate_job_graph(env.get_stream_graph("rescale")))


def names(vertices: list[ExecutionVertex]) -> list[str]:
    return [v.task_name_with_subtask for v in vertices]


# -- Flink's MyJob example ----------------------------------------------------------------------------


@pytest.mark.parametrize("parallelism", [2, 4])
def test_my_job_partitions_and_gates(parallelism: int) -> None:
    graph = my_job(parallelism)
    source_map, window, sink = graph.job_vertices
    assert len(graph.job_vertices) == 3
    assert source_map.name == "Source: source -> Map"
    assert window.name.startswith("Window(TumblingEventTimeWindows(10000, 0)")
    assert sink.name == "Sink: Print to Std. Out"
    assert [v.parallelism for v in graph.job_vertices] == [parallelism, parallelism, 1]
    assert len(graph.all_execution_vertices()) == 2 * parallelism + 1

    # each SourceMap subtask: one partition, one subpartition per Window subtask
    for ev in source_map.task_vertices:
        assert ev.consumed_partitions == []
        (partition,) = ev.produced_partitions
        assert partition.num_subpartitions == parallelism
        assert partition.consumers == window.task_vertices
        assert partition.result.distribution_pattern is DistributionPattern.ALL_TO_ALL
        assert str(partition.result.partitioner) == "HASH"
    # each Window subtask: one gate with one channel per SourceMap subtask; one subpartition out
    for ev in window.task_vertices:
        assert ev.num_input_gates == 1
        assert ev.num_input_channels(0) == parallelism
        assert [p.producer for p in ev.consumed_partitions[0]] == source_map.task_vertices
        (partition,) = ev.produced_partitions
        assert partition.num_subpartitions == 1
        assert partition.consumers == sink.task_vertices
        assert partition.subpartition_of(sink.task_vertices[0]) == 0
    # the Sink: one gate with one channel per Window subtask
    (sink_ev,) = sink.task_vertices
    assert sink_ev.num_input_channels(0) == parallelism
    assert sink_ev.produced_partitions == []


def test_my_job_results_and_identity() -> None:
    graph = my_job(2)
    source_map, window, sink = graph.job_vertices
    assert graph.job_name == "MyJob"
    assert len(graph.job_id) == 32 and int(graph.job_id, 16) >= 0
    assert my_job(2).job_id == graph.job_id  # deterministic
    assert graph.status.state is JobStatus.CREATED
    assert len(graph.intermediate_results) == 2
    first, second = graph.intermediate_results.values()
    assert (first.producer, first.consumer) == (source_map, window)
    assert (second.producer, second.consumer) == (window, sink)
    assert first.result_type is ResultPartitionType.PIPELINED_BOUNDED
    assert [p.partition_number for p in first.partitions] == [0, 1]
    assert source_map.produced_results == [first] and window.inputs == [first] and sink.inputs == [second]
    assert names(window.task_vertices) == [f"{window.name} (1/2)", f"{window.name} (2/2)"]
    assert graph.execution_vertex(window.id, 1) is window.task_vertices[1]
    with pytest.raises(KeyError):
        graph.execution_vertex(window.id, 2)
    with pytest.raises(UsageError, match="no input gate 1"):
        window.task_vertices[0].num_input_channels(1)
    attempt_ids = {ev.current_execution.attempt_id for ev in graph.all_execution_vertices()}
    assert len(attempt_ids) == 5
    assert build_execution_graph(graph.job_graph, job_id="f" * 32).job_id == "f" * 32


# -- pointwise ----------------------------------------------------------------------------------


def test_rescale_four_to_two() -> None:
    graph = rescaled(4, 2)
    producer, consumer = graph.job_vertices
    assert consumer.inputs[0].distribution_pattern is DistributionPattern.POINTWISE
    c0, c1 = consumer.task_vertices
    assert [p.partition_number for p in c0.consumed_partitions[0]] == [0, 1]
    assert [p.partition_number for p in c1.consumed_partitions[0]] == [2, 3]
    for ev in producer.task_vertices:
        (partition,) = ev.produced_partitions
        assert partition.num_subpartitions == 1
        assert partition.consumers == [c0 if ev.subtask_index < 2 else c1]


def test_rescale_two_to_four() -> None:
    graph = rescaled(2, 4)
    producer, consumer = graph.job_vertices
    p0, p1 = (ev.produced_partitions[0] for ev in producer.task_vertices)
    assert p0.consumers == consumer.task_vertices[:2]
    assert p1.consumers == consumer.task_vertices[2:]
    assert p0.num_subpartitions == p1.num_subpartitions == 2
    assert [p0.subpartition_of(c) for c in p0.consumers] == [0, 1]
    for ev in consumer.task_vertices:
        assert ev.num_input_channels(0) == 1
    with pytest.raises(UsageError, match="does not consume"):
        p0.subpartition_of(consumer.task_vertices[3])


def test_rescale_equal_parallelism_is_one_to_one() -> None:
    graph = rescaled(3, 3)
    producer, consumer = graph.job_vertices
    for up, down in zip(producer.task_vertices, consumer.task_vertices):
        (partition,) = up.produced_partitions
        assert partition.consumers == [down]
        assert down.consumed_partitions == [[partition]]


@pytest.mark.parametrize("producers", range(1, 9))
@pytest.mark.parametrize("consumers", range(1, 9))
def test_pointwise_covers_every_partition_and_consumer(producers: int, consumers: int) -> None:
    consumed = pointwise_consumed_partitions(producers, consumers)
    assert len(consumed) == consumers
    assert all(len(r) >= 1 for r in consumed)  # every consumer reads something
    fed: dict[int, list[int]] = {}
    for consumer, partitions in enumerate(consumed):
        for p in partitions:
            fed.setdefault(p, []).append(consumer)
    assert sorted(fed) == list(range(producers))  # every partition has a consumer
    if producers <= consumers:
        assert all(len(r) == 1 for r in consumed)
    else:
        assert all(len(c) == 1 for c in fed.values())


def test_pointwise_rejects_empty_sides() -> None:
    with pytest.raises(UsageError):
        pointwise_consumed_partitions(0, 2)


# -- attempts -----------------------------------------------------------------------------------


def test_restart_creates_the_next_attempt_of_the_same_vertex() -> None:
    graph = my_job(2)
    ev = graph.job_vertices[1].task_vertices[0]
    first = ev.current_execution
    assert (first.attempt_number, first.state, first.assigned_slot) == (0, ExecutionState.CREATED, None)
    with pytest.raises(UsageError, match="attempt 0 is CREATED"):
        ev.reset_for_new_execution()
    for event in ("schedule", "deploy", "initialize", "run", "fail"):
        first.on_event(event)
    assert first.state is ExecutionState.FAILED
    second = ev.reset_for_new_execution()
    assert ev.current_execution is second and second.vertex is ev
    assert second.attempt_number == 1 and second.state is ExecutionState.CREATED
    assert second.attempt_id != first.attempt_id
    assert ev.prior_executions == [first]
    assert first.state is ExecutionState.FAILED  # the old attempt is never revived
    with pytest.raises(IllegalStateTransition):
        first.on_event("schedule")


# -- pipelined regions --------------------------------------------------------------------------


def test_streaming_job_is_one_region() -> None:
    graph = my_job(2)
    (region,) = graph.regions
    assert len(region) == 5
    assert region.vertices == graph.all_execution_vertices()
    assert region.blocking_inputs() == []
    assert all(graph.region_of(ev) is region for ev in graph.all_execution_vertices())


def test_batch_job_splits_regions_at_blocking_edges() -> None:
    graph = my_job(2, batch=True)
    source_map, window, sink = graph.job_vertices
    assert all(r.result_type is ResultPartitionType.BLOCKING for r in graph.intermediate_results.values())
    # every subtask is its own region: nothing is pipelined
    assert [r.vertices for r in graph.regions] == [[ev] for ev in graph.all_execution_vertices()]
    assert [r.id for r in graph.regions] == list(range(5))
    position = {id(r): i for i, r in enumerate(graph.regions)}
    for region in graph.regions:
        for partition in region.blocking_inputs():
            assert position[id(graph.region_of(partition.producer))] < position[id(region)]
    window_region = graph.region_of(window.task_vertices[1])
    assert [p.producer for p in window_region.blocking_inputs()] == source_map.task_vertices
    assert [
        p.producer for p in graph.region_of(sink.task_vertices[0]).blocking_inputs()
    ] == window.task_vertices


def test_mixed_pipelined_and_blocking_regions() -> None:
    """A blocking edge in a streaming job splits it there; the consumer region comes last."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    stream = source(env).map(lambda n: n).key_by(lambda n: n).map(lambda n: n).name("keyed")
    stream.print().set_parallelism(1)
    job = generate_job_graph(env.get_stream_graph("mixed"))
    # make the keyed edge blocking, as an explicit batch exchange would
    job.vertices[0].produced_data_sets[0].result_type = ResultPartitionType.BLOCKING
    graph = build_execution_graph(job)
    source_map, keyed, sink = graph.job_vertices
    # each SourceMap subtask alone; the keyed maps and the sink are joined by pipelined REBALANCE
    assert [r.vertices for r in graph.regions] == [
        [source_map.task_vertices[0]],
        [source_map.task_vertices[1]],
        [*keyed.task_vertices, *sink.task_vertices],
    ]
    last = graph.regions[-1]
    assert [p.producer for p in last.blocking_inputs()] == source_map.task_vertices
    assert graph.regions[0].blocking_inputs() == []


def test_regions_waiting_on_each_other_are_merged() -> None:
    """A -blocking-> B -blocking-> C with A -pipelined-> C: {A, C} and {B} would deadlock, so one region."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    a = source(env).map(lambda n: n).name("a")
    b = a.key_by(lambda n: n).map(lambda n: n).name("b")
    a.union(b).map(lambda n: n).name("c")
    job = generate_job_graph(env.get_stream_graph("cycle"))
    a_vertex, b_vertex = (job.vertex_by_name(n) for n in ("Source: source -> a", "b"))
    for data_set in a_vertex.produced_data_sets:
        if data_set.consumers[0].target is b_vertex:
            data_set.result_type = ResultPartitionType.BLOCKING
    (b_to_c,) = b_vertex.produced_data_sets
    b_to_c.result_type = ResultPartitionType.BLOCKING
    graph = build_execution_graph(job)
    (region,) = graph.regions
    assert len(region) == 3
    assert region.blocking_inputs() == []

"""Slot sharing and placement: Flink's Source-Map-Reduce slot example, Flink's WindowWordCount, locality."""

from __future__ import annotations

import pytest

from weir.common import Time, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.window import TumblingEventTimeWindows
from weir.errors import UsageError
from weir.graph.execution_graph import ExecutionGraph, build_execution_graph
from weir.graph.job_graph import generate_job_graph
from weir.graph.slots import Slot, plan_slots, required_slots


def compile_job(env: StreamExecutionEnvironment, name: str) -> ExecutionGraph:
    return build_execution_graph(generate_job_graph(env.get_stream_graph(name)))


def source_map_reduce(chaining: bool = True) -> ExecutionGraph:
    """Flink's slot sharing example: Source 4 -> Map 4 -> Reduce 3."""
    env = StreamExecutionEnvironment.get_execution_environment()
    if not chaining:
        env.disable_operator_chaining()
    (
        env.from_source(NumberSequenceSource(1, 100), WatermarkStrategy.no_watermarks(), "source")
        .set_parallelism(4)
        .map(lambda n: (n % 3, n))
        .set_parallelism(4)
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .set_parallelism(3)
    )
    return compile_job(env, "slot sharing example")


def window_word_count() -> ExecutionGraph:
    """Flink's WindowWordCount: source at 1 in 'default', flat_map at 4 in 'flatMap_sg', window sum and sink at 3 in 'sum_sg'."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(3)
    (
        env.from_source(NumberSequenceSource(1, 100), WatermarkStrategy.no_watermarks(), "source")
        .set_parallelism(1)
        .flat_map(lambda n: [(str(n % 7), 1)])
        .slot_sharing_group("flatMap_sg")
        .set_parallelism(4)
        .key_by(lambda pair: pair[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(5)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .slot_sharing_group("sum_sg")
        .set_parallelism(3)
        .print()
    )
    return compile_job(env, "WindowWordCount")


def my_job(parallelism: int) -> ExecutionGraph:
    """Flink's MyJob example."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    (
        env.from_source(NumberSequenceSource(1, 100), WatermarkStrategy.no_watermarks(), "source")
        .map(lambda n: (n % 10, n))
        .key_by(lambda t: t[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .reduce(lambda a, b: a)
        .print()
        .set_parallelism(1)
    )
    return compile_job(env, "MyJob")


def contents(slot: Slot) -> list[str]:
    return [ev.task_name_with_subtask for ev in slot.subtasks]


# -- Flink's slot sharing example -------------------------------------------------------------------------------


@pytest.mark.parametrize("chaining", [True, False])
def test_seed_004_pipelines_on_two_taskmanagers(chaining: bool) -> None:
    graph = source_map_reduce(chaining)
    assert len(graph.job_vertices) == (2 if chaining else 3)
    reduce_vertex = graph.job_vertices[-1]
    plan = plan_slots(graph, taskmanagers=2, slots_per_taskmanager=3)
    assert required_slots(graph) == {"default": 4}
    assert (plan.slots_used, plan.slots_offered) == (4, 6)
    assert [(s.taskmanager, s.index) for s in plan.slots] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert len(plan.slots_on(0)) == 3 and len(plan.slots_on(1)) == 1
    for k, slot in enumerate(plan.slots_on(0)):
        # slot k holds subtask k of every operator, the reduce's included
        assert [ev.subtask_index for ev in slot.subtasks] == [k] * len(graph.job_vertices)
        assert [ev.job_vertex for ev in slot.subtasks] == graph.job_vertices
        assert plan.slot_of(reduce_vertex.task_vertices[k]) is slot
    (last,) = plan.slots_on(1)
    assert [ev.job_vertex for ev in last.subtasks] == graph.job_vertices[:-1]  # no 4th reduce subtask
    assert all(ev.subtask_index == 3 for ev in last.subtasks)
    assert contents(last)[0].endswith("(4/4)")
    for ev in graph.all_execution_vertices():
        assert ev in plan.slot_of(ev).subtasks
        assert plan.taskmanager_of(ev) == (1 if ev.subtask_index == 3 else 0)


def test_seed_004_evenly_spread_deals_slots_round_robin() -> None:
    graph = source_map_reduce()
    plan = plan_slots(graph, taskmanagers=2, slots_per_taskmanager=3, evenly_spread=True)
    assert [(s.taskmanager, s.index, s.shared_slot_index) for s in plan.slots] == [
        (0, 0, 0),
        (0, 1, 2),
        (1, 0, 1),
        (1, 1, 3),
    ]
    source_vertex = graph.job_vertices[0]
    assert [plan.taskmanager_of(ev) for ev in source_vertex.task_vertices] == [0, 1, 0, 1]


def test_assign_to_executions_records_slots() -> None:
    graph = source_map_reduce()
    plan = plan_slots(graph, 2, 3)
    assert all(ev.current_execution.assigned_slot is None for ev in graph.all_execution_vertices())
    plan.assign_to_executions()
    for ev in graph.all_execution_vertices():
        assert ev.current_execution.assigned_slot is plan.slot_of(ev)


# -- Flink's WindowWordCount ------------------------------------------------------------------------------------


def test_window_word_count_needs_a_slot_per_group_slice() -> None:
    graph = window_word_count()
    assert [v.slot_sharing_group for v in graph.job_vertices] == ["default", "flatMap_sg", "sum_sg"]
    assert required_slots(graph) == {"default": 1, "flatMap_sg": 4, "sum_sg": 3}
    plan = plan_slots(graph, taskmanagers=2, slots_per_taskmanager=4)
    assert plan.slots_used == 8
    groups = [s.slot_sharing_group for s in plan.slots]
    assert groups == ["default"] + ["flatMap_sg"] * 4 + ["sum_sg"] * 3
    # the window and its chained sink share the sum_sg slots
    for slot in plan.slots:
        assert all(ev.job_vertex.slot_sharing_group == slot.slot_sharing_group for ev in slot.subtasks)


def test_window_word_count_does_not_fit_on_six_slots() -> None:
    graph = window_word_count()
    with pytest.raises(UsageError) as info:
        plan_slots(graph, taskmanagers=2, slots_per_taskmanager=3)
    message = str(info.value)
    assert "needs 8 slots (group 'default': 1, group 'flatMap_sg': 4, group 'sum_sg': 3)" in message
    assert "offers 6 (2 TaskManagers × 3 slots)" in message


@pytest.mark.parametrize(("taskmanagers", "slots"), [(0, 3), (2, 0), (-1, 1), (True, 1)])
def test_bad_cluster_shapes_are_usage_errors(taskmanagers: int, slots: int) -> None:
    with pytest.raises(UsageError, match="must be a positive integer"):
        plan_slots(source_map_reduce(), taskmanagers, slots)


def test_single_taskmanager_singular_message() -> None:
    with pytest.raises(UsageError, match=r"offers 1 \(1 TaskManager × 1 slot\)"):
        plan_slots(source_map_reduce(), 1, 1)


# -- channel locality (Flink's physical transport) ---------------------------------------------


def test_my_job_channel_locality_on_two_taskmanagers() -> None:
    graph = my_job(2)
    plan = plan_slots(graph, taskmanagers=2, slots_per_taskmanager=1)
    source_map, window, sink = graph.job_vertices
    assert [contents(s) for s in plan.slots] == [
        [f"{source_map.name} (1/2)", f"{window.name} (1/2)", f"{sink.name} (1/1)"],
        [f"{source_map.name} (2/2)", f"{window.name} (2/2)"],
    ]
    assert plan.is_local(source_map.task_vertices[0], window.task_vertices[0])
    assert not plan.is_local(source_map.task_vertices[0], window.task_vertices[1])
    keyed, to_sink = plan.channel_locality(graph)
    assert (keyed.producer, keyed.consumer, keyed.local, keyed.remote) == (source_map.name, window.name, 2, 2)
    assert str(keyed.edge.partitioner) == "HASH"
    assert (to_sink.producer, to_sink.consumer, to_sink.local, to_sink.remote) == (
        window.name,
        sink.name,
        1,
        1,
    )
    assert keyed.channels == 4 and to_sink.channels == 2
    assert "2 local, 2 remote" in str(keyed)


def test_one_taskmanager_keeps_every_channel_local() -> None:
    graph = my_job(4)
    plan = plan_slots(graph, taskmanagers=1, slots_per_taskmanager=4)
    assert [(e.local, e.remote) for e in plan.channel_locality(graph)] == [(16, 0), (4, 0)]


def test_slot_of_unknown_vertex() -> None:
    plan = plan_slots(my_job(2), 2, 1)
    with pytest.raises(KeyError):
        plan.slot_of(my_job(2).all_execution_vertices()[0])

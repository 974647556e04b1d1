"""DataStream.set_buffer_timeout: the operator's timeout goes to the task whose output
partitions carry its records; other tasks keep the job's."""

from __future__ import annotations

import pytest

from weir.common import Types
from weir.datastream import StreamExecutionEnvironment
from weir.errors import UsageError
from weir.graph.job_graph import generate_job_graph, vertex_buffer_timeout_ms


def timeouts(env: StreamExecutionEnvironment) -> dict[str, int]:
    job = generate_job_graph(env.get_stream_graph())
    return {v.name: vertex_buffer_timeout_ms(job, v, env.get_buffer_timeout()) for v in job.vertices}


def build(map_timeout: int | None, filter_timeout: int | None = None) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_buffer_timeout(100)
    ds = env.from_collection([1, 2, 3], type_info=Types.LONG()).name("source")
    mapped = ds.map(lambda x: x, output_type=Types.LONG()).name("map")
    if map_timeout is not None:
        mapped.set_buffer_timeout(map_timeout)
    filtered = mapped.filter(lambda x: x > 0).name("filter")
    if filter_timeout is not None:
        filtered.set_buffer_timeout(filter_timeout)
    filtered.rebalance().map(lambda x: x, output_type=Types.LONG()).name("after").print()
    return env


def test_the_job_default_applies_without_a_timeout_of_its_own() -> None:
    assert set(timeouts(build(None)).values()) == {100}


def test_the_operator_whose_records_leave_the_task_decides() -> None:
    got = timeouts(build(None, filter_timeout=0))
    (upstream,) = [name for name in got if "filter" in name]
    assert got[upstream] == 0
    assert all(t == 100 for name, t in got.items() if name != upstream)


def test_a_timeout_inside_the_chain_does_not_reach_the_partitions() -> None:
    got = timeouts(build(map_timeout=5))
    assert set(got.values()) == {100}


def test_flush_only_when_full_is_per_operator_too() -> None:
    got = timeouts(build(None, filter_timeout=-1))
    assert sorted(got.values()) == [-1, 100]


def test_bad_timeouts_are_named() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([1], type_info=Types.LONG()).map(lambda x: x, output_type=Types.LONG())
    with pytest.raises(UsageError, match="set_buffer_timeout needs -1"):
        ds.set_buffer_timeout(-2)
    with pytest.raises(UsageError, match="no operator of its own"):
        ds.rebalance().set_buffer_timeout(0)

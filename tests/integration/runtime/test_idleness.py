"""An idle source subtask stops holding the watermark back after the idleness timeout (MockClock),
with the strategy on the source or on ``assign_timestamps_and_watermarks`` after it."""

from __future__ import annotations

import pytest
import trio

from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster
from weir.codec.batch import Batch
from weir.common import Duration, Time, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.base import Source
from weir.datastream.window import TumblingEventTimeWindows
from weir.graph.job_graph import generate_job_graph
from weir.operators.sources import SourceReader


class _Reader(SourceReader):
    """Subtask 0 emits one record per 100 ms of processing time; subtask 1 never emits."""

    def __init__(self, subtask: int) -> None:
        self.subtask = subtask
        self.n = 0

    async def next_batch(self) -> Batch | None:
        if self.subtask == 1:
            await trio.sleep_forever()
        await trio.sleep(0.1)
        self.n += 1
        return Batch([("k", self.n)])


class HalfSilentSource(Source):
    def is_bounded(self) -> bool:
        return False

    def create_reader(self, subtask: int, parallelism: int) -> SourceReader:
        return _Reader(subtask)


def job(
    idle_timeout_ms: int | None, on_source: bool = True
) -> tuple[StreamExecutionEnvironment, list[tuple[str, int]], object]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[1] * 100)
    if idle_timeout_ms is not None:
        strategy = strategy.with_idleness(Duration.of_millis(idle_timeout_ms))
    out: list[tuple[str, int]] = []
    if on_source:
        stream = env.from_source(HalfSilentSource(), strategy, "half silent")
    else:
        stream = env.from_source(HalfSilentSource(), WatermarkStrategy.no_watermarks(), "half silent")
        stream = stream.assign_timestamps_and_watermarks(strategy)
    (
        stream.key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .set_parallelism(1)
        .add_sink(out.append)
    )
    return env, out, generate_job_graph(env.get_stream_graph("idleness"))


async def run_for(
    seconds: float, idle_timeout_ms: int | None, on_source: bool = True
) -> list[tuple[str, int]]:
    env, _, job_graph = job(idle_timeout_ms, on_source)
    async with open_minicluster(ClusterConfig(taskmanagers=1, slots_per_taskmanager=2)) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))  # type: ignore[arg-type]
        await trio.sleep(seconds)
        sink = next(
            op
            for te in cluster.task_executors
            for h in te.tasks.values()
            if h.task is not None
            for op in h.task.chain.operators
            if op.name.startswith("Sink")
        )
        results = list(sink.function.__self__)  # the sink's own copy of out.append
        handle.cancel()
        await handle.wait()
    return results


ON = pytest.mark.parametrize("on_source", [True, False], ids=["from_source", "assign_timestamps"])


@ON
async def test_a_silent_subtask_holds_windows_back_without_idleness(
    autojump_clock: trio.testing.MockClock, on_source: bool
) -> None:
    assert await run_for(10, None, on_source) == []


@ON
async def test_idleness_lets_windows_fire(autojump_clock: trio.testing.MockClock, on_source: bool) -> None:
    results = await run_for(10, 1_000, on_source)
    # records n = 1, 2, ... at event time n * 100 ms: window [0, 1 s) holds n = 1..9
    assert results[:3] == [("k", sum(range(1, 10))), ("k", sum(range(10, 20))), ("k", sum(range(20, 30)))]

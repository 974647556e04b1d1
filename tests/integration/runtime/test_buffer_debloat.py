"""Buffer debloating end to end: a slow user function chained to a source no longer
holds checkpoints back.

The job is issue 24's: a number sequence at parallelism 2 → a map that takes 0.2 ms a
record (a sleep of 4 ms every 20 records: a user function calling a model) → key_by → a
running reduce → an exactly-once FileSink, checkpointing every 200 ms. With 4,096 records
a batch, one batch is 820 ms of the map and the source cannot emit a barrier in between;
debloated batches take 10 ms (1/100 of the 1 s target).

The map's cost is real time, on purpose: a MockClock advanced by the map would also count
the checkpoint files' writes in worker threads as the map's time (the loop never idles),
so virtual checkpoint durations would measure the disk, not the engine. The job runs
about 3 s; the bounds leave room for a loaded machine (measured: median 0.2 s, against
one checkpoint of 9 s without debloating).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import trio

from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster
from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.file_system import Encoder, FileSink
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.graph.job_graph import generate_job_graph

RECORDS = 12_000
INTERVAL_MS = 200
PAIR = Types.TUPLE([Types.LONG(), Types.LONG()])


def slow_map(n: int) -> tuple[int, int]:
    """0.2 ms a record: 4 ms every 20 records."""
    if n % 20 == 0:
        time.sleep(0.004)
    return (n % 10, n)


def slow_job(out_dir: Path, debloat: bool) -> tuple[Any, Any]:
    conf = Configuration()
    conf.set_string("execution.checkpointing.interval", f"{INTERVAL_MS} ms")
    conf.set_string("execution.checkpointing.dir", str(out_dir / "checkpoints"))
    conf.set_string("taskmanager.network.memory.buffer-debloat.enabled", str(debloat).lower())
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    sink = FileSink.for_row_format(str(out_dir / "out"), Encoder.simple_string_encoder()).build()
    (
        env.from_source(NumberSequenceSource(0, RECORDS - 1), WatermarkStrategy.no_watermarks(), "numbers")
        .map(slow_map, output_type=PAIR)
        .key_by(lambda r: r[0], key_type=Types.LONG())
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(sink)
    )
    return env, generate_job_graph(env.get_stream_graph("slow map"))


async def run_slow_job(out_dir: Path, debloat: bool) -> tuple[list[Any], float]:
    """The job's completed checkpoints (their statistics) and its run time in seconds."""
    env, job_graph = slow_job(out_dir, debloat)
    async with open_minicluster(ClusterConfig(taskmanagers=1, slots_per_taskmanager=2)) as cluster:
        started = trio.current_time()
        handle = cluster.submit(job_graph, job_settings_for(env))
        result = await handle.wait()
        elapsed = trio.current_time() - started
    assert result.status.name == "FINISHED", result.failure
    stats = [s for s in result.accumulators["checkpoint_stats"] if s["status"] == "COMPLETED"]
    lines = [
        line for p in (out_dir / "out").rglob("*") if p.is_file() and not p.name.startswith(".")
        for line in p.read_text(encoding="utf-8").splitlines()
    ]  # fmt: skip
    assert len(lines) == RECORDS  # one running sum a record, each committed once
    return stats, elapsed


async def test_checkpoints_of_a_slow_chain_complete_at_the_configured_rate(tmp_path: Path) -> None:
    stats, elapsed = await run_slow_job(tmp_path, debloat=True)
    # the map alone is 1.2 s of each subtask, 2.4 s of the loop both share
    assert elapsed >= 2.4
    durations = sorted(s["duration_ms"] for s in stats)
    median_ms = durations[len(durations) // 2]
    # a checkpoint waits for some steps of 10 ms of both tasks, not for a batch of 820 ms
    assert median_ms < 3 * INTERVAL_MS
    # one checkpoint about every interval plus its duration (half as many on a loaded machine)
    assert len(stats) >= elapsed * 1000 / (INTERVAL_MS + median_ms) / 2


async def test_without_debloating_the_slow_chain_holds_checkpoints_back(tmp_path: Path) -> None:
    """The same job with fixed batches of 4,096: the behaviour the first test rules out."""
    stats, elapsed = await run_slow_job(tmp_path, debloat=False)
    assert elapsed >= 2.4
    # a source emits a barrier between two batches only, and its 6,000 records are two batches
    assert len(stats) <= 2

"""Savepoints end to end (MockClock): take one, stop with one, restore at another parallelism
and on another backend; the results equal those of a run that never stopped."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import trio

from weir.checkpoint.storage import load_savepoint
from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster
from weir.cluster.savepoints import load_savepoint_restore_state
from weir.common import Configuration, Duration, Time, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.window import TumblingEventTimeWindows
from weir.errors import CheckpointError, UsageError
from weir.graph.job_graph import generate_job_graph

EVENTS = 6_000
KEYS = 7
EVENT_TYPE = Types.TUPLE([Types.INT(), Types.LONG(), Types.LONG()])


def make_event(i: int) -> tuple[int, int, int]:
    """(key, value, event time ms): 1000 events per second of event time, up to 50 ms out of order."""
    return (i * 31) % KEYS, i % 13, i + (i * 7919) % 50


def build(
    parallelism: int,
    backend: str,
    out: list,
    savepoint: str | None = None,
    events: int = EVENTS,
    incremental: bool = False,
    **restore: bool,
):
    conf = Configuration()
    conf.set_string("state.backend.type", backend)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    if incremental:  # incremental checkpoints run before the savepoint; the savepoint is still full
        env.get_configuration().set_string("execution.checkpointing.incremental", "true")
        env.enable_checkpointing(200)
    watermarks = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(50)
    ).with_timestamp_assigner(lambda e, _: e[2])
    (
        env.from_source(
            DataGeneratorSource(make_event, events, rate_limit=2000.0, type_info=EVENT_TYPE),
            watermarks,
            "events",
        )
        .uid("events")
        .key_by(lambda e: e[0], key_type=Types.INT())
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])))
        .uid("window")
        .map(lambda e: (e[0], e[1]))
        .add_sink(out.append)
        .set_parallelism(1)
    )
    if savepoint is not None:
        env._restore_from(savepoint, restore.get("allow_non_restored_state", False))
    return env, generate_job_graph(env.get_stream_graph("savepointed windows"))


def oracle(events: int = EVENTS) -> Counter:
    sums: Counter = Counter()
    for i in range(events):
        key, value, ts = make_event(i)
        sums[(key, ts // 1000)] += value
    return Counter((key, total) for (key, _), total in sums.items())


async def run_to_end(env, job_graph) -> None:
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=4)) as cluster:
        result = await cluster.submit(job_graph, job_settings_for(env)).wait()
    assert result.status.name == "FINISHED", result.failure


async def stop_with_savepoint(
    env, job_graph, target: Path, after_s: float, drain: bool = False, fmt: str = "canonical"
) -> str:
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=4)) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))
        await trio.sleep(after_s)
        path = await handle.job_master.trigger_savepoint(str(target), fmt, "drain" if drain else "no_drain")
        result = await handle.wait()
    assert result.status.name == "FINISHED", result.failure
    return path


@pytest.mark.parametrize(
    ("old_p", "new_p", "old_backend", "new_backend"),
    [
        (2, 1, "hashmap", "hashmap"),
        (2, 3, "hashmap", "lmdb"),
        (2, 4, "lmdb", "hashmap"),
        (2, 2, "lmdb", "lmdb"),
    ],
)
async def test_stop_with_savepoint_then_restore_at_another_parallelism_gives_the_uninterrupted_result(
    old_p: int, new_p: int, old_backend: str, new_backend: str, tmp_path: Path, autojump_clock: object
) -> None:
    first: list = []
    env, graph = build(old_p, old_backend, first)
    path = await stop_with_savepoint(env, graph, tmp_path, after_s=1.2)
    metadata = load_savepoint(path, verify_checksums=True)
    assert metadata.kind == "savepoint" and metadata.savepoint_format == "canonical"
    assert 0 < len(first) < len(oracle())  # stopped midway: some windows fired, not all
    second: list = []
    env, graph = build(new_p, new_backend, second, savepoint=path)
    await run_to_end(env, graph)
    assert Counter(first) + Counter(second) == oracle()
    assert Path(path).is_dir()  # a savepoint is never removed by weir


async def test_savepoint_while_running_leaves_the_job_running_and_restores_exactly(
    tmp_path: Path, autojump_clock: object
) -> None:
    out: list = []
    events = 40_000  # 10 s at the sources' rate: still running when the savepoint is taken
    env, graph = build(2, "hashmap", out, events=events)
    async with open_minicluster(ClusterConfig(taskmanagers=1, slots_per_taskmanager=4)) as cluster:
        handle = cluster.submit(graph, job_settings_for(env))
        await trio.sleep(1.0)
        path = await handle.job_master.trigger_savepoint(str(tmp_path), "native")
        result = await handle.wait()
    assert result.status.name == "FINISHED"
    assert Counter(out) == oracle(events)
    assert load_savepoint(path).savepoint_format == "native"
    # restoring it gives the windows that had not fired when it was taken, plus the rest
    again: list = []
    env, graph = build(3, "lmdb", again, savepoint=path, events=events)
    await run_to_end(env, graph)
    assert again and Counter(again) <= oracle(events)


async def test_stop_with_drain_fires_every_window_before_the_savepoint(
    tmp_path: Path, autojump_clock: object
) -> None:
    out: list = []
    env, graph = build(2, "hashmap", out)
    path = await stop_with_savepoint(env, graph, tmp_path, after_s=1.2, drain=True)
    # event time ended before the savepoint: every window with data fired (partial ones too),
    # so the window operator saved no window contents and no timers
    seen_keys = {key for key, _ in out}
    assert len(seen_keys) == KEYS
    state = load_savepoint_restore_state(path, graph)
    window_payloads = [p for payloads in state.values() for p in payloads if p.get("keyed") is not None]
    assert window_payloads and all(p["keyed"].number_of_entries() == 0 for p in window_payloads)
    assert all(len(p["timers"].event_time) == 0 for p in window_payloads if p.get("timers") is not None)


async def test_savepoint_of_an_operator_the_new_job_lacks_fails_unless_allowed(
    tmp_path: Path, autojump_clock: object
) -> None:
    env, graph = build(2, "hashmap", [])
    path = await stop_with_savepoint(env, graph, tmp_path, after_s=1.0)

    def without_window(out: list, allow: bool):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        env.from_source(
            DataGeneratorSource(make_event, EVENTS, type_info=EVENT_TYPE),
            WatermarkStrategy.no_watermarks(),
            "events",
        ).uid("events").map(lambda e: e[1]).add_sink(out.append)
        env._restore_from(path, allow)
        return env, generate_job_graph(env.get_stream_graph("changed"))

    env2, graph2 = without_window([], False)
    async with open_minicluster(ClusterConfig(taskmanagers=1, slots_per_taskmanager=4)) as cluster:
        result = await cluster.submit(graph2, job_settings_for(env2)).wait()
    assert result.status.name == "FAILED"
    assert isinstance(result.failure, UsageError) and "allow_non_restored_state" in str(result.failure)

    out: list = []
    env3, graph3 = without_window(out, True)
    await run_to_end(env3, graph3)
    assert 0 < len(out) < EVENTS  # the source resumed where the savepoint left it


async def test_savepoint_needs_a_target_directory(autojump_clock: object) -> None:
    env, graph = build(1, "hashmap", [])
    async with open_minicluster(ClusterConfig(taskmanagers=1, slots_per_taskmanager=2)) as cluster:
        handle = cluster.submit(graph, job_settings_for(env))
        with pytest.raises(UsageError, match="savepoint-dir"):
            await handle.job_master.trigger_savepoint(None)
        handle.cancel()
        await handle.wait()
    with pytest.raises(CheckpointError):
        await handle.job_master.trigger_savepoint("/nonexistent-never-used")


def test_job_client_takes_savepoints_and_stops_with_one(tmp_path: Path) -> None:
    out: list = []
    env, _ = build(2, "hashmap", out, events=200_000)  # 100 s at the sources' rate: stopped long before
    client = env.execute_async("client savepoints")
    taken = client.trigger_savepoint(str(tmp_path)).result()
    assert load_savepoint(taken).kind == "savepoint"
    final = client.stop_with_savepoint(False, str(tmp_path)).result()
    result = client.get_job_execution_result().result(60)
    assert result.get_job_status().name == "FINISHED"
    assert final != taken and load_savepoint(final).savepoint_format == "canonical"
    assert len(out) < len(oracle(200_000))
    with pytest.raises(Exception, match="not running"):
        client.trigger_savepoint(str(tmp_path)).result()


@pytest.mark.parametrize("fmt", ["canonical", "native"])
async def test_a_savepoint_of_an_incremental_lmdb_job_restores_anywhere(
    fmt: str, tmp_path: Path, autojump_clock: object
) -> None:
    first: list = []
    events = 40_000  # 20 s at the sources' rate: far from done when stopped
    env, graph = build(2, "lmdb", first, incremental=True, events=events)
    path = await stop_with_savepoint(env, graph, tmp_path, after_s=1.2, fmt=fmt)
    chains = [h.shared_files for op in load_savepoint(path).operators for h in op.state_handles]
    if fmt == "canonical":  # full, backend-independent state
        assert not any(chains)
    else:  # LMDB's own form: its chain of run files, copied into the savepoint
        assert any(chains) and all(not f.shared for files in chains for f in files)
    second: list = []
    env, graph = build(3, "hashmap", second, savepoint=path, events=events)
    await run_to_end(env, graph)
    got, want = Counter(first) + Counter(second), oracle(events)
    assert got == want, (len(first), len(second), want - got, got - want)

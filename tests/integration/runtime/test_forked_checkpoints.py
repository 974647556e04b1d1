"""Checkpoints and savepoints whose files forked children write (``weir.checkpointing.async-snapshot:
PROCESS``) restore to the uninterrupted result, and say what the fork cost.

A child works in real time while the MockClock jumps whenever every task waits: the jobs
here give their checkpoints a timeout of years, so that no jump expires one."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import trio

from tests.integration.runtime.test_savepoints import build, oracle, run_to_end
from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster


def children_write(env: object) -> None:
    conf = env.get_configuration()  # type: ignore[attr-defined]
    conf.set_string("weir.checkpointing.async-snapshot", "PROCESS")
    conf.set_string("execution.checkpointing.timeout", f"{10**11} ms")


async def stop_with_a_childs_savepoint(handle: object, tmp_path: Path) -> str:
    """Stop the job with a savepoint, check that it finished and that a child wrote the savepoint."""
    path: str = await handle.job_master.trigger_savepoint(  # type: ignore[attr-defined]
        str(tmp_path / "savepoints"), "canonical", "no_drain"
    )
    result = await handle.wait()  # type: ignore[attr-defined]
    assert result.status.name == "FINISHED", result.failure
    stats = result.accumulators["checkpoint_stats"]
    assert [s["kind"] for s in stats] == ["savepoint"] and stats[0]["fork_ms"] > 0, stats
    return path


@pytest.mark.parametrize(("backend", "new_backend"), [("hashmap", "lmdb"), ("lmdb", "hashmap")])
async def test_a_savepoint_written_by_children_restores_at_another_parallelism(
    backend: str, new_backend: str, tmp_path: Path, autojump_clock: object
) -> None:
    first: list = []
    env, graph = build(2, backend, first)
    children_write(env)
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=4)) as cluster:
        handle = cluster.submit(graph, job_settings_for(env))
        await trio.sleep(1.2)
        path = await stop_with_a_childs_savepoint(handle, tmp_path)
    assert 0 < len(first) < len(oracle())
    second: list = []
    env, graph = build(3, new_backend, second, savepoint=path)
    await run_to_end(env, graph)
    assert Counter(first) + Counter(second) == oracle()


@pytest.mark.parametrize(("backend", "incremental"), [("hashmap", False), ("lmdb", True)])
async def test_a_job_whose_checkpoints_children_write_commits_exactly_the_oracle(
    backend: str, incremental: bool, tmp_path: Path, autojump_clock: object
) -> None:
    from tests.integration.runtime.test_exactly_once import (
        Case,
        build_job,
        committed_lines,
        describe_difference,
        run_job,
    )
    from tests.integration.runtime.test_exactly_once import oracle as exact_oracle

    case = Case("window", 2, backend, False)
    env, job_graph = build_job(case, tmp_path, 8_000)
    children_write(env)
    env.get_configuration().set_string("execution.checkpointing.incremental", str(incremental).lower())
    result, _ = await run_job(env, job_graph)
    assert result.status.name == "FINISHED", result.failure
    stats = [s for s in result.accumulators["checkpoint_stats"] if s["status"] == "COMPLETED"]
    assert all(s["fork_ms"] > 0 for s in stats), stats  # how many complete before the end varies
    assert describe_difference(committed_lines(tmp_path), exact_oracle(case, 8_000)) == ""


# -- a vectorized window whose pane tables children do not inherit ------------------------------
PANE_KEYS = 20_000  # one event per key and 1 s window: tables past unforked.MIN_BYTES
PANE_EVENTS = 100_000


def pane_event(i: int) -> tuple[int, int, int]:
    """(key, value, event time ms): PANE_KEYS events per second of event time, in order."""
    return i % PANE_KEYS, i % 100, i * 1000 // PANE_KEYS


def pane_oracle() -> Counter:
    counts: Counter = Counter()
    sums: Counter = Counter()
    for i in range(PANE_EVENTS):
        k, v, t = pane_event(i)
        counts[(k, t - t % 1000)] += 1
        sums[(k, t - t % 1000)] += v
    return Counter((k, start, n, sums[(k, start)]) for (k, start), n in counts.items())


def pane_job(out: list, parallelism: int, savepoint: str | None = None) -> tuple:
    from weir.columnar import Aggregates, count, key, sum, window_start
    from weir.common import Duration, Time, Types, WatermarkStrategy
    from weir.datastream import StreamExecutionEnvironment
    from weir.datastream.connectors.datagen import DataGeneratorSource
    from weir.datastream.window import TumblingEventTimeWindows
    from weir.graph.job_graph import generate_job_graph

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    children_write(env)
    event_type = Types.TUPLE([Types.LONG(), Types.LONG(), Types.LONG()])
    watermarks = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(50)
    ).with_timestamp_assigner(lambda e, _: e[2])
    (
        env.from_source(
            DataGeneratorSource(pane_event, PANE_EVENTS, rate_limit=40_000.0, type_info=event_type),
            watermarks,
            "events",
        )
        .uid("events")
        .key_by(lambda e: e[0], key_type=Types.LONG())
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .aggregate(Aggregates(key(), window_start(), count(), sum(1)))
        .uid("panes")
        .map(tuple)
        .add_sink(out.append)
        .set_parallelism(1)
    )
    if savepoint is not None:
        env._restore_from(savepoint, False)
    return env, generate_job_graph(env.get_stream_graph("unforked panes"))


def _pane_stores(handle: object) -> list[object]:
    from weir.operators.window.aggregates import AggregatesWindowOperator

    tasks = [h.task for h in handle.job_master.handles.values() if h.task is not None]  # type: ignore[attr-defined]
    ops = [op for task in tasks for op in task.chain.operators if isinstance(op, AggregatesWindowOperator)]
    return [op.panes for op in ops]


@pytest.mark.parametrize(
    ("parallelism", "dense_cells", "store"),
    # the window keeps its panes in dense arrays until they would outgrow DENSE_CELLS, then
    # in the pane log: a small bound moves them there early
    [(1, None, "_AggregatePanes"), (2, 1 << 12, "_AggregatePaneLog")],
)
async def test_a_vectorized_windows_savepoint_written_by_a_child_restores_though_it_never_saw_the_panes(
    parallelism: int,
    dense_cells: int | None,
    store: str,
    tmp_path: Path,
    autojump_clock: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from weir.operators.window import vector
    from weir.state import unforked

    if dense_cells is not None:
        monkeypatch.setattr(vector, "DENSE_CELLS", dense_cells)
    first: list = []
    env, graph = pane_job(first, parallelism)
    async with open_minicluster(ClusterConfig(taskmanagers=1, slots_per_taskmanager=4)) as cluster:
        handle = cluster.submit(graph, job_settings_for(env))
        await trio.sleep(1.6)
        stores = _pane_stores(handle)
        assert len(stores) == parallelism and store in {type(s).__name__ for s in stores}
        tables = [
            getattr(s, name)
            for s in stores
            for name in ("rows", "index", "count", "iacc")
            if hasattr(s, name)
        ]
        assert sum(s.live for s in stores) > 10_000  # type: ignore[attr-defined]
        assert (
            all(unforked.is_unforked(t) for t in tables if t.nbytes >= unforked.MIN_BYTES)
            is unforked.SUPPORTED
        )
        assert any(t.nbytes >= unforked.MIN_BYTES for t in tables)
        path = await stop_with_a_childs_savepoint(handle, tmp_path)
    assert 0 < len(first) < len(pane_oracle())
    second: list = []
    env, graph = pane_job(second, parallelism, savepoint=path)
    async with open_minicluster(ClusterConfig(taskmanagers=1, slots_per_taskmanager=4)) as cluster:
        result = await cluster.submit(graph, job_settings_for(env)).wait()
    assert result.status.name == "FINISHED", result.failure
    assert Counter(first) + Counter(second) == pane_oracle()

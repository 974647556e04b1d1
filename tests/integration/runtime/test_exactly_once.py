"""Exactly-once end to end: jobs writing through the FileSink under seeded failures.

Two jobs, both with an exact oracle computed by a Python loop:

- the windowed shape of Flink's MyJob example: source → map → key_by → 10 s tumbling event-time
  window → FileSink; one line per (key, window start, sum);
- a keyed running sum: source → map → key_by → reduce → FileSink; one line per record,
  the key's running total. Every key's records come from one quarter of the index range,
  so from one source subtask at parallelism 1, 2 or 4, and reach the sum in order: the
  lines of a correct run are fully determined (no interleaving of several sources).

Each run's committed output (the finished part files) must be exactly the oracle: no line
missing, none twice. Failures come from the failure injector: operator exceptions, lost
TaskManagers (with their LMDB directories), JobManager crashes before ``_metadata`` and
damaged checkpoint files. A sink that appends without two-phase commit is shown to write
duplicates under the same failures, so the comparison can fail.

Fast tests run a few failures in a few configurations; ``@pytest.mark.slow`` runs at least
20 failures in every configuration (job × parallelism 2, 4 × heap, LMDB × aligned, unaligned).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster
from weir.common import Configuration, Duration, Time, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.file_system import (
    BucketAssigner,
    Encoder,
    FileSink,
    OutputFileConfig,
    RollingPolicy,
)
from weir.datastream.functions import SinkFunction, WindowFunction
from weir.datastream.window import TumblingEventTimeWindows
from weir.graph.job_graph import generate_job_graph

RATE = 20_000.0  # records/s of processing time over all source subtasks
CHECKPOINT_INTERVAL_MS = 50

# -- the windowed job (MyJob's shape and events) ---------------------------------------------
SENSORS = 50
EVENT_SPACING_MS = 10
MAX_DISORDER_MS = 2_000
EVENT_TYPE = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])
COUNT_TYPE = Types.TUPLE([Types.STRING(), Types.LONG()])
WINDOW_RESULT_TYPE = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])


def make_event(index: int) -> tuple[str, int, int]:
    """As examples/my_job.py: (sensor, value, event time ms), at most 1 s out of order."""
    key = f"sensor-{(index * 7919) % SENSORS:02d}"
    jitter = (index * 104_729) % MAX_DISORDER_MS
    return key, index % 10, index * EVENT_SPACING_MS + jitter - MAX_DISORDER_MS // 2


class WithWindowStart(WindowFunction):
    def apply(self, key: Any, window: Any, inputs: Any) -> Any:
        for _key, total in inputs:
            yield (key, window.start, total)


def window_oracle(events: int) -> Counter[str]:
    sums: Counter[tuple[str, int]] = Counter()
    for i in range(events):
        key, value, ts = make_event(i)
        sums[(key, ts - ts % 10_000)] += value
    return Counter(str((key, start, total)) for (key, start), total in sums.items())


# -- the keyed running sum ---------------------------------------------------------------------
KEYS_PER_QUARTER = 5
PAIR_TYPE = Types.TUPLE([Types.STRING(), Types.LONG()])


def make_number(events: int, index: int) -> tuple[str, int]:
    """(key, value): keys of one quarter of the indexes never occur in another quarter."""
    quarter = index * 4 // events
    return f"q{quarter}-k{index % KEYS_PER_QUARTER}", index + 1


def sum_oracle(events: int) -> Counter[str]:
    totals: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    for i in range(events):
        key, value = make_number(events, i)
        totals[key] += value
        lines[str((key, totals[key]))] += 1
    return lines


# -- running a case ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    job: str  # "window" | "sum"
    parallelism: int
    backend: str  # "hashmap" | "lmdb"
    unaligned: bool

    def __str__(self) -> str:
        return f"{self.job}-p{self.parallelism}-{self.backend}-{'unaligned' if self.unaligned else 'aligned'}"


class AppendingSink(SinkFunction):
    """NOT exactly-once: appends every record to a file at once, without two-phase commit."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._file: Any = None

    def open(self, runtime_context: Any) -> None:
        subtask = runtime_context.get_index_of_this_subtask()
        self._file = open(Path(self.directory) / f"appended-{subtask}.txt", "a", encoding="utf-8")  # noqa: SIM115

    def invoke(self, value: Any, context: Any) -> None:
        self._file.write(f"{value}\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def build_job(
    case: Case,
    out_dir: Path,
    events: int,
    spec: str | None = None,
    seed: int = 0,
    max_failures: int = -1,
    exactly_once: bool = True,
    rolling: Any = None,
    interval_ms: int = CHECKPOINT_INTERVAL_MS,
) -> tuple[StreamExecutionEnvironment, Any]:
    conf = Configuration()
    conf.set_string("state.backend.type", case.backend)
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "1000")
    conf.set_string("restart-strategy.fixed-delay.delay", "10 ms")
    if spec is not None:
        conf.set_string("weir.failure-injection.spec", spec)
        conf.set_string("weir.failure-injection.seed", str(seed))
        conf.set_string("weir.failure-injection.max-failures", str(max_failures))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(case.parallelism)
    env.enable_checkpointing(interval_ms)
    if case.unaligned:
        env.get_checkpoint_config().enable_unaligned_checkpoints()
    if case.job == "window":
        watermarks = WatermarkStrategy.for_bounded_out_of_orderness(
            Duration.of_millis(MAX_DISORDER_MS)
        ).with_timestamp_assigner(lambda event, _: event[2])
        stream = (
            env.from_source(
                DataGeneratorSource(make_event, events, rate_limit=RATE, type_info=EVENT_TYPE),
                watermarks,
                "Events",
            )
            .map(lambda e: (e[0], e[1]), output_type=COUNT_TYPE)
            .name("Map")
            .key_by(lambda e: e[0], key_type=Types.STRING())
            .window(TumblingEventTimeWindows.of(Time.seconds(10)))
            .reduce(
                lambda a, b: (a[0], a[1] + b[1]),
                window_function=WithWindowStart(),
                output_type=WINDOW_RESULT_TYPE,
            )
            .name("Window")
            .uid("window")
        )
    else:
        stream = (
            env.from_source(
                DataGeneratorSource(
                    functools.partial(make_number, events), events, rate_limit=RATE, type_info=PAIR_TYPE
                ),
                WatermarkStrategy.no_watermarks(),
                "Numbers",
            )
            .map(lambda r: r, output_type=PAIR_TYPE)
            .name("Map")
            .key_by(lambda r: r[0], key_type=Types.STRING())
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
            .name("Sum")
            .uid("sum")
        )
    if exactly_once:
        sink = (
            FileSink.for_row_format(str(out_dir), Encoder.simple_string_encoder())
            .with_output_file_config(
                OutputFileConfig.builder().with_part_prefix("part").with_part_suffix(".txt").build()
            )
            .with_rolling_policy(rolling or RollingPolicy.default_rolling_policy(part_size=4096))
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .build()
        )
        stream.sink_to(sink).name("FileSink").uid("sink")
    else:
        stream.add_sink(AppendingSink(str(out_dir))).name("AppendingSink").uid("sink")
    return env, generate_job_graph(env.get_stream_graph(f"exactly-once {case}"))


async def run_job(env: StreamExecutionEnvironment, job_graph: Any, taskmanagers: int = 2) -> tuple[Any, Any]:
    config = ClusterConfig(taskmanagers=taskmanagers, slots_per_taskmanager=job_graph_parallelism(job_graph))
    async with open_minicluster(config) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))
        result = await handle.wait()  # no fail_after: threads let MockClock jump far ahead
        return result, handle.job_master


def job_graph_parallelism(job_graph: Any) -> int:
    return max(v.parallelism for v in job_graph.vertices)


def committed_lines(out_dir: Path) -> Counter[str]:
    """Every line of every finished (visible) file under ``out_dir``."""
    lines: Counter[str] = Counter()
    for path in out_dir.rglob("*"):
        if path.is_file() and not path.name.startswith("."):
            lines.update(path.read_text(encoding="utf-8").splitlines())
    return lines


def describe_difference(got: Counter[str], want: Counter[str]) -> str:
    """Empty when equal; else how many lines are missing and duplicated, with examples."""
    missing = want - got
    extra = got - want
    if not missing and not extra:
        return ""
    return (
        f"{sum(missing.values())} line(s) missing (e.g. {sorted(missing)[:3]}), "
        f"{sum(extra.values())} extra or duplicated (e.g. {sorted(extra)[:3]})"
    )


def oracle(case: Case, events: int) -> Counter[str]:
    return window_oracle(events) if case.job == "window" else sum_oracle(events)


def failure_spec(case: Case, failures: int, damage: bool = True) -> str:
    """Faults of every kind. The first attempts each end with a checkpoint fault (a crash
    before ``_metadata``; with ``damage`` also a corrupted and a deleted checkpoint file), so
    every run has them; after that operator exceptions, lost TaskManagers and checkpoint
    faults compete (the first trigger reached in an attempt wins), each allowed ``failures``
    times; max-failures bounds the total. Record thresholds are scaled so that an attempt
    usually gets past a checkpoint or two before it fails: the job makes progress."""
    per_checkpoint = int(RATE / case.parallelism * CHECKPOINT_INTERVAL_MS / 1000)  # records per subtask
    after = f"{per_checkpoint}..{4 * per_checkpoint}"
    stateful = "Window" if case.job == "window" else "Sum"
    first = ["crash-before-metadata:checkpoint=2,attempt=0"]
    if damage:
        first += ["corrupt-checkpoint:attempt=1", "delete-checkpoint-file:attempt=2"]
    later = f"attempt={len(first)}..{failures},times={failures}"
    faults = [
        *first,
        f"raise:operator=Map,after={after},{later}",
        f"raise:operator={stateful},after={after},{later}",
        f"lose-taskmanager:operator=Map,after={after},{later}",
        f"raise:operator=sink,probability=0.02,{later}",
        f"crash-before-metadata:probability=0.2,{later}",
    ]
    if damage:
        faults += [
            f"corrupt-checkpoint:probability=0.2,{later}",
            f"delete-checkpoint-file:probability=0.1,{later}",
        ]
    return ";".join(faults)


async def check_case_under_failures(
    case: Case, tmp_path: Path, events: int, failures: int, seed: int, damage: bool = True, run: Any = None
) -> None:
    """``run(env, job_graph)``: how the job runs (default ``run_job``, TaskManagers in the process)."""
    out = tmp_path / "out"
    spec = failure_spec(case, failures, damage)
    env, job_graph = build_job(case, out, events, spec, seed=seed, max_failures=failures)
    result, master = await (run or run_job)(env, job_graph)
    assert result.status.name == "FINISHED", result.failure
    injected = result.accumulators["injected_failures"]
    # faults in two processes can strike one attempt before the JobManager restarts it, and
    # then one restart recovers from both (as one failover of a region does in Flink)
    failed_attempts = {re.search(r"\(attempt (\d+),", line).group(1) for line in injected}  # type: ignore[union-attr]
    assert len(injected) >= failures and master.restarts >= len(failed_attempts), (
        f"{case}: only {len(injected)} injected failures in {len(failed_attempts)} attempts "
        f"({master.restarts} restarts) before the job ended; the job is too short for {failures}: {injected}"
    )
    kinds = Counter(re.search(r"fault \d+ ([a-z-]+)\)", line).group(1) for line in injected)  # type: ignore[union-attr]
    assert len(kinds) >= (4 if damage else 2), f"{case}: the failures were not varied: {kinds}"
    stats = result.accumulators.get("checkpoint_stats", [])
    assert all(bool(s.get("unaligned")) == case.unaligned for s in stats if s.get("kind") == "checkpoint"), (
        stats
    )
    in_flight = sum(s.get("persisted_in_flight_bytes", 0) for s in stats)
    assert (in_flight > 0) == case.unaligned, f"{case}: {in_flight} bytes of in-flight data persisted"
    print(f"{case}: {dict(kinds)}; {len(stats)} checkpoints, {in_flight} bytes of in-flight data persisted")
    problem = describe_difference(committed_lines(out), oracle(case, events))
    assert not problem, f"{case} with {len(injected)} failures: {problem}\n" + "\n".join(injected)
    assert not [p.name for p in out.rglob(".*")], "hidden in-progress files or manifests were left behind"


# -- fast tests ------------------------------------------------------------------------------------
FAST_EVENTS = 8_000


@pytest.mark.parametrize("job", ["window", "sum"])
async def test_a_run_without_failures_commits_exactly_the_oracle(
    job: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    case = Case(job, 2, "hashmap", False)
    env, job_graph = build_job(case, tmp_path, FAST_EVENTS)
    result, master = await run_job(env, job_graph)
    assert result.status.name == "FINISHED", result.failure
    assert master.restarts == 0 and result.accumulators["checkpoints_completed"] >= 1
    assert describe_difference(committed_lines(tmp_path), oracle(case, FAST_EVENTS)) == ""
    parts = sorted(p.name for p in tmp_path.iterdir())
    assert parts and all(p.startswith("part-") and p.endswith(".txt") for p in parts), parts


FAST_CASES = [
    Case("window", 2, "hashmap", False),
    Case("sum", 4, "lmdb", False),
    Case("window", 4, "lmdb", True),
    Case("sum", 2, "hashmap", True),
]


@pytest.mark.parametrize("case", FAST_CASES, ids=str)
async def test_a_few_failures_change_nothing(
    case: Case, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    await check_case_under_failures(case, tmp_path, FAST_EVENTS * 4, failures=4, seed=11)


async def test_a_damaged_checkpoint_is_skipped_with_a_message(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    case = Case("sum", 2, "hashmap", False)
    out = tmp_path / "out"
    env, job_graph = build_job(case, out, FAST_EVENTS * 2, "corrupt-checkpoint:checkpoint=2", max_failures=1)
    result, _master = await run_job(env, job_graph)
    assert result.status.name == "FINISHED", result.failure
    (note,) = result.accumulators["recovery"]
    assert "skipped damaged checkpoint" in note and "is corrupt" in note and "restored checkpoint" in note, (
        note
    )
    assert describe_difference(committed_lines(out), oracle(case, FAST_EVENTS * 2)) == ""


async def test_a_failure_right_after_falling_back_keeps_the_restored_checkpoint(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Checkpoint 2 is damaged, recovery falls back to 1, and the next attempt fails before it
    completes a checkpoint: the second recovery must find checkpoint 1 again. If retention
    dropped it (counting the damaged 2 as retained), the job would start from the beginning
    and write everything up to checkpoint 1 a second time."""
    case = Case("sum", 2, "hashmap", False)
    out = tmp_path / "out"
    spec = "corrupt-checkpoint:checkpoint=2,attempt=0;raise:operator=Map,after=1,attempt=1"
    env, job_graph = build_job(case, out, FAST_EVENTS * 2, spec)
    result, master = await run_job(env, job_graph)
    assert result.status.name == "FINISHED", result.failure
    assert master.restarts == 2, result.accumulators
    notes = result.accumulators["recovery"]
    assert len(notes) == 2 and all("restored checkpoint 1" in note for note in notes), notes
    assert describe_difference(committed_lines(out), oracle(case, FAST_EVENTS * 2)) == ""


@pytest.mark.parametrize("retained", [2, 1])
async def test_recovery_behind_a_committed_checkpoint_writes_its_records_once(
    retained: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The newest checkpoint completed and the sink committed its files; then a state file of it
    is damaged and a TaskManager is lost. Recovery falls back to the checkpoint before (with
    one retained checkpoint: to the beginning), whose state knows nothing of those files: the
    sink moves them aside, says so, and the replay writes their records once."""
    from weir.checkpoint.storage import METADATA_FILE_NAME

    case = Case("sum", 2, "hashmap", False)
    out = tmp_path / "out"
    events = FAST_EVENTS * 8
    rolling = RollingPolicy.on_checkpoint_rolling_policy()
    env, job_graph = build_job(case, out, events, rolling=rolling, interval_ms=300)
    env.get_checkpoint_config().set_num_retained_checkpoints(retained)
    config = ClusterConfig(taskmanagers=2, slots_per_taskmanager=job_graph_parallelism(job_graph))
    async with open_minicluster(config) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))
        damaged = 0
        while not damaged:
            await trio.sleep(0.01)
            driver = handle.job_master.checkpoints
            if driver is None or len(driver.completed) < 2:
                continue
            newest = driver.completed[-1]
            await trio.sleep(0.05)  # the sinks hear of it and commit (the next one is 300 ms away)
            if driver.completed[-1] != newest:
                continue
            victim = next(
                p for p in driver.storage.checkpoint_dir(newest).iterdir() if p.name != METADATA_FILE_NAME
            )
            data = bytearray(victim.read_bytes())
            data[len(data) // 2] ^= 0xFF
            victim.write_bytes(bytes(data))  # no await in between: no checkpoint completes meanwhile
            running = [e for e, x in handle.job_master.executions.items() if x.state.name == "RUNNING"]
            cluster.lose_taskmanager(cluster.taskmanager_index_of(running[0]))
            damaged = newest
        result = await handle.wait()
    assert result.status.name == "FINISHED", result.failure
    notes = result.accumulators.get("recovery", [])
    assert any(f"skipped damaged checkpoint {damaged}" in n for n in notes), (notes, result.accumulators)
    moved = [n for n in notes if "moved" in n and "aside" in n]
    assert moved, notes
    assert describe_difference(committed_lines(out), oracle(case, events)) == ""
    assert [p.name for p in out.rglob(".*") if ".superseded." not in p.name] == []


async def test_an_appending_sink_duplicates_under_the_same_failures(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The control experiment: the comparison catches a sink without two-phase commit."""
    case = Case("sum", 2, "hashmap", False)
    out = tmp_path / "out"
    out.mkdir()
    spec = failure_spec(case, 4, damage=False)
    env, job_graph = build_job(case, out, FAST_EVENTS * 2, spec, seed=11, max_failures=4, exactly_once=False)
    result, master = await run_job(env, job_graph)
    assert result.status.name == "FINISHED", result.failure
    assert master.restarts >= 4
    got, want = committed_lines(out), oracle(case, FAST_EVENTS * 2)
    duplicated = got - want
    assert duplicated and not (want - got), describe_difference(got, want)
    assert "extra or duplicated" in describe_difference(got, want)


async def test_on_checkpoint_rolling_commits_whole_files_per_checkpoint(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    case = Case("sum", 2, "lmdb", False)
    out = tmp_path / "out"
    per_checkpoint = int(RATE / case.parallelism * CHECKPOINT_INTERVAL_MS / 1000)
    spec = f"raise:operator=Sum,after={per_checkpoint}..{4 * per_checkpoint},times=3"  # counts, not timing
    rolling = RollingPolicy.on_checkpoint_rolling_policy()
    # twice the events: the third fault counts up to 4 checkpoints' records after the restore,
    # which need not fit in what is left of FAST_EVENTS when the restore is an early checkpoint
    events = FAST_EVENTS * 2
    env, job_graph = build_job(case, out, events, spec, seed=5, max_failures=3, rolling=rolling)
    result, master = await run_job(env, job_graph)
    assert result.status.name == "FINISHED", result.failure
    assert master.restarts >= 3
    assert describe_difference(committed_lines(out), oracle(case, events)) == ""
    files = len(list(out.iterdir()))
    assert files > result.accumulators["checkpoints_completed"]  # a file per checkpoint and subtask


async def test_date_time_buckets_are_directories(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(CHECKPOINT_INTERVAL_MS)
    sink = (
        FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.date_time_bucket_assigner("yyyy-MM-dd--HH", "UTC"))
        .build()
    )
    env.from_source(
        DataGeneratorSource(lambda i: i, 2_000, rate_limit=RATE, type_info=Types.LONG()),
        WatermarkStrategy.no_watermarks(),
        "n",
    ).sink_to(sink)
    result, _ = await run_job(env, generate_job_graph(env.get_stream_graph("buckets")))
    assert result.status.name == "FINISHED", result.failure
    assert [p.name for p in tmp_path.iterdir()] == ["1970-01-01--00"]  # MockClock time starts at 0
    assert committed_lines(tmp_path) == Counter(str(i) for i in range(2_000))


# -- slow: at least 20 failures in every configuration ---------------------------------------------
SLOW_EVENTS = 120_000
SLOW_CASES = [
    Case(job, parallelism, backend, unaligned)
    for job in ("window", "sum")
    for parallelism in (2, 4)
    for backend in ("hashmap", "lmdb")
    for unaligned in (False, True)
]


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW_CASES, ids=str)
async def test_twenty_seeded_failures_change_nothing(
    case: Case, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    await check_case_under_failures(case, tmp_path, SLOW_EVENTS, failures=20, seed=2024)

"""One measured run: build a query over replayed tables, run it on weir, summarise it.

A run is one job execution with one ``ReplayRun`` (the schedule) and one ``LatencySink``.
``build_job`` wires the environment from a ``RunConfig`` (parallelism, buffer timeout,
checkpointing off/aligned/unaligned, heap or LMDB state); ``run_sync`` executes it with
``env.execute()``; ``run_async`` does the same inside a running Trio loop (tests use it
under MockClock). ``summarise`` turns the shared run state into a ``RunResult``:

- throughput = records the source emitted after the warm-up (whenever they were due) /
  (last arrival at the sink − the end of the warm-up): the rate the job took records at
  while it was measured. A job that falls behind delivers its last records late, and that
  lowers the rate it is credited with; the backlog it carried out of the warm-up counts as
  work done in the measured time, since it was;
- an open-loop run is *sustained* when that throughput is at least 95% of the target;
- latency percentiles come from the merged HdrHistogram of the sink subtasks, over the
  records whose intended time is after the warm-up;
- a run that measured nothing (no record emitted after the warm-up, or none of them
  reached the sink) has an ``error`` and no figures: a report and ``weir bench`` fail on it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from weir import columnar as col
from weir.common import Configuration, Duration, WatermarkStrategy
from weir.core.state_backend import HashMapStateBackend, LmdbStateBackend
from weir.datastream import StreamExecutionEnvironment
from weir.errors import UsageError
from weir.harness.latency import LatencyHistogram, warm_up
from weir.harness.queries import Query, get_query
from weir.harness.replay import (
    COLUMNAR_OPEN_LOOP_BATCH_ROWS,
    DEFAULT_BATCH_WAIT_MS,
    OPEN_LOOP_BATCH_ROWS,
    ReplayRun,
    ReplaySource,
)
from weir.harness.sink import EventTimeMapping, LatencySink
from weir.harness.steadiness import HostProbe
from weir.workloads import dataset

CHECKPOINTING_MODES = ("off", "aligned", "unaligned")
BACKENDS = ("heap", "lmdb")
SUSTAINED_FRACTION = 0.95


@dataclass(frozen=True)
class RunConfig:
    """One point of a sweep, without the rate."""

    query: str
    parallelism: int = 2
    buffer_timeout_ms: int = 100
    checkpointing: str = "off"
    backend: str = "heap"
    checkpoint_interval_ms: int = 1000

    def __post_init__(self) -> None:
        get_query(self.query)
        if self.parallelism < 1:
            raise UsageError(f"parallelism must be at least 1, got {self.parallelism}")
        if self.buffer_timeout_ms < -1:
            raise UsageError(f"buffer timeout must be -1, 0 or positive ms, got {self.buffer_timeout_ms}")
        if self.checkpointing not in CHECKPOINTING_MODES:
            raise UsageError(
                f"checkpointing must be one of {CHECKPOINTING_MODES}, got {self.checkpointing!r}"
            )
        if self.backend not in BACKENDS:
            raise UsageError(f"state backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.checkpoint_interval_ms < 10:
            raise UsageError(f"checkpoint interval must be at least 10 ms, got {self.checkpoint_interval_ms}")

    @property
    def key(self) -> str:
        """A readable identity, the same in every report (``weir compare`` matches on it)."""
        return (
            f"{self.query} p{self.parallelism} timeout={self.buffer_timeout_ms}ms "
            f"checkpoints={self.checkpointing} state={self.backend}"
        )

    @property
    def group(self) -> str:
        """The configuration without its buffer timeout (one line per group in the plots)."""
        return f"{self.query} p{self.parallelism} checkpoints={self.checkpointing} state={self.backend}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunResult:
    config: RunConfig
    mode: str  # "throughput" or "rate"
    target_rate: float | None
    records_emitted: int
    records_measured: int
    records_out: int
    throughput: float
    sustained: bool | None
    seconds: float
    latency: LatencyHistogram
    lag: LatencyHistogram
    trend: list[dict[str, float]]
    max_source_behind_ms: float
    checkpoints_completed: int
    restarts: int = 0
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    host: dict[str, Any] | None = None  # the steadiness probe inside the run
    records_after_warmup: int = 0  # emitted after the warm-up ended: what the throughput counts
    warmup_s: float = 0.0

    @property
    def error(self) -> str | None:
        """Why the run measured nothing, or None: a run without measured records has no
        throughput and no latency to report (a 0 would be a figure nobody measured)."""
        if self.records_after_warmup == 0:
            return (
                f"measured nothing: none of the {self.records_emitted:,} records replayed was emitted "
                f"after the {self.warmup_s:g} s warm-up"
            )
        if self.seconds <= 0 or self.latency.total_count == 0:
            return (
                f"measured nothing: {self.records_after_warmup:,} records were emitted after the "
                f"{self.warmup_s:g} s warm-up, but no record due after it reached the sink"
            )
        return None

    def summary(self) -> dict[str, Any]:
        """What one repeat of a measurement adds to the report: its rate, verdict, percentiles
        and how steady the host was while it ran."""
        return {
            "throughput": self.throughput,
            "sustained": self.sustained,
            "latency_us": self.latency.percentiles_us(),
            "host": self.host,
            "error": self.error,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "target_rate": self.target_rate,
            "records_emitted": self.records_emitted,
            "records_measured": self.records_measured,
            "records_after_warmup": self.records_after_warmup,
            "records_out": self.records_out,
            "throughput": self.throughput,
            "sustained": self.sustained,
            "seconds": self.seconds,
            "latency_us": self.latency.percentiles_us(),
            "latency_mean_us": self.latency.mean_us(),
            "latency_hdr": self.latency.encode(),
            "lag_us": self.lag.percentiles_us() if self.lag.total_count else None,
            "lag_hdr": self.lag.encode(),
            "trend": self.trend,
            "max_source_behind_ms": self.max_source_behind_ms,
            "checkpoints_completed": self.checkpoints_completed,
            "restarts": self.restarts,
            "host": self.host,
            "error": self.error,
        }


class DataSet:
    """A generated data set: its directory and manifest, with the numbers a replay needs."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.manifest = dataset.load_manifest(self.directory)
        self.generator: str = self.manifest["generator"]
        self.params: dict[str, Any] = self.manifest["parameters"]

    def rows(self, table: str) -> int:
        return int(self.manifest["tables"][table]["rows"])

    @property
    def schedule_column(self) -> str | None:
        return "event_id" if self.generator == "nexmark" else None

    @property
    def schedule_span(self) -> int:
        """Schedule units covered by the data set: rows (keyed) or Nexmark event ids."""
        return int(self.params["events"])

    @property
    def lap_event_time_ms(self) -> int:
        """How far one pass over the data set moves event time: its events at ``event_rate``
        per second (rounded up to a whole ms). The generators put event ``i`` at
        ``start + i * 1000 // event_rate`` plus a delay, so a replay that laps with this shift
        continues the data set as if it had more events (``ReplayRun.lap_event_time_ms``)."""
        return -(-self.schedule_span * 1000 // int(self.params["event_rate"]))

    @property
    def disorder_ms(self) -> int:
        return int(self.params.get("disorder_ms", 0))

    def event_time_mapping(self) -> EventTimeMapping:
        origin = int(self.params.get("start_ms", self.params.get("base_time_ms", 0)))
        return EventTimeMapping(origin, float(self.params["event_rate"]))

    def replayed_rows(self, query: Query) -> int:
        return sum(self.rows(t.table) for t in query.inputs)

    def check_query(self, query: Query) -> None:
        if query.workload != self.generator:
            raise UsageError(
                f"query '{query.name}' runs on a {query.workload} data set, but '{self.directory}' is {self.generator}"
            )


def schedule_for(
    ds: DataSet, query: Query, rate: float | None, seconds: float | None
) -> tuple[float | None, int | None]:
    """(schedule units per second, schedule limit) replaying ``rate`` records/s for ``seconds``.
    The limit may lie past the data set's end: such a run laps (``ReplayRun``)."""
    density = ds.replayed_rows(query) / ds.schedule_span  # replayed rows per schedule unit
    schedule_rate = None if rate is None else rate / density
    limit = None
    if rate is not None and seconds is not None:
        limit = int(rate * seconds / density) + 1
    return schedule_rate, limit


def build_job(
    ds: DataSet, config: RunConfig, run: ReplayRun, sink: LatencySink, work_dir: Path
) -> StreamExecutionEnvironment:
    query = get_query(config.query)
    ds.check_query(query)
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    env.set_parallelism(config.parallelism)
    env.set_buffer_timeout(config.buffer_timeout_ms)
    if config.backend == "lmdb":
        env.set_state_backend(LmdbStateBackend(path=work_dir / "lmdb"))
    else:
        env.set_state_backend(HashMapStateBackend())
    if config.checkpointing != "off":
        env.enable_checkpointing(config.checkpoint_interval_ms)
        checkpoint_config = env.get_checkpoint_config()
        checkpoint_config.set_checkpoint_storage_dir(str(work_dir / "checkpoints"))
        if config.checkpointing == "unaligned":
            checkpoint_config.enable_unaligned_checkpoints()
    streams = []
    for table_input in query.inputs:
        source = ReplaySource(
            ds.directory,
            table_input.table,
            list(table_input.columns),
            run,
            ds.schedule_column,
            event_time_column=table_input.event_time_column,
        )
        # decoded and split now, so that no Parquet is read while the job is measured
        source.preload(config.parallelism)
        ts_index = table_input.columns.index(table_input.event_time_column)
        assigner = (
            col.timestamp_field(ts_index) if query.columnar else (lambda record, _, i=ts_index: record[i])
        )
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(
            Duration.of_millis(ds.disorder_ms)
        ).with_timestamp_assigner(assigner)
        streams.append(env.from_source(source, strategy, f"replay {table_input.table}"))
    out = query.build(streams, ds.params)
    out.sink_to(sink).name("latency sink")
    return env


class Run:
    """Everything one execution needs and leaves behind; ``execute`` then ``summarise``."""

    def __init__(
        self,
        ds: DataSet,
        config: RunConfig,
        rate: float | None = None,
        seconds: float | None = None,
        warmup_s: float = 0.0,
        collect: bool = False,
        work_dir: Path | None = None,
        batch_wait_ms: float = DEFAULT_BATCH_WAIT_MS,
    ) -> None:
        self.ds = ds
        self.config = config
        self.rate = rate
        query = get_query(config.query)
        schedule_rate, limit = schedule_for(ds, query, rate, seconds)
        self.run = ReplayRun(
            schedule_rate=schedule_rate,
            warmup_s=warmup_s,
            schedule_limit=limit,
            max_duration_s=seconds if rate is None else None,
            batch_wait_ns=int(batch_wait_ms * 1e6),
            open_loop_batch_rows=COLUMNAR_OPEN_LOOP_BATCH_ROWS if query.columnar else OPEN_LOOP_BATCH_ROWS,
            # a run of given seconds replays the data set as often as they take: a benchmark
            # measures for its configured time, however fast the machine (docs/harness.md)
            lap_schedule_units=None if seconds is None else ds.schedule_span,
            lap_event_time_ms=ds.lap_event_time_ms,
            # which runs met a slow stretch of the host: an open-loop run's tail follows them,
            # and a max-throughput attempt's rate
            host_probe=HostProbe(),
        )
        self.sink = LatencySink(self.run, collect=collect, event_time=ds.event_time_mapping())
        self._own_dir = work_dir is None
        self.work_dir = Path(tempfile.mkdtemp(prefix="weir-run-")) if work_dir is None else work_dir
        self.env = build_job(ds, config, self.run, self.sink, self.work_dir)
        self.checkpoints_completed = 0
        self.restarts = 0
        self.restart_log: list[str] = []

    def execute(self) -> Run:
        warm_up()  # the latency kernel, before any record is measured
        try:
            outcome = self.env.execute(f"bench {self.config.key}")
            self._record(outcome)
        finally:
            self.cleanup()
        return self

    def _record(self, outcome: Any) -> None:
        self.checkpoints_completed = int(outcome.get_accumulator_result("checkpoints_completed") or 0)
        self.restarts = int(outcome.get_accumulator_result("restarts") or 0)
        self.restart_log = list(outcome.get_accumulator_result("restart_log") or [])
        self.sink.commit_finished()

    async def execute_async(self) -> Run:
        from weir.cluster.client import run_stream_graph

        try:
            outcome = await run_stream_graph(self.env, self.env.get_stream_graph(f"bench {self.config.key}"))
            self._record(outcome)
        finally:
            self.run.end_probe()  # this loop outlives the run
            self.cleanup()
        return self

    def cleanup(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def summarise(self) -> RunResult:
        run, sink = self.run, self.sink
        start = run.warmup_end_ns
        end = sink.last_arrival_ns
        taken = run.emitted_after_warmup
        seconds = (end - start) / 1e9 if start is not None and end > start else 0.0
        throughput = taken / seconds if seconds > 0 else 0.0
        sustained = None if self.rate is None else throughput >= SUSTAINED_FRACTION * self.rate
        return RunResult(
            config=self.config,
            mode="throughput" if self.rate is None else "rate",
            target_rate=self.rate,
            records_emitted=run.emitted,
            records_measured=run.emitted_measured,
            records_out=sink.records,
            throughput=throughput,
            sustained=sustained,
            seconds=seconds,
            latency=sink.latency(),
            lag=sink.lag(),
            trend=sink.trend(),
            max_source_behind_ms=run.max_behind_ns / 1e6,
            checkpoints_completed=self.checkpoints_completed,
            restarts=self.restarts,
            rows=sink.rows() if sink.collect else [],
            host=None if run.host_probe is None else run.host_probe.summary(),
            records_after_warmup=taken,
            warmup_s=run.warmup_s,
        )


def run_sync(
    ds: DataSet,
    config: RunConfig,
    rate: float | None = None,
    seconds: float | None = None,
    warmup_s: float = 0.0,
    collect: bool = False,
    batch_wait_ms: float = DEFAULT_BATCH_WAIT_MS,
) -> RunResult:
    return (
        Run(ds, config, rate, seconds, warmup_s, collect, batch_wait_ms=batch_wait_ms).execute().summarise()
    )


# -- correctness ----------------------------------------------------------------------------------
def compare_with_expected(ds: DataSet, query_name: str, rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    """The verdict of one run's output against Spark's answer: same multiset of rows or not."""
    from weir.workloads.reference import read_expected

    expected = read_expected(ds.directory, get_query(query_name).answer)
    want, got = Counter(expected), Counter(tuple(r) for r in rows)
    missing = want - got
    unexpected = got - want
    return {
        "query": query_name,
        "matches": not missing and not unexpected,
        "rows_expected": len(expected),
        "rows_got": len(rows),
        "missing": sum(missing.values()),
        "unexpected": sum(unexpected.values()),
        "missing_examples": [list(r) for r in list(missing)[:3]],
        "unexpected_examples": [list(r) for r in list(unexpected)[:3]],
    }

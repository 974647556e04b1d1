"""``weir bench checkpoint``: what checkpoints cost, measured in one run.

Two questions, each answered by runs of the same job one after another in this process,
so the printed ratios compare like with like:

1. Under backpressure, how long does a checkpoint take aligned and unaligned? The job is
   source → map → key_by → keyed sum → a *slow sink* that accepts only ``sink_rate``
   records/s (it awaits between batches, so the network really fills up: credits run
   out, subpartition queues grow, the sources block). An aligned barrier waits behind
   every queued buffer; an unaligned one overtakes them and persists them instead.
   Reported: median and maximum checkpoint duration, and the in-flight bytes persisted.
   These records carry a ``PAYLOAD_BYTES`` string, so the in-flight buffers hold what a
   real job's would: with (key, count) pairs alone, packed to a few bytes per record, the
   buffers take in most of a short run, the sources finish early and no checkpoint is
   left to measure under backpressure.
2. What does checkpointing every second cost in throughput? The same job with a
   discarding sink, with checkpoints every ``interval_ms`` and without: records/s of each
   and their ratio.

3. What does a checkpoint cost as the keyed state grows (``run_state_size_sweep``)? For
   each state size (10 k, 100 k, 1 M keys by default) and backend (heap, LMDB full, LMDB
   incremental): a source at parallelism 1 emits ``records_per_key`` records per key
   (at least ``min_records``),
   ``(i mod keys, i mod 100, event time)``, into ``key_by`` field 0 and a rolling
   ``reduce`` at ``parallelism`` (the state lives in the backend, one entry per key,
   every key changing between two checkpoints) and a discarding sink; once with
   checkpoints every ``interval_ms`` and once without, on the same backend. Reported per
   point: the synchronous and asynchronous phase and the duration of each checkpoint
   (median and maximum, from the job's ``_history.jsonl``), its size, and the throughput
   with checkpoints over the throughput without. ``job="window"`` runs the issue-29 job
   instead: a 1 s tumbling event-time window ``reduce`` (every key live in each window).
   A point whose checkpointed run completed no checkpoint is an error: it measured nothing.

Durations come from the job's checkpoint statistics (``weir.cluster.checkpoint_stats``),
wall-clock time, since the benchmark runs on the real clock.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio

from weir.cluster.checkpoint_stats import HISTORY_FILE_NAME, read_history
from weir.common import Configuration, Duration, Time, Types, WatermarkStrategy
from weir.core.connectors import Sink
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.builtin import DiscardingSink
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.window import TumblingEventTimeWindows
from weir.errors import UsageError
from weir.operators.sinks import SinkOperator

KEYS = 1000
#: The string each record of the backpressure runs carries.
PAYLOAD_BYTES = 64


class _SlowSinkOperator(SinkOperator):
    """Accepts ``rate`` records/s: after each batch it waits as long as the batch is worth."""

    def __init__(self, name: str, rate: float) -> None:
        super().__init__(name)
        self.rate = rate
        self._owed_s = 0.0

    def process_batch(self, batch: Any) -> None:
        self.metrics.records_in += len(batch)
        self._owed_s += len(batch) / self.rate

    async def drain(self) -> None:
        if self._owed_s > 0:
            owed, self._owed_s = self._owed_s, 0.0
            await trio.sleep(owed)


class SlowSink(Sink):
    """A sink (``sink_to``) whose subtasks each accept ``rate`` records/s."""

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def default_name(self) -> str:
        return "Slow sink"

    def describe(self) -> dict[str, Any]:
        return {"type": "slow sink", "rate": self.rate}

    def create_operator(self, name: str) -> SinkOperator:
        return _SlowSinkOperator(name, self.rate)


@dataclass
class CheckpointRun:
    mode: str  # "aligned" | "unaligned" | "none"
    sink: str
    records: int
    seconds: float
    records_per_s: float
    checkpoints_completed: int
    durations_ms: list[int] = field(default_factory=list)
    persisted_in_flight_bytes: int = 0

    @property
    def median_ms(self) -> float:
        return statistics.median(self.durations_ms) if self.durations_ms else float("nan")

    @property
    def max_ms(self) -> float:
        return max(self.durations_ms) if self.durations_ms else float("nan")


def build_job(
    records: int, parallelism: int, mode: str, interval_ms: int, sink: Any, payload_bytes: int = 0
) -> StreamExecutionEnvironment:
    """The benchmark's job; ``payload_bytes`` > 0: (key, count, payload) records."""
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", 1)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    if mode != "none":
        env.enable_checkpointing(interval_ms)
        if mode == "unaligned":
            env.get_checkpoint_config().enable_unaligned_checkpoints()
    numbers = env.from_source(
        DataGeneratorSource(lambda i: i, records, type_info=Types.LONG()),
        WatermarkStrategy.no_watermarks(),
        "numbers",
    )
    if payload_bytes:
        payload = "x" * payload_bytes
        triple = Types.TUPLE([Types.LONG(), Types.LONG(), Types.STRING()])
        keyed = numbers.map(lambda n: (n % KEYS, n, payload), output_type=triple).key_by(
            lambda p: p[0], key_type=Types.LONG()
        )
        keyed.reduce(lambda a, b: (a[0], a[1] + b[1], a[2])).sink_to(sink)
    else:
        pair = Types.TUPLE([Types.LONG(), Types.LONG()])
        keyed = numbers.map(lambda n: (n % KEYS, n), output_type=pair).key_by(
            lambda p: p[0], key_type=Types.LONG()
        )
        keyed.reduce(lambda a, b: (a[0], a[1] + b[1])).sink_to(sink)
    return env


def run_one(
    records: int, parallelism: int, mode: str, interval_ms: int, sink: Any, payload_bytes: int = 0
) -> CheckpointRun:
    env = build_job(records, parallelism, mode, interval_ms, sink, payload_bytes)
    result = env.execute(f"checkpoint bench {mode}")
    seconds = max(result.get_net_runtime(), 1) / 1000
    stats = result.get_accumulator_result("checkpoint_stats") or []
    completed = [s for s in stats if s["status"] == "COMPLETED"]
    return CheckpointRun(
        mode=mode,
        sink="slow" if isinstance(sink, SlowSink) else "discarding",
        records=records,
        seconds=seconds,
        records_per_s=records / seconds,
        checkpoints_completed=len(completed),
        durations_ms=[int(s["duration_ms"]) for s in completed],
        persisted_in_flight_bytes=sum(int(s["persisted_in_flight_bytes"]) for s in completed),
    )


def run_checkpoint_bench(
    records: int = 2_000_000,
    parallelism: int = 2,
    interval_ms: int = 1000,
    sink_rate: float = 50_000.0,
    backpressure_interval_ms: int = 300,
    backpressure_seconds: float = 3.0,
) -> dict[str, Any]:
    parameters = {
        "records": records,
        "parallelism": parallelism,
        "interval_ms": interval_ms,
        "sink_rate_per_subtask": sink_rate,
        "backpressure_interval_ms": backpressure_interval_ms,
        "backpressure_seconds": backpressure_seconds,
        "keys": KEYS,
        "backpressure_payload_bytes": PAYLOAD_BYTES,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    slow = SlowSink(sink_rate)
    bp_records = max(
        int(sink_rate * parallelism * backpressure_seconds), 1_000
    )  # that long at the sink's pace
    run_one(
        min(records, 20_000), parallelism, "aligned", interval_ms, DiscardingSink()
    )  # warm-up (JIT, imports)
    runs = [
        run_one(bp_records, parallelism, "aligned", backpressure_interval_ms, slow, PAYLOAD_BYTES),
        run_one(bp_records, parallelism, "unaligned", backpressure_interval_ms, slow, PAYLOAD_BYTES),
        run_one(records, parallelism, "none", interval_ms, DiscardingSink()),
        run_one(records, parallelism, "aligned", interval_ms, DiscardingSink()),
    ]
    aligned, unaligned, plain, checkpointed = runs
    ratios = {
        "aligned_over_unaligned_median_duration": aligned.median_ms / unaligned.median_ms
        if unaligned.durations_ms
        else None,
        "throughput_with_checkpoints_over_without": checkpointed.records_per_s / plain.records_per_s,
    }
    return {
        "parameters": parameters,
        "runs": [{**asdict(r), "median_ms": r.median_ms, "max_ms": r.max_ms} for r in runs],
        "ratios": ratios,
    }


def format_report(report: dict[str, Any]) -> str:
    p = report["parameters"]
    lines = [
        f"checkpoints under backpressure (slow sink, {p['sink_rate_per_subtask']:,.0f} records/s per subtask, "
        f"p={p['parallelism']}, {p.get('backpressure_payload_bytes', 0)}-byte payloads, "
        f"checkpoint every {p['backpressure_interval_ms']} ms):"
    ]
    for run in report["runs"][:2]:
        lines.append(
            f"  {run['mode']:>9}: {run['checkpoints_completed']} checkpoints, median {run['median_ms']:.0f} ms, "
            f"max {run['max_ms']:.0f} ms, in-flight data persisted {run['persisted_in_flight_bytes']:,} bytes"
        )
    ratio = report["ratios"]["aligned_over_unaligned_median_duration"]
    if ratio is not None:
        lines.append(f"  aligned checkpoints take {ratio:.1f}x as long as unaligned ones")
    plain, checkpointed = report["runs"][2], report["runs"][3]
    lines.append(f"throughput cost of checkpointing every {p['interval_ms']} ms ({p['records']:,} records):")
    lines.append(f"  without checkpoints: {plain['records_per_s']:,.0f} records/s")
    lines.append(
        f"  with checkpoints:    {checkpointed['records_per_s']:,.0f} records/s "
        f"({checkpointed['checkpoints_completed']} completed)"
    )
    lines.append(
        f"  checkpointing keeps {report['ratios']['throughput_with_checkpoints_over_without']:.2f}x of the throughput"
    )
    return "\n".join(lines)


# ------------------------------------------------------------------------------ state-size sweep

STATE_SIZES = (10_000, 100_000, 1_000_000)
SWEEP_BACKENDS = ("hashmap", "lmdb", "lmdb-incremental")
#: records of a sweep run at least (a few seconds of work), whatever the state size
SWEEP_MIN_RECORDS = 1_000_000


def build_state_job(
    keys: int, records: int, parallelism: int, backend: str, interval_ms: int | None, job: str, directory: str
) -> StreamExecutionEnvironment:
    """The sweep's job on ``backend`` (``hashmap``, ``lmdb``, ``lmdb-incremental``); no
    checkpoints when ``interval_ms`` is None."""
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", 1)
    conf.set_string("state.backend.type", "lmdb" if backend.startswith("lmdb") else "hashmap")
    conf.set_string(
        "execution.checkpointing.incremental", "true" if backend == "lmdb-incremental" else "false"
    )
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    if interval_ms is not None:
        env.enable_checkpointing(interval_ms)
        env.get_checkpoint_config().set_checkpoint_storage_dir(directory)
    row = Types.TUPLE([Types.LONG(), Types.LONG(), Types.LONG()])
    # event time runs 1 s per `keys` records: every key once in each 1 s window
    source = env.from_source(
        DataGeneratorSource(lambda i: (i % keys, i % 100, i * 1000 // keys), records, type_info=row),
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(50)).with_timestamp_assigner(
            lambda v, _: v[2]
        ),
        "records",
    ).set_parallelism(1)
    keyed = source.key_by(lambda r: r[0], key_type=Types.LONG())
    if job == "window":
        reduced = keyed.window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(
            lambda a, b: (a[0], a[1] + b[1], b[2]), output_type=row
        )
    else:
        reduced = keyed.reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
    reduced.set_parallelism(parallelism).sink_to(DiscardingSink()).set_parallelism(parallelism)
    return env


def _children_cpu() -> float:
    """CPU seconds of this process's waited-for children (the forked checkpoint writers)."""
    t = os.times()
    return t.children_user + t.children_system


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "max": max(values)} if values else {}


def run_state_point(
    keys: int,
    backend: str,
    records_per_key: int,
    parallelism: int,
    interval_ms: int,
    job: str,
    min_records: int = 0,
    repeats: int = 1,
) -> dict[str, Any]:
    """One point of the sweep: the job without and with checkpoints, on ``backend``; at least
    ``min_records`` records, so that a small state still sees several checkpoints. With
    ``repeats`` > 1 the two alternate that many times and each keeps its fastest run (a slow
    spell of the machine only ever slows a run), with that run's CPU times and checkpoints."""
    records = max(keys * records_per_key, min_records)
    seconds: dict[str, float] = {}
    cpu_seconds: dict[str, float] = {}  # the job's own process (every thread)
    child_seconds: dict[str, float] = {}  # the children that wrote checkpoint files
    history: list[dict[str, Any]] = []
    for _ in range(repeats):
        for mode in ("none", "checkpoints"):
            with tempfile.TemporaryDirectory(prefix="weir-bench-chk-") as directory:
                env = build_state_job(
                    keys,
                    records,
                    parallelism,
                    backend,
                    interval_ms if mode == "checkpoints" else None,
                    job,
                    directory,
                )
                started, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
                env.execute(f"state-size sweep {keys} keys {backend} {mode}")
                took = time.perf_counter() - started
                if mode in seconds and took >= seconds[mode]:
                    continue
                seconds[mode] = took
                cpu_seconds[mode] = time.process_time() - cpu
                child_seconds[mode] = _children_cpu() - children
                if mode == "checkpoints":
                    history = [
                        h for path in Path(directory).rglob(HISTORY_FILE_NAME) for h in read_history(path)
                    ]
    completed = [h for h in history if h.get("status") == "COMPLETED" and h.get("kind") == "checkpoint"]
    if not completed:
        raise UsageError(
            f"state-size sweep point {keys:,} keys on {backend}: no checkpoint completed in "
            f"{seconds['checkpoints']:.1f} s with one every {interval_ms} ms, so it measured nothing; "
            "give it more records per key (--records-per-key) or a shorter --interval"
        )
    return {
        "keys": keys,
        "backend": backend,
        "job": job,
        "records": records,
        "seconds_without": seconds["none"],
        "seconds_with": seconds["checkpoints"],
        "records_per_s_without": records / seconds["none"],
        "records_per_s_with": records / seconds["checkpoints"],
        "throughput_ratio": seconds["none"] / seconds["checkpoints"],
        "cpu_seconds_without": cpu_seconds["none"],
        "cpu_seconds_with": cpu_seconds["checkpoints"],
        "job_cpu_ratio": cpu_seconds["checkpoints"] / cpu_seconds["none"],
        "child_cpu_seconds": child_seconds["checkpoints"],
        "checkpoints_completed": len(completed),
        "checkpoints_failed": len([h for h in history if h.get("status") == "FAILED"]),
        "repeats": repeats,
        "sync_ms": _spread([float(h["sync_ms"]) for h in completed]),
        "async_ms": _spread([float(h["async_ms"]) for h in completed]),
        "fork_ms": _spread([float(h.get("fork_ms", 0.0)) for h in completed]),
        "duration_ms": _spread([float(h["duration_ms"]) for h in completed]),
        "full_size_bytes": _spread([float(h["full_size_bytes"]) for h in completed]),
        "checkpointed_size_bytes": _spread([float(h["checkpointed_size_bytes"]) for h in completed]),
    }


def run_state_size_sweep(
    state_sizes: tuple[int, ...] = STATE_SIZES,
    backends: tuple[str, ...] = SWEEP_BACKENDS,
    records_per_key: int = 3,
    parallelism: int = 2,
    interval_ms: int = 1000,
    job: str = "reduce",
    echo: Any = None,
    min_records: int = SWEEP_MIN_RECORDS,
    repeats: int = 1,
) -> list[dict[str, Any]]:
    """Every (state size, backend) point, smallest first; ``echo`` prints each point as it ends."""
    for backend in backends:
        if backend not in SWEEP_BACKENDS:
            raise UsageError(
                f"state-size sweep backend {backend!r} is not one of {', '.join(SWEEP_BACKENDS)}"
            )
    if job not in ("reduce", "window"):
        raise UsageError(f"state-size sweep job {job!r} is not 'reduce' or 'window'")
    for backend in backends:  # warm-up (JIT, imports), not measured
        with tempfile.TemporaryDirectory(prefix="weir-bench-chk-") as directory:
            build_state_job(1000, 20_000, parallelism, backend, None, job, directory).execute("sweep warm-up")
    points = []
    for keys in sorted(state_sizes):
        for backend in backends:
            point = run_state_point(
                keys, backend, records_per_key, parallelism, interval_ms, job, min_records, repeats
            )
            points.append(point)
            if echo is not None:
                echo(format_state_point(point))
    return points


def format_state_point(p: dict[str, Any]) -> str:
    mb = 1_000_000
    return (
        f"  {p['keys']:>9,} keys {p['backend']:>16}: sync {p['sync_ms']['median']:.0f}/{p['sync_ms']['max']:.0f} ms, "
        f"async {p['async_ms']['median']:.0f}/{p['async_ms']['max']:.0f} ms, "
        f"fork {p['fork_ms']['median']:.0f}/{p['fork_ms']['max']:.0f} ms, "
        f"duration {p['duration_ms']['median']:.0f}/{p['duration_ms']['max']:.0f} ms (median/max), "
        f"size {p['checkpointed_size_bytes']['median'] / mb:.1f} MB (full {p['full_size_bytes']['median'] / mb:.1f}), "
        f"{p['checkpoints_completed']} checkpoints; "
        f"{p['records_per_s_with']:,.0f} vs {p['records_per_s_without']:,.0f} records/s without: "
        f"{p['throughput_ratio']:.2f}x; the job's CPU {p['cpu_seconds_with']:.1f} vs {p['cpu_seconds_without']:.1f} s "
        f"({p['job_cpu_ratio']:.2f}x), children {p['child_cpu_seconds']:.1f} s"
    )


def format_sweep(points: list[dict[str, Any]], interval_ms: int) -> str:
    job = points[0]["job"] if points else "reduce"
    lines = [f"checkpoint cost by state size ({job} job, checkpoint every {interval_ms} ms):"]
    lines += [format_state_point(p) for p in points]
    return "\n".join(lines)


def write_report(report: dict[str, Any], path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump(report, out, indent=2, default=str)

"""``weir bench query``: the shared query written four ways, timed in one run.

The query (a Flink user's everyday job): event ``i`` (0 <= i < N) has key
``(i * 2654435761) mod K``, value ``i mod 100`` and event time ``i - ((i * 7919) mod 51)`` ms
(out of order by at most 50 ms, a bounded-out-of-orderness watermark of 50 ms). Per key and
1 s tumbling event-time window: the count and the sum of value, emitted as
``(key, window_start, count, sum)``.

Written as

- ``columnar``: weir with ``weir.columnar`` (a number sequence, a ``batch_map`` building the
  columns, ``timestamp_field``, ``field`` keys, ``Aggregates``, a ``BatchSinkFunction``);
- ``per_record``: weir with PyFlink's per-record functions only (a map building tuples, a
  timestamp assigner, a key selector, an ``AggregateFunction`` with a
  ``ProcessWindowFunction``, a ``SinkFunction``);
- ``numba``: a hand-written numba loop over a typed dict keyed by (key, window), generation
  included, the way a user writes one;
- ``python``: a plain Python dict loop.

Each is checked against the exact answer computed with numpy (``np.unique`` over
``key * windows + window``, ``np.bincount``) by an order-independent checksum: rows, total
count, total sum and the wrapping sum of a hash of each row. A run whose checksum differs is
reported (``checksum_ok`` false) and is an error of the command. Events/s are N over the
job's net runtime (weir) or the loop's wall time, of the median of ``repeat`` runs (3 by
default; the runs go in rounds of one run per way). Every way is warmed up first and untimed:
the numba loop is compiled, and each weir job runs once on 100,000 events (the first job of
a process loads weir's numba kernels from the cache). Each way starts after a full garbage
collection, so the garbage of the ways before it is not collected inside its timing.
"""

from __future__ import annotations

import gc
import itertools
import platform
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

import numba
import numpy as np
from numba import types
from numba.typed import Dict

from weir import columnar as col
from weir.common import Configuration, Duration, Time, Types, WatermarkStrategy
from weir.core.functions import AggregateFunction, ProcessWindowFunction, SinkFunction
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.window import TumblingEventTimeWindows
from weir.errors import UsageError

WINDOW_MS = 1000
OUT_OF_ORDER_MS = 50
KEY_MULTIPLIER = 2654435761
WARM_UP_EVENTS = 100_000
_H = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True)
class Checksum:
    rows: int
    count: int
    total: int
    hash: int  # sum over rows of row_hash, modulo 2**64


def row_hashes(key: np.ndarray, start: np.ndarray, count: np.ndarray, total: np.ndarray) -> np.ndarray:
    """One uint64 per row; wrapping arithmetic, the same for every writer of the query."""
    with np.errstate(over="ignore"):
        h = key.astype(np.uint64) * _H
        h = (h ^ start.astype(np.uint64)) * _H
        h = (h ^ count.astype(np.uint64)) * _H
        return (h ^ total.astype(np.uint64)) * _H


def checksum_of(key: np.ndarray, start: np.ndarray, count: np.ndarray, total: np.ndarray) -> Checksum:
    hashes = row_hashes(key, start, count, total)
    return Checksum(len(key), int(count.sum()), int(total.sum()), int(hashes.sum(dtype=np.uint64)))


def event_columns(i: np.ndarray, keys: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    i = i.astype(np.int64, copy=False)
    return (i * KEY_MULTIPLIER) % keys, i % 100, i - (i * 7919) % 51


def exact_answer(events: int, keys: int) -> Checksum:
    key, value, ts = event_columns(np.arange(events, dtype=np.int64), keys)
    window = ts // WINDOW_MS  # floor: the first events have negative times
    first = int(window.min())
    windows = int(window.max()) - first + 1
    groups, inverse = np.unique(key * windows + (window - first), return_inverse=True)
    count = np.bincount(inverse)
    total = np.bincount(inverse, weights=value).astype(np.int64)
    return checksum_of(groups // windows, (groups % windows + first) * WINDOW_MS, count, total)


# -- the hand-written loops ------------------------------------------------------------------------
_PAIR = types.UniTuple(types.int64, 2)


@numba.njit(cache=True)
def _numba_loop(
    events: int, keys: int, window_ms: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    acc = Dict.empty(key_type=_PAIR, value_type=_PAIR)
    for i in range(events):
        key = (i * 2654435761) % keys
        value = i % 100
        ts = i - (i * 7919) % 51
        group = (key, ts - ts % window_ms)
        if group in acc:
            c, t = acc[group]
            acc[group] = (c + 1, t + value)
        else:
            acc[group] = (1, value)
    n = len(acc)
    key_out = np.empty(n, np.int64)
    start_out = np.empty(n, np.int64)
    count_out = np.empty(n, np.int64)
    total_out = np.empty(n, np.int64)
    for j, (group, found) in enumerate(acc.items()):
        key_out[j] = group[0]
        start_out[j] = group[1]
        count_out[j] = found[0]
        total_out[j] = found[1]
    return key_out, start_out, count_out, total_out


def numba_query(events: int, keys: int) -> tuple[Checksum, float]:
    run = _numba_loop
    run(1000, keys, WINDOW_MS)  # compile (or load from the cache) outside the timing
    started = time.perf_counter()
    out = run(events, keys, WINDOW_MS)
    seconds = time.perf_counter() - started
    return checksum_of(*out), seconds


def python_query(events: int, keys: int) -> tuple[Checksum, float]:
    started = time.perf_counter()
    acc: dict[tuple[int, int], list[int]] = {}
    for i in range(events):
        key = (i * KEY_MULTIPLIER) % keys
        value = i % 100
        ts = i - (i * 7919) % 51
        group = (key, ts - ts % WINDOW_MS)
        found = acc.get(group)
        if found is None:
            acc[group] = [1, value]
        else:
            found[0] += 1
            found[1] += value
    rows = [(k, s, c, t) for (k, s), (c, t) in acc.items()]
    seconds = time.perf_counter() - started
    return _checksum_of_rows(rows), seconds


def _checksum_of_rows(rows: list[tuple[int, int, int, int]]) -> Checksum:
    if not rows:
        return Checksum(0, 0, 0, 0)
    columns = [np.fromiter((r[j] for r in rows), np.int64, len(rows)) for j in range(4)]
    return checksum_of(*columns)


# -- weir -----------------------------------------------------------------------------------------
#: rows that the sinks of one run collected, by run id (the sink functions are copied per subtask)
_COLLECTED: dict[str, list[Any]] = {}
_RUN_IDS = itertools.count()


class _RowSink(SinkFunction):
    """Per record: remembers the row."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def invoke(self, value: Any, context: Any) -> None:
        _COLLECTED[self.run_id].append(value)


class _ColumnSink(col.BatchSinkFunction):
    """Per batch: remembers the columns."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def invoke_batch(self, columns: Any, timestamps: Any) -> None:
        _COLLECTED[self.run_id].append(tuple(np.asarray(c, dtype=np.int64) for c in columns))

    def invoke(self, value: Any, context: Any) -> None:
        _COLLECTED[self.run_id].append(tuple(np.asarray([v], dtype=np.int64) for v in value))


class _CountAndSum(AggregateFunction):
    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: Any, accumulator: tuple[int, int]) -> tuple[int, int]:
        return (accumulator[0] + 1, accumulator[1] + value[1])

    def get_result(self, accumulator: tuple[int, int]) -> tuple[int, int]:
        return accumulator

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])


class _WithKeyAndStart(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        start = context.window().start
        return [(key, start, c, s) for c, s in elements]


def _environment(
    parallelism: int, checkpointing: str, backend: str, directory: str
) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", 1)
    conf.set_string("state.backend.type", "lmdb" if backend == "lmdb" else "hashmap")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    if checkpointing == "aligned":
        env.enable_checkpointing(1000)
        env.get_checkpoint_config().set_checkpoint_storage_dir(directory)
    return env


def _strategy(assigner: Any) -> WatermarkStrategy:
    return WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(OUT_OF_ORDER_MS)
    ).with_timestamp_assigner(assigner)


def build_columnar(
    env: StreamExecutionEnvironment, events: int, keys: int, run_id: str, sink: Any = None
) -> None:
    L = Types.LONG
    numbers = env.from_source(
        NumberSequenceSource(0, events - 1), WatermarkStrategy.no_watermarks(), "numbers"
    )
    events_ = numbers.map(
        col.batch_map(lambda i: event_columns(i, keys)), output_type=Types.TUPLE([L(), L(), L()])
    )
    (
        events_.assign_timestamps_and_watermarks(_strategy(col.timestamp_field(2)))
        .key_by(col.field(0))
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .aggregate(col.Aggregates(col.key(), col.window_start(), col.count(), col.sum(1)))
        .add_sink(sink if sink is not None else _ColumnSink(run_id))
    )


def build_per_record(
    env: StreamExecutionEnvironment, events: int, keys: int, run_id: str, sink: Any = None
) -> None:
    L = Types.LONG
    numbers = env.from_source(
        NumberSequenceSource(0, events - 1), WatermarkStrategy.no_watermarks(), "numbers"
    )
    events_ = numbers.map(
        lambda i: ((i * KEY_MULTIPLIER) % keys, i % 100, i - (i * 7919) % 51),
        output_type=Types.TUPLE([L(), L(), L()]),
    )
    (
        events_.assign_timestamps_and_watermarks(_strategy(lambda e, ts: e[2]))
        .key_by(lambda e: e[0], key_type=L())
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .aggregate(_CountAndSum(), _WithKeyAndStart(), output_type=Types.TUPLE([L(), L(), L(), L()]))
        .add_sink(sink if sink is not None else _RowSink(run_id))
    )


def weir_query(
    way: str, events: int, keys: int, parallelism: int, checkpointing: str, backend: str
) -> tuple[Checksum, float, int]:
    """(checksum, seconds of the job, checkpoints completed)."""
    run_id = f"{way}-{next(_RUN_IDS)}"
    _COLLECTED[run_id] = []
    try:
        with tempfile.TemporaryDirectory(prefix="weir-query-") as directory:
            env = _environment(parallelism, checkpointing, backend, directory)
            build = build_columnar if way == "columnar" else build_per_record
            build(env, events, keys, run_id)
            result = env.execute(f"query {way}")
        collected = _COLLECTED[run_id]
    finally:
        _COLLECTED.pop(run_id, None)
    if way == "columnar":
        checksum = (
            checksum_of(*(np.concatenate([c[j] for c in collected]) for j in range(4)))
            if collected
            else Checksum(0, 0, 0, 0)
        )
    else:
        checksum = _checksum_of_rows(collected)
    stats = result.get_accumulator_result("checkpoint_stats") or []
    completed = sum(1 for s in stats if s["status"] == "COMPLETED")
    return checksum, max(result.get_net_runtime(), 1) / 1000, completed


def run_query_bench(
    keys: int,
    parallelism: int,
    events: int,
    checkpointing: str,
    backend: str,
    echo: Any = None,
    repeat: int = 3,
) -> dict[str, Any]:
    """Every way ``repeat`` times, in this process, in rounds (each round runs every way once,
    so a slow spell of the machine falls on all of them); a way's figure is its median run.
    The result holds the parameters and every run's seconds."""
    if events < 10_000:
        raise UsageError(f"--events must be at least 10000 to measure anything, got {events}")
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")
    say = echo or (lambda line: None)
    expected = exact_answer(events, keys)
    # each way runs once untimed on a small input first, as the numba loop is compiled before
    # its timing: the first job of a process loads weir's kernels from numba's cache
    for way in ("columnar", "per_record"):
        weir_query(way, WARM_UP_EVENTS, keys, parallelism, "off", backend)
    ways: tuple[str, ...] = ("columnar", "per_record", "numba", "python")
    if checkpointing != "off":
        # the columnar way without checkpoints too, in the same rounds: what checkpoints cost
        # is a ratio of this run, not of two commands on a machine whose speed moves between them
        ways = ("columnar_off", *ways)
    runs: dict[str, list[tuple[float, int | None, bool, Checksum]]] = {w: [] for w in ways}
    for round_ in range(repeat):
        for way in ways:
            say(f"  {way} ({round_ + 1}/{repeat}) ...")
            gc.collect()  # the garbage of the runs before is not collected inside this one's timing
            checkpoints = None
            if way == "columnar_off":
                got, seconds, _ = weir_query("columnar", events, keys, parallelism, "off", backend)
            elif way in ("columnar", "per_record"):
                got, seconds, checkpoints = weir_query(way, events, keys, parallelism, checkpointing, backend)
            elif way == "numba":
                got, seconds = numba_query(events, keys)
            else:
                got, seconds = python_query(events, keys)
            if checkpointing == "aligned" and checkpoints == 0:
                raise UsageError(
                    f"the {way} run took {seconds:.1f} s with a checkpoint every second and completed none: "
                    f"it measured nothing of checkpointing; give it more --events (now {events:,})"
                )
            runs[way].append((seconds, checkpoints, got == expected, got))
    figures: dict[str, Any] = {}
    for way in ways:
        ordered = sorted(runs[way], key=lambda r: r[0])
        seconds, checkpoints, _, got = ordered[(len(ordered) - 1) // 2]
        match = all(r[2] for r in runs[way])
        figures[way] = {
            "eps": events / seconds,
            "seconds": seconds,
            "runs_s": [r[0] for r in runs[way]],
            "checksum_ok": match,
            "checksum": asdict(got if match else next(r[3] for r in runs[way] if not r[2])),
        }
        if checkpoints is not None:
            figures[way]["checkpoints_completed"] = checkpoints
    ok = all(f["checksum_ok"] for f in figures.values())
    return {
        "parameters": {
            "keys": keys,
            "parallelism": parallelism,
            "events": events,
            "checkpointing": checkpointing,
            "backend": backend,
            "repeat": repeat,
            "window_ms": WINDOW_MS,
            "out_of_orderness_ms": OUT_OF_ORDER_MS,
            "python": platform.python_version(),
            "machine": platform.machine(),
        },
        "expected": asdict(expected),
        "figures": figures,
        "columnar_eps": figures["columnar"]["eps"],
        "per_record_eps": figures["per_record"]["eps"],
        "numba_eps": figures["numba"]["eps"],
        "python_eps": figures["python"]["eps"],
        "checkpoints_completed": {
            w: figures[w].get("checkpoints_completed") for w in ("columnar", "per_record")
        },
        **(
            {
                "columnar_off_eps": figures["columnar_off"]["eps"],
                "columnar_checkpoint_ratio": figures["columnar"]["eps"] / figures["columnar_off"]["eps"],
            }
            if "columnar_off" in figures
            else {}
        ),
        "checksum_ok": ok,
    }


def format_query_report(report: dict[str, Any]) -> str:
    p = report["parameters"]
    f = report["figures"]
    lines = [
        f"query: K={p['keys']} keys, p={p['parallelism']}, {p['events']:,} events, median of {p['repeat']} runs, "
        f"checkpoints {p['checkpointing']}" + (f" ({p['backend']})" if p["checkpointing"] != "off" else ""),
        f"  {'way':<11} {'events/s':>12} {'seconds':>8}  checksum",
    ]
    for way in ("columnar_off", "columnar", "per_record", "numba", "python"):
        if way not in f:
            continue
        fig = f[way]
        done = fig.get("checkpoints_completed")
        note = "" if done is None or p["checkpointing"] == "off" else f"  {done} checkpoints"
        lines.append(
            f"  {way:<11} {fig['eps']:>12,.0f} {fig['seconds']:>8.2f}  {'ok' if fig['checksum_ok'] else 'WRONG'}{note}"
        )
    lines.append(
        f"  columnar / numba = {report['columnar_eps'] / report['numba_eps']:.2f}x, "
        f"columnar / per_record = {report['columnar_eps'] / report['per_record_eps']:.1f}x, "
        f"per_record / python = {report['per_record_eps'] / report['python_eps']:.0%}"
    )
    if "columnar_checkpoint_ratio" in report:
        lines.append(f"  columnar with / without checkpoints = {report['columnar_checkpoint_ratio']:.2f}x")
    return "\n".join(lines)

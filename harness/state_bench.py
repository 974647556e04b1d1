"""``weir bench state``: a keyed tumbling window, count + sum over 10,000 keys, on typed records.

Record ``n`` (0, 1, ...) has key ``n % 10,000``, value ``n % 100`` and event time
``n // 100`` ms; windows are 1 s tumbling event-time windows, so every window holds
100,000 records, 10 per key. Batches are generated with numpy inside the source (the
same generator feeds the plain-Python loop), with their timestamps attached, so no
per-record user code runs before the window.

Jobs, each at parallelism 1, on the heap (``hashmap``) and the LMDB backend:

- **(a) Python reduce**: records ``(key, 1, value)`` typed ``TUPLE(LONG, LONG, LONG)``,
  ``reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2]))``: one window computes count
  and sum.
- **(b) built-ins**: ``count()`` and ``sum()`` on the same keyed, windowed stream (two
  vectorized window operators), on records typed ``LONG`` whose value is the key
  (``key_by(lambda k: k)``), so the whole path from the source to the window is numpy:
  this is the end-to-end figure of the vectorized path. Each of the two operators also
  runs alone (``count()`` alone, ``sum()`` alone): with two, every buffer is written and
  read twice.
- **(b') built-ins on tuples**: ``count()`` and ``sum(2)`` over the ``(key, 1, value)``
  tuples of (a). The typed codec builds and takes apart one Python tuple per record at
  the network boundary, which bounds this job; it is shown to make that cost visible.

Next to them, in the same process: a plain-Python dict loop and a numba loop computing the
same count + sum per (key, window) over the same generated records. The summary gives
the ratios that the targets of issue 4 are stated in, from the wall clock and from the
CPU time of the process (see ``run_round``).
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Iterator
from typing import Any

import numba
import numpy as np

from weir.codec.batch import Batch
from weir.common import Configuration, Time, Types, WatermarkStrategy
from weir.common.typeinfo import TypeInformation
from weir.core.connectors import Source
from weir.core.window import TumblingEventTimeWindows
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.builtin import DiscardingSink
from weir.operators.sources import DEFAULT_BATCH_SIZE, SourceReader, split_range

KEYS = 10_000
VALUES = 100
RECORDS_PER_MS = 100
WINDOW_MS = 1_000
TRIPLE = Types.TUPLE([Types.LONG(), Types.LONG(), Types.LONG()])


# ----------------------------------------------------------------------------- records


def generate(start: int, stop: int, shape: str) -> Iterator[tuple[Any, np.ndarray]]:
    """Batches of records ``start .. stop - 1``: (values, event timestamps)."""
    for lo in range(start, stop, DEFAULT_BATCH_SIZE):
        n = np.arange(lo, min(lo + DEFAULT_BATCH_SIZE, stop), dtype=np.int64)
        keys = n % KEYS
        stamps = n // RECORDS_PER_MS
        if shape == "long":
            yield keys, stamps
        else:
            yield list(zip(keys.tolist(), [1] * len(n), (n % VALUES).tolist())), stamps


class BenchSource(Source):
    """The benchmark's records, generated per batch, timestamps attached; bounded."""

    def __init__(self, records: int, shape: str) -> None:
        self.records = records
        self.shape = shape

    def produced_type(self) -> TypeInformation:
        return Types.LONG() if self.shape == "long" else TRIPLE

    def create_reader(self, subtask: int, parallelism: int) -> SourceReader:
        return _BenchReader(*split_range(0, self.records, subtask, parallelism), self.shape)


class _BenchReader(SourceReader):
    def __init__(self, start: int, stop: int, shape: str) -> None:
        self.batches = generate(start, stop, shape)

    async def next_batch(self) -> Batch | None:
        item = next(self.batches, None)
        return None if item is None else Batch(item[0], item[1])


# ----------------------------------------------------------------------------- jobs


def build_job(records: int, backend: str, job: str) -> StreamExecutionEnvironment:
    """``job``: "reduce" (a), "builtin" (b, LONG records; "builtin-count"/"builtin-sum": one of
    its two operators alone) or "builtin-tuple" (b', tuples)."""
    conf = Configuration()
    conf.set_string("state.backend.type", backend)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    shape = "tuple" if job in ("reduce", "builtin-tuple") else "long"
    source = env.from_source(
        BenchSource(records, shape), WatermarkStrategy.for_monotonous_timestamps(), "records"
    )
    window = TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS))
    if job == "reduce":
        keyed = source.key_by(lambda r: r[0], key_type=Types.LONG())
        keyed.window(window).reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2])).sink_to(DiscardingSink())
    elif job.startswith("builtin") and job != "builtin-tuple":
        keyed = source.key_by(lambda k: k, key_type=Types.LONG())
        if job in ("builtin", "builtin-count"):
            keyed.window(window).count().sink_to(DiscardingSink())
        if job in ("builtin", "builtin-sum"):
            keyed.window(window).sum().sink_to(DiscardingSink())
    else:
        keyed = source.key_by(lambda r: r[0], key_type=Types.LONG())
        keyed.window(window).count().sink_to(DiscardingSink())
        keyed.window(window).sum(2).sink_to(DiscardingSink())
    return env


def run_job(records: int, backend: str, job: str) -> tuple[float, float]:
    """Records/s of one job from its net runtime (wall clock), and the CPU seconds this
    process spent on it (start-up and shutdown of the local cluster included)."""
    env = build_job(records, backend, job)
    cpu = time.process_time()
    result = env.execute(f"state {backend} {job}")
    cpu = time.process_time() - cpu
    return records / (max(result.get_net_runtime(), 1) / 1000), cpu


#: The records of the job whose CPU time stands for the fixed cost of running a job.
OVERHEAD_RECORDS = 4_096


# ----------------------------------------------------------------------------- baselines


def python_loop(records: int) -> tuple[float, float]:
    """count + sum per (key, window) in a dict, over the same generated tuples:
    (records/s, records per CPU second)."""
    started, cpu = time.perf_counter(), time.process_time()
    windows: dict[tuple[int, int], tuple[int, int]] = {}
    get = windows.get
    for values, stamps in generate(0, records, "tuple"):
        for (key, one, value), t in zip(values, stamps.tolist()):
            slot = (key, t - t % WINDOW_MS)
            acc = get(slot)
            windows[slot] = (one, value) if acc is None else (acc[0] + one, acc[1] + value)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert sum(c for c, _ in windows.values()) == records
    return records / elapsed, records / max(cpu, 1e-9)


@numba.njit(cache=True)
def _numba_aggregate(keys: np.ndarray, stamps: np.ndarray, values: np.ndarray, acc: np.ndarray) -> None:
    for i in range(keys.shape[0]):
        w = stamps[i] // WINDOW_MS
        acc[w, keys[i], 0] += 1
        acc[w, keys[i], 1] += values[i]


def numba_loop(records: int) -> tuple[float, float]:
    """The same count + sum in one numba loop over the columns, generation excluded:
    (records/s, records per CPU second)."""
    n = np.arange(records, dtype=np.int64)
    keys, stamps, values = n % KEYS, n // RECORDS_PER_MS, n % VALUES
    acc = np.zeros((int(stamps[-1]) // WINDOW_MS + 1, KEYS, 2), dtype=np.int64)
    _numba_aggregate(keys[:10], stamps[:10], values[:10], acc)  # compile or load outside the clock
    acc[:] = 0
    started, cpu = time.perf_counter(), time.process_time()
    _numba_aggregate(keys, stamps, values, acc)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert int(acc[:, :, 0].sum()) == records
    return records / elapsed, records / max(cpu, 1e-9)


# ----------------------------------------------------------------------------- the suite

JOBS = {
    "reduce": "Python reduce (a)",
    "builtin": "count()+sum(), LONG (b)",
    "builtin-count": "count() alone, LONG",
    "builtin-sum": "sum() alone, LONG",
    "builtin-tuple": "count()+sum(), tuples (b')",
}
#: Jobs on LONG records, which run ``BUILTIN_SCALE`` times the records.
LONG_JOBS = ("builtin", "builtin-count", "builtin-sum")
BACKENDS = ("hashmap", "lmdb")
#: The built-in jobs run this many times the records of the others, so that they run long enough.
BUILTIN_SCALE = 5


def run_round(records: int) -> dict[str, float]:
    """Every job on both backends and both loops, back to back: ``NAME`` is records/s from
    the wall clock, ``NAME cpu`` records per CPU second of this process (for a job: after
    taking off the CPU time of the same job over ``OVERHEAD_RECORDS``). On a machine other
    processes share, the CPU figures are the steadier ones; on an idle machine the two agree
    (a job at parallelism 1 runs on one thread)."""
    rates: dict[str, float] = {}
    for backend in BACKENDS:
        for job in JOBS:
            n = records * BUILTIN_SCALE if job in LONG_JOBS else records
            _, overhead = run_job(OVERHEAD_RECORDS, backend, job)
            rate, cpu = run_job(n, backend, job)
            rates[f"{backend} {job}"] = rate
            rates[f"{backend} {job} cpu"] = (n - OVERHEAD_RECORDS) / max(cpu - overhead, 1e-9)
    rates["python loop"], rates["python loop cpu"] = python_loop(records)
    rates["numba loop"], rates["numba loop cpu"] = numba_loop(records * BUILTIN_SCALE)
    return rates


def ratios(rates: dict[str, float], cpu: bool = False) -> dict[str, float]:
    """The figures the targets of issue 4 are stated in, from one round (wall clock or CPU time)."""

    def r(name: str) -> float:
        return rates[f"{name} cpu" if cpu else name]

    heap_reduce = r("hashmap reduce")
    return {
        "heap_reduce_over_python_loop": heap_reduce / r("python loop"),
        "lmdb_reduce_over_heap_reduce": r("lmdb reduce") / heap_reduce,
        "heap_builtin_records_per_s": r("hashmap builtin"),
        "heap_builtin_over_numba_loop": r("hashmap builtin") / r("numba loop"),
        "lmdb_builtin_over_heap_builtin": r("lmdb builtin") / r("hashmap builtin"),
        "heap_builtin_tuple_over_python_loop": r("hashmap builtin-tuple") / r("python loop"),
        "heap_count_alone_records_per_s": r("hashmap builtin-count"),
        "heap_sum_alone_records_per_s": r("hashmap builtin-sum"),
    }


def targets(summary: dict[str, float]) -> dict[str, bool]:
    return {
        "(a) heap reduce >= 50% of the plain-Python loop": summary["heap_reduce_over_python_loop"] >= 0.5,
        "(b) heap built-ins >= 10,000,000 records/s": summary["heap_builtin_records_per_s"] >= 10_000_000,
        "LMDB reduce within 3x of heap": summary["lmdb_reduce_over_heap_reduce"] >= 1 / 3,
    }


def _median(values: list[float]) -> float:
    return statistics.median(values)


def run_suite(records: int, rounds: int = 3, echo: Any = print) -> dict[str, Any]:
    """``rounds`` rounds of every job and loop; medians of the rates and of the per-round ratios
    (a round's ratios pair measurements taken seconds apart on a machine whose speed drifts)."""
    for job in JOBS:  # warm up: compile or load every kernel before anything is timed
        for backend in BACKENDS:
            run_job(20_000, backend, job)
    per_round = [run_round(records) for _ in range(rounds)]
    rates = {name: _median([r[name] for r in per_round]) for name in per_round[0]}
    summaries = {}
    for clock, cpu in (("wall clock", False), ("CPU time", True)):
        per_round_ratios = [ratios(r, cpu) for r in per_round]
        summaries[clock] = {
            name: _median([r[name] for r in per_round_ratios]) for name in per_round_ratios[0]
        }
    labels = {f"{b} {job}": f"{b} {label}" for b in BACKENDS for job, label in JOBS.items()}
    labels.update({"python loop": "plain-Python dict loop", "numba loop": "numba loop"})
    echo(f"median of {rounds} rounds; {records:,} records ({records * BUILTIN_SCALE:,} for (b) and numba)")
    echo(f"{'':<36} {'records/s':>14} {'records/CPU-s':>14}")
    for name, label in labels.items():
        echo(f"{label:<36} {rates[name]:>14,.0f} {rates[name + ' cpu']:>14,.0f}")
    met = {}
    for clock, summary in summaries.items():
        echo(f"-- {clock}")
        for name, value in summary.items():
            echo(f"{name}: {value:,.2f}")
        met[clock] = targets(summary)
        for name, ok in met[clock].items():
            echo(f"target {name}: {'met' if ok else 'NOT met'}")
    return {
        "benchmark": "state",
        "parameters": {
            "records": records,
            "builtin_records": records * BUILTIN_SCALE,
            "rounds": rounds,
            "keys": KEYS,
            "window_ms": WINDOW_MS,
            "event_time": f"record n at n // {RECORDS_PER_MS} ms "
            f"({RECORDS_PER_MS * WINDOW_MS // KEYS} records per key per window)",
            "parallelism": 1,
        },
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "records_per_s": rates,
        "rounds_records_per_s": per_round,
        "summary": summaries,
        "targets_met": met,
    }

"""``weir bench state``: a keyed tumbling window (count + sum) over 10,000 keys.

Runs (a) a Python ``reduce`` and (b) the built-in ``sum`` on the heap and LMDB backends,
each next to a plain-Python dict loop and a numba loop doing the same aggregation in the
same process, so the ratios come from one run.
"""

from __future__ import annotations

import platform
import time
from typing import Any

import numba
import numpy as np

from engine.common import Configuration, Time, Types, WatermarkStrategy
from engine.datastream import StreamExecutionEnvironment
from engine.datastream.connectors.builtin import DiscardingSink
from engine.datastream.connectors.number_seq import NumberSequenceSource
from engine.datastream.window import TumblingEventTimeWindows

KEYS = 10_000
WINDOW_MS = 1_000
PAIR = Types.TUPLE([Types.LONG(), Types.LONG()])


def build_job(records: int, backend: str, builtin: bool) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_string("state.backend.type", backend)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda n, _: n // 100)
    pairs = env.from_source(NumberSequenceSource(0, records - 1), strategy, "numbers").map(
        lambda n: (n % KEYS, 1), output_type=PAIR
    )
    windowed = pairs.key_by(lambda p: p[0], key_type=Types.LONG()).window(
        TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS))
    )
    result = windowed.sum(1) if builtin else windowed.reduce(lambda a, b: (a[0], a[1] + b[1]))
    result.sink_to(DiscardingSink())
    return env


def run_job(records: int, backend: str, builtin: bool) -> float:
    env = build_job(records, backend, builtin)
    result = env.execute(f"state {backend} {'builtin' if builtin else 'reduce'}")
    return records / (max(result.get_net_runtime(), 1) / 1000)


def python_loop(records: int) -> float:
    started = time.perf_counter()
    windows: dict[tuple[int, int], int] = {}
    for n in range(records):
        slot = (n % KEYS, (n // 100) // WINDOW_MS)
        windows[slot] = windows.get(slot, 0) + 1
    return records / (time.perf_counter() - started)


@numba.njit(cache=True)
def _numba_aggregate(keys: np.ndarray, windows: np.ndarray, counts: np.ndarray) -> None:
    for i in range(keys.shape[0]):
        counts[windows[i], keys[i]] += 1


def numba_loop(records: int) -> float:
    n = np.arange(records, dtype=np.int64)
    counts = np.zeros(((records // 100) // WINDOW_MS + 1, KEYS), dtype=np.int64)
    _numba_aggregate(n[:10] % KEYS, (n[:10] // 100) // WINDOW_MS, counts)  # compile/load outside the clock
    counts[:] = 0
    started = time.perf_counter()
    _numba_aggregate(n % KEYS, (n // 100) // WINDOW_MS, counts)
    return records / (time.perf_counter() - started)


def run_suite(records: int, echo: Any = print) -> dict[str, Any]:
    run_job(10_000, "hashmap", False)  # warm up
    results: dict[str, float] = {}
    for backend in ("hashmap", "lmdb"):
        for builtin in (False, True):
            name = f"{backend} {'built-in sum' if builtin else 'Python reduce'}"
            results[name] = run_job(records, backend, builtin)
            echo(f"{name:<26} {results[name]:>14,.0f} records/s")
    loop, fast = python_loop(records), numba_loop(records)
    echo(f"{'plain-Python dict loop':<26} {loop:>14,.0f} records/s")
    echo(f"{'numba loop':<26} {fast:>14,.0f} records/s")
    summary = {
        "heap_reduce_over_python_loop": results["hashmap Python reduce"] / loop,
        "lmdb_reduce_over_heap_reduce": results["lmdb Python reduce"] / results["hashmap Python reduce"],
        "heap_builtin_over_numba_loop": results["hashmap built-in sum"] / fast,
    }
    for k, v in summary.items():
        echo(f"{k}: {v:.2f}")
    return {
        "benchmark": "state",
        "parameters": {
            "records": records,
            "keys": KEYS,
            "window_ms": WINDOW_MS,
            "event_time": "record n at n // 100 ms (10 records per key per window)",
            "parallelism": 1,
        },
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "records_per_s": results,
        "python_loop_records_per_s": loop,
        "numba_loop_records_per_s": fast,
        "summary": summary,
    }

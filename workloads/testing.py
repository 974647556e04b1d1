"""Small generated data sets for test suites (weir's own and its users').

``spark_dataset`` generates a data set once per process and parameters (Spark's JVM
starts once per process too) under a base directory the caller owns, typically pytest's
``tmp_path_factory.getbasetemp()``; later calls with the same parameters return the same
directory. ``keyed_rows_dataset`` writes a keyed data set from Python values with
pyarrow, without Spark, for tests of the replay itself.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from weir.workloads import dataset
from weir.workloads.generate import generate, make_params

_GENERATED: dict[str, Path] = {}


def spark_dataset(base_dir: Path | str, kind: str, events: int, seed: int = 0, **options: Any) -> Path:
    """The directory of data set ``kind`` with these parameters, generated on first use (local[2])."""
    from weir.workloads.spark import spark_session

    key = json.dumps([kind, events, seed, options], sort_keys=True)
    if key in _GENERATED and (_GENERATED[key] / dataset.MANIFEST).exists():
        return _GENERATED[key]
    directory = Path(base_dir) / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    generate(kind, make_params(kind, events, seed, **options), directory, spark=spark_session("local[2]"))
    _GENERATED[key] = directory
    return directory


def keyed_rows_dataset(
    directory: Path | str,
    events: list[tuple[str, int, int]],
    event_rate: int = 1000,
    disorder_ms: int = 0,
    window_ms: int = 10_000,
) -> Path:
    """A keyed data set of (key, value, event_time) rows written with pyarrow (no Spark)."""
    import pyarrow as pa

    table = pa.table(
        {
            "key": pa.array([e[0] for e in events], pa.string()),
            "value": pa.array([e[1] for e in events], pa.int64()),
            "event_time": pa.array([e[2] for e in events], pa.int64()),
            "payload": pa.array([""] * len(events), pa.string()),
        }
    )
    params = {
        "events": len(events), "seed": 0, "event_rate": event_rate, "disorder_ms": disorder_ms,
        "window_ms": window_ms, "start_ms": 0,
    }  # fmt: skip
    dataset.write_arrow_dataset(directory, "keyed", params, {"events": table})
    return Path(directory)


# Small data sets with several 10 s windows (1000 events per second of event time), as
# weir's own tests use them: keyword arguments of ``spark_dataset``.
SMALL_KEYED_UNIFORM: dict[str, Any] = {
    "kind": "keyed", "events": 20_000, "seed": 3, "keys": 50, "event_rate": 1000, "partitions": 2,
}  # fmt: skip
SMALL_KEYED_ZIPF: dict[str, Any] = {**SMALL_KEYED_UNIFORM, "seed": 4, "distribution": "zipf", "zipf_s": 1.1}
SMALL_NEXMARK: dict[str, Any] = {"kind": "nexmark", "events": 30_000, "seed": 5, "event_rate": 1000}

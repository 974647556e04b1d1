"""``weir gen``: run a generator on Spark, write its tables, its expected answers and the manifest.

Steps (each reported to ``progress``): start Spark, write every table, read the written
files back to measure the event-time range, compute and write the expected answer of
every query from those files, write ``manifest.json`` last. A directory holding a
manifest is a finished data set; ``ensure_dataset`` reuses one whose generator and
parameters match and whose files still have their checksums.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from weir.errors import UsageError
from weir.workloads import dataset, keyed, nexmark
from weir.workloads.spark import DEFAULT_MASTER, spark_session, track_stages

GENERATORS = ("keyed", "nexmark")
EVENT_TIME_COLUMNS = {
    "events": "event_time",
    "persons": "date_time",
    "auctions": "date_time",
    "bids": "date_time",
}


class Progress(Protocol):
    def step(self, description: str) -> None: ...

    def spark_tasks(self, done: int, total: int) -> None: ...


class _Quiet:
    def step(self, description: str) -> None:
        pass

    def spark_tasks(self, done: int, total: int) -> None:
        pass


def make_params(kind: str, events: int, seed: int, **options: Any) -> Any:
    """The parameter object of generator ``kind``; UsageError for an unknown generator or option."""
    if kind == "keyed":
        cls: Any = keyed.KeyedParams
    elif kind == "nexmark":
        cls = nexmark.NexmarkParams
    else:
        raise UsageError(f"unknown workload generator {kind!r}; choose one of {GENERATORS}")
    known = set(cls.__dataclass_fields__)
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(f"{kind} generator has no option(s) {unknown}; its options are {sorted(known)}")
    return cls(events=events, seed=seed, **options)


def steps_of(kind: str) -> int:
    tables = 1 if kind == "keyed" else 3
    queries = len(keyed.QUERIES) if kind == "keyed" else len(nexmark.QUERIES)
    return 1 + tables + 1 + queries + 1


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a directory for the data set")
    if out.is_dir() and any(out.iterdir()) and not (out / dataset.MANIFEST).exists():
        raise UsageError(
            f"--out {out} is a non-empty directory that is not a weir data set; "
            f"give a new or empty directory (weir only replaces directories it generated)"
        )


def generate(
    kind: str,
    params: Any,
    out: Path | str,
    master: str = DEFAULT_MASTER,
    progress: Progress | None = None,
    spark: Any = None,
) -> dict[str, Any]:
    """Generate data set ``kind`` with ``params`` into ``out``; returns its manifest."""
    out = Path(out)
    _check_out(out)
    progress = progress or _Quiet()
    started = time.monotonic()
    progress.step("starting Spark")
    if spark is None:
        spark = spark_session(master)
    if out.exists():
        shutil.rmtree(out)
    staging = out / ".spark"
    staging.mkdir(parents=True)

    def write(df: Any, name: str, target: Path) -> list[Path]:
        with track_stages(spark, progress.spark_tasks):
            df.write.mode("overwrite").parquet(str(staging / name))
        return dataset.move_parts(staging / name, target)

    tables_df = keyed.generate(spark, params) if kind == "keyed" else nexmark.generate(spark, params)
    if kind == "keyed":
        tables_df = {"events": tables_df}
    tables: dict[str, Any] = {}
    written: dict[str, Any] = {}
    for name, df in tables_df.items():
        progress.step(f"writing table {name}")
        files = write(df, name, out / name)
        entries = dataset.describe_files(out, files)
        tables[name] = {
            "files": entries,
            "rows": sum(e["rows"] for e in entries),
            "schema": dataset.schema_of(files),
            "event_time_column": EVENT_TIME_COLUMNS[name],
        }
        written[name] = spark.read.parquet(*[str(f) for f in files]) if files else None

    progress.step("measuring event-time ranges")
    from pyspark.sql import functions as F

    for name, info in tables.items():
        column = info["event_time_column"]
        df = written[name]
        if df is None or info["rows"] == 0:
            info["event_time"] = {"min": None, "max": None}
            continue
        with track_stages(spark, progress.spark_tasks):
            row = df.agg(F.min(column).alias("lo"), F.max(column).alias("hi")).collect()[0]
        info["event_time"] = {"min": int(row["lo"]), "max": int(row["hi"])}

    if kind == "keyed":
        answers = keyed.expected(spark, written["events"], params)
    else:
        answers = nexmark.expected(spark, written, params)
    expected: dict[str, Any] = {}
    for query, df in answers.items():
        progress.step(f"expected answer of {query}")
        ordered = df.repartition(1).sortWithinPartitions(*df.columns)
        files = write(ordered, f"expected-{query}", out / "expected" / query)
        entries = dataset.describe_files(out, files)
        expected[query] = {
            "files": entries,
            "rows": sum(e["rows"] for e in entries),
            "schema": dataset.schema_of(files),
        }
    shutil.rmtree(staging, ignore_errors=True)

    progress.step("writing manifest")
    all_entries = [e for t in tables.values() for e in t["files"]]
    manifest = {
        "format_version": dataset.FORMAT_VERSION,
        "generator": kind,
        "parameters": params.to_json(),
        "seed": params.seed,
        "tables": tables,
        "expected": expected,
        "checksum": dataset.combined_checksum(all_entries),
        "spark_version": spark.version,
    }
    dataset.write_manifest(out, manifest)
    manifest["_seconds"] = time.monotonic() - started  # not written: manifests depend on parameters only
    return manifest


def ensure_dataset(
    kind: str,
    params: Any,
    out: Path | str,
    master: str = DEFAULT_MASTER,
    progress: Progress | None = None,
    spark: Any = None,
    on_reuse: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The data set in ``out`` if it was generated by ``kind`` with ``params`` and is intact, else a new one."""
    out = Path(out)
    if (out / dataset.MANIFEST).exists():
        try:
            manifest = dataset.load_manifest(out)
        except UsageError:
            manifest = {}
        if (
            manifest.get("generator") == kind
            and manifest.get("parameters") == params.to_json()
            and not dataset.verify(out)
        ):
            if on_reuse is not None:
                on_reuse(manifest)
            return manifest
    return generate(kind, params, out, master, progress, spark)

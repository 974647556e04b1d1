"""A generated data set on disk: Parquet tables, expected answers, and the manifest.

Layout of a data set directory::

    manifest.json                 generator, parameters, seed, schema, rows, event-time range, checksums
    <table>/part-00000.parquet    the table, in event order across part files (sorted by name)
    expected/<query>/part-00000.parquet   Spark's answer to a query, sorted by all columns

Spark names its part files with a random job UUID and adds ``_SUCCESS`` and ``.crc``
files; ``move_parts`` renames the parts to ``part-NNNNN.parquet`` (keeping Spark's
partition order) and drops the rest, so the same seed gives the same paths and bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from weir.errors import UsageError

MANIFEST = "manifest.json"
FORMAT_VERSION = 1


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def move_parts(spark_dir: Path, target: Path) -> list[Path]:
    """Rename Spark's ``part-NNNNN-<uuid>….parquet`` files under ``spark_dir`` to
    ``target/part-NNNNN.parquet`` (in Spark's partition order); remove ``spark_dir``."""
    parts = sorted(p for p in spark_dir.iterdir() if p.name.startswith("part-") and p.suffix == ".parquet")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    moved = []
    for index, part in enumerate(parts):
        destination = target / f"part-{index:05d}.parquet"
        os.replace(part, destination)
        moved.append(destination)
    shutil.rmtree(spark_dir)
    return moved


def describe_files(root: Path, files: list[Path]) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return [
        {
            "path": f.relative_to(root).as_posix(),
            "rows": pq.read_metadata(f).num_rows,
            "bytes": f.stat().st_size,
            "sha256": sha256_file(f),
        }
        for f in files
    ]


def schema_of(files: list[Path]) -> list[dict[str, str]]:
    import pyarrow.parquet as pq

    if not files:
        return []
    schema = pq.read_schema(files[0])
    return [{"name": field.name, "type": str(field.type)} for field in schema]


def combined_checksum(entries: list[dict[str, Any]]) -> str:
    """One SHA-256 over every file's path and SHA-256, in order."""
    digest = hashlib.sha256()
    for e in entries:
        digest.update(f"{e['path']}\0{e['sha256']}\n".encode())
    return digest.hexdigest()


def write_manifest(directory: Path, manifest: dict[str, Any]) -> Path:
    path = directory / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def load_manifest(directory: Path | str) -> dict[str, Any]:
    """The manifest of the data set in ``directory``; UsageError if there is none or it is not one."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise UsageError(
            f"'{directory}' is not a weir data set: {MANIFEST} is missing "
            f"(create one with `weir gen keyed|nexmark --events N --seed S --out {directory}`)"
        )
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from None
    if manifest.get("format_version") != FORMAT_VERSION or "tables" not in manifest:
        raise UsageError(
            f"{path} is not a weir data set manifest of format {FORMAT_VERSION} "
            f"(format_version {manifest.get('format_version')!r}); regenerate it with `weir gen`"
        )
    return manifest


def table_files(directory: Path | str, manifest: dict[str, Any], table: str) -> list[Path]:
    """The Parquet files of ``table``, in event order."""
    tables = manifest["tables"]
    if table not in tables:
        raise UsageError(
            f"data set '{directory}' ({manifest.get('generator')}) has no table '{table}'; "
            f"it has {sorted(tables)}"
        )
    return [Path(directory) / f["path"] for f in tables[table]["files"]]


def expected_files(directory: Path | str, manifest: dict[str, Any], query: str) -> list[Path]:
    expected = manifest.get("expected", {})
    if query not in expected:
        raise UsageError(
            f"data set '{directory}' has no expected answer for query '{query}'; it has {sorted(expected)}"
        )
    return [Path(directory) / f["path"] for f in expected[query]["files"]]


def verify(directory: Path | str) -> list[str]:
    """Files whose size or SHA-256 differs from the manifest (empty: the data set is intact)."""
    manifest = load_manifest(directory)
    problems = []
    groups = [t["files"] for t in manifest["tables"].values()]
    groups += [e["files"] for e in manifest.get("expected", {}).values()]
    for files in groups:
        for entry in files:
            path = Path(directory) / entry["path"]
            if not path.is_file():
                problems.append(f"{entry['path']}: missing")
            elif sha256_file(path) != entry["sha256"]:
                problems.append(f"{entry['path']}: checksum differs")
    return problems


def write_arrow_dataset(
    directory: Path | str,
    generator: str,
    parameters: dict[str, Any],
    tables: dict[str, Any],
    expected: dict[str, Any] | None = None,
    event_time_columns: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Write pyarrow tables as a data set with a manifest (no Spark): for tests and small
    hand-made workloads. ``parameters`` must hold what the replay reads (``events``,
    ``event_rate``, ``disorder_ms`` …)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    columns = event_time_columns or {}
    manifest_tables: dict[str, Any] = {}
    for name, table in tables.items():
        path = directory / name / "part-00000.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        column = columns.get(name, "event_time")
        times = table.column(column) if column in table.column_names and table.num_rows else None
        manifest_tables[name] = {
            "files": describe_files(directory, [path]),
            "rows": table.num_rows,
            "schema": schema_of([path]),
            "event_time_column": column,
            "event_time": {
                "min": None if times is None else pc.min(times).as_py(),
                "max": None if times is None else pc.max(times).as_py(),
            },
        }
    manifest_expected: dict[str, Any] = {}
    for query, table in (expected or {}).items():
        path = directory / "expected" / query / "part-00000.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        manifest_expected[query] = {
            "files": describe_files(directory, [path]),
            "rows": table.num_rows,
            "schema": schema_of([path]),
        }
    manifest = {
        "format_version": FORMAT_VERSION,
        "generator": generator,
        "parameters": parameters,
        "seed": parameters.get("seed", 0),
        "tables": manifest_tables,
        "expected": manifest_expected,
        "checksum": combined_checksum([e for t in manifest_tables.values() for e in t["files"]]),
    }
    write_manifest(directory, manifest)
    return manifest

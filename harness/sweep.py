"""Sweeps: which data sets, correctness checks and measured configurations a suite runs.

A spec (a YAML/JSON file, a built-in suite, or either changed by command-line flags) has
three parts:

``datasets``     name → generator and parameters; generated with Spark into
                 ``<data root>/<generator>-<hash of parameters>`` and reused while intact;
``correctness``  runs in throughput mode that collect every output record and compare
                 the multiset with Spark's expected answer;
``sweeps``       each entry expands to every combination of query × parallelism ×
                 buffer timeout × checkpointing × state backend. The harness first
                 measures the max throughput (as fast as possible) of every combination
                 of an entry and data set, taking the attempts in turns (the first
                 attempt of each, then the second of each, ...), then replays each
                 combination open loop at ``fractions`` of its max (and at absolute
                 ``rates``), ``seconds`` long each after ``warmup_s``.

The attempts take turns because the targets compare maxima (the one at 1 ms against the
one at 100 ms), and a shared machine's speed drifts by a fifth within minutes: measured
one configuration after another, the ratio of two maxima held the drift between them;
in turns, every configuration's best attempt comes from the same stretch of time.

``run_spec`` executes a spec and returns the report dictionary (``weir.harness.report``
writes it); ``Reporter`` receives progress.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any, Protocol

from weir.errors import UsageError
from weir.harness import steadiness
from weir.harness.queries import get_query
from weir.harness.replay import DEFAULT_BATCH_WAIT_MS
from weir.harness.runner import (
    BACKENDS,
    CHECKPOINTING_MODES,
    DataSet,
    RunConfig,
    RunResult,
    compare_with_expected,
    run_sync,
)

BUFFER_TIMEOUTS_MS = (0, 1, 5, 10, 50, 100)
#: How long the machine's steadiness is probed before and after a suite's runs (seconds).
STEADINESS_SECONDS = 3.0

SWEEP_DEFAULTS: dict[str, Any] = {
    "parallelism": [2],
    "buffer_timeouts_ms": list(BUFFER_TIMEOUTS_MS),
    "checkpointing": ["off"],
    "backend": ["heap"],
    "checkpoint_interval_ms": 1000,
    "fractions": [0.25, 0.5, 0.75, 0.9],
    "rates": [],
    "seconds": 3.0,
    "throughput_seconds": 3.0,
    "throughput_repeats": 2,  # max throughput = the best of this many runs (noise only ever slows a run)
    # every open-loop rate runs this many times; the run with the median p99 stands for the rate
    # (one stall of a shared machine moves the p99 of a 3 s run; the other repeats are kept too)
    "latency_repeats": 1,
    "warmup_s": 0.5,
    "batch_wait_ms": DEFAULT_BATCH_WAIT_MS,  # open-loop batch period: a due row waits at most this long
}

SUITES: dict[str, dict[str, Any]] = {
    "run": {
        "description": "make run: the reference windowed job checked against Spark, then 3 buffer timeouts",
        "datasets": {"keyed": {"generator": "keyed", "events": 600_000, "seed": 1, "keys": 1000,
                               "distribution": "zipf", "zipf_s": 1.1}},
        "correctness": [{"query": "keyed-window", "dataset": "keyed", "parallelism": [2],
                         "checkpointing": "aligned", "backend": "lmdb", "checkpoint_interval_ms": 500}],
        "sweeps": [{"query": "keyed-shuffle", "dataset": "keyed", "buffer_timeouts_ms": [1, 10, 100],
                    "seconds": 2.0, "throughput_seconds": 2.0,
                    "throughput_repeats": 1}],
    },
    "quick": {
        "description": "a few minutes on 2 cores: every query checked, 6 buffer timeouts, overload shown",
        "datasets": {
            "keyed": {"generator": "keyed", "events": 1_000_000, "seed": 1, "keys": 1000,
                      "distribution": "zipf", "zipf_s": 1.1},
            "nexmark": {"generator": "nexmark", "events": 400_000, "seed": 1},
        },
        "correctness": [
            {"query": "keyed-window", "dataset": "keyed", "parallelism": [1, 2], "checkpointing": "aligned",
             "backend": "lmdb", "checkpoint_interval_ms": 500},
            {"query": "keyed-window-columnar", "dataset": "keyed", "parallelism": [1, 2],
             "checkpointing": "aligned", "backend": "lmdb", "checkpoint_interval_ms": 500},
            {"query": ["keyed-shuffle", "keyed-shuffle-columnar"], "dataset": "keyed", "parallelism": [2]},
            {"query": ["q0", "q1", "q2", "q5", "q7", "q8"], "dataset": "nexmark", "parallelism": [2]},
        ],
        "sweeps": [
            {"query": ["keyed-shuffle", "keyed-shuffle-columnar"], "dataset": "keyed",
             "fractions": [0.25, 0.5, 0.75, 0.9, 1.25], "seconds": 2.0, "latency_repeats": 3,
             "throughput_repeats": 3},
            {"query": ["keyed-window", "keyed-window-columnar"], "dataset": "keyed", "buffer_timeouts_ms": [1, 100],
             "checkpointing": ["aligned"], "backend": ["lmdb"], "fractions": [0.5, 0.9],
             "throughput_repeats": 3},
        ],
    },
    "full": {
        "description": "every dimension: checkpointing off/aligned/unaligned, heap/LMDB, parallelism 1/2",
        "datasets": {
            "keyed": {"generator": "keyed", "events": 4_000_000, "seed": 1, "keys": 10_000,
                      "distribution": "zipf", "zipf_s": 1.1},
            "keyed-uniform": {"generator": "keyed", "events": 1_000_000, "seed": 2, "keys": 10_000},
            "nexmark": {"generator": "nexmark", "events": 2_000_000, "seed": 1},
        },
        "correctness": [
            {"query": ["keyed-window", "keyed-shuffle"], "dataset": ["keyed", "keyed-uniform"],
             "parallelism": [1, 2], "checkpointing": "aligned", "backend": "lmdb"},
            {"query": ["q0", "q1", "q2", "q5", "q7", "q8"], "dataset": "nexmark", "parallelism": [1, 2]},
        ],
        "sweeps": [
            {"query": "keyed-shuffle", "dataset": "keyed", "parallelism": [1, 2],
             "checkpointing": ["off", "aligned", "unaligned"], "fractions": [0.25, 0.5, 0.75, 0.9, 1.25],
             "seconds": 5.0},
            {"query": "keyed-window", "dataset": "keyed", "buffer_timeouts_ms": [1, 10, 100],
             "checkpointing": ["off", "aligned", "unaligned"], "backend": ["heap", "lmdb"], "seconds": 5.0},
            {"query": ["q1", "q5", "q7"], "dataset": "nexmark", "buffer_timeouts_ms": [1, 100], "seconds": 5.0},
        ],
    },
}  # fmt: skip


class Reporter(Protocol):
    def start(self, total: int) -> None: ...

    def advance(self, description: str) -> None: ...

    def log(self, line: str) -> None: ...

    def progress(self) -> Any: ...


class QuietReporter:
    def start(self, total: int) -> None:
        pass

    def advance(self, description: str) -> None:
        pass

    def log(self, line: str) -> None:
        pass

    def progress(self) -> Any:
        return None


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def load_spec(path: str | Path) -> dict[str, Any]:
    """A spec from a YAML or JSON file (a report.json works too: its ``spec`` is used)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"sweep spec '{path}' does not exist")
    try:
        data = yaml.safe_load(path.read_text())  # JSON is YAML
    except yaml.YAMLError as exc:
        raise UsageError(f"sweep spec '{path}' is not valid YAML/JSON: {exc}") from None
    if isinstance(data, dict) and "spec" in data and "configurations" in data:
        data = data["spec"]
    return validate_spec(data, str(path))


def suite_spec(name: str) -> dict[str, Any]:
    if name not in SUITES:
        raise UsageError(f"unknown suite {name!r}; choose one of {sorted(SUITES)}")
    spec = copy.deepcopy(SUITES[name])
    spec["suite"] = name
    return validate_spec(spec, f"suite {name}")


def validate_spec(spec: Any, where: str) -> dict[str, Any]:
    """Fill defaults and check every name and value; UsageError naming the field otherwise."""
    if not isinstance(spec, dict):
        raise UsageError(f"{where}: a sweep spec is a mapping with datasets, correctness and sweeps")
    unknown = set(spec) - {"suite", "description", "datasets", "correctness", "sweeps"}
    if unknown:
        raise UsageError(f"{where}: unknown field(s) {sorted(unknown)}; known: datasets, correctness, sweeps")
    datasets = spec.get("datasets") or {}
    if not isinstance(datasets, dict) or not datasets:
        raise UsageError(
            f"{where}: 'datasets' must name at least one data set (name: {{generator: keyed, ...}})"
        )
    from weir.workloads.generate import make_params

    for name, ds in datasets.items():
        if not isinstance(ds, dict) or "generator" not in ds or "events" not in ds:
            raise UsageError(f"{where}: data set '{name}' needs 'generator' and 'events'")
        options = {k: v for k, v in ds.items() if k not in ("generator", "events", "seed")}
        make_params(ds["generator"], ds["events"], ds.get("seed", 0), **options)
    out = {
        "suite": spec.get("suite", "custom"),
        "description": spec.get("description", ""),
        "datasets": datasets,
        "correctness": [],
        "sweeps": [],
    }
    for i, entry in enumerate(spec.get("correctness") or []):
        e = _entry(entry, f"{where}: correctness[{i}]", datasets, sweep=False)
        out["correctness"].append(e)
    for i, entry in enumerate(spec.get("sweeps") or []):
        e = _entry(entry, f"{where}: sweeps[{i}]", datasets, sweep=True)
        out["sweeps"].append(e)
    return out


def _entry(entry: Any, where: str, datasets: dict[str, Any], sweep: bool) -> dict[str, Any]:
    if not isinstance(entry, dict) or "query" not in entry:
        raise UsageError(f"{where}: needs at least 'query'")
    e = {**SWEEP_DEFAULTS, **entry} if sweep else {
        "parallelism": [2], "checkpointing": "off", "backend": "heap", "checkpoint_interval_ms": 1000,
        "buffer_timeout_ms": 100, **entry,
    }  # fmt: skip
    known = set(SWEEP_DEFAULTS) | {"query", "dataset", "buffer_timeout_ms"}
    unknown = set(entry) - known
    if unknown:
        raise UsageError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
    e["query"] = _as_list(e["query"])
    for q in e["query"]:
        query = get_query(q)
        names = _as_list(
            e.get("dataset") or [n for n, d in datasets.items() if d["generator"] == query.workload][:1]
        )
        for n in names:
            if n not in datasets:
                raise UsageError(f"{where}: data set '{n}' is not defined; defined: {sorted(datasets)}")
            if datasets[n]["generator"] != query.workload:
                raise UsageError(
                    f"{where}: query '{q}' needs a {query.workload} data set, '{n}' is {datasets[n]['generator']}"
                )
        if not names:
            raise UsageError(
                f"{where}: query '{q}' needs a {query.workload} data set; define one under 'datasets'"
            )
    e["dataset"] = _as_list(e.get("dataset")) if e.get("dataset") else None
    for name in ("parallelism", "checkpointing", "backend") + (
        ("buffer_timeouts_ms", "fractions", "rates") if sweep else ()
    ):
        e[name] = _as_list(e[name])
    for mode in e["checkpointing"]:
        if mode not in CHECKPOINTING_MODES:
            raise UsageError(f"{where}: checkpointing must be one of {CHECKPOINTING_MODES}, got {mode!r}")
    for backend in e["backend"]:
        if backend not in BACKENDS:
            raise UsageError(f"{where}: backend must be one of {BACKENDS}, got {backend!r}")
    if sweep:
        for f in e["fractions"]:
            if not isinstance(f, (int, float)) or f <= 0:
                raise UsageError(f"{where}: fractions of max throughput must be positive numbers, got {f!r}")
        for r in e["rates"]:
            if not isinstance(r, (int, float)) or r <= 0:
                raise UsageError(f"{where}: rates must be positive records/s, got {r!r}")
        if not isinstance(e["batch_wait_ms"], (int, float)) or e["batch_wait_ms"] < 0:
            raise UsageError(
                f"{where}: batch_wait_ms must be a non-negative number, got {e['batch_wait_ms']!r}"
            )
        for name in ("throughput_repeats", "latency_repeats"):
            if not isinstance(e[name], int) or isinstance(e[name], bool) or e[name] < 1:
                raise UsageError(f"{where}: {name} must be a positive integer, got {e[name]!r}")
        for name in ("seconds", "throughput_seconds"):
            if not isinstance(e[name], (int, float)) or e[name] <= 0:
                raise UsageError(f"{where}: {name} must be a positive number of seconds, got {e[name]!r}")
        if not isinstance(e["warmup_s"], (int, float)) or not 0 <= e["warmup_s"] < e["seconds"]:
            raise UsageError(f"{where}: warmup_s must be in [0, seconds), got {e['warmup_s']!r}")
    return e


def apply_flags(spec: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """Replace fields of every sweep entry with the values given on the command line."""
    spec = copy.deepcopy(spec)
    mapping = {
        "queries": "query", "parallelism": "parallelism", "buffer_timeouts_ms": "buffer_timeouts_ms",
        "checkpointing": "checkpointing", "backends": "backend", "rates": "rates", "fractions": "fractions",
        "seconds": "seconds", "latency_repeats": "latency_repeats",
    }  # fmt: skip
    for flag, field_name in mapping.items():
        value = flags.get(flag)
        if value in (None, (), []):
            continue
        for entry in spec["sweeps"]:
            entry[field_name] = list(value) if isinstance(value, (list, tuple)) else value
            if field_name == "query":
                entry["dataset"] = None
            if field_name == "rates" and not flags.get("fractions"):
                entry["fractions"] = []
    if flags.get("events"):
        for ds in spec["datasets"].values():
            ds["events"] = int(flags["events"])
    return validate_spec(spec, "command line")


def dataset_dir(data_root: Path, ds: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(ds, sort_keys=True).encode()).hexdigest()[:10]
    return data_root / f"{ds['generator']}-{digest}"


@dataclass
class Planned:
    kind: str  # "correctness" or "sweep"
    dataset: str
    config: RunConfig
    entry: dict[str, Any]


def plan(spec: dict[str, Any]) -> Iterator[Planned]:
    def datasets_for(entry: dict[str, Any], query: str) -> list[str]:
        if entry["dataset"]:
            return list(entry["dataset"])
        workload = get_query(query).workload
        return [n for n, d in spec["datasets"].items() if d["generator"] == workload][:1]

    for entry in spec["correctness"]:
        for query in entry["query"]:
            for ds in datasets_for(entry, query):
                for p, mode, backend in product(
                    entry["parallelism"], entry["checkpointing"], entry["backend"]
                ):
                    config = RunConfig(
                        query, p, entry["buffer_timeout_ms"], mode, backend, entry["checkpoint_interval_ms"]
                    )
                    yield Planned("correctness", ds, config, entry)
    for entry in spec["sweeps"]:
        for query in entry["query"]:
            for ds in datasets_for(entry, query):
                for p, mode, backend, timeout in product(
                    entry["parallelism"],
                    entry["checkpointing"],
                    entry["backend"],
                    entry["buffer_timeouts_ms"],
                ):
                    config = RunConfig(query, p, timeout, mode, backend, entry["checkpoint_interval_ms"])
                    yield Planned("sweep", ds, config, entry)


def count_steps(spec: dict[str, Any]) -> int:
    steps = len(spec["datasets"]) + 1  # data sets, warm-up
    for item in plan(spec):
        entry = item.entry
        if item.kind == "correctness":
            steps += 1
        else:
            steps += entry["throughput_repeats"] + entry["latency_repeats"] * (
                len(entry["fractions"]) + len(entry["rates"])
            )
    return steps


def prepare_datasets(
    spec: dict[str, Any], data_root: Path, master: str, reporter: Reporter
) -> dict[str, DataSet]:
    from weir.workloads.generate import ensure_dataset, make_params

    out: dict[str, DataSet] = {}
    for name, ds in spec["datasets"].items():
        options = {k: v for k, v in ds.items() if k not in ("generator", "events", "seed")}
        params = make_params(ds["generator"], ds["events"], ds.get("seed", 0), **options)
        directory = dataset_dir(data_root, ds)
        reporter.advance(f"data set {name}: {ds['generator']}, {ds['events']:,} events")
        manifest = ensure_dataset(ds["generator"], params, directory, master, reporter.progress())
        how = f"generated with Spark in {manifest['_seconds']:.0f} s" if "_seconds" in manifest else "reused"
        reporter.log(f"data set {name}: {how}: {directory}")
        out[name] = DataSet(directory)
    return out


def run_spec(
    spec: dict[str, Any],
    data_root: Path,
    reporter: Reporter | None = None,
    master: str = "local[*]",
    steadiness_seconds: float = STEADINESS_SECONDS,
) -> dict[str, Any]:
    """Run every part of ``spec``; returns the report dictionary (without machine details).
    The machine's steadiness is probed for ``steadiness_seconds`` before and after the runs."""
    reporter = reporter or QuietReporter()
    reporter.start(count_steps(spec))
    started = time.monotonic()
    load_start = _load_average()
    datasets = prepare_datasets(spec, data_root, master, reporter)

    reporter.advance("warm-up run (kernels, imports)")
    first = next(iter(datasets.values()))
    warm_query = "keyed-shuffle" if first.generator == "keyed" else "q0"
    run_sync(first, RunConfig(warm_query, 2, 100), seconds=0.5)
    steady_start = steadiness.probe(steadiness_seconds)
    reporter.log(f"machine steadiness at the start: {steadiness.describe(steady_start)}")

    correctness: list[dict[str, Any]] = []
    configurations: dict[str, dict[str, Any]] = {}
    groups: dict[tuple[int, str], list[Planned]] = {}  # a sweep entry's combinations on one data set
    for item in plan(spec):
        if item.kind == "sweep":
            groups.setdefault((id(item.entry), item.dataset), []).append(item)
            continue
        ds = datasets[item.dataset]
        config = item.config
        reporter.advance(f"check {config.key} on {item.dataset}")
        result = run_sync(ds, config, collect=True)
        verdict = compare_with_expected(ds, config.query, result.rows)
        verdict.update(
            dataset=item.dataset, config=config.to_json(), key=config.key,
            checkpoints_completed=result.checkpoints_completed,
            restarts=result.restarts,
            throughput=result.throughput,
        )  # fmt: skip
        correctness.append(verdict)
        reporter.log(
            f"{'match' if verdict['matches'] else 'MISMATCH'}: {config.key} on {item.dataset} "
            f"({verdict['rows_got']:,} rows, {result.checkpoints_completed} checkpoints, "
            f"{result.restarts} restarts)"
        )
    for items in groups.values():
        entry = items[0].entry
        ds = datasets[items[0].dataset]
        attempts: list[list[RunResult]] = [[] for _ in items]
        repeats = entry["throughput_repeats"]
        for attempt in range(repeats):
            for item, tries in zip(items, attempts):
                reporter.advance(f"max throughput ({attempt + 1}/{repeats}): {item.config.key}")
                tries.append(
                    run_sync(ds, item.config, seconds=entry["throughput_seconds"], warmup_s=entry["warmup_s"])
                )
        for item, tries in zip(items, attempts):
            configurations[item.config.key] = _open_loop(ds, item, tries, reporter)
    steady_end = steadiness.probe(steadiness_seconds)
    reporter.log(f"machine steadiness at the end: {steadiness.describe(steady_end)}")
    return {
        "suite": spec["suite"],
        "spec": spec,
        "datasets": {
            name: {
                "directory": str(ds.directory),
                "generator": ds.generator,
                "parameters": ds.params,
                "seed": ds.manifest["seed"],
                "checksum": ds.manifest["checksum"],
                "rows": {t: info["rows"] for t, info in ds.manifest["tables"].items()},
            }
            for name, ds in datasets.items()
        },
        "correctness": correctness,
        "configurations": list(configurations.values()),
        "seconds": time.monotonic() - started,
        "load_average": {"start": load_start, "end": _load_average()},
        "steadiness": {"start": steady_start, "end": steady_end},
    }


def _open_loop(ds: DataSet, item: Planned, attempts: list[RunResult], reporter: Reporter) -> dict[str, Any]:
    """Replay ``item``'s configuration open loop at its entry's fractions of the best of
    ``attempts`` (its max-throughput runs) and at its absolute rates; the configuration's
    part of the report."""
    config, entry = item.config, item.entry
    top = max(attempts, key=lambda r: r.throughput if r.error is None else -1.0)
    runs: list[RunResult] = [top]
    errors: list[str] = []
    if top.error is not None:  # no fraction of a maximum nobody measured is run
        errors.append(f"{config.key}: max throughput: {top.error}")
        reporter.log(f"{config.key}: max throughput NOT MEASURED: {top.error}")
    else:
        reporter.log(f"{config.key}: max {top.throughput:,.0f} records/s")
    fractions_of_max = entry["fractions"] if top.error is None else []
    targets = [(f, f * top.throughput) for f in fractions_of_max] + [(None, r) for r in entry["rates"]]
    fractions: list[float | None] = []
    repeats: list[list[RunResult]] = []
    n = entry["latency_repeats"]
    for fraction, rate in targets:
        label = f"{fraction:.0%} of max" if fraction is not None else f"{rate:,.0f} records/s"
        if rate <= 0:
            continue
        tries = []
        for attempt in range(n):
            reporter.advance(
                f"open loop {label}" + (f" ({attempt + 1}/{n})" if n > 1 else "") + f": {config.key}"
            )
            tries.append(
                run_sync(
                    ds,
                    config,
                    rate=rate,
                    seconds=entry["seconds"],
                    warmup_s=entry["warmup_s"],
                    batch_wait_ms=entry["batch_wait_ms"],
                )
            )
        for t in tries:
            if t.error is not None:
                errors.append(f"{config.key}: open loop {label}: {t.error}")
                reporter.log(f"  {label}: NOT MEASURED: {t.error}")
        tries = [t for t in tries if t.error is None]  # only measured runs stand for the rate
        if not tries:
            continue
        r = median_run(tries)
        runs.append(r)
        fractions.append(fraction)
        repeats.append(tries)
        p = r.latency.percentiles_us()
        spread = ""
        if len(tries) > 1:
            p99s = ", ".join(
                f"{t.latency.percentiles_us()['p99'] / 1000:.1f} ms ({steadiness.loop_label(t.host)})"
                for t in tries
            )
            spread = f" (median of {len(tries)} runs; p99 of each, with the host probe's median loop: {p99s})"
        elif r.host is not None:
            spread = f" (host probe: {steadiness.loop_label(r.host)})"
        reporter.log(
            f"  {label}: {r.throughput:,.0f}/{rate:,.0f} records/s "
            f"{'sustained' if r.sustained else 'NOT sustained'}, p50 {p['p50'] / 1000:.1f} ms, "
            f"p99 {p['p99'] / 1000:.1f} ms{spread}"
        )
    return {
        "key": config.key,
        "group": config.group,
        "config": config.to_json(),
        "dataset": item.dataset,
        "record_level": get_query(config.query).record_level,
        "max_throughput": None if top.error is not None else top.throughput,
        "throughput_attempts": [None if r.error is not None else r.throughput for r in attempts],
        "throughput_attempts_host": [r.host for r in attempts],
        "max_sustained_rate": max(
            (
                r.target_rate
                for r in runs[1:]
                if r.sustained and r.error is None and r.target_rate is not None
            ),
            default=None,
        ),
        "errors": errors,
        "runs": [
            {
                **r.to_json(),
                "fraction": f,
                **({"repeats": [t.summary() for t in ts]} if len(ts) > 1 else {}),
            }
            for r, f, ts in zip(runs, [None, *fractions], [[top], *repeats])
        ],
    }


def median_run(runs: list[RunResult]) -> RunResult:
    """The run with the median p99 latency (of an even number, the higher of the middle two):
    the one that stands for a rate measured several times."""
    ordered = sorted(runs, key=lambda r: r.latency.percentiles_us()["p99"])
    return ordered[len(ordered) // 2]


def _load_average() -> list[float] | None:
    """The machine's 1/5/15-minute load averages: how shared it was while the suite ran."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None

"""The lab's commands: ``weir gen``, ``weir bench suite``, ``weir report``, ``weir compare``.

Parsing and printing only; the work is in ``weir.workloads`` and ``weir.harness``.
``weir.cli`` registers the commands (``register``) and builds ``weir bench suite`` from
``suite_options`` and ``run_bench_suite``. These commands need the ``bench`` extra
(PySpark, pyarrow, matplotlib, hdrhistogram, PyYAML): ``require_lab`` says so in one line
when it is missing. ``weir bench network``, ``state`` and ``checkpoint`` need only the engine.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from weir.errors import UsageError

SUITE_NAMES = ("run", "quick", "full")

#: import name -> distribution, of what the lab needs beyond the engine (the ``bench`` extra)
LAB_MODULES = {"pyspark": "pyspark", "pyarrow": "pyarrow", "matplotlib": "matplotlib",
               "hdrh": "hdrhistogram", "yaml": "pyyaml"}  # fmt: skip


def require_lab(command: str) -> None:
    """Raise ``UsageError`` naming the extra when a package of the lab is not installed."""
    import importlib.util

    missing = [dist for module, dist in LAB_MODULES.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise UsageError(
            f"`weir {command}` needs the benchmark lab, which is not installed (missing: {', '.join(missing)}); "
            "install it with: pip install 'weir[bench]'"
        )


# -- progress on a terminal --------------------------------------------------------------------
class _SparkProgress:
    """weir.workloads.generate.Progress on a rich task: one step per line, Spark tasks as the bar."""

    def __init__(self, progress: Any, task: Any) -> None:
        self.p = progress
        self.task = task

    def step(self, description: str) -> None:
        self.p.update(self.task, description=f"  spark: {description}", completed=0, total=None)

    def spark_tasks(self, done: int, total: int) -> None:
        self.p.update(self.task, completed=done, total=total)


class RichReporter:
    """weir.harness.sweep.Reporter drawing a rich progress bar on stderr."""

    def __init__(self, progress: Any) -> None:
        self.p = progress
        self.task: Any = None
        self.spark_task: Any = None
        self._started = False

    def start(self, total: int) -> None:
        self.task = self.p.add_task("starting", total=total)

    def advance(self, description: str) -> None:
        if self._started:
            self.p.advance(self.task)
        self._started = True
        self.p.update(self.task, description=description)

    def log(self, line: str) -> None:
        self.p.console.print(line, highlight=False)

    def progress(self) -> _SparkProgress:
        if self.spark_task is None:
            self.spark_task = self.p.add_task("  spark", total=None)
        return _SparkProgress(self.p, self.spark_task)

    def finish(self) -> None:
        if self.task is not None:
            self.p.update(self.task, completed=self.p.tasks[self.task].total, description="done")
        if self.spark_task is not None:
            self.p.update(self.spark_task, visible=False)


def _progress(console: Any) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=False,
    )  # fmt: skip


def _console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


# -- weir gen ----------------------------------------------------------------------------------
@click.command("gen")
@click.argument("generator", type=click.Choice(["keyed", "nexmark"]))
@click.option("--events", type=click.IntRange(min=1), required=True, help="Number of events to generate.")
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same bytes.")
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Data set directory."
)
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--keys", type=click.IntRange(min=1), help="keyed: number of keys (default 1000).")
@click.option(
    "--distribution", type=click.Choice(["uniform", "zipf"]), help="keyed: key skew (default uniform)."
)
@click.option(
    "--zipf-s", type=click.FloatRange(min=0, min_open=True), help="keyed: Zipf exponent (default 1.1)."
)
@click.option(
    "--event-rate", type=click.IntRange(min=1), help="Events per second of event time (default 10000)."
)
@click.option(
    "--disorder-ms", type=click.IntRange(min=0), help="Bounded disorder of event times (keyed default 2000)."
)
@click.option(
    "--payload-bytes", type=click.IntRange(min=0), help="keyed: payload size per event (default 0)."
)
@click.option(
    "--window-ms", type=click.IntRange(min=1), help="Tumbling window of the expected answers (default 10000)."
)
@click.option("--partitions", type=click.IntRange(min=0), help="Parquet files per table (default: by size).")
def gen(generator: str, events: int, seed: int, out: Path, master: str, **options: Any) -> None:
    """Generate a workload with PySpark: Parquet, Spark's expected answers, and a manifest."""
    require_lab("gen")
    from weir.workloads.generate import generate, make_params, steps_of

    chosen = {k: v for k, v in options.items() if v is not None}
    if generator == "nexmark":
        for keyed_only in ("keys", "distribution", "zipf_s", "payload_bytes"):
            if keyed_only in chosen:
                raise UsageError(f"--{keyed_only.replace('_', '-')} applies to the keyed generator only")
    params = make_params(generator, events, seed, **chosen)
    console = _console()
    with _progress(console) as progress:
        steps = progress.add_task(f"{generator}: starting Spark", total=steps_of(generator))
        spark_task = progress.add_task("  spark tasks", total=None)

        class Steps:
            first = True

            def step(self, description: str) -> None:
                if not self.first:
                    progress.advance(steps)
                self.first = False
                progress.update(steps, description=f"{generator}: {description}")
                progress.update(spark_task, completed=0, total=None)

            def spark_tasks(self, done: int, total: int) -> None:
                progress.update(spark_task, completed=done, total=total)

        manifest = generate(generator, params, out, master, Steps())
        progress.update(steps, completed=steps_of(generator), description=f"{generator}: done")
        progress.update(spark_task, visible=False)
    rows = ", ".join(f"{t} {info['rows']:,}" for t, info in manifest["tables"].items())
    click.echo(f"wrote {out}: {rows} rows; expected answers for {', '.join(manifest['expected'])}")
    click.echo(f"checksum {manifest['checksum']} ({manifest['_seconds']:.1f} s)")


# -- weir bench suite -------------------------------------------------------------------------
ENGINE_NAMES = ("weir", "flink", "spark")


def _suite_flags() -> list[Callable[..., Any]]:
    """The options ``weir bench suite`` and ``weir bench --suite`` share (all but the suite's name)."""
    return [
        click.option("--spec", type=click.Path(dir_okay=False, path_type=Path),
                     help="A sweep spec (YAML/JSON), or a report.json to re-run exactly."),
        click.option("--out", "results_root", type=click.Path(file_okay=False, path_type=Path), default=Path("results"),
                     show_default=True, help="Reports go to OUT/<date>-<suite>-<git sha>/."),
        click.option("--data", "data_root", type=click.Path(file_okay=False, path_type=Path), default=Path("data"),
                     show_default=True, help="Generated data sets (reused while intact)."),
        click.option("--master", default="local[*]", show_default=True, help="Spark master for generation."),
        click.option("--query", "queries", multiple=True, help="Repeatable: replace the sweeps' queries."),
        click.option("--parallelism", "parallelism", type=click.IntRange(min=1), multiple=True, help="Repeatable."),
        click.option("--buffer-timeout", "buffer_timeouts_ms", type=click.IntRange(min=-1), multiple=True,
                     help="Repeatable, ms (the seed's sweep: 0 1 5 10 50 100)."),
        click.option("--checkpointing", type=click.Choice(["off", "aligned", "unaligned"]), multiple=True,
                     help="Repeatable."),
        click.option("--backend", "backends", type=click.Choice(["heap", "lmdb"]), multiple=True, help="Repeatable."),
        click.option("--rate", "rates", type=click.FloatRange(min=0, min_open=True), multiple=True,
                     help="Repeatable: open-loop rates in records/s (instead of fractions of max)."),
        click.option("--fraction", "fractions", type=click.FloatRange(min=0, min_open=True), multiple=True,
                     help="Repeatable: open-loop rates as fractions of the measured max throughput."),
        click.option("--seconds", type=click.FloatRange(min=0, min_open=True), help="Length of each open-loop run."),
        click.option("--repeats", "latency_repeats", type=click.IntRange(min=1),
                     help="Runs of each open-loop rate; the one with the median p99 stands for it."),
        click.option("--events", type=click.IntRange(min=1), help="Events in every data set of the suite."),
        click.option("--note", help="A sentence the report states under its verdict (e.g. how busy the machine was)."),
        click.option("--engine", "engines", type=click.Choice(ENGINE_NAMES), multiple=True,
                     help="Repeatable (default weir): flink and spark run the correctness checks on Apache "
                          "Flink (PyFlink from $WEIR_FLINK_PYTHON or .venv-flink) and on Spark Structured "
                          "Streaming too, side by side in the report."),
    ]  # fmt: skip


def suite_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options of ``weir bench suite [NAME]``: a built-in sweep, or a spec, and overrides."""
    decorators = [click.argument("suite", required=False, type=click.Choice(SUITE_NAMES)), *_suite_flags()]
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


#: parameter names of the options the ``bench`` group forwards to the suite
GROUP_SUITE_PARAMS = ("suite", "spec", "results_root", "data_root", "master", "queries", "parallelism",
                      "buffer_timeouts_ms", "checkpointing", "backends", "rates", "fractions", "seconds",
                      "latency_repeats", "events", "note", "engines")  # fmt: skip


def group_suite_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The same options on the ``bench`` group, the suite named by ``--suite``: the spelling
    ``weir bench --suite quick --engine weir --engine flink`` runs what ``weir bench suite quick
    --engine weir --engine flink`` runs."""
    decorators = [
        click.option("--suite", "suite", type=click.Choice(SUITE_NAMES),
                     help="Run a built-in suite: `weir bench --suite quick` = `weir bench suite quick`."),
        *_suite_flags(),
    ]  # fmt: skip
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


def _command_line(options: dict[str, Any], group_form: bool = False) -> str:
    """The command as typed: ``weir bench suite NAME ...``, or with ``group_form`` ``weir bench --suite NAME ...``."""
    parts = ["weir", "bench"] if group_form else ["weir", "bench", "suite"]
    if options.get("suite") is not None:
        parts += ["--suite", options["suite"]] if group_form else [options["suite"]]
    for name, flag in (("spec", "--spec"), ("master", "--master"), ("seconds", "--seconds"),
                       ("latency_repeats", "--repeats"), ("events", "--events")):  # fmt: skip
        value = options.get(name)
        if value is not None and not (name == "master" and value == "local[*]"):
            parts += [flag, str(value)]
    for name, flag in (("queries", "--query"), ("parallelism", "--parallelism"),
                       ("buffer_timeouts_ms", "--buffer-timeout"), ("checkpointing", "--checkpointing"),
                       ("backends", "--backend"), ("rates", "--rate"), ("fractions", "--fraction")):  # fmt: skip
        for value in options.get(name) or ():
            parts += [flag, str(value)]
    if set(options.get("engines") or ()) - {"weir"}:
        for engine in options["engines"]:
            parts += ["--engine", engine]
    return " ".join(shlex.quote(p) for p in parts)


def run_bench_suite(group_form: bool = False, **options: Any) -> None:
    """``weir bench suite`` (or ``weir bench --suite``, ``group_form``): a sweep of a built-in
    suite or of a spec, its report and its verdict."""
    if (options.get("suite") is None) == (options.get("spec") is None):
        example = "weir bench --suite quick" if group_form else "weir bench suite quick"
        name = "--suite NAME" if group_form else "a suite"
        raise UsageError(
            f"give {name} ({', '.join(SUITE_NAMES)}) or --spec FILE, exactly one: e.g. `{example}`"
        )
    require_lab("bench suite")
    import datetime as _dt

    from weir.harness import report as rep
    from weir.harness import side_by_side
    from weir.harness.sweep import apply_flags, load_spec, run_spec, suite_spec

    spec = suite_spec(options["suite"]) if options.get("suite") else load_spec(options["spec"])
    spec = apply_flags(spec, options)
    engines = set(options.get("engines") or ()) or {"weir"}
    if "weir" not in engines:
        others = " ".join(f"--engine {e}" for e in sorted(engines))
        raise UsageError(f"the other engines run beside weir: give `--engine weir {others}`")
    if "flink" in engines:
        from weir.flink_bridge import flink_python

        flink_python()  # before anything runs: a missing PyFlink is one error naming the fix
    from weir.workloads.spark import check_java

    check_java()  # before anything runs: generation needs Spark
    console = _console()
    results_root: Path = options["results_root"]
    sha = rep.git_sha()
    with _progress(console) as progress:
        reporter = RichReporter(progress)
        report = run_spec(spec, options["data_root"], reporter, options["master"])
        engines_part = _engines(report, spec, options["data_root"], engines, reporter)
        reporter.finish()
    report = {
        "format": "weir-bench-report",
        "version": 1,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": _command_line(options, group_form),
        "git_sha": sha,
        "versions": rep.versions(),
        "machine": rep.machine(),
        **report,
        "engines": engines_part,
    }
    if options.get("note"):
        report["note"] = options["note"]
    directory = rep.write(report, rep.results_dir(results_root, spec["suite"], sha))
    ok, summary = rep.verdict(report)
    click.echo(f"correctness: {summary}")
    for name, label in side_by_side.ENGINES.items():
        part = engines_part.get(name)
        if not part:
            continue
        checks = part["correctness"]
        bad = [c["key"] for c in checks if not c.get("matches")]
        click.echo(
            f"{label} {part['version']}: {len(checks) - len(bad)} of {len(checks)} checks match Spark"
            + (f"; NOT: {', '.join(bad)}" if bad else "")
            + "".join(f"; weir only: {w['query']} ({w['reason']})" for w in part["weir_only"])
            + "".join(f"; not run: {w['query']} ({w['reason']})" for w in part.get("not_run", []))
        )
        headline = side_by_side.headline(report, name)
        if headline is not None:
            click.echo(f"headline: {side_by_side.describe_headline(headline)}")
        ok = ok and not bad
    errors = rep.measurement_errors(report)
    for error in errors:
        click.echo(f"measurement FAILED: {error}")
    for t in rep.targets(report):
        click.echo(
            f"target {'met' if t['met'] else 'NOT met'}: {t['target']} [{t['group']}]: {rep.target_value(t)}"
        )
    click.echo(f"report: {directory / rep.REPORT_MD} (plots and report.json next to it)")
    if not ok or errors:
        sys.exit(1)


def _engines(
    report: dict[str, Any], spec: dict[str, Any], data_root: Path, engines: set[str], reporter: Any
) -> dict[str, Any]:
    """The report's ``engines`` part: weir's version and start-up, and with ``flink`` / ``spark`` the
    suite's correctness runs on Apache Flink (weir.harness.flink_engine) / Spark Structured
    Streaming (weir.harness.spark_engine)."""
    from weir.harness import flink_engine
    from weir.harness.runner import DataSet, RunConfig
    from weir.harness.sweep import dataset_dir

    part: dict[str, Any] = {
        "weir": {"engine": "weir", "version": report_version(), "startup_s": flink_engine.weir_startup_s()}
    }
    runs = []
    for c in report["correctness"]:
        ds = DataSet(dataset_dir(data_root, spec["datasets"][c["dataset"]]))
        runs.append((c["dataset"], ds, RunConfig(**c["config"])))
    if "flink" in engines:
        reporter.advance("Apache Flink: the correctness checks on Flink")
        part["flink"] = flink_engine.run_on_flink(runs, reporter.log)
    if "spark" in engines:
        from weir.harness import spark_engine

        reporter.advance("Spark Structured Streaming: the correctness checks on Spark")
        part["spark"] = spark_engine.run_on_spark(runs, reporter.log)
    return part


def report_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("weir")
    except metadata.PackageNotFoundError:
        return "unknown"


# -- weir report / weir compare --------------------------------------------------------------------
@click.command("report")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
def report_cmd(directory: Path) -> None:
    """Rebuild report.md and the plots of DIRECTORY from its report.json."""
    require_lab("report")
    from weir.harness import report as rep

    for path in rep.render(directory):
        click.echo(f"wrote {path}")


@click.command("compare")
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path))
def compare_cmd(a: Path, b: Path) -> None:
    """Ratios B/A of two reports, configuration by configuration (throughput up is better, latency down)."""
    require_lab("compare")
    from rich.console import Console
    from rich.table import Table

    from weir.harness import report as rep

    ra, rb = rep.load(a), rep.load(b)
    rows = rep.compare(ra, rb)
    if not rows:
        raise UsageError(f"reports {a} and {b} have no configuration in common; nothing to compare")
    table = Table(title=f"B/A: {b} over {a}")
    for column in (
        "configuration",
        "max rec/s A",
        "max rec/s B",
        "throughput B/A",
        "p50 B/A by load",
        "p99 B/A by load",
    ):
        table.add_column(column)

    def fmt(x: float | None) -> str:
        return "–" if x is None else f"{x:.2f}"

    for r in rows:
        p50 = ", ".join(f"{load['fraction']:.0%}: {fmt(load['p50_ratio'])}" for load in r["loads"])
        p99 = ", ".join(f"{load['fraction']:.0%}: {fmt(load['p99_ratio'])}" for load in r["loads"])
        table.add_row(r["key"], rep._rate(r["max_throughput_a"]), rep._rate(r["max_throughput_b"]),
                      fmt(r["throughput_ratio"]), p50, p99)  # fmt: skip
    Console(width=200).print(table)
    # latency ratios between reports taken in unlike hours say more about the hours
    click.echo(f"host, A: {rep.describe_host(ra)}")
    click.echo(f"host, B: {rep.describe_host(rb)}")
    only_a, only_b = rep.only_in(ra, rb)
    for name, keys in (("A", only_a), ("B", only_b)):
        if keys:
            click.echo(f"only in {name}: {', '.join(keys)}")


def register(main: click.Group) -> None:
    main.add_command(gen)
    main.add_command(report_cmd)
    main.add_command(compare_cmd)

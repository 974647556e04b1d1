"""Reports from real (MockClock) runs: report.json → report.md and plots, `weir report`,
`weir compare`, the sweep spec, and the CLI's errors."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio.testing
from click.testing import CliRunner

from weir.cli import main
from weir.errors import UsageError
from weir.harness import report as rep
from weir.harness import sweep
from weir.harness.latency import LatencyHistogram
from weir.harness.runner import DataSet, Run, RunConfig, RunResult
from weir.harness.sweep import apply_flags, count_steps, load_spec, plan, suite_spec
from weir.workloads.testing import keyed_rows_dataset


async def _configuration(ds: DataSet, timeout_ms: int) -> dict[str, Any]:
    config = RunConfig("keyed-shuffle", 2, timeout_ms)
    top = Run(ds, config, seconds=5, warmup_s=0.05)
    await top.execute_async()
    half = Run(ds, config, rate=400.0, seconds=5, warmup_s=0.1, batch_wait_ms=0)
    await half.execute_async()
    runs = [{**top.summarise().to_json(), "fraction": None}, {**half.summarise().to_json(), "fraction": 0.5}]
    return {"key": config.key, "group": config.group, "config": config.to_json(), "dataset": "keyed",
            "record_level": True, "max_throughput": 800.0 if timeout_ms == 1 else 1000.0, "runs": runs}  # fmt: skip


@pytest.fixture(scope="module")
def made_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One report from real runs under MockClock (throughput, and open loop at 400 rec/s)."""
    tmp_path = tmp_path_factory.mktemp("report")
    directory = keyed_rows_dataset(tmp_path / "keyed", [(f"k{i % 3}", i, i) for i in range(200)])
    ds = DataSet(directory)

    async def both() -> list[dict[str, Any]]:
        return [await _configuration(ds, 1), await _configuration(ds, 100)]

    configurations = trio.run(both, clock=trio.testing.MockClock(autojump_threshold=0))
    report = {
        "format": "weir-bench-report", "version": 1, "suite": "quick", "created": "2026-01-01T00:00:00+00:00",
        "command": "weir bench suite quick", "git_sha": "abc1234",
        "versions": rep.versions(), "machine": rep.machine(), "seconds": 1.0,
        "spec": suite_spec("quick"),
        "datasets": {"keyed": {"directory": str(directory), "generator": "keyed", "parameters": ds.params,
                               "seed": 0, "checksum": ds.manifest["checksum"], "rows": {"events": 200}}},
        "correctness": [{"query": "keyed-window", "dataset": "keyed", "key": "keyed-window p2", "matches": True,
                         "rows_expected": 3, "rows_got": 3, "missing": 0, "unexpected": 0,
                         "config": RunConfig("keyed-window").to_json(), "checkpoints_completed": 2}],
        "configurations": configurations,
    }  # fmt: skip
    return rep.write(report, tmp_path / "results" / "r1")


@pytest.fixture
def report_dir(made_report: Path, tmp_path: Path) -> Path:
    """A private copy: tests may change it."""
    copy = tmp_path / "r1"
    shutil.copytree(made_report, copy)
    return copy


def test_the_report_has_json_markdown_and_plots(report_dir: Path) -> None:
    for name in (rep.REPORT_JSON, rep.REPORT_MD, rep.LATENCY_PLOT, rep.THROUGHPUT_PLOT):
        assert (report_dir / name).stat().st_size > 0
    md = (report_dir / rep.REPORT_MD).read_text().splitlines()
    assert md[0] == "# weir benchmark report: quick suite"
    assert md[2] == "**Correctness: all 1 outputs match Spark's expected answers.**"
    assert "`weir bench suite quick`" in md[4] and "`abc1234`" in md[4]
    text = "\n".join(md)
    assert "| keyed-shuffle p2 checkpoints=off state=heap | 1 | 800 |" in text
    report = rep.load(report_dir)
    run = report["configurations"][0]["runs"][1]
    assert run["sustained"] is True and run["latency_us"]["p99"] <= 1002
    assert LatencyHistogram.decode(run["latency_hdr"]).total_count == run["records_measured"] > 0
    goals = {t["unit"]: t for t in rep.targets(report)}
    assert goals["ratio"]["value"] == pytest.approx(0.8) and goals["ratio"]["met"] is False
    assert goals["ms"]["met"] is True


def test_a_failed_check_is_the_first_thing_the_report_says(report_dir: Path) -> None:
    report = rep.load(report_dir)
    report["correctness"][0].update(matches=False, missing=1)
    ok, summary = rep.verdict(report)
    assert not ok and "DO NOT match" in summary
    assert rep.markdown(report).splitlines()[2].startswith("**Correctness: FAILED.")


def test_weir_report_rebuilds_markdown_and_plots(report_dir: Path) -> None:
    before = (report_dir / rep.REPORT_MD).read_text()
    for name in (rep.REPORT_MD, rep.LATENCY_PLOT, rep.THROUGHPUT_PLOT):
        (report_dir / name).unlink()
    result = CliRunner().invoke(main, ["report", str(report_dir)])
    assert result.exit_code == 0, result.output
    assert (report_dir / rep.REPORT_MD).read_text() == before
    assert (report_dir / rep.LATENCY_PLOT).exists() and (report_dir / rep.THROUGHPUT_PLOT).exists()


def test_weir_compare_prints_ratios_per_configuration(report_dir: Path, tmp_path: Path) -> None:
    report = rep.load(report_dir)
    for c in report["configurations"]:
        c["max_throughput"] *= 2
    other = tmp_path / "r2"
    other.mkdir()
    (other / rep.REPORT_JSON).write_text(json.dumps(report))
    rows = rep.compare(rep.load(report_dir), report)
    assert [r["throughput_ratio"] for r in rows] == [2.0, 2.0]
    assert all(load["p99_ratio"] == 1.0 for r in rows for load in r["loads"])
    result = CliRunner().invoke(main, ["compare", str(report_dir), str(other)])
    assert result.exit_code == 0, result.output
    assert "2.00" in result.output and "timeout=1ms" in result.output
    # each report's host, so that ratios between unlike hours are not taken for the engine's
    assert "host, A: " in result.output and "host, B: " in result.output
    assert "windows slow (calmest run " in result.output


def test_weir_bench_has_one_grammar_a_subcommand_each(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["bench", "--help"])
    assert result.exit_code == 0
    assert all(name in result.output for name in ("suite", "network", "state", "checkpoint"))
    assert "--suite [run|quick|full]" in result.output  # issue 28's spelling: `weir bench --suite quick`
    assert runner.invoke(main, ["bench", "network", "--help"]).exit_code == 0
    neither = runner.invoke(main, ["bench", "suite"])
    assert neither.exit_code == 2 and "give a suite (run, quick, full) or --spec FILE" in neither.output
    no_suite = runner.invoke(main, ["bench", "--engine", "weir"])
    assert (
        no_suite.exit_code == 2 and "give --suite NAME (run, quick, full) or --spec FILE" in no_suite.output
    )
    both = runner.invoke(main, ["bench", "--suite", "quick", "--spec", "x.json"])
    assert both.exit_code == 2 and "exactly one" in both.output
    # the suite's options before another subcommand are refused, naming both right spellings
    misplaced = runner.invoke(main, ["bench", "--engine", "flink", "network"])
    assert misplaced.exit_code == 2
    assert "--engine is an option of the suite, not of `weir bench network`" in misplaced.output
    assert "`weir bench --suite NAME --engine ...`" in misplaced.output


def test_the_lab_commands_name_the_extra_when_it_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else find_spec(name, *a)
    )
    for args in (
        ["bench", "suite", "quick"],
        ["gen", "keyed", "--events", "1", "--out", "x"],
        ["report", "."],
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, result.output
        assert "needs the benchmark lab" in result.output and "pip install 'weir[bench]'" in result.output
        assert "missing: pyspark" in result.output


def test_weir_gen_without_java_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    result = CliRunner().invoke(
        main, ["gen", "keyed", "--events", "10", "--seed", "1", "--out", str(tmp_path / "d")]
    )
    assert result.exit_code == 2
    assert "Java not found" in result.output and "openjdk-17" in result.output


def test_sweep_specs_expand_and_reject_mistakes(tmp_path: Path) -> None:
    quick = suite_spec("quick")
    points = list(plan(quick))
    sweeps = [p for p in points if p.kind == "sweep"]
    assert {p.config.buffer_timeout_ms for p in sweeps if p.config.query == "keyed-shuffle"} == {
        0,
        1,
        5,
        10,
        50,
        100,
    }
    assert count_steps(quick) > len(points)
    flagged = apply_flags(
        quick, {"buffer_timeouts_ms": (1, 100), "checkpointing": ("unaligned",), "rates": (5000.0,)}
    )
    assert {
        (p.config.buffer_timeout_ms, p.config.checkpointing) for p in plan(flagged) if p.kind == "sweep"
    } == {(1, "unaligned"), (100, "unaligned")}
    assert all(e["fractions"] == [] and e["rates"] == [5000.0] for e in flagged["sweeps"])
    assert {e["latency_repeats"] for e in apply_flags(quick, {"latency_repeats": 5})["sweeps"]} == {5}
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text("datasets:\n  k: {generator: keyed, events: 1000}\nsweeps:\n  - {query: q1}\n")
    with pytest.raises(UsageError, match="needs a nexmark data set"):
        load_spec(spec_file)
    spec_file.write_text(
        "datasets:\n  k: {generator: keyed, events: 1000}\nsweeps:\n  - {query: keyed-window, backend: rocks}\n"
    )
    with pytest.raises(UsageError, match="backend must be one of"):
        load_spec(spec_file)
    spec_file.write_text("datasets:\n  k: {generator: keyed, events: 1000, skew: 2}\n")
    with pytest.raises(UsageError, match="no option"):
        load_spec(spec_file)
    with pytest.raises(UsageError, match="unknown suite"):
        suite_spec("huge")


def test_results_directories_never_overwrite(tmp_path: Path) -> None:
    day = dt.date(2026, 1, 2)
    first = rep.results_dir(tmp_path, "quick", "abc1234", day)
    assert first.name == "2026-01-02-quick-abc1234"
    first.mkdir()
    assert rep.results_dir(tmp_path, "quick", "abc1234", day).name == "2026-01-02-quick-abc1234-2"


def _result(config: RunConfig, p99_ms: float, rate: float | None) -> RunResult:
    latency = LatencyHistogram()
    latency.record_array([1000] * 99 + [int(p99_ms * 1000)] * 2)
    return RunResult(
        config=config, mode="rate" if rate else "throughput", target_rate=rate, records_emitted=100,
        records_measured=100, records_out=100, throughput=rate or 1000.0, sustained=True if rate else None,
        seconds=1.0, latency=latency, lag=LatencyHistogram(), trend=[], max_source_behind_ms=0.0,
        checkpoints_completed=0, records_after_warmup=100,
    )  # fmt: skip


def test_a_rate_run_several_times_is_stood_for_by_its_median_p99_run(
    made_report: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p99s = iter([30.0, 4.0, 9.0])  # the repeats of the one open-loop rate, in the order they run
    calls: list[float | None] = []

    def fake_run_sync(ds: Any, config: RunConfig, rate: float | None = None, **_: Any) -> RunResult:
        calls.append(rate)
        return _result(config, next(p99s) if rate else 1.0, rate)

    ds = DataSet(json.loads((made_report / "report.json").read_text())["datasets"]["keyed"]["directory"])
    monkeypatch.setattr(sweep, "prepare_datasets", lambda *a, **k: {"keyed": ds})
    monkeypatch.setattr(sweep, "run_sync", fake_run_sync)
    spec = sweep.validate_spec(
        {"datasets": {"keyed": {"generator": "keyed", "events": 200}}, "correctness": [],
         "sweeps": [{"query": "keyed-shuffle", "buffer_timeouts_ms": [1], "fractions": [0.5],
                     "throughput_repeats": 1, "latency_repeats": 3}]},
        "test",
    )  # fmt: skip
    assert sweep.count_steps(spec) == 1 + 1 + 1 + 3  # data set, warm-up, throughput, 3 repeats
    out = sweep.run_spec(spec, Path("unused"), steadiness_seconds=0.05)
    (configuration,) = out["configurations"]
    half = configuration["runs"][1]
    assert calls == [None, None, 500.0, 500.0, 500.0]  # warm-up, max throughput, three repeats
    assert half["latency_us"]["p99"] == pytest.approx(9000, rel=0.01)  # the median of 30, 4 and 9 ms
    assert [round(r["latency_us"]["p99"] / 1000) for r in half["repeats"]] == [30, 4, 9]
    md = rep.markdown(
        {**json.loads((made_report / "report.json").read_text()), "configurations": [configuration]}
    )
    assert "(median of 3 runs)" in md
    assert " / ".join(rep._ms(r["latency_us"]["p99"]) for r in half["repeats"]) in md
    with pytest.raises(UsageError, match="latency_repeats must be a positive integer"):
        sweep.validate_spec(
            {"datasets": {"keyed": {"generator": "keyed", "events": 200}},
             "sweeps": [{"query": "keyed-shuffle", "latency_repeats": 0}]},
            "test",
        )  # fmt: skip


def test_the_max_throughput_attempts_of_a_sweep_take_turns(
    made_report: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the machine slows down while the sweep runs: one configuration measured after the
    # other would carry the slowdown into the ratio of their maxima
    speeds = iter([1000.0, 900.0, 800.0, 700.0])
    calls: list[tuple[int, float | None]] = []

    def fake_run_sync(ds: Any, config: RunConfig, rate: float | None = None, **_: Any) -> RunResult:
        calls.append((config.buffer_timeout_ms, rate))
        result = _result(config, 2.0, rate)
        if rate is None and len(calls) > 1:  # not the warm-up
            result.throughput = next(speeds)
        return result

    ds = DataSet(json.loads((made_report / "report.json").read_text())["datasets"]["keyed"]["directory"])
    monkeypatch.setattr(sweep, "prepare_datasets", lambda *a, **k: {"keyed": ds})
    monkeypatch.setattr(sweep, "run_sync", fake_run_sync)
    spec = sweep.validate_spec(
        {"datasets": {"keyed": {"generator": "keyed", "events": 200}}, "correctness": [],
         "sweeps": [{"query": "keyed-shuffle", "buffer_timeouts_ms": [1, 100], "fractions": [0.5],
                     "throughput_repeats": 2, "latency_repeats": 1}]},
        "test",
    )  # fmt: skip
    assert sweep.count_steps(spec) == 1 + 1 + 2 * (2 + 1)
    out = sweep.run_spec(spec, Path("unused"), steadiness_seconds=0.05)
    assert calls == [
        (100, None),  # warm-up
        (1, None), (100, None), (1, None), (100, None),  # the attempts, in turns
        (1, 500.0), (100, 450.0),  # half of each one's best: 1,000 and 900
    ]  # fmt: skip
    maxima = {c["config"]["buffer_timeout_ms"]: c for c in out["configurations"]}
    assert maxima[1]["throughput_attempts"] == [1000.0, 800.0]
    assert maxima[100]["throughput_attempts"] == [900.0, 700.0]
    assert [c["max_throughput"] for c in out["configurations"]] == [1000.0, 900.0]
    # the machine's steadiness, probed before and after the runs
    assert out["steadiness"]["start"]["loop_us"] > 0 and out["steadiness"]["end"]["loop_us"] > 0


def test_a_run_that_measured_nothing_fails_the_report_and_the_command(
    made_report: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the max-throughput run at 100 ms ends with nothing after its warm-up (a data set eaten
    # within it, before runs lapped): no figure for it, no fraction of it run, and a failure
    calls: list[tuple[int, float | None]] = []

    def fake_run_sync(ds: Any, config: RunConfig, rate: float | None = None, **_: Any) -> RunResult:
        calls.append((config.buffer_timeout_ms, rate))
        result = _result(config, 2.0, rate)
        if config.buffer_timeout_ms == 100 and len(calls) > 1:  # not the warm-up
            result.records_after_warmup, result.throughput = 0, 0.0
        return result

    ds = DataSet(json.loads((made_report / "report.json").read_text())["datasets"]["keyed"]["directory"])
    monkeypatch.setattr(sweep, "prepare_datasets", lambda *a, **k: {"keyed": ds})
    monkeypatch.setattr(sweep, "run_sync", fake_run_sync)
    run_spec = sweep.run_spec
    monkeypatch.setattr(sweep, "run_spec", lambda *a, **k: run_spec(*a, **k, steadiness_seconds=0.05))
    monkeypatch.setattr("weir.workloads.spark.check_java", lambda: None)
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(
        "datasets:\n  keyed: {generator: keyed, events: 200}\n"
        "sweeps:\n  - {query: keyed-shuffle, buffer_timeouts_ms: [1, 100], fractions: [0.5], throughput_repeats: 1}\n"
    )
    result = CliRunner().invoke(
        main,
        [
            "bench",
            "suite",
            "--spec",
            str(spec_file),
            "--out",
            str(tmp_path / "results"),
            "--data",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 1, result.output
    assert "measurement FAILED: keyed-shuffle p2 timeout=100ms" in result.output
    assert "max throughput: measured nothing" in result.output
    assert (100, 0.0) not in calls and (1, 500.0) in calls  # no open loop at a fraction of nothing
    (directory,) = (tmp_path / "results").iterdir()
    report = json.loads((directory / "report.json").read_text())
    by_timeout = {c["config"]["buffer_timeout_ms"]: c for c in report["configurations"]}
    assert by_timeout[100]["max_throughput"] is None and by_timeout[100]["throughput_attempts"] == [None]
    assert by_timeout[1]["errors"] == [] and by_timeout[1]["max_throughput"] == 1000.0
    md = (directory / "report.md").read_text()
    assert "**Measurement: FAILED. 1 run(s) measured nothing" in md
    assert "| keyed-shuffle p2 checkpoints=off state=heap | 100 | not measured | not measured |" in md
    assert not any(t["target"].startswith("max throughput at 1 ms") for t in rep.targets(report))

"""`weir bench --suite NAME` / `--spec FILE`: issue 28's spelling runs the suite `weir bench suite` runs.

A real suite (correctness checks only, on a small Spark-generated data set shared with the
other harness tests) through the group's options; the report records the command in the
spelling it was given, so that its "Reproduce with" line is what the user typed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from weir.cli import main
from weir.harness.sweep import dataset_dir
from weir.workloads.testing import SMALL_KEYED_UNIFORM

DATASET = {"generator": "keyed", **{k: v for k, v in SMALL_KEYED_UNIFORM.items() if k != "kind"}}
SPEC = {
    "suite": "group-form",
    "datasets": {"keyed": DATASET},
    "correctness": [{"query": "keyed-window", "dataset": "keyed", "parallelism": [2]}],
    # one short max-throughput run: what the command-line flags replace is in the sweeps
    "sweeps": [{"query": "keyed-shuffle", "dataset": "keyed", "parallelism": [1], "fractions": [],
                "throughput_repeats": 1, "throughput_seconds": 0.5, "warmup_s": 0.1, "seconds": 0.5}],
}  # fmt: skip


@pytest.mark.slow  # a whole suite run (about 15 s); the spelling alone is checked below
def test_the_group_spelling_runs_the_suite_and_records_itself(tmp_path: Path, keyed_uniform: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(keyed_uniform, dataset_dir(data, DATASET))  # the same parameters: reused, not generated
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    out = tmp_path / "results"
    args = ["bench", "--spec", str(spec), "--out", str(out), "--data", str(data), "--buffer-timeout", "7",
            "--note", "The machine was shared."]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "correctness: " in result.output and "report: " in result.output
    [directory] = out.iterdir()
    report = json.loads((directory / "report.json").read_text())
    assert [c["query"] for c in report["correctness"]] == ["keyed-window"]
    assert report["correctness"][0]["matches"] and report["correctness"][0]["rows_got"] > 0
    # --buffer-timeout reached the suite's sweep, and the run measured something
    [configuration] = report["configurations"]
    assert configuration["config"]["buffer_timeout_ms"] == 7 and configuration["max_throughput"] > 0
    assert report["command"] == f"weir bench --spec {spec} --buffer-timeout 7"
    markdown = (directory / "report.md").read_text()
    assert f"Reproduce with `weir bench --spec {spec} --buffer-timeout 7`" in markdown
    assert report["note"] == "The machine was shared." and "\nNote: The machine was shared.\n" in markdown


def test_the_issue_spelling_is_recorded_as_given() -> None:
    from weir.cli_harness import _command_line

    options = {"suite": "quick", "engines": ("weir", "flink")}
    assert _command_line(options, group_form=True) == "weir bench --suite quick --engine weir --engine flink"
    assert _command_line(options) == "weir bench suite quick --engine weir --engine flink"

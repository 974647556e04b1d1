"""`weir bench suite --engine weir --engine flink`: one report with both engines' verdicts.

A tiny suite (a few thousand Spark-generated events) runs its correctness checks on weir
and on Apache Flink; the report must hold both engines with versions and start-up times,
Flink's verdict against Spark for each query it can run, and the weir.columnar query
listed as weir-only with its reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from weir.cli import main

pytestmark = [pytest.mark.flink, pytest.mark.timeout(1800)]  # PyFlink starts JVMs

SPEC = {
    "datasets": {"keyed": {"generator": "keyed", "events": 3000, "seed": 3, "keys": 20}},
    "correctness": [
        {"query": ["keyed-window", "keyed-window-columnar"], "dataset": "keyed", "parallelism": [1]},
        {"query": "keyed-shuffle", "dataset": "keyed", "parallelism": [2]},
    ],
    "sweeps": [],
}


def test_a_suite_on_both_engines_writes_one_report_with_each_verdict(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"suite": "two-engines", **SPEC}))
    result = CliRunner().invoke(
        main,
        ["bench", "suite", "--spec", str(spec), "--out", str(tmp_path / "results"),
         "--data", str(tmp_path / "data"), "--engine", "weir", "--engine", "flink"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "Apache Flink 2." in result.output and "2 of 2 checks match Spark" in result.output
    [directory] = (tmp_path / "results").iterdir()
    report = json.loads((directory / "report.json").read_text())
    engines = report["engines"]
    assert engines["weir"]["startup_s"] > 0 and engines["flink"]["startup_s"] > 0
    assert engines["flink"]["version"].startswith("2.")
    flink = {c["key"]: c for c in engines["flink"]["correctness"]}
    assert sorted(c.split()[0] for c in flink) == ["keyed-shuffle", "keyed-window"]
    for check in flink.values():
        assert check["matches"] and check["rows_got"] == check["rows_expected"] > 0
        assert check["throughput"] > 0
    assert engines["flink"]["weir_only"] == [
        {"query": "keyed-window-columnar", "reason": engines["flink"]["weir_only"][0]["reason"]}
    ]
    assert "weir.columnar" in engines["flink"]["weir_only"][0]["reason"]
    markdown = (directory / "report.md").read_text()
    assert "## weir and Apache Flink side by side" in markdown
    assert "weir only: written with weir.columnar" in markdown
    assert markdown.count("| match | ") >= 2  # Flink's verdicts, beside weir's

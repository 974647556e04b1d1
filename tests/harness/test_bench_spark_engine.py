"""`weir bench --spec FILE --engine weir --engine spark`: Spark Structured Streaming as a column.

A tiny suite (small Spark-generated data sets shared with the other harness tests) runs its
correctness checks on weir and on Spark Structured Streaming; the report must hold Spark's
version and start-up, its verdict against Spark's batch answer for every query it expresses,
and the weir.columnar query as weir-only with its reason.
Slow: it starts a JVM for the child and one for its start-up probe.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from weir.cli import main
from weir.harness.sweep import dataset_dir
from weir.workloads.testing import SMALL_KEYED_UNIFORM, SMALL_NEXMARK

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

KEYED = {"generator": "keyed", **{k: v for k, v in SMALL_KEYED_UNIFORM.items() if k != "kind"}}
NEXMARK = {"generator": "nexmark", **{k: v for k, v in SMALL_NEXMARK.items() if k != "kind"}}
SPEC = {
    "suite": "spark-column",
    "datasets": {"keyed": KEYED, "nexmark": NEXMARK},
    "correctness": [
        {"query": ["keyed-window", "keyed-window-columnar"], "dataset": "keyed", "parallelism": [1],
         "checkpointing": "aligned", "backend": "lmdb"},
        {"query": "keyed-shuffle", "dataset": "keyed", "parallelism": [2]},
        {"query": ["q0", "q1", "q2", "q5", "q7", "q8"], "dataset": "nexmark", "parallelism": [2]},
    ],
    "sweeps": [],
}  # fmt: skip


def test_a_suite_with_spark_writes_its_column_and_verdicts(
    tmp_path: Path, keyed_uniform: Path, nexmark_small: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(keyed_uniform, dataset_dir(data, KEYED))  # same parameters: reused, not generated
    shutil.copytree(nexmark_small, dataset_dir(data, NEXMARK))
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    result = CliRunner().invoke(
        main,
        ["bench", "--spec", str(spec), "--out", str(tmp_path / "results"), "--data", str(data),
         "--engine", "weir", "--engine", "spark"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "Spark Structured Streaming 4." in result.output and "8 of 8 checks match Spark" in result.output
    assert "headline: weir/Spark SS throughput " in result.output
    [directory] = (tmp_path / "results").iterdir()
    report = json.loads((directory / "report.json").read_text())
    spark = report["engines"]["spark"]
    assert spark["version"] == report["versions"]["pyspark"] and spark["startup_s"] > 0
    checks = {c["key"].split()[0]: c for c in spark["correctness"]}
    assert sorted(checks) == ["keyed-shuffle", "keyed-window", "q0", "q1", "q2", "q5", "q7", "q8"]
    for check in checks.values():
        assert check["matches"] and check["rows_got"] == check["rows_expected"] > 0, check
        assert check["throughput"] > 0 and check["micro_batches"] >= 1
    # windows fire because the end-of-input event moved the watermark: a micro-batch of its own
    for windowed in ("keyed-window", "q5", "q7"):
        assert checks[windowed]["micro_batches"] >= 2
    assert checks["keyed-window"]["state_store"].endswith("RocksDBStateStoreProvider")
    assert [w["query"] for w in spark["weir_only"]] == ["keyed-window-columnar"]
    assert spark["not_run"] == []
    markdown = (directory / "report.md").read_text()
    assert "## weir and Spark Structured Streaming side by side" in markdown
    assert "| Spark SS rec/s | Spark SS vs Spark | weir/Spark SS |" in markdown
    assert "weir only: written with weir.columnar" in markdown
    assert markdown.count("| match | ") >= 8

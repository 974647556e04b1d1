"""weir's own examples (examples/*.py) on Apache Flink: `weir run --target flink` against `python FILE`.

Each example runs as a user runs it on weir (``python examples/X.py``) and as `weir run
--target flink examples/X.py` runs it on PyFlink's local MiniCluster; the printed records
must be the same (as multisets). An example that is weir-only on purpose must be refused
with the one error that names its weir-only use; docs/decisions.md says why each is.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .two_engines import assert_same_output, run_on_weir, run_weir_cli_on_flink

pytestmark = [pytest.mark.flink, pytest.mark.timeout(1800)]  # each PyFlink run starts a JVM

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SAME_OUTPUT = "same output"
BOTH_RUN = "both run"  # the output is timings: each engine's own
# example -> SAME_OUTPUT, BOTH_RUN, or ("refused", the weir-only use the error names at file:line)
PORTABILITY: dict[str, object] = {
    "keyed_sum.py": SAME_OUTPUT,
    "currency_join.py": SAME_OUTPUT,
    "window_word_count.py": SAME_OUTPUT,
    "slow_map.py": BOTH_RUN,
    "my_job.py": ("refused", "my_job.py:18: weir.datastream.connectors.datagen"),
    "columnar_query.py": ("refused", "columnar_query.py:9: weir.columnar"),
}
# examples whose results differ on weir today (strict: the fix shows up as a failure to update)
DIFFERS: dict[str, str] = {}


def test_the_table_names_every_example() -> None:
    assert {path.name for path in EXAMPLES.glob("*.py")} == set(PORTABILITY)


def _cases(kind: object) -> list[object]:
    cases = []
    for name, how in PORTABILITY.items():
        if how == kind or (isinstance(kind, type) and isinstance(how, kind)):
            marks = [pytest.mark.xfail(strict=True, reason=DIFFERS[name])] if name in DIFFERS else []
            cases.append(pytest.param(name, marks=marks, id=name))
    return cases


@pytest.mark.parametrize("name", _cases(SAME_OUTPUT))
def test_example_gives_the_same_output_on_both_engines(name: str, tmp_path: Path) -> None:
    weir = run_on_weir(EXAMPLES / name, tmp_path)
    flink = run_weir_cli_on_flink(EXAMPLES / name, tmp_path)
    assert_same_output(weir, flink)


@pytest.mark.parametrize("name", _cases(BOTH_RUN))
def test_example_runs_on_both_engines(name: str, tmp_path: Path) -> None:
    weir = run_on_weir(EXAMPLES / name, tmp_path)
    assert weir.returncode == 0, weir.stderr[-3000:]
    flink = run_weir_cli_on_flink(EXAMPLES / name, tmp_path)
    assert flink.returncode == 0, flink.stderr[-3000:]


@pytest.mark.parametrize("name", _cases(tuple))
def test_weir_only_example_is_refused_before_flink_starts(name: str, tmp_path: Path) -> None:
    flink = run_weir_cli_on_flink(EXAMPLES / name, tmp_path)
    _, use = PORTABILITY[name]  # type: ignore[misc]
    assert flink.returncode == 2, flink.stderr[-3000:]
    lines = flink.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: job file '{EXAMPLES / name}' uses weir-only API"), flink.stderr
    assert any(use in line and "-> on Flink: " in line for line in lines[1:]), flink.stderr
    assert "Py4J" not in flink.stderr and "java" not in flink.stderr.lower()  # no JVM started


def test_plan_shows_flinks_plan_beside_weirs(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "weir.cli",
            "plan",
            "--target",
            "flink",
            "--format",
            "json",
            str(EXAMPLES / "currency_join.py"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    both = json.loads(done.stdout)
    weir_nodes, flink_nodes = both["weir"]["plan"]["nodes"], both["flink"]["plan"]["nodes"]
    assert any(node["contents"].startswith("Source: Collection Source") for node in flink_nodes), flink_nodes
    assert any("price in euro" in node["contents"] for node in flink_nodes), flink_nodes
    assert any("price in euro" in node["contents"] for node in weir_nodes), weir_nodes
    assert both["flink"]["job_vertices"] and all(v["parallelism"] >= 1 for v in both["flink"]["job_vertices"])
    text = subprocess.run(
        [sys.executable, "-m", "weir.cli", "plan", "--target", "flink", str(EXAMPLES / "currency_join.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    ).stdout
    assert "== Apache Flink execution plan ==" in text and "== differences ==" in text
    assert "job vertices (chains): weir " in text

"""The weir side of the bridge to Apache Flink: prefix swap, weir-only API, configuration,
the one refusal, plan differences, and the error when PyFlink is missing. No PyFlink needed
(the runs on Flink are in tests/flink, under the ``flink`` marker)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from weir import flink_runner
from weir.errors import UsageError
from weir.flink_bridge import FLINK_PYTHON_ENV, flink_python, plan_differences, prepare

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_the_swap_changes_imports_and_dotted_names_only() -> None:
    source = (
        "import weir\n"
        "import weir.datastream as ds\n"
        "from weir.common import Types  # weir.common\n"
        'NAME = "weir.datastream stays in a string"\n'
        "x = weir.common.Types\n"
        "obj.weir.thing = 1\n"
        "weir = 3\n"
    )
    swapped = flink_runner.swap_prefix(source, "weir", "pyflink")
    assert swapped.splitlines() == [
        "import pyflink",
        "import pyflink.datastream as ds",
        "from pyflink.common import Types  # weir.common",
        'NAME = "weir.datastream stays in a string"',
        "x = pyflink.common.Types",
        "obj.weir.thing = 1",
        "weir = 3",
    ]


def test_the_swap_back_gives_the_original() -> None:
    source = (EXAMPLES / "keyed_sum.py").read_text(encoding="utf-8")
    there = flink_runner.swap_prefix(source, "weir", "pyflink")
    assert "from pyflink.datastream import StreamExecutionEnvironment" in there
    assert flink_runner.swap_prefix(there, "pyflink", "weir") == source


def test_weir_only_imports_are_found_with_their_line_and_equivalent() -> None:
    source = (
        "from weir.common import Types\n"
        "from weir import columnar as col\n"
        "from weir.datastream.connectors.datagen import DataGeneratorSource\n"
        "import weir.testing\n"
    )
    uses = flink_runner.weir_only_uses(source, "job.py")
    assert [(u["line"], u["use"]) for u in uses] == [
        (2, "weir.columnar"),
        (3, "weir.datastream.connectors.datagen"),
        (4, "weir.testing"),
    ]
    assert "NumberSequenceSource" in uses[1]["equivalent"]


def test_one_refusal_names_every_use_once() -> None:
    findings = [
        {"line": 9, "use": "weir.columnar", "equivalent": "per-record functions"},
        {"line": 9, "use": "pyflink.columnar", "equivalent": "none in PyFlink"},  # the child's view of it
        {"line": 3, "use": "pyflink.datastream.LmdbStateBackend", "equivalent": "none in PyFlink"},
    ]
    message = flink_runner.refusal("job.py", findings)
    assert message.splitlines() == [
        "job file 'job.py' uses weir-only API that Apache Flink does not have (2 uses):",
        "  job.py:3: weir.datastream.LmdbStateBackend -> on Flink: none in PyFlink",
        "  job.py:9: weir.columnar -> on Flink: per-record functions",
    ]


def test_configuration_is_translated_to_flinks_keys(tmp_path: Path) -> None:
    conf, notes = flink_runner.translate_configuration(
        {
            "state.backend.type": "lmdb",
            "state.checkpoints.dir": "checkpoints",
            "execution.checkpointing.interval": "200 ms",
            "execution.checkpointing.savepoint-dir": "s3://bucket/savepoints",
            "weir.failure-injection.seed": "3",
            "execution.busy-poll.enabled": "true",
            "state.backend.lmdb.incremental.max-chain-length": "4",
            "parallelism.default": "2",
        },
        str(tmp_path),
    )
    assert conf == {
        "state.backend.type": "rocksdb",
        "execution.checkpointing.dir": (tmp_path / "checkpoints").as_uri(),
        "execution.checkpointing.interval": "200 ms",
        "execution.checkpointing.savepoint-dir": "s3://bucket/savepoints",
        "parallelism.default": "2",
    }
    assert sum(note.startswith("dropped ") for note in notes) == 3
    assert any("lmdb -> rocksdb" in note for note in notes)


def test_prepare_writes_the_swapped_copy_and_the_spec(tmp_path: Path) -> None:
    job = prepare(EXAMPLES / "columnar_query.py", {"state.backend.type": "lmdb"}, tmp_path, [])
    spec = __import__("json").loads(job.spec_path.read_text())
    assert Path(spec["job"]).read_text().startswith('"""')
    assert "from pyflink import columnar as col" in Path(spec["job"]).read_text()
    assert [(f["line"], f["use"]) for f in spec["findings"]] == [(9, "weir.columnar")]
    assert spec["configuration"] == {"state.backend.type": "rocksdb"}


def test_a_job_file_that_is_not_python_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"job file '.*job.txt' is not a Python file"):
        prepare(tmp_path / "job.txt", {}, tmp_path, [])


def test_without_pyflink_the_error_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FLINK_PYTHON_ENV, str(tmp_path / "no-such-python"))
    with pytest.raises(UsageError, match=r"no-such-python' is not a file; .*make flink-env"):
        flink_python()


def test_the_cli_reports_missing_pyflink_in_one_line(tmp_path: Path) -> None:
    import os

    env = dict(os.environ, **{FLINK_PYTHON_ENV: str(tmp_path / "none")})
    done = subprocess.run(
        [sys.executable, "-m", "weir.cli", "run", "--target", "flink", str(EXAMPLES / "keyed_sum.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: WEIR_FLINK_PYTHON=")
    assert "make flink-env" in done.stderr


def test_weir_only_flags_are_refused_with_target_flink() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "weir.cli",
            "run",
            "--target",
            "flink",
            "--taskmanagers",
            "2",
            str(EXAMPLES / "keyed_sum.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "--taskmanagers: weir-only, not available with --target flink" in done.stderr


def test_plan_differences_name_vertices_parallelism_ship_strategies_and_chains() -> None:
    weir_plan = {
        "nodes": [
            {"id": 1, "contents": "Source: numbers", "parallelism": 2},
            {
                "id": 2,
                "contents": "Map",
                "parallelism": 2,
                "predecessors": [{"id": 1, "ship_strategy": "FORWARD"}],
            },
        ]
    }
    flink = {
        "plan": {
            "nodes": [
                {"id": 1, "contents": "Source: numbers", "parallelism": 2},
                {
                    "id": 2,
                    "contents": "Map",
                    "parallelism": 1,
                    "predecessors": [{"id": 1, "ship_strategy": "REBALANCE"}],
                },
            ]
        },
        "job_vertices": [{"name": "Source: numbers", "parallelism": 2}, {"name": "Map", "parallelism": 1}],
    }
    weir_vertices = [{"name": "Source: numbers -> Map", "parallelism": 2}]
    text = plan_differences(weir_plan, weir_vertices, flink)
    assert "operators: weir 2, Flink 2" in text
    assert "job vertices (chains): weir 1, Flink 2" in text
    assert "-Map [p=2] <- FORWARD from Source: numbers" in text
    assert "+Map [p=1] <- REBALANCE from Source: numbers" in text
    assert "-Source: numbers -> Map [p=2]" in text
    same = plan_differences(weir_plan, weir_vertices, {"plan": weir_plan, "job_vertices": weir_vertices})
    assert "operators, parallelism and ship strategies: the same" in same
    assert "chaining: the same" in same


def test_a_relative_interpreter_path_is_made_absolute_not_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jobs run in other directories; a venv's python is a link that must stay in the venv."""
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(FLINK_PYTHON_ENV, "venv/bin/python")
    assert flink_python() == str(venv_bin / "python")

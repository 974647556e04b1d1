"""``weir run JOB -s SAVEPOINT`` with a savepoint whose state file was replaced by a pickle that
runs a command: the run fails with one line naming the file, and the command never runs."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from weir.checkpoint.metadata import body_checksum
from weir.cli import main

JOB = """
from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
(
    env.from_source(
        DataGeneratorSource(lambda i: (i % 5, i), 200_000, rate_limit=50_000.0,
                            type_info=Types.TUPLE([Types.LONG(), Types.LONG()])),
        WatermarkStrategy.no_watermarks(), "numbers",
    ).uid("numbers")
    .key_by(lambda p: p[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).uid("sums")
    .add_sink(lambda r: None)
)
"""


class RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_weir_run_from_a_crafted_savepoint_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEIR_HOME", str(tmp_path / "home"))
    job = tmp_path / "job.py"
    job.write_text(JOB + 'client = env.execute_async("sums")\n'
                   f'print(client.stop_with_savepoint(False, {str(tmp_path / "sp")!r}).result())\n')  # fmt: skip
    made = CliRunner().invoke(main, ["run", str(job), "--no-live"])
    assert made.exit_code == 0, made.output
    savepoint = next((tmp_path / "sp").iterdir())
    meta_path = savepoint / "_metadata"
    doc = json.loads(meta_path.read_text())
    handle = next(h for op in doc["operators"] for h in op["state_handles"] if h["state_kind"] == "keyed")
    marker = tmp_path / "pwned"
    evil = pickle.dumps(RunsCode(marker), protocol=5)
    (savepoint / handle["file"]["path"]).write_bytes(evil)
    handle["file"].update(size_bytes=len(evil), sha256=hashlib.sha256(evil).hexdigest())
    doc["checksum"] = body_checksum(doc)
    meta_path.write_text(json.dumps(doc))

    job.write_text(JOB + 'env.execute("sums")\n')
    restored = CliRunner().invoke(main, ["run", str(job), "--no-live", "-s", str(savepoint)])
    assert restored.exit_code != 0
    assert handle["file"]["path"] in restored.output
    assert "Traceback" not in restored.output
    assert not marker.exists(), "restoring ran code from the savepoint"

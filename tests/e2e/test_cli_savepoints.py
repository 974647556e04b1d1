"""``weir run`` in one process, ``weir list`` / ``weir savepoint`` / ``weir stop`` / ``weir cancel``
in another, and ``weir run --from-savepoint``: the way an operator of a job uses them.

Two real processes talk here, so the waits are on the wall clock (a MockClock cannot span
processes); each is a poll with a deadline or a pause that lets the job emit records."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from weir.cli import main

JOB = """
from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
out = []
(
    env.from_source(
        DataGeneratorSource(lambda i: i, {events}, rate_limit={rate}, type_info=Types.LONG()),
        WatermarkStrategy.no_watermarks(),
        "numbers",
    )
    .uid("numbers")
    .map(lambda n: (n % 5, n))
    .key_by(lambda p: p[0])
    .reduce(lambda a, b: (a[0], a[1] + b[1]))
    .uid("sums")
    .add_sink(out.append)
)
env.execute("cli savepoints")
final = {{}}
for key, total in out:
    final[key] = max(final.get(key, 0), total)
print("FINAL", sorted(final.items()), "COUNT", len(out))
"""


def _weir(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "weir.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def _wait_for_job(env: dict[str, str]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        listing = _weir("list", env=env)
        assert listing.returncode == 0, listing.stderr
        if "cli savepoints" in listing.stdout:
            return listing.stdout.split()[0]
        time.sleep(0.3)
    raise AssertionError("the job never showed up in `weir list`")


def test_stop_with_savepoint_from_another_process_then_resume(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB.format(events=200_000, rate=20_000.0))
    env = {**os.environ, "WEIR_HOME": str(tmp_path / "home")}
    running = subprocess.Popen(
        [sys.executable, "-m", "weir.cli", "run", str(job), "--no-live"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        job_id = _wait_for_job(env)
        time.sleep(1.0)
        taken = _weir("savepoint", job_id, str(tmp_path / "sp"), env=env)
        assert taken.returncode == 0, taken.stderr
        assert Path(taken.stdout.strip(), "_metadata").is_file()
        stopped = _weir("stop", job_id, "--savepoint-path", str(tmp_path / "sp"), env=env)
        assert stopped.returncode == 0, stopped.stderr
        final = Path(stopped.stdout.strip())
        out, err = running.communicate(timeout=60)
    finally:
        running.kill()
    assert running.returncode == 0, err
    assert "FINISHED" in err
    first_count = int(out.split("COUNT")[1])
    assert 0 < first_count < 200_000  # stopped early
    assert _weir("list", env=env).stdout.startswith("no running jobs")

    resumed = _weir("run", str(job), "--no-live", "--from-savepoint", str(final), env=env)
    assert resumed.returncode == 0, resumed.stderr
    # the rolling sums go on from the savepoint: together the two runs emit one sum per record,
    # and the resumed run ends with the true totals (state restored exactly once)
    assert first_count + int(resumed.stdout.split("COUNT")[1]) == 200_000
    totals = {k: sum(range(k, 200_000, 5)) for k in range(5)}
    assert resumed.stdout.split("FINAL")[1].split("COUNT")[0].strip() == str(sorted(totals.items()))


def test_savepoint_of_an_unknown_job_names_the_running_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEIR_HOME", str(tmp_path))
    result = CliRunner().invoke(main, ["savepoint", "0123abcd", str(tmp_path / "sp")])
    assert result.exit_code == 2
    assert "no running job 0123abcd" in result.stderr and "running jobs: none" in result.stderr


def test_allow_non_restored_state_needs_a_savepoint(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB.format(events=10, rate=None))
    result = CliRunner().invoke(main, ["run", str(job), "--allow-non-restored-state", "--no-live"])
    assert result.exit_code == 2
    assert "--from-savepoint" in result.output

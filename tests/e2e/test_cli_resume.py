"""A `weir run` process dies (SIGKILL) in the middle of a job; `weir checkpoints DIR` names its
latest retained checkpoint and `weir run -s` resumes from it with exact output.

Real processes, so the waits are polls on the wall clock with deadlines."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

EVENTS = 3_000
HALF = EVENTS // 2

JOB = f"""
import os
from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.file_system import BucketAssigner, Encoder, FileSink, RollingPolicy

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.enable_checkpointing(200)
env.get_checkpoint_config().set_checkpoint_storage_dir(os.environ["CHECKPOINTS"])
sink = (
    FileSink.for_row_format(os.environ["OUT"], Encoder.simple_string_encoder())
    .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
    .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=2048))
    .build()
)
(
    env.from_source(
        DataGeneratorSource(lambda i: i, {EVENTS}, rate_limit=1500.0, type_info=Types.LONG()),
        WatermarkStrategy.no_watermarks(),
        "numbers",
    )
    .uid("numbers")
    .map(lambda n: (f"{{n // {HALF}}}-{{n % 3}}", n))  # a key is fed by one source subtask, in order
    .key_by(lambda p: p[0])
    .reduce(lambda a, b: (a[0], a[1] + b[1]))
    .uid("sums")
    .sink_to(sink)
    .uid("files")
)
env.execute("resumable")
"""


def expected_lines() -> Counter[str]:
    totals: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    for n in range(EVENTS):
        key = f"{n // HALF}-{n % 3}"
        totals[key] += n
        lines[str((key, totals[key]))] += 1
    return lines


def committed_lines(out: Path) -> Counter[str]:
    lines: Counter[str] = Counter()
    for path in out.rglob("*"):
        if path.is_file() and not path.name.startswith("."):
            lines.update(path.read_text().splitlines())
    return lines


def _weir(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "weir.cli", *args], capture_output=True, text=True, env=env, timeout=180
    )


def _wait_for_checkpoint(checkpoints: Path, running: subprocess.Popen[str], checkpoint_id: int) -> None:
    """Until a checkpoint with id ``checkpoint_id`` or higher is complete (its ``_metadata`` exists)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert running.poll() is None, "the job ended before it was killed: make it longer"
        done = [int(p.parent.name.removeprefix("chk-")) for p in checkpoints.glob("*/chk-*/_metadata")]
        if done and max(done) >= checkpoint_id:
            return
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint completed under {checkpoints} within the deadline")


def test_a_killed_run_resumes_from_its_latest_checkpoint_with_exact_output(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    checkpoints, out = tmp_path / "checkpoints", tmp_path / "out"
    env = {
        **os.environ,
        "WEIR_HOME": str(tmp_path / "home"),
        "CHECKPOINTS": str(checkpoints),
        "OUT": str(out),
    }
    running = subprocess.Popen(
        [sys.executable, "-m", "weir.cli", "run", str(job), "--no-live"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        _wait_for_checkpoint(checkpoints, running, checkpoint_id=2)
        os.kill(running.pid, signal.SIGKILL)  # no cleanup of any kind: the checkpoints stay
        running.communicate(timeout=60)
    finally:
        running.kill()
    assert running.returncode == -signal.SIGKILL
    before = committed_lines(out)
    assert sum(before.values()) < EVENTS  # killed in the middle

    listing = _weir("checkpoints", str(checkpoints), env=env)
    assert listing.returncode == 0, listing.stderr
    (path,) = re.findall(r"weir run JOB_FILE -s (\S+)", listing.stdout)
    assert re.search(r"chk-\d+$", path) and Path(path, "_metadata").is_file(), listing.stdout

    resumed = _weir("run", str(job), "--no-live", "-s", path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "FINISHED" in resumed.stderr
    got, want = committed_lines(out), expected_lines()
    assert got == want, f"missing {sum((want - got).values())}, extra {sum((got - want).values())}"
    assert not [p.name for p in out.rglob(".*")], "hidden files left behind"
    # the killed job's checkpoints stay (nothing ended it); the resumed job FINISHED: its are gone
    assert Path(path, "_metadata").is_file()
    assert len(list(checkpoints.glob("*/chk-*/_metadata"))) == len(
        list(Path(path).parent.glob("chk-*/_metadata"))
    )

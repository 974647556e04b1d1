"""Running one job file on weir and on Apache Flink (PyFlink in its own environment) and
comparing what each printed."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from weir.flink_bridge import flink_environment, flink_python

TIMEOUT_S = 900  # PyFlink starts a JVM and a Python worker per job: ~40 s on a loaded machine
SUBTASK_PREFIX = re.compile(r"^\d+> ")
# what PyFlink's own libraries print on stdout at start-up (Apache Beam, the Cython check)
PYFLINK_NOISE = re.compile(
    r"^(No module named google\.cloud\.|PYFLINK_CYTHON_ENABLED: |Using Any for unsupported type: )"
)


def run_on_weir(job: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(job)], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )


def run_on_pyflink(job: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    python = flink_python()
    return subprocess.run(
        [python, str(job)],
        cwd=cwd,
        env=flink_environment(python),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def run_weir_cli_on_flink(job: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`weir run --target flink JOB` as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "weir.cli", "run", "--target", "flink", str(job)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def printed(stdout: str) -> Counter[str]:
    """The printed records as a multiset, without PyFlink's start-up lines: the subtask prefix ``N> `` of a print sink at
    parallelism > 1 is dropped (which subtask printed a record depends on the machine's
    core count and the hash of its key), and the order does not count."""
    return Counter(
        SUBTASK_PREFIX.sub("", line)
        for line in stdout.splitlines()
        if line.strip() and not PYFLINK_NOISE.match(line)
    )


def pyflink_examples_dir() -> Path:
    python = flink_python()
    out = subprocess.run(
        [python, "-c", "import os, pyflink; print(os.path.dirname(pyflink.__file__))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return Path(out.stdout.strip()) / "examples" / "datastream"


def assert_same_output(
    weir: subprocess.CompletedProcess[str], flink: subprocess.CompletedProcess[str]
) -> None:
    assert flink.returncode == 0, f"PyFlink failed:\n{flink.stderr[-3000:]}"
    assert weir.returncode == 0, f"weir failed:\n{weir.stderr[-3000:]}"
    got, want = printed(weir.stdout), printed(flink.stdout)
    assert want, "PyFlink printed nothing: nothing to compare"
    missing, extra = want - got, got - want
    assert not missing and not extra, (
        f"outputs differ: {sum(missing.values())} lines only on Flink, {sum(extra.values())} only on weir\n"
        f"only on Flink: {sorted(missing)[:10]}\nonly on weir: {sorted(extra)[:10]}"
    )

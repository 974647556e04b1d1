"""Fixtures of the end-to-end tests: a ``weir run --web`` job in a child process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

DASHBOARD_JOB = Path(__file__).with_name("dashboard_job.py")


class RunningJob:
    """``weir run --web --web-port 0 JOB`` in a child process; ``url`` once it printed it."""

    def __init__(self, job: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "weir.cli", "run", "--web-port", "0", "--no-live", str(job)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self.url = self._wait_for_url()

    def _wait_for_url(self) -> str:
        stderr: IO[str] = self.process.stderr  # type: ignore[assignment]
        for line in stderr:  # the process prints the URL once it listens (the test's timeout bounds this)
            self.lines.append(line)
            match = re.search(r"dashboard: (http://\S+/)", line)
            if match:
                return match.group(1)
        raise AssertionError(f"weir run ended without a dashboard URL: {''.join(self.lines)}")

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=30) as response:
            return json.loads(response.read())

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C, as a person at the terminal would; (exit status, stderr)."""
        self.process.send_signal(signal.SIGINT)
        _, rest = self.process.communicate(timeout=120)
        return self.process.returncode, "".join(self.lines) + rest


@pytest.fixture
def running_job(tmp_path: Path) -> Iterator[RunningJob]:
    env = {**os.environ, "WEIR_HOME": str(tmp_path / "home"), "WEIR_DASHBOARD_HOLD": str(tmp_path / "hold")}
    job = RunningJob(DASHBOARD_JOB, env)
    try:
        yield job
    finally:
        if job.process.poll() is None:
            job.process.kill()
            job.process.wait()

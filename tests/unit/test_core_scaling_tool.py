"""tools/core_scaling.py: one piece of work in a child, and the arguments it refuses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "core_scaling.py"


def test_a_child_prints_the_seconds_of_its_work() -> None:
    out = subprocess.run(
        [sys.executable, str(TOOL), "--child", "python"], capture_output=True, text=True, check=True
    )
    assert 0 < float(out.stdout) < 60


def test_a_repeat_below_one_is_refused_naming_it() -> None:
    out = subprocess.run([sys.executable, str(TOOL), "--repeat", "0"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "--repeat must be at least 1, got 0" in out.stderr

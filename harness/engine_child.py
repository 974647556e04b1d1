"""Running another engine's checks in a child process: a JSON spec in, a JSON result out.

The Flink and Spark columns of the side-by-side report each run a query in a fresh Python
process (PyFlink's own interpreter, or this one with Spark), so that its JVM and its
dependencies stay out of the harness's process. The child reads the spec file, writes the
result file and exits; nothing crosses but JSON.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

__all__ = ["run_child"]


def run_child(
    argv: list[str], spec: dict[str, Any], work: Path, name: str, who: str, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], float, str]:
    """Run ``argv`` + the spec file's path; (its result, wall seconds, the tail of its stderr).
    No result file: an empty result and ``who`` with the exit status and the tail."""
    spec_path, result_path = work / f"{name}.json", work / f"{name}-result.json"
    spec_path.write_text(json.dumps({**spec, "result": str(result_path)}), encoding="utf-8")
    started = time.monotonic()
    done = subprocess.run([*argv, str(spec_path)], env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    tail = "\n".join(done.stderr.strip().splitlines()[-10:])
    if not result_path.is_file():
        return {}, seconds, f"{who} exited with {done.returncode}: {tail}"
    return json.loads(result_path.read_text(encoding="utf-8")), seconds, tail

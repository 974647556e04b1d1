"""Taking a weir job file to Apache Flink: ``weir run --target flink`` and ``weir plan --target flink``.

Theory of operation
-------------------
A weir job file imports ``weir.``; the same file with the prefix swapped to ``pyflink.`` is
a PyFlink job. PyFlink cannot be imported here: apache-flink pins pyarrow, numpy and py4j
below weir's ranges, so it lives in its own environment (``make flink-env`` builds
``.venv-flink`` from requirements-flink.lock) and this module drives that environment's
Python in a child process running ``weir/flink_runner.py`` (stdlib only; it owns the swap,
the configuration translation and the weir-only table, so both sides use the same rules).

Order of a run: read the job file, find its weir-only imports (``weir.columnar``, weir's
datagen connector, ...), swap the prefix into a temporary copy (same name, same line
numbers), translate weir's configuration (``state.backend.type: lmdb`` -> ``rocksdb``,
checkpoint paths as ``file://`` URIs, weir-only keys dropped with a note on stderr), then
start the child. The child adds the names the installed PyFlink lacks to the findings and,
if there are any, stops with ONE error naming each use by file:line and its Flink
equivalent — before any JVM starts; otherwise it runs the job on PyFlink's local
MiniCluster (run) or hands back Flink's execution plan and JobGraph vertices (plan), which
:func:`plan_differences` sets against weir's.

The interpreter with PyFlink: ``$WEIR_FLINK_PYTHON``, else ``.venv-flink/bin/python`` of
the working directory or of weir's checkout, else this interpreter when it can import
pyflink. The runtime never imports this module.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weir import flink_runner
from weir.errors import UsageError

FLINK_PYTHON_ENV = "WEIR_FLINK_PYTHON"
INSTALL_HINT = (
    "install PyFlink in its own environment: `make flink-env` (builds .venv-flink from "
    "requirements-flink.lock; `make test-flink` does it too), or `python -m venv VENV && "
    "VENV/bin/pip install apache-flink==2.3.0`, then point WEIR_FLINK_PYTHON at VENV/bin/python "
    "(apache-flink cannot share weir's environment: docs/decisions.md)"
)


def flink_python() -> str:
    """The Python interpreter that has PyFlink, or a UsageError saying how to get one."""
    configured = os.environ.get(FLINK_PYTHON_ENV)
    if configured:
        if not Path(configured).is_file():
            raise UsageError(f"{FLINK_PYTHON_ENV}='{configured}' is not a file; {INSTALL_HINT}")
        return str(Path(configured).absolute())  # not resolved: a venv's python is a link out of it
    checkout = Path(__file__).resolve().parents[1]
    for root in (Path.cwd(), checkout):
        candidate = root / ".venv-flink" / "bin" / "python"
        if candidate.is_file():
            return str(candidate.absolute())
    if importlib.util.find_spec("pyflink") is not None:
        return sys.executable
    raise UsageError(f"running on Apache Flink needs PyFlink, which is not installed: {INSTALL_HINT}")


def flink_environment(python: str) -> dict[str, str]:
    """The child's environment: PyFlink's environment first on PATH (its JVM starts Python
    workers by the name ``python``)."""
    env = dict(os.environ)
    env["PATH"] = str(Path(python).parent) + os.pathsep + env.get("PATH", "")
    return env


def _read_job(job_file: Path) -> str:
    if not job_file.is_file() or job_file.suffix != ".py":
        raise UsageError(
            f"job file '{job_file}' is not a Python file (.py); give the path of a weir job file"
        )
    return job_file.read_text(encoding="utf-8")


@dataclass
class FlinkJob:
    """A job file prepared for PyFlink: the swapped copy and the child's spec."""

    spec_path: Path
    notes: list[str] = field(default_factory=list)


def prepare(job_file: Path, configuration: dict[str, str], workdir: Path, argv: list[str]) -> FlinkJob:
    """Swap the prefix into ``workdir``, translate the configuration, write the spec; refuses
    weir-only imports that weir itself can name (the child adds PyFlink's missing names)."""
    source = _read_job(job_file)
    try:
        findings = flink_runner.weir_only_uses(source, str(job_file))
    except SyntaxError as exc:
        raise UsageError(
            f"job file '{job_file}' is not valid Python (line {exc.lineno}): {exc.msg}"
        ) from None
    translated, notes = flink_runner.translate_configuration(configuration, os.getcwd())
    swapped = workdir / job_file.name
    swapped.write_text(flink_runner.swap_prefix(source, "weir", "pyflink"), encoding="utf-8")
    spec = {
        "job": str(swapped),
        "original": str(job_file),
        "workdir": str(job_file.resolve().parent),
        "configuration": translated,
        "findings": findings,
        "argv": argv,
    }
    spec_path = workdir / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    return FlinkJob(spec_path, notes)


def _runner_command(python: str, mode: str, spec: Path) -> list[str]:
    return [python, str(Path(flink_runner.__file__).resolve()), mode, str(spec)]


def run_on_flink(
    job_file: Path, configuration: dict[str, str], argv: list[str] | None = None, echo: Any = None
) -> int:
    """Run the job file on PyFlink's local MiniCluster; its output goes to this process's
    stdout/stderr. Returns the child's exit status (2: refused, with the one error on stderr)."""
    python = flink_python()
    with tempfile.TemporaryDirectory(prefix="weir-flink-") as tmp:
        job = prepare(job_file, configuration, Path(tmp), argv or [])
        for note in job.notes:
            (echo or _stderr)(f"weir: {note}")
        done = subprocess.run(
            _runner_command(python, "run", job.spec_path), env=flink_environment(python), check=False
        )
    return done.returncode


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def flink_plan(job_file: Path, configuration: dict[str, str]) -> dict[str, Any]:
    """Flink's execution plan JSON and chained JobGraph vertices of the job file."""
    python = flink_python()
    with tempfile.TemporaryDirectory(prefix="weir-flink-") as tmp:
        job = prepare(job_file, configuration, Path(tmp), [])
        done = subprocess.run(
            _runner_command(python, "plan", job.spec_path),
            env=flink_environment(python),
            capture_output=True,
            text=True,
            check=False,
        )
    for line in done.stdout.splitlines():
        if line.startswith(flink_runner.PLAN_MARKER):
            result: dict[str, Any] = json.loads(line[len(flink_runner.PLAN_MARKER) :])
            result["notes"] = job.notes
            return result
    detail = done.stderr.strip().splitlines()
    if done.returncode == 2 and detail and detail[0].startswith("error: "):
        raise UsageError("\n".join(detail)[len("error: ") :])
    tail = "\n".join(detail[-15:])
    raise UsageError(f"PyFlink did not produce a plan for '{job_file}' (exit {done.returncode}):\n{tail}")


def _plan_lines(plan: dict[str, Any]) -> list[str]:
    """One line per node: what it is, its parallelism and how each input is shipped."""
    names = {node["id"]: node["contents"] for node in plan.get("nodes", [])}
    lines = []
    for node in plan.get("nodes", []):
        inputs = ", ".join(
            f"{p.get('ship_strategy')} from {names.get(p['id'], p['id'])}"
            for p in node.get("predecessors", [])
        )
        lines.append(f"{node['contents']} [p={node['parallelism']}]" + (f" <- {inputs}" if inputs else ""))
    return lines


def plan_differences(
    weir_plan: dict[str, Any], weir_vertices: list[dict[str, Any]], flink: dict[str, Any]
) -> str:
    """The two plans side by side: counts, then a unified diff of nodes and of chained vertices."""
    flink_plan_json = flink["plan"]
    flink_vertices = flink["job_vertices"]
    out = [
        f"operators: weir {len(weir_plan.get('nodes', []))}, Flink {len(flink_plan_json.get('nodes', []))}",
        f"job vertices (chains): weir {len(weir_vertices)}, Flink {len(flink_vertices)}",
    ]
    node_diff = list(
        difflib.unified_diff(
            _plan_lines(weir_plan),
            _plan_lines(flink_plan_json),
            "weir operators",
            "Flink operators",
            lineterm="",
            n=99,
        )
    )
    out += node_diff or ["operators, parallelism and ship strategies: the same"]
    weir_chains, flink_chains = (
        [f"{v['name']} [p={v['parallelism']}]" for v in vs] for vs in (weir_vertices, flink_vertices)
    )
    chain_diff = list(
        difflib.unified_diff(weir_chains, flink_chains, "weir chains", "Flink chains", lineterm="", n=99)
    )
    out += chain_diff or ["chaining: the same"]
    return "\n".join(out)

"""Runs a weir job file on Apache Flink: the half of the bridge that lives in PyFlink's Python.

Theory of operation
-------------------
apache-flink cannot share weir's Python environment (its pins on pyarrow, numpy and py4j
exclude weir's; docs/decisions.md, "PyFlink in its own environment"), so ``weir run
--target flink`` and ``weir plan --target flink`` (weir.flink_bridge) run this file as a
script with the Python of an environment that has PyFlink, in a child process. This module
therefore imports nothing from weir and only the standard library at its top: weir's side
imports its pure helpers (the prefix swap, the configuration translation, the table of
weir-only API) from here, so both processes apply the same rules.

The child gets one JSON spec (argument 2): the job file already swapped to ``pyflink.``
(written beside nothing of the user's, in a temporary directory), the job's directory (put
on ``sys.path`` for its sibling imports), weir's configuration translated to Flink's keys,
and the weir-only uses weir's side found. Before anything can start a JVM it checks every
``from pyflink.X import name`` of the swapped file against the installed PyFlink; all
findings go out as ONE error (exit status 2) naming each use by file:line with its Flink
equivalent. Otherwise it wraps ``StreamExecutionEnvironment.get_execution_environment`` so
the job's environment gets the translated configuration (the job's own ``Configuration``
is translated the same way) and runs the file as ``__main__``: in "run" mode the job
executes on PyFlink's local MiniCluster; in "plan" mode ``execute()`` prints Flink's
execution-plan JSON and its chained JobGraph vertices as one marked JSON line and stops.
"""

from __future__ import annotations

import ast
import io
import json
import os
import sys
import tokenize
from pathlib import Path
from typing import Any

PLAN_MARKER = "WEIR-FLINK-PLAN "
"""Prefix of the line in which the child hands the plan back (the job may print too)."""

# weir-only API: module (or module.name) -> what to write for Apache Flink instead
WEIR_ONLY: dict[str, str] = {
    "weir.columnar": "per-record Python functions (map/flat_map/reduce/aggregate/process); "
    "PyFlink has no vectorized DataStream API",
    "weir.datastream.connectors.datagen": "env.from_collection(...) or NumberSequenceSource "
    "(pyflink.datastream.connectors.number_seq) followed by a map that makes each event",
    "weir.testing": "pytest against PyFlink's local MiniCluster (env.execute_and_collect())",
    "weir.harness": "no equivalent: weir's benchmark harness runs on weir",
    "weir.workloads": "no equivalent: weir's workload generators run under PySpark",
    "weir.cluster": "no equivalent: Flink's cluster is configured, not imported",
}

# weir's configuration keys Flink knows under another name
RENAMED_KEYS: dict[str, str] = {
    "state.checkpoints.dir": "execution.checkpointing.dir",
    "state.savepoints.dir": "execution.checkpointing.savepoint-dir",
    "state.checkpoints.num-retained": "execution.checkpointing.num-retained",
    "state.backend.incremental": "execution.checkpointing.incremental",
    "execution.checkpointing.unaligned": "execution.checkpointing.unaligned.enabled",
    "execution.buffer-timeout": "execution.buffer-timeout.interval",
    "pipeline.operator-chaining": "pipeline.operator-chaining.enabled",
    "local.number-taskmanager": "minicluster.number-of-taskmanagers",
}

# weir-only configuration: dropped on Flink, with the reason
WEIR_ONLY_KEYS: dict[str, str] = {
    "execution.busy-poll.enabled": "weir's busy-poll loop",
    "execution.busy-poll.min-load": "weir's busy-poll loop",
    "taskmanager.network.transport": "weir's choice of in-process or TCP transport",
    "execution.target": "weir's executor (PyFlink picks local execution itself)",
}
WEIR_ONLY_PREFIXES = ("weir.", "state.backend.lmdb.")

PATH_KEYS = (
    "execution.checkpointing.dir",
    "execution.checkpointing.savepoint-dir",
    "execution.savepoint.path",
)


def swap_prefix(source: str, old: str, new: str) -> str:
    """``source`` with every dotted name that starts with package ``old`` starting with ``new``.

    Only code changes: a NAME token ``old`` that begins a dotted name (``old.x``) or is
    imported whole (``import old``) is replaced; strings and comments are left as written,
    and every line keeps its number (tracebacks and the file:line of errors still point at
    the user's file).
    """
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int]] = []  # (row, col, end col) of each replaced token
    for index, token in enumerate(tokens):
        if token.type != tokenize.NAME or token.string != old:
            continue
        before = tokens[index - 1] if index else None
        after = tokens[index + 1] if index + 1 < len(tokens) else None
        if before is not None and before.type == tokenize.OP and before.string == ".":
            continue  # an attribute named like the package (x.weir), not the package
        dotted = after is not None and after.type == tokenize.OP and after.string == "."
        imported = before is not None and before.type == tokenize.NAME and before.string in ("import", "from")
        if dotted or imported:
            edits.append((token.start[0], token.start[1], token.end[1]))
    for row, start, end in reversed(edits):
        line = lines[row - 1]
        lines[row - 1] = line[:start] + new + line[end:]
    return "".join(lines)


def weir_only_uses(source: str, filename: str) -> list[dict[str, Any]]:
    """Every import of weir-only API in a weir job file: ``{"line", "use", "equivalent"}``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            for weir_only, equivalent in WEIR_ONLY.items():
                if target == weir_only or target.startswith(weir_only + "."):
                    found.append({"line": node.lineno, "use": target, "equivalent": equivalent})
                    break
            else:
                continue
            break  # one finding per import statement
    return found


def translate_configuration(
    conf: dict[str, str], base: str | None = None
) -> tuple[dict[str, str], list[str]]:
    """weir's configuration as Flink's: renamed keys, ``lmdb`` -> ``rocksdb``, local paths as
    ``file://`` URIs (relative ones against ``base``), weir-only keys dropped. Returns the
    translated keys and one note per change."""
    out: dict[str, str] = {}
    notes: list[str] = []
    for key, value in conf.items():
        if key in WEIR_ONLY_KEYS or key.startswith(WEIR_ONLY_PREFIXES):
            reason = WEIR_ONLY_KEYS.get(key, "weir-only")
            notes.append(f"dropped {key}={value} ({reason}; Flink has no such option)")
            continue
        target = RENAMED_KEYS.get(key, key)
        if target != key:
            notes.append(f"{key} -> {target}")
        if target == "state.backend.type" and value.strip().lower() == "lmdb":
            value = "rocksdb"
            notes.append("state.backend.type: lmdb -> rocksdb (Flink's on-disk keyed state backend)")
        if target in PATH_KEYS and "://" not in value:
            uri = Path(base or os.getcwd(), value).resolve().as_uri()
            notes.append(f"{target}: {value} -> {uri}")
            value = uri
        out[target] = value
    return out, notes


def missing_names(source: str, filename: str) -> list[dict[str, Any]]:
    """Names a PyFlink job file imports that the installed PyFlink lacks (imports modules only:
    no JVM starts)."""
    import importlib

    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "pyflink":
                continue
            try:
                module = importlib.import_module(node.module)
            except ImportError:
                found.append({"line": node.lineno, "use": node.module, "equivalent": "none in PyFlink"})
                continue
            for alias in node.names:
                if alias.name != "*" and not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        use = f"{node.module}.{alias.name}"
                        found.append({"line": node.lineno, "use": use, "equivalent": "none in PyFlink"})
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "pyflink":
                    try:
                        importlib.import_module(alias.name)
                    except ImportError:
                        found.append(
                            {"line": node.lineno, "use": alias.name, "equivalent": "none in PyFlink"}
                        )
    return found


def refusal(original: str, findings: list[dict[str, Any]]) -> str:
    """The one error for every weir-only use of a job file."""
    first: dict[tuple[int, str], str] = {}  # weir's own findings come first and name the equivalent
    for f in findings:
        use = "weir." + f["use"][len("pyflink.") :] if f["use"].startswith("pyflink.") else f["use"]
        first.setdefault((f["line"], use), f["equivalent"])
    lines = [f"  {original}:{line}: {use} -> on Flink: {eq}" for (line, use), eq in sorted(first.items())]
    return (
        f"job file '{original}' uses weir-only API that Apache Flink does not have "
        f"({len(lines)} use{'s' if len(lines) != 1 else ''}):\n" + "\n".join(lines)
    )


def _install_configuration(conf: dict[str, str], base: str) -> None:
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment

    original = StreamExecutionEnvironment.get_execution_environment

    def get_execution_environment(configuration: Any = None) -> Any:
        merged = Configuration()
        merged.set_string("python.executable", sys.executable)  # Python workers use this environment
        for key, value in conf.items():
            merged.set_string(key, value)
        if configuration is not None:
            own, notes = translate_configuration(dict(configuration.to_dict()), base)
            for note in notes:
                print(f"weir: {note}", file=sys.stderr)
            for key, value in own.items():
                merged.set_string(key, value)
        return original(merged)

    StreamExecutionEnvironment.get_execution_environment = staticmethod(get_execution_environment)


def _install_slot_sizing() -> None:
    """Unless the job sets ``taskmanager.numberOfTaskSlots``, give the local MiniCluster as
    many slots as the job needs, as ``weir run`` does: the sum over slot sharing groups of
    their largest parallelism (Flink's local executor takes the job's largest parallelism,
    too few when a job has several groups)."""
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.java_gateway import get_gateway

    def sized(original: Any) -> Any:
        def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
            j_conf = self._j_stream_execution_environment.getConfiguration()
            option = get_gateway().jvm.org.apache.flink.configuration.TaskManagerOptions.NUM_TASK_SLOTS
            if not j_conf.contains(option):
                groups: dict[str, int] = {}
                j_graph = self._generate_stream_graph(clear_transformations=False)
                for node in j_graph.getStreamNodes().toArray():
                    group = node.getSlotSharingGroup() or "default"
                    groups[group] = max(groups.get(group, 0), node.getParallelism())
                j_conf.set(option, max(1, sum(groups.values())))
            return original(self, *args, **kwargs)

        return execute

    StreamExecutionEnvironment.execute = sized(StreamExecutionEnvironment.execute)
    StreamExecutionEnvironment.execute_async = sized(StreamExecutionEnvironment.execute_async)


class _PlanCaptured(Exception):
    pass


def _install_plan_capture() -> None:
    from pyflink.datastream import StreamExecutionEnvironment

    def capture(self: Any, *args: Any, **kwargs: Any) -> Any:
        plan = json.loads(self.get_execution_plan())
        j_graph = self._generate_stream_graph(clear_transformations=False)
        vertices = []
        for vertex in j_graph.getJobGraph().getVerticesSortedTopologicallyFromSources().toArray():
            vertices.append(
                {
                    "name": vertex.getName(),
                    "parallelism": vertex.getParallelism(),
                    "operators": vertex.getOperatorIDs().size(),
                }
            )
        print(PLAN_MARKER + json.dumps({"plan": plan, "job_vertices": vertices}), flush=True)
        raise _PlanCaptured

    StreamExecutionEnvironment.execute = capture
    StreamExecutionEnvironment.execute_async = capture


def _run_as_main(source: str, original: str) -> None:
    """Run the swapped source as ``__main__`` under the original file's name: ``__file__``
    (data files beside the job) and tracebacks point at the user's file."""
    import types

    module = types.ModuleType("__main__")
    module.__file__ = original
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = module
    try:
        exec(compile(source, original, "exec"), module.__dict__)
    finally:
        sys.modules["__main__"] = saved


def main(argv: list[str]) -> int:
    mode, spec_path = argv[1], argv[2]
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    job = spec["job"]
    source = Path(job).read_text(encoding="utf-8")
    findings = list(spec.get("findings", [])) + missing_names(source, job)
    if findings:
        print(f"error: {refusal(spec['original'], findings)}", file=sys.stderr)
        return 2
    _install_configuration(spec.get("configuration", {}), os.getcwd())  # relative paths: as on weir
    if mode == "plan":
        _install_plan_capture()
    else:
        _install_slot_sizing()
    sys.argv = [spec["original"], *spec.get("argv", [])]
    sys.path.insert(0, spec["workdir"])
    try:
        _run_as_main(source, str(Path(spec["original"]).resolve()))
    except _PlanCaptured:
        return 0
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""``assert_exactly_once``: run a job twice — once cleanly, once with seeded random failures — and
require identical output. An exactly-once check anyone can put on their own job.

    def build(env):
        ...
        return collect(result_stream, exactly_once=True)   # or a FileSink's directory

    report = assert_exactly_once(build, seed=7, failures=3)

Theory of operation
-------------------
``build(env)`` adds the job to a fresh environment and returns a handle to its output: a
``CollectingSink``, a directory (``str`` / ``Path``: the finished part files of a
FileSink are read, hidden working files skipped), a list, or anything ``read_output``
turns into records. The helper runs it on a clean environment, then on a second one
configured for failure injection (``weir.cluster.failure_injector``: the
``weir.failure-injection.*`` keys; by default ``failures`` operator failures, each in a
randomly drawn operator and subtask after a seeded random number of records), with
checkpointing on (unless the job sets its own interval) and a fixed-delay restart strategy
with enough attempts. Then it compares the two outputs as multisets (or sequences with
``ordered=True``) and fails with the diff of ``assert_output`` — missing records mean
lost data, duplicated ones mean a sink or state that is not exactly-once — and the list of
injected failures. A run in which no failure was injected fails too: the check would
prove nothing.

``env_factory`` makes the environments (default: a new StreamExecutionEnvironment each
run; with the pytest plugin, the ``weir_env_factory`` fixture runs both on the shared
cluster, under mock time when the test uses ``weir_clock``).

What it does not do: inject into sources (the injector cannot), or make a sink
exactly-once: a sink that writes at-least-once (``add_sink(list.append)``) fails the check,
which is the point.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weir.errors import UsageError
from weir.testing.assertions import OutputDiff, diff_output

FAILURE_SPEC_KEY = "weir.failure-injection.spec"
FAILURE_SEED_KEY = "weir.failure-injection.seed"
FAILURE_MAX_KEY = "weir.failure-injection.max-failures"


@dataclass
class ExactlyOnceReport:
    """What the two runs did: outputs, the failures injected, restarts, and wall times."""

    clean_output: list[Any]
    output_with_failures: list[Any]
    injected_failures: list[str]
    restarts: int
    checkpoints_completed: int
    clean_seconds: float
    with_failures_seconds: float
    spec: str
    seed: int
    diff: OutputDiff | None = field(default=None, repr=False)

    def __str__(self) -> str:
        return (
            f"exactly-once check (seed {self.seed}, spec {self.spec!r}): {len(self.clean_output)} records, "
            f"{len(self.injected_failures)} injected failure(s), {self.restarts} restart(s), "
            f"{self.checkpoints_completed} checkpoint(s); clean run {self.clean_seconds:.2f} s, "
            f"with failures {self.with_failures_seconds:.2f} s"
        )


def read_output_of(handle: Any) -> list[Any]:
    """Records behind an output handle: a CollectingSink's records, the finished files of a
    directory (one record per line, files in name order), or a list / iterable itself."""
    records = getattr(handle, "records", None)
    if records is not None and not callable(records):
        return list(records)
    if isinstance(handle, str | Path):
        base = Path(handle)
        if not base.is_dir():
            return []
        lines: list[Any] = []
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            if any(part.startswith((".", "_")) for part in path.relative_to(base).parts):
                continue  # in-progress, pending and manifest files are the sink's working space
            lines.extend(path.read_text(encoding="utf-8").splitlines())
        return lines
    if handle is None:
        raise UsageError(
            "assert_exactly_once: build(env) returned None; return the job's output handle "
            "(collect(stream, exactly_once=True), a FileSink directory, ...) or pass read_output"
        )
    try:
        return list(handle)
    except TypeError:
        raise UsageError(
            f"assert_exactly_once cannot read output from {handle!r}; pass read_output=callable"
        ) from None


def default_failure_spec(failures: int, records_hint: int) -> str:
    """``failures`` operator failures, each after a random number of records up to ``records_hint``."""
    return f"raise:operator=*,after=1..{max(1, records_hint)},times={failures}"


def assert_exactly_once(
    build: Callable[[Any], Any],
    read_output: Callable[[Any], Any] | None = None,
    *,
    env_factory: Callable[[], Any] | None = None,
    failures: int = 3,
    seed: int = 0,
    spec: str | None = None,
    records_hint: int = 100,
    checkpoint_interval_ms: int = 100,
    restart_delay: str = "10 ms",
    ordered: bool = False,
    job_name: str = "exactly-once check",
) -> ExactlyOnceReport:
    """Run ``build``'s job cleanly and with seeded failures; fail unless both outputs agree.
    Returns an ExactlyOnceReport (print it to see what happened)."""
    __tracebackhide__ = True
    if isinstance(failures, bool) or not isinstance(failures, int) or failures < 1:
        raise UsageError(f"assert_exactly_once(failures) must be a positive integer, got {failures!r}")
    if env_factory is None:
        from weir.datastream import StreamExecutionEnvironment

        env_factory = StreamExecutionEnvironment.get_execution_environment
    reader = read_output or read_output_of
    spec = spec or default_failure_spec(failures, records_hint)

    clean_env = env_factory()
    clean_handle = build(clean_env)
    started = time.perf_counter()
    clean_env.execute(f"{job_name} (clean)")
    clean_seconds = time.perf_counter() - started
    clean = list(reader(clean_handle))

    env = env_factory()
    conf = env.get_configuration()
    conf.set_string(FAILURE_SPEC_KEY, spec)
    conf.set_string(FAILURE_SEED_KEY, str(seed))
    conf.set_string(FAILURE_MAX_KEY, str(failures))
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", str(failures + 2))
    conf.set_string("restart-strategy.fixed-delay.delay", restart_delay)
    handle = build(env)
    if env.get_checkpoint_interval() <= 0:
        env.enable_checkpointing(checkpoint_interval_ms)
    started = time.perf_counter()
    result = env.execute(f"{job_name} (with failures)")
    failed_seconds = time.perf_counter() - started
    with_failures = list(reader(handle))

    injected = list(result.get_accumulator_result("injected_failures") or [])
    report = ExactlyOnceReport(
        clean_output=clean,
        output_with_failures=with_failures,
        injected_failures=injected,
        restarts=int(result.get_accumulator_result("restarts") or 0),
        checkpoints_completed=int(result.get_accumulator_result("checkpoints_completed") or 0),
        clean_seconds=clean_seconds,
        with_failures_seconds=failed_seconds,
        spec=spec,
        seed=seed,
    )
    if not injected:
        raise AssertionError(
            f"exactly-once check proved nothing: no failure was injected (spec {spec!r}, seed {seed}); "
            f"the job may be smaller than records_hint={records_hint}, or its operators have no input "
            f"(sources are never failed) — lower records_hint or pass a spec"
        )
    report.diff = diff_output(with_failures, clean, ordered)
    if report.diff:
        raise AssertionError(
            "output with failures differs from the clean run, so the job is not exactly-once\n"
            + report.diff.describe("clean run", "with failures")
            + "\n  injected failures:\n"
            + "\n".join(f"    {line}" for line in injected)
        )
    return report

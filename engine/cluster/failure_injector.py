"""Seeded failure injection: the faults recovery must survive, on purpose and reproducibly.

Theory of operation
-------------------
A job's configuration names the faults (``weir.failure-injection.spec``), a seed
(``weir.failure-injection.seed``) and an overall bound (``weir.failure-injection.max-failures``);
``weir run --inject-failures SPEC`` sets the first. The JobMaster builds one
``FailureInjector`` per job from them and hands it to three hook points:

- every task's operator guard calls the callable from ``for_operator`` before each input
  batch (record faults: ``raise``, ``lose-taskmanager``);
- the checkpoint driver calls ``intercept_metadata_write`` after the last acknowledgement
  of a checkpoint, instead of writing ``_metadata`` (checkpoint faults);
- the MiniCluster attaches itself (``cluster``), so a fault can kill a TaskManager.

Rules that make a job under injection finish: at most ONE injected failure per attempt
(the first fault whose trigger is reached fires; the attempt is over then), each fault
fires at most ``times`` times, and all faults together at most ``max-failures`` times. So
a restart strategy with more attempts than that always gets the job through. Every
random choice (a threshold in a range, a subtask, a per-batch or per-checkpoint coin, the
file to corrupt) comes from ``random.Random`` seeded with the seed, the fault's index and
the attempt (or checkpoint id), never from the order in which tasks happen to run: the
same seed arms the same faults. (Where a threshold lands in the stream can still differ
a little between runs, because batch boundaries follow the scheduler.)

SPEC grammar::

    SPEC  := FAULT (';' FAULT)*
    FAULT := KIND [':' PARAM (',' PARAM)*]
    PARAM := NAME '=' VALUE

Kinds and their parameters:

- ``raise`` — an operator raises before processing an input batch (an ``InjectedFailure``
  that the task reports like a user exception);
- ``lose-taskmanager`` — the TaskManager running that operator's subtask dies: its tasks
  are cancelled at once and their local state directories (LMDB) deleted, it is
  unregistered (the JobMasters fail over at once) and a fresh one with the same id and
  slots registers;

  both take ``operator=NAME`` (the operator's name or uid; ``*`` for any operator with an
  input), ``subtask=I`` (default: drawn per attempt), and one trigger: ``after=N`` records
  of that operator subtask in the attempt, ``after=LO..HI`` (drawn per attempt), or
  ``probability=P`` per batch; default ``after=1``.
- ``crash-before-metadata`` — the JobManager "crashes" between the last acknowledgement of
  a checkpoint and its ``_metadata`` write: the checkpoint never exists, the job fails over;
- ``corrupt-checkpoint`` / ``delete-checkpoint-file`` — ``_metadata`` is written, then one
  private state file of that checkpoint is corrupted (one byte flipped) or deleted, and the
  JobManager crashes before telling any task the checkpoint completed. Recovery's checksum
  check rejects the checkpoint and falls back to the previous retained one (the JobMaster
  records the reason in ``JobResult.accumulators["recovery"]``). The crash comes before the
  notification on purpose: once sinks have committed a checkpoint's output, falling back
  behind it would write that output twice, in weir as in Flink;

  these take ``checkpoint=K`` (the first checkpoint with id >= K; default 1) or
  ``probability=P`` per checkpoint.

Every kind takes ``times=N`` (default 1) and ``attempt=N`` or ``attempt=LO..HI``: the
attempts (0 is the first run, 1 the first restart, ...) it may fire in (default: any). Example::

    raise:operator=Map,after=200..800,times=5;crash-before-metadata:probability=0.2,times=2

TaskManager processes (``weir.taskmanager.processes``, a standalone cluster): record faults
fire inside the process that runs the operator. Each deployment carries a copy of the
job's injector (``for_deployment``: spec, seed and the budgets spent so far); a TaskManager
process keeps one copy per job for all its tasks (``absorb`` merges what later deployments
know), so the one-failure-per-attempt rule holds within a process. Every failure it fires
is reported to the JobManager (``on_fire``, an ``injected_failure`` message sent before
the failure takes effect) and recorded there (``record_remote``), so the budgets and the
log of the job stay whole. ``lose-taskmanager`` in a process makes the process die
(``lose``: it sends the report, cancels its tasks, deletes their local state and SIGKILLs
itself); the JobManager notices by the lost connection. Two processes learn of each
other's failures only with the next deployment, so both may fire in the same attempt:
under processes ``max-failures`` can be exceeded by the failures of one attempt.

What it does not do: inject into sources (their records enter no guard), or into savepoints.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from weir.common import config_options as opts
from weir.errors import UsageError

RECORD_KINDS = ("raise", "lose-taskmanager")
CHECKPOINT_KINDS = ("crash-before-metadata", "corrupt-checkpoint", "delete-checkpoint-file")
KINDS = RECORD_KINDS + CHECKPOINT_KINDS
_PARAMS = {
    "raise": {"operator", "subtask", "after", "probability", "times", "attempt"},
    "lose-taskmanager": {"operator", "subtask", "after", "probability", "times", "attempt"},
    "crash-before-metadata": {"checkpoint", "probability", "times", "attempt"},
    "corrupt-checkpoint": {"checkpoint", "probability", "times", "attempt"},
    "delete-checkpoint-file": {"checkpoint", "probability", "times", "attempt"},
}


class InjectedFailure(RuntimeError):
    """A failure the failure injector caused on purpose."""


#: (execution id, fault index, attempt, what) of a failure fired in a TaskManager process
FireReport = Callable[[str, int, int, str], None]


@dataclass(frozen=True)
class Fault:
    """One parsed fault of a SPEC. Pure."""

    kind: str
    operator: str | None = None
    subtask: int | None = None
    after: tuple[int, int] | None = None  # (lo, hi) records; lo == hi for a fixed count
    probability: float | None = None
    checkpoint: int | None = None
    times: int = 1
    attempts: tuple[int, int] | None = None  # (first, last) attempt it may fire in; None: any

    def may_fire_in(self, attempt: int) -> bool:
        return self.attempts is None or self.attempts[0] <= attempt <= self.attempts[1]

    @property
    def is_record_fault(self) -> bool:
        return self.kind in RECORD_KINDS

    def matches(self, name: str, uid: str | None) -> bool:
        return self.operator == "*" or self.operator == name or (uid is not None and self.operator == uid)


def _int(fault: str, name: str, text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(
            f"failure injection: fault '{fault}': {name} must be an integer, got {text!r}"
        ) from None
    if value < minimum:
        raise UsageError(f"failure injection: fault '{fault}': {name} must be >= {minimum}, got {value}")
    return value


def _range(fault: str, name: str, text: str, minimum: int) -> tuple[int, int]:
    """``N`` or ``LO..HI`` (inclusive)."""
    lo_text, dots, hi_text = text.partition("..")
    lo = _int(fault, name, lo_text, minimum)
    return lo, _int(fault, name, hi_text, lo) if dots else lo


def parse_fault(text: str) -> Fault:
    """One FAULT of the grammar (module docstring); a UsageError names what is wrong."""
    kind, _, rest = text.strip().partition(":")
    kind = kind.strip()
    if kind not in KINDS:
        raise UsageError(
            f"failure injection: unknown fault kind {kind!r} in '{text}'; expected one of {', '.join(KINDS)}"
        )
    params: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        name, eq, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not value:
            raise UsageError(f"failure injection: fault '{text}': expected NAME=VALUE, got {part!r}")
        if name not in _PARAMS[kind]:
            raise UsageError(
                f"failure injection: fault '{text}': {kind} takes {', '.join(sorted(_PARAMS[kind]))}, not {name!r}"
            )
        if name in params:
            raise UsageError(f"failure injection: fault '{text}': {name} is given twice")
        params[name] = value
    if "after" in params and "probability" in params:
        raise UsageError(f"failure injection: fault '{text}': give either after= or probability=, not both")
    if "checkpoint" in params and "probability" in params:
        raise UsageError(
            f"failure injection: fault '{text}': give either checkpoint= or probability=, not both"
        )
    after = _range(text, "after", params["after"], 1) if "after" in params else None
    if after is None and kind in RECORD_KINDS and "probability" not in params:
        after = (1, 1)
    probability = None
    if "probability" in params:
        try:
            probability = float(params["probability"])
        except ValueError:
            probability = -1.0
        if not 0.0 < probability <= 1.0:
            raise UsageError(
                f"failure injection: fault '{text}': probability must be a number in (0, 1], "
                f"got {params['probability']!r}"
            )
    if kind in RECORD_KINDS and "operator" not in params:
        raise UsageError(
            f"failure injection: fault '{text}': {kind} needs operator=NAME (an operator's name or uid, or *)"
        )
    checkpoint = None
    if kind in CHECKPOINT_KINDS and probability is None:
        checkpoint = _int(text, "checkpoint", params.get("checkpoint", "1"), 1)
    return Fault(
        kind=kind,
        operator=params.get("operator"),
        subtask=_int(text, "subtask", params["subtask"], 0) if "subtask" in params else None,
        after=after,
        probability=probability,
        checkpoint=checkpoint,
        times=_int(text, "times", params.get("times", "1"), 0),
        attempts=_range(text, "attempt", params["attempt"], 0) if "attempt" in params else None,
    )


def parse_spec(spec: str) -> list[Fault]:
    """Every FAULT of a SPEC, in order."""
    faults = [parse_fault(part) for part in spec.split(";") if part.strip()]
    if not faults:
        raise UsageError(
            f"failure injection: the spec {spec!r} names no fault; e.g. 'raise:operator=Map,after=100'"
        )
    return faults


class FailureInjector:
    """The faults of one job, their budgets, and the effects. See the module docstring."""

    def __init__(self, faults: list[Fault], seed: int = 0, max_failures: int = -1) -> None:
        self.faults = list(faults)
        self.seed = seed
        self.max_failures = max_failures
        self.fired = [0] * len(self.faults)
        self.log: list[str] = []  # one line per injected failure, in order
        self.attempt = 0  # the newest attempt a task registered for
        self._failed_attempt = -1  # the attempt that already got its failure
        self.cluster: Any = None  # the MiniCluster, for lose-taskmanager
        # in a TaskManager process: report each fired failure to the JobManager; die
        self.on_fire: FireReport | None = None
        self.lose: Callable[[], None] | None = None
        self.process_name = ""  # "TaskManager <id> (pid <pid>)" in a TaskManager process

    @classmethod
    def from_configuration(cls, conf: Any) -> FailureInjector | None:
        """The injector a job's Configuration asks for, or None when it names no faults."""
        spec = conf.get_option(opts.FAILURE_INJECTION_SPEC)
        if not spec:
            return None
        return cls(
            parse_spec(spec),
            conf.get_option(opts.FAILURE_INJECTION_SEED),
            conf.get_option(opts.FAILURE_INJECTION_MAX_FAILURES),
        )

    @property
    def total_fired(self) -> int:
        return sum(self.fired)

    def _rng(self, *parts: object) -> random.Random:
        return random.Random("/".join(str(p) for p in (self.seed, *parts)))

    def _may_fire(self, index: int, attempt: int) -> bool:
        """The budget rules: one failure per attempt, ``times`` per fault, ``max_failures`` overall."""
        if attempt < self.attempt or attempt <= self._failed_attempt:
            return False
        if not self.faults[index].may_fire_in(attempt):
            return False
        if self.fired[index] >= self.faults[index].times:
            return False
        return not (0 <= self.max_failures <= self.total_fired)

    def _fire(self, index: int, attempt: int, what: str, execution_id: str = "") -> str:
        if self.on_fire is not None:
            self.on_fire(execution_id, index, attempt, what)
        self.fired[index] += 1
        self._failed_attempt = attempt
        line = f"injected failure {self.total_fired} (attempt {attempt}, fault {index + 1} {self.faults[index].kind}): {what}"
        self.log.append(line)
        return line

    # -- record faults ---------------------------------------------------------------------------
    def for_operator(
        self, name: str, uid: str | None, subtask: int, parallelism: int, attempt: int, execution_id: str
    ) -> Callable[[int], None] | None:
        """The per-batch hook of one operator subtask in one attempt, or None if no fault aims at it.
        Call it with the batch's record count before the operator processes the batch."""
        self.attempt = max(self.attempt, attempt)
        armed = []
        for index, fault in enumerate(self.faults):
            if not fault.is_record_fault or not fault.matches(name, uid) or fault.times == 0:
                continue
            rng = self._rng(index, attempt, name if fault.operator == "*" else "")
            target = fault.subtask if fault.subtask is not None else rng.randrange(parallelism)
            if target != subtask:
                continue
            threshold = rng.randint(*fault.after) if fault.after is not None else None
            coin = self._rng(index, attempt, name, subtask, "batches")
            armed.append((index, fault, threshold, coin))
        if not armed:
            return None
        seen = [0]

        def before_batch(records: int) -> None:
            seen[0] += records
            for index, fault, threshold, coin in armed:
                if threshold is not None:
                    hit = seen[0] >= threshold
                else:
                    assert fault.probability is not None
                    hit = coin.random() < fault.probability
                if hit and self._may_fire(index, attempt):
                    self._strike(index, fault, attempt, name, subtask, parallelism, seen[0], execution_id)

        return before_batch

    def _strike(
        self, index: int, fault: Fault, attempt: int, name: str, subtask: int, parallelism: int, seen: int,
        execution_id: str,
    ) -> None:  # fmt: skip
        where = f"operator '{name}' subtask {subtask + 1}/{parallelism} after {seen} records"
        if fault.kind == "raise":
            raise InjectedFailure(self._fire(index, attempt, where, execution_id))
        if self.lose is not None:  # in a TaskManager process: the process dies
            what = f"{self.process_name} lost with its local state at {where}"
            line = self._fire(index, attempt, what, execution_id)  # reported before the process dies
            self.lose()
            raise InjectedFailure(line)
        if self.cluster is None:
            raise UsageError(
                "failure injection: lose-taskmanager needs the job to run on a MiniCluster "
                "(the injector was never attached to one)"
            )
        tm_index = self.cluster.taskmanager_index_of(execution_id)
        line = self._fire(index, attempt, f"TaskManager {tm_index} lost with its local state at {where}")
        self.cluster.lose_taskmanager(tm_index)
        raise InjectedFailure(line)

    # -- TaskManager processes -------------------------------------------------------------------
    def for_deployment(self, attempt: int) -> FailureInjector:
        """A copy to ship with a deployment of ``attempt``: the faults, the seed and the
        budgets spent so far, without this process's hooks."""
        self.attempt = max(self.attempt, attempt)
        copy = FailureInjector(self.faults, self.seed, self.max_failures)
        copy.fired = list(self.fired)
        copy.attempt = self.attempt
        copy._failed_attempt = self._failed_attempt
        return copy

    def absorb(self, other: FailureInjector) -> None:
        """Merge what a newer copy of the same job's injector knows (budgets, attempts)."""
        if [f for f in other.faults] != self.faults:
            raise UsageError("failure injection: two deployments of one job carry different fault specs")
        self.fired = [max(a, b) for a, b in zip(self.fired, other.fired, strict=True)]
        self.attempt = max(self.attempt, other.attempt)
        self._failed_attempt = max(self._failed_attempt, other._failed_attempt)

    def record_remote(self, index: int, attempt: int, what: str) -> str:
        """A failure a TaskManager process fired for this job: count it and log it as if
        it had fired here. Raises UsageError for a fault index the spec does not have."""
        if not 0 <= index < len(self.faults) or attempt < 0:
            raise UsageError(
                f"failure injection: a TaskManager reported fault {index + 1} in attempt {attempt}; "
                f"the spec has faults 1..{len(self.faults)}"
            )
        self.attempt = max(self.attempt, attempt)
        failed = self._failed_attempt
        line = self._fire(index, attempt, what)
        self._failed_attempt = max(failed, attempt)
        return line

    # -- checkpoint faults -----------------------------------------------------------------------
    def _checkpoint_fault(self, checkpoint_id: int) -> int | None:
        for index, fault in enumerate(self.faults):
            if fault.is_record_fault:
                continue
            if fault.probability is not None:
                hit = self._rng(index, "checkpoint", checkpoint_id).random() < fault.probability
            else:
                hit = checkpoint_id >= (fault.checkpoint or 1)
            if hit and self._may_fire(index, self.attempt):
                return index
        return None

    async def intercept_metadata_write(self, driver: Any, checkpoint_id: int, metadata: Any) -> bool:
        """Called instead of the ``_metadata`` write of a checkpoint (not a savepoint). True: a
        fault fired and the driver must carry on as if the JobManager had crashed here (no
        completion, no notification); False: write the metadata as usual.
        Cancellation: the crash may be half done (metadata written, file not yet damaged)."""
        index = self._checkpoint_fault(checkpoint_id)
        if index is None:
            return False
        fault = self.faults[index]
        if fault.kind == "crash-before-metadata":
            line = self._fire(
                index, self.attempt, f"JobManager crashed before the _metadata of checkpoint {checkpoint_id}"
            )
            driver.fail_job(line)
            return True
        files = list(metadata.private_files()) or list(metadata.files())
        if not files:
            return False  # nothing to damage: let the checkpoint complete
        handle = self._rng(index, "file", checkpoint_id).choice(files)
        verb = "deleted" if fault.kind == "delete-checkpoint-file" else "corrupted"
        # fire before the first await: no other fault may claim this attempt meanwhile
        line = self._fire(
            index,
            self.attempt,
            f"{verb} {handle.path} of checkpoint {checkpoint_id}, then the JobManager crashed",
        )
        await trio.to_thread.run_sync(driver.storage.write_metadata, checkpoint_id, metadata)
        path = driver.storage.path_of(handle)
        await trio.to_thread.run_sync(
            path.unlink if verb == "deleted" else functools.partial(_flip_one_byte, path)
        )
        driver.fail_job(line)
        return True

    def statistics(self) -> dict[str, Any]:
        return {"injected_failures": self.total_fired, "log": list(self.log)}


def _flip_one_byte(path: Any) -> None:
    """Invert the byte in the middle of the file (its size stays; its checksum does not)."""
    with open(path, "r+b") as f:
        size = f.seek(0, 2)
        if size == 0:
            f.write(b"\x00")  # an empty file grows a byte: its size check fails
            return
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))

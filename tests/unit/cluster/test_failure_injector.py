"""The failure injector: SPEC grammar, budgets, determinism, and the checkpoint faults' effects."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from weir.checkpoint.metadata import CheckpointMetadata
from weir.checkpoint.storage import CheckpointStorage
from weir.cli import main
from weir.cluster.failure_injector import FailureInjector, Fault, InjectedFailure, parse_fault, parse_spec
from weir.common import Configuration
from weir.errors import UsageError


def test_the_spec_grammar() -> None:
    faults = parse_spec(
        "raise:operator=Map,after=200..800,times=5; lose-taskmanager:operator=window,subtask=1,probability=0.5;"
        "crash-before-metadata:probability=0.2;corrupt-checkpoint:checkpoint=3;delete-checkpoint-file"
    )
    assert faults == [
        Fault("raise", operator="Map", after=(200, 800), times=5),
        Fault("lose-taskmanager", operator="window", subtask=1, probability=0.5),
        Fault("crash-before-metadata", probability=0.2),
        Fault("corrupt-checkpoint", checkpoint=3),
        Fault("delete-checkpoint-file", checkpoint=1),
    ]
    assert parse_fault("raise:operator=*") == Fault("raise", operator="*", after=(1, 1))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("explode:operator=Map", "unknown fault kind 'explode'"),
        ("raise", "needs operator=NAME"),
        ("raise:operator=Map,after=0", "after must be >= 1"),
        ("raise:operator=Map,after=9..3", "after must be >= 9"),
        ("raise:operator=Map,after=x", "after must be an integer"),
        ("raise:operator=Map,after=5,probability=0.1", "either after= or probability="),
        ("raise:operator=Map,probability=2", r"probability must be a number in \(0, 1\]"),
        ("raise:operator=Map,checkpoint=3", "raise takes"),
        ("crash-before-metadata:operator=Map", "crash-before-metadata takes"),
        ("raise:operator=Map,operator=Sum", "operator is given twice"),
        ("raise:operator", "expected NAME=VALUE"),
        (" ; ", "names no fault"),
    ],
)
def test_bad_specs_are_explained(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_spec(spec)


def test_a_raise_fires_once_after_its_count_then_never_in_that_attempt() -> None:
    injector = FailureInjector(parse_spec("raise:operator=Map,subtask=0,after=10,times=2"))
    hook = injector.for_operator("Map", None, 0, 2, attempt=0, execution_id="e0")
    assert hook is not None
    assert (
        injector.for_operator("Map", None, 1, 2, attempt=0, execution_id="e1") is None
    )  # subtask 1 not aimed at
    assert injector.for_operator("Sum", "sum", 0, 2, attempt=0, execution_id="e2") is None
    hook(9)
    with pytest.raises(InjectedFailure, match="operator 'Map' subtask 1/2 after 12 records"):
        hook(3)
    hook(100)  # the attempt already failed: nothing more
    again = injector.for_operator("Map", None, 0, 2, attempt=1, execution_id="e3")
    assert again is not None
    with pytest.raises(InjectedFailure):
        again(10)
    last = injector.for_operator("Map", None, 0, 2, attempt=2, execution_id="e4")
    assert last is not None
    last(1_000)  # times=2 is used up
    assert injector.total_fired == 2 and len(injector.log) == 2
    hook(1)  # a task of an old attempt never fires


def test_max_failures_bounds_all_faults_together() -> None:
    injector = FailureInjector(parse_spec("raise:operator=*,after=1,times=10"), max_failures=3)
    for attempt in range(6):
        hook = injector.for_operator("Map", "map", 0, 1, attempt, f"e{attempt}")
        assert hook is not None
        if attempt < 3:
            with pytest.raises(InjectedFailure):
                hook(1)
        else:
            hook(1)
    assert injector.total_fired == 3


def test_only_one_injected_failure_per_attempt_across_faults() -> None:
    injector = FailureInjector(parse_spec("raise:operator=Map,after=1;raise:operator=Sum,after=1"))
    first = injector.for_operator("Map", None, 0, 1, 0, "a")
    second = injector.for_operator("Sum", None, 0, 1, 0, "b")
    assert first is not None and second is not None
    with pytest.raises(InjectedFailure):
        first(1)
    second(1)  # the attempt is over
    assert injector.fired == [1, 0]


def thresholds(seed: int) -> list[int]:
    """Where the fault fires in each of 5 attempts (subtask drawn too)."""
    injector = FailureInjector(parse_spec("raise:operator=Map,after=100..10000,times=5"), seed=seed)
    out = []
    for attempt in range(5):
        for subtask in range(4):
            hook = injector.for_operator("Map", None, subtask, 4, attempt, f"e{attempt}{subtask}")
            if hook is None:
                continue
            seen = 0
            try:
                while True:
                    hook(1)
                    seen += 1
            except InjectedFailure:
                out.append(subtask * 100_000 + seen + 1)
    return out


def test_the_seed_decides_every_choice() -> None:
    assert thresholds(7) == thresholds(7)
    assert thresholds(7) != thresholds(8)
    assert len(thresholds(7)) == 5 and all(100 <= t % 100_000 <= 10_000 for t in thresholds(7))


def test_probability_per_batch_is_seeded() -> None:
    def batches_until_failure(seed: int) -> int:
        injector = FailureInjector(parse_spec("raise:operator=Map,subtask=0,probability=0.01"), seed=seed)
        hook = injector.for_operator("Map", None, 0, 1, 0, "e")
        assert hook is not None
        for n in range(100_000):
            try:
                hook(1)
            except InjectedFailure:
                return n
        raise AssertionError("never fired")

    assert batches_until_failure(3) == batches_until_failure(3)
    assert len({batches_until_failure(s) for s in range(5)}) > 1


def test_from_configuration() -> None:
    assert FailureInjector.from_configuration(Configuration()) is None
    conf = Configuration()
    conf.set_string("weir.failure-injection.spec", "raise:operator=Map")
    conf.set_string("weir.failure-injection.seed", "42")
    conf.set_string("weir.failure-injection.max-failures", "3")
    injector = FailureInjector.from_configuration(conf)
    assert injector is not None and injector.seed == 42 and injector.max_failures == 3
    with pytest.raises(UsageError, match="max-failures: must be -1"):
        conf.set_string("weir.failure-injection.max-failures", "-2")


class FakeDriver:
    def __init__(self, storage: CheckpointStorage) -> None:
        self.storage = storage
        self.failures: list[str] = []

    def fail_job(self, reason: str) -> None:
        self.failures.append(reason)


def checkpoint_with_one_file(tmp_path: Path) -> tuple[CheckpointStorage, CheckpointMetadata, Any]:
    from weir.checkpoint.metadata import OperatorCheckpointState, SubtaskStateHandle

    storage = CheckpointStorage(tmp_path, "job")
    handle = storage.write_state_file(4, "op-0.state", b"state bytes " * 10)
    metadata = CheckpointMetadata(
        job_id="job", checkpoint_id=4, timestamp_ms=0,
        operators=(OperatorCheckpointState("op", 1, 128, (SubtaskStateHandle(0, "operator", handle, None),), {}),),
    )  # fmt: skip
    return storage, metadata, handle


async def test_a_crash_before_metadata_leaves_no_checkpoint(tmp_path: Path) -> None:
    storage, metadata, _ = checkpoint_with_one_file(tmp_path)
    driver = FakeDriver(storage)
    injector = FailureInjector(parse_spec("crash-before-metadata:checkpoint=4"))
    assert await injector.intercept_metadata_write(driver, 3, metadata) is False  # not yet
    assert await injector.intercept_metadata_write(driver, 4, metadata) is True
    assert not storage.metadata_path(4).exists()
    assert "crashed before the _metadata of checkpoint 4" in driver.failures[0]
    assert storage.latest_valid().metadata is None


@pytest.mark.parametrize(
    ("kind", "reason"), [("corrupt-checkpoint", "is corrupt"), ("delete-checkpoint-file", "is missing")]
)
async def test_damaged_checkpoint_files_are_caught_by_the_checks(
    tmp_path: Path, kind: str, reason: str
) -> None:
    storage, metadata, handle = checkpoint_with_one_file(tmp_path)
    path = storage.path_of(handle)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    driver = FakeDriver(storage)
    injector = FailureInjector(parse_spec(f"{kind}:checkpoint=1"))
    assert await injector.intercept_metadata_write(driver, 4, metadata) is True
    assert storage.metadata_path(4).exists()  # written, then damaged, then the crash
    assert not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != before
    latest = storage.latest_valid()
    assert latest.metadata is None and latest.reason is not None and reason in latest.reason
    assert driver.failures and injector.total_fired == 1
    assert await injector.intercept_metadata_write(driver, 5, metadata) is False  # times=1 used up


def test_the_cli_rejects_a_bad_spec_before_running(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text("raise SystemExit('must not run')\n")
    result = CliRunner().invoke(main, ["run", str(job), "--no-live", "--inject-failures", "raise:after=3"])
    assert result.exit_code == 2
    assert "raise needs operator=NAME" in result.output


def test_the_cli_injects_failures_into_a_job(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(
        "from weir.common import Configuration\n"
        "from weir.datastream import StreamExecutionEnvironment\n"
        "conf = Configuration()\n"
        "conf.set_string('restart-strategy.type', 'fixed-delay')\n"
        "conf.set_string('restart-strategy.fixed-delay.attempts', '3')\n"
        "conf.set_string('restart-strategy.fixed-delay.delay', '0 ms')\n"
        "env = StreamExecutionEnvironment.get_execution_environment(conf)\n"
        "env.from_collection(list(range(100))).map(lambda x: x).name('Map').add_sink(lambda v: None)\n"
        "result = env.execute('injected')\n"
        "print('INJECTED', result.get_accumulator_result('injected_failures'))\n"
        "print('RESTARTS', result.get_accumulator_result('restarts'))\n"
    )
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(job),
            "--no-live",
            "--inject-failures",
            "raise:operator=Map,after=1",
            "--failure-seed",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "RESTARTS 1" in result.output
    assert "injected failure 1 (attempt 0, fault 1 raise): operator 'Map' subtask 1/1" in result.output


def test_a_copy_for_a_deployment_carries_the_budgets_and_reports_back() -> None:
    home = FailureInjector(
        parse_spec("raise:operator=Map,subtask=0,after=2,times=2"), seed=5, max_failures=-1
    )
    copy = home.for_deployment(attempt=0)
    reports: list[tuple[str, int, int, str]] = []
    copy.on_fire = lambda *report: reports.append(report)
    hook = copy.for_operator("Map", None, 0, 2, 0, "exec-1")
    assert hook is not None
    hook(1)
    with pytest.raises(InjectedFailure):
        hook(1)
    ((execution_id, index, attempt, what),) = reports
    assert (execution_id, index, attempt) == ("exec-1", 0, 0)
    home.record_remote(index, attempt, what)
    assert home.fired == [1] and home.log == copy.log
    later = home.for_deployment(attempt=1)
    copy.absorb(later)
    assert copy.fired == [1] and copy.attempt == 1
    with pytest.raises(UsageError, match=r"fault 3 in attempt 0; the spec has faults 1\.\.1"):
        home.record_remote(2, 0, "bogus")

"""The job control mailbox of ``weir run`` against another local user (issue 24).

Each test replays one attack. "Another user" is uid 65534 (``nobody``): the tests run as
root here and in CI, so they ``chown`` what the attacker would have planted; run as
another user, they fall back to what that user can do (a directory owned by root, mode
bits, a symlink), so no test is skipped.

Two real processes talk here, so the waits are on the wall clock (a MockClock cannot span
processes); each is a poll with a deadline."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from weir.cli import main

NOBODY = 65534
ROOT = os.geteuid() == 0

JOB = """
from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource

env = StreamExecutionEnvironment.get_execution_environment()
(
    env.from_source(
        DataGeneratorSource(lambda i: i, 10_000_000, rate_limit=500.0, type_info=Types.LONG()),
        WatermarkStrategy.no_watermarks(),
        "numbers",
    )
    .key_by(lambda n: n % 3)
    .reduce(lambda a, b: a + b)
    .add_sink(lambda n: None)
)
env.execute("control security")
"""


def _umask_000() -> None:
    os.umask(0)


def _weir(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "weir.cli", *args],
        capture_output=True, text=True, env=env, timeout=120, preexec_fn=_umask_000,
    )  # fmt: skip


def _poll(condition: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting: {what}")
        time.sleep(0.1)


class Job:
    """A `weir run` process under umask 000, reachable through the mailbox under ``home``."""

    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.env = {**os.environ, "WEIR_HOME": str(self.home)}
        job = tmp_path / "job.py"
        job.write_text(JOB)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "weir.cli", "run", str(job), "--no-live"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env,
            preexec_fn=_umask_000,
        )  # fmt: skip
        self.job_id = ""
        _poll(self._listed, "the job shows up in `weir list`")
        self.box = self.home / "jobs" / self.job_id

    def _listed(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"weir run ended early: {self.process.communicate()[1]}")
        listing = _weir("list", env=self.env)
        assert listing.returncode == 0, listing.stderr
        if "control security" not in listing.stdout:
            return False
        self.job_id = listing.stdout.split()[0]
        return True

    def running(self) -> bool:
        return self.job_id in _weir("list", env=self.env).stdout

    def drop_request(self, name: str, request: object, owner: int | None = None) -> Path:
        """Put a request into the mailbox the way a client does (temp file, then rename)."""
        tmp = self.box / "requests" / f".{name}.planting"
        tmp.write_text(json.dumps(request))
        if owner is not None:
            os.chown(tmp, owner, owner)
        path = self.box / "requests" / name
        tmp.rename(path)
        return path


@pytest.fixture
def job(tmp_path: Path) -> Iterator[Job]:
    running = Job(tmp_path)
    try:
        yield running
    finally:
        running.process.kill()
        running.process.communicate()


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_under_umask_000_the_mailbox_is_private(job: Job) -> None:
    for directory in (job.home, job.home / "jobs", job.box, job.box / "requests", job.box / "responses"):
        assert _mode(directory) == 0o700, directory
    assert _mode(job.box / "job.json") == 0o600


def _foreign_dir(path: Path) -> Path:
    """A directory owned by another user: planted by uid 65534 as root, else root's own "/"."""
    if not ROOT:
        return Path("/")
    path.mkdir(mode=0o755)
    os.chown(path, NOBODY, NOBODY)
    return path


def test_a_home_owned_by_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _foreign_dir(tmp_path / "theirs")
    monkeypatch.setenv("WEIR_HOME", str(home))
    listed = CliRunner().invoke(main, ["list"])
    assert listed.exit_code == 2
    assert f"{home} is owned by uid" in listed.stderr and "WEIR_HOME" in listed.stderr
    job = tmp_path / "job.py"
    job.write_text(JOB)
    ran = CliRunner().invoke(main, ["run", str(job), "--no-live"])
    assert ran.exit_code == 2 and "is owned by uid" in ran.stderr


def test_a_jobs_dir_owned_by_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    jobs = home / "jobs"
    if ROOT:
        _foreign_dir(jobs)
    else:  # not root: another user's directory cannot be made; a link to one is planted instead
        jobs.symlink_to("/")
    monkeypatch.setenv("WEIR_HOME", str(home))
    result = CliRunner().invoke(main, ["cancel", "0123abcd"])
    assert result.exit_code == 2
    assert str(jobs) in result.stderr and "no running job" not in result.stderr


def test_a_home_writable_by_others_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o777)
    monkeypatch.setenv("WEIR_HOME", str(home))
    result = CliRunner().invoke(main, ["list"])
    assert result.exit_code == 2
    assert "writable by group or others" in result.stderr and f"chmod 700 {home}" in result.stderr


def test_a_request_planted_by_another_user_is_refused(job: Job) -> None:
    if ROOT:
        planted = job.drop_request("1-planted.json", {"action": "cancel"}, owner=NOBODY)
    else:  # not root: a file of another uid cannot be made; a link to a request is planted instead
        decoy = job.box.parent.parent.parent / "decoy.json"
        decoy.write_text(json.dumps({"action": "cancel"}))
        planted = job.box / "requests" / "1-planted.json"
        planted.symlink_to(decoy)
    _poll(lambda: not os.path.lexists(planted), "the job removes the planted request")
    assert not (job.box / "responses" / planted.name).exists()
    time.sleep(0.5)  # a cancel would have ended the job by now
    assert job.running()
    cancelled = _weir("cancel", job.job_id, env=job.env)  # the owner's own request still works
    assert cancelled.returncode == 0, cancelled.stderr
    job.process.communicate(timeout=60)
    assert job.process.returncode == 0


def test_a_symlinked_response_does_not_overwrite_its_target(job: Job, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("the owner's secret")
    victim.chmod(0o600)
    name = "2-attack.json"
    responses = job.box / "responses"
    for planted in (responses / name, responses / f".{name}.tmp"):  # the answer and its old temp name
        planted.symlink_to(victim)
    job.drop_request(name, {"action": "unknown"})
    answer = responses / name

    def answered() -> bool:
        return victim.read_text() != "the owner's secret" or not answer.is_symlink()

    _poll(answered, "the job answers the request")
    assert victim.read_text() == "the owner's secret"
    assert stat.S_ISREG(os.lstat(answer).st_mode) and _mode(answer) == 0o600
    assert "unknown request 'unknown'" in json.loads(answer.read_text())["error"]


def test_a_savepoint_target_through_another_users_symlink_is_refused(job: Job, tmp_path: Path) -> None:
    private = tmp_path / "owner-only"
    private.mkdir(mode=0o700)
    drop = tmp_path / "drop"
    drop.mkdir()
    link = drop / "sp"
    link.symlink_to(private)
    if ROOT:
        os.lchown(link, NOBODY, NOBODY)
        expected = f"{link} is a symlink owned by uid 65534"
    else:  # not root: the link sits in a directory everybody may write, as in a shared /tmp without +t
        drop.chmod(0o777)
        expected = f"{drop} has mode 0777, writable by group or others"
    result = _weir("savepoint", job.job_id, str(link), env=job.env)
    assert result.returncode == 2
    assert expected in result.stderr
    assert list(private.iterdir()) == []
    assert job.running()


def test_a_savepoint_target_of_another_user_is_refused(job: Job, tmp_path: Path) -> None:
    if ROOT:
        theirs = _foreign_dir(tmp_path / "theirs")
        expected = "owned by uid 65534"
    else:  # not root: a directory everybody may write and rename in (no sticky bit)
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        theirs.chmod(0o777)
        expected = "writable by group or others"
    result = _weir("savepoint", job.job_id, str(theirs / "sp"), env=job.env)
    assert result.returncode == 2
    assert str(theirs) in result.stderr and expected in result.stderr
    assert list(theirs.iterdir()) == []


def test_a_new_savepoint_target_is_made_by_the_job_and_not_writable_by_others(
    job: Job, tmp_path: Path
) -> None:
    target = tmp_path / "new" / "sp"
    result = _weir("savepoint", job.job_id, str(target), env=job.env)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).parent == target
    for directory in (tmp_path / "new", target):
        assert _mode(directory) == 0o755, directory

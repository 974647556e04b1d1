"""The job control mailbox's checks, one process, no job: request shapes, savepoint targets,
private files. "Another user" is uid 65534, planted with ``chown`` when the tests run as
root (here and in CI); otherwise the test falls back to what a user can do (mode bits,
root's own directories)."""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio
import trio.testing

from weir.cluster.control import (
    checked_savepoint_target,
    parse_request,
    running_jobs,
    serve_job_control,
)
from weir.errors import UsageError
from weir.private_files import private_dir, read_private

NOBODY = 65534
ROOT = os.geteuid() == 0


@pytest.fixture
def umask_000() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# ---------------------------------------------------------------------- requests


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "malformed request: not JSON"),
        (b"[1, 2]", "expected a JSON object, got list"),
        (b'{"action": "rm -rf"}', "unknown request 'rm -rf'; known: savepoint, stop, cancel"),
        (b'{"action": "cancel", "target": "/x"}', "unknown fields ['target']; it takes ['action']"),
        (b'{"action": "savepoint", "target": 7}', "target must be an absolute path (a string), got 7"),
        (b'{"action": "savepoint", "target": "sp"}', "target must be an absolute path (a string), got 'sp'"),
        (b'{"action": "stop", "format": "zip"}', "format must be 'canonical' or 'native', got 'zip'"),
        (b'{"action": "stop", "drain": "yes"}', "drain must be true or false, got 'yes'"),
    ],
)
def test_a_malformed_request_is_refused_with_what_is_wrong(data: bytes, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_request(data)
    assert message in str(caught.value)


def test_a_well_formed_request_is_taken_as_it_is() -> None:
    request = {"action": "stop", "target": "/sp", "drain": True, "format": "native"}
    assert parse_request(json.dumps(request).encode()) == request


# ---------------------------------------------------------------------- savepoint targets


def test_a_missing_target_is_made_without_group_or_other_write(tmp_path: Path, umask_000: None) -> None:
    target = tmp_path / "a" / "b"
    assert checked_savepoint_target(str(target)) == target
    assert _mode(tmp_path / "a") == _mode(target) == 0o755


def test_a_link_of_the_jobs_own_user_is_followed_to_its_real_directory(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    assert checked_savepoint_target(str(tmp_path / "link" / "sp")) == tmp_path / "real" / "sp"
    assert (tmp_path / "real" / "sp").is_dir()


def test_a_link_of_another_user_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real")
    if ROOT:
        os.lchown(link, NOBODY, NOBODY)
        expected = f"{link} is a symlink owned by uid 65534"
    else:  # not root: the link sits where everybody may replace it
        tmp_path.chmod(0o777)
        expected = "writable by group or others without the sticky bit"
    with pytest.raises(UsageError) as caught:
        checked_savepoint_target(str(link / "sp"))
    assert expected in str(caught.value)
    assert list((tmp_path / "real").iterdir()) == []


def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    if ROOT:
        os.chown(theirs, NOBODY, NOBODY)
        expected = f"{theirs} is owned by uid 65534, not by the job's user (uid 0) or root"
    else:  # not root: another user's directory cannot be made; one anybody may write stands in
        theirs.chmod(0o777)
        expected = f"{theirs} has mode 0777"
    with pytest.raises(UsageError) as caught:
        checked_savepoint_target(str(theirs / "sp"))
    assert expected in str(caught.value)
    assert list(theirs.iterdir()) == []


def test_writable_by_others_is_refused_unless_sticky(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UsageError) as caught:
        checked_savepoint_target(str(shared / "sp"))
    assert f"{shared} has mode 0777, writable by group or others without the sticky bit" in str(caught.value)
    assert f"chmod go-w {shared}" in str(caught.value)
    shared.chmod(0o1777)  # like /tmp: others cannot rename or remove what weir makes there
    assert checked_savepoint_target(str(shared / "sp")) == shared / "sp"


def test_a_relative_target_or_a_link_loop_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="must be an absolute path, got 'sp'"):
        checked_savepoint_target("sp")
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(UsageError, match="too many levels of symlinks"):
        checked_savepoint_target(str(tmp_path / "loop" / "sp"))


# ---------------------------------------------------------------------- private files


def test_private_dir_makes_every_missing_level_0700_under_umask_000(tmp_path: Path, umask_000: None) -> None:
    home = tmp_path / "a" / "b" / "home"
    private_dir(home)
    for level in (tmp_path / "a", tmp_path / "a" / "b", home):
        assert _mode(level) == 0o700, level


def test_read_private_refuses_a_fifo_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="is not a regular file"):
        read_private(fifo)


def test_read_private_refuses_another_users_file(tmp_path: Path) -> None:
    if ROOT:
        theirs = tmp_path / "theirs"
        theirs.write_text("{}")
        os.chown(theirs, NOBODY, NOBODY)
    else:  # not root: a file of root's stands in for another user's
        theirs = Path("/etc/passwd")
    with pytest.raises(UsageError, match=r"is owned by uid .*, not by you"):
        read_private(theirs)


def test_read_private_refuses_a_file_longer_than_expected(tmp_path: Path) -> None:
    (tmp_path / "big").write_text("{}")
    with pytest.raises(UsageError, match="holds 2 bytes, more than the 1 expected"):
        read_private(tmp_path / "big", max_bytes=1)


def _plant_job(home: Path, name: str, info_owner: int | None) -> Path:
    box = home / "jobs" / name
    private_dir(box)
    info = {"job_id": name, "name": "planted", "pid": os.getpid(), "started": time.time()}
    (box / "job.json").write_text(json.dumps(info))
    if info_owner is not None:
        os.chown(box / "job.json", info_owner, info_owner)
    return box


def test_weir_list_does_not_trust_another_users_or_a_linked_job_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("WEIR_HOME", str(home))
    own = _plant_job(home, "own", None)
    linked = _plant_job(home, "linked", None)
    (linked / "job.json").rename(linked / "real.json")
    (linked / "job.json").symlink_to(linked / "real.json")
    expected = {"own"}
    if ROOT:
        _plant_job(home, "theirs", NOBODY)
    assert {job["job_id"] for job in running_jobs()} == expected
    assert own.is_dir()


def test_a_job_id_that_is_a_path_gets_no_mailbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WEIR_HOME", str(tmp_path / "home"))
    handle = SimpleNamespace(job_id="../../escape", job_master=None)
    trio.run(serve_job_control, None, handle)  # returns at once: the job goes on without a mailbox
    assert not (tmp_path / "escape").exists()
    assert "job id '../../escape' is not a plain token" in capsys.readouterr().err


def test_a_directory_planted_as_a_request_is_removed_and_the_mailbox_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEIR_HOME", str(tmp_path / "home"))
    handle = SimpleNamespace(
        job_id="abc", job_master=SimpleNamespace(job_graph=SimpleNamespace(job_name="j"))
    )
    requests = tmp_path / "home" / "jobs" / "abc" / "requests"

    async def plant_then_stop() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_job_control, None, handle)
            while not requests.is_dir():
                await trio.sleep(0.01)
            (requests / "1-dir.json").mkdir()
            (requests / "1-dir.json" / "inside").write_text("{}")
            await trio.sleep(1)  # ten polls
            assert not (requests / "1-dir.json").exists()
            assert (requests.parent / "job.json").is_file()  # the mailbox is still served
            nursery.cancel_scope.cancel()

    trio.run(plant_then_stop, clock=trio.testing.MockClock(autojump_threshold=0))

"""Reaching a running job from another process: ``weir savepoint``, ``weir stop``, ``weir cancel``.

Theory of operation
-------------------
``weir run`` runs its jobs in its own process, on an embedded cluster. While a job runs,
that process keeps a small mailbox for it under the weir home directory
(``$WEIR_HOME``, default ``~/.weir``)::

    jobs/<job id>/job.json          who runs it: name, pid, start time
    jobs/<job id>/requests/<id>.json    written by a client (temp file + rename)
    jobs/<job id>/responses/<id>.json   written by the job's process when done

A client writes a request and waits for the response with the same id. The job's
process polls the request folder every 100 ms, carries out each request on the job's
JobMaster (savepoint, stop-with-savepoint, cancel) and answers with the result or one
clear error. The mailbox is removed when the job ends. Files, not a socket: nothing
listens on the network, the mailbox survives nothing it should not, and a job whose
process died is recognised by its pid.

Who may use it: only the user who runs the job. Whoever can write a request can cancel
the job or have it write a savepoint wherever its user may write, so (with
``weir.private_files``):

- every level (home, ``jobs/``, ``jobs/<id>/``, ``requests/``, ``responses/``) is created
  0700 whatever the umask, and an existing one is used only if it is a real directory of
  this user that nobody else can write; otherwise ``UsageError`` says what is wrong
  (``weir run`` refuses to start, ``weir list`` and the other clients refuse to look);
- files (``job.json``, requests, responses) are written 0600 to an ``O_EXCL`` temporary
  and renamed into place, and read with ``O_NOFOLLOW`` only if they are regular files of
  this user: a request planted by another user (or as a symlink) is removed unread and
  never answered; a response or ``job.json`` that is not the user's own is refused;
- a request is data: a JSON object with a known action and typed fields, checked before
  anything runs; names of requests and job ids are plain tokens, never paths;
- a savepoint target named in a request is an absolute path that the job's process walks
  down itself (``checked_savepoint_target``): missing levels are made by the job's user
  without group or other write; an existing level must be owned by that user or root and
  not writable by group or others unless sticky (as ``/tmp``); a symlink is followed only
  if its owner is that user or root (Linux's ``protected_symlinks`` rule). What the
  savepoint is written under is then a chain of real directories nobody else can change.

It does not defend against root or the user's own processes, and it does not check the
directories above the weir home (``~`` is the user's own business).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import stat
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from weir import private_files
from weir.errors import UsageError, WeirError
from weir.private_files import check_private_dir, private_dir, read_private, write_private

POLL_S = 0.1
MAX_MESSAGE_BYTES = 64 * 1024
_TOKEN = re.compile(r"[0-9A-Za-z_-]{1,64}")
_REQUEST_FIELDS = {
    "savepoint": {"action", "target", "format"},
    "stop": {"action", "target", "drain", "format"},
    "cancel": {"action"},
}
_MAX_SYMLINK_HOPS = 40


def weir_home() -> Path:
    """The weir home directory (``$WEIR_HOME``, default ``~/.weir``); not created."""
    return private_files.weir_home()


def jobs_dir() -> Path:
    return weir_home() / "jobs"


def _write_json(path: Path, value: Any) -> None:
    write_private(path, json.dumps(value, indent=2, sort_keys=True).encode())


def _read_json(path: Path) -> Any:
    """A JSON file of this user (no symlink, not another user's); ``UsageError`` otherwise."""
    data = read_private(path, max_bytes=MAX_MESSAGE_BYTES)
    try:
        return json.loads(data)
    except ValueError as exc:
        raise UsageError(f"{path} is not JSON: {exc}") from None


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (possibly another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _existing_jobs_dir() -> Path | None:
    """``jobs/`` checked private with the home above it, or None if there is none yet."""
    root = jobs_dir()
    for level in (root.parent, root):
        if not os.path.lexists(level):
            return None
        check_private_dir(level)
    return root


def _job_info(entry: Path) -> dict[str, Any] | None:
    """``job.json`` of a mailbox of this user, or None for anything else (skipped, never trusted)."""
    try:
        check_private_dir(entry)
        info = _read_json(entry / "job.json")
    except (OSError, UsageError):
        return None
    if not (
        isinstance(info, dict)
        and isinstance(info.get("job_id"), str)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("pid"), int)
        and isinstance(info.get("started"), (int, float))
    ):
        return None
    return info


def running_jobs() -> list[dict[str, Any]]:
    """Jobs whose process is still alive (stale mailboxes of dead processes are removed).
    Raises ``UsageError`` when the home or ``jobs/`` is not private."""
    out: list[dict[str, Any]] = []
    root = _existing_jobs_dir()
    if root is None:
        return out
    for name in sorted(os.listdir(root)):
        entry = root / name
        info = _job_info(entry)
        if info is None:
            continue
        if _alive(info["pid"]):
            out.append(info)
        else:
            shutil.rmtree(entry, ignore_errors=True)
    return out


def parse_request(data: bytes) -> dict[str, Any]:
    """A request as the job's process accepts it, or ``UsageError`` naming what is wrong."""
    try:
        request = json.loads(data)
    except ValueError as exc:
        raise UsageError(f"malformed request: not JSON ({exc})") from None
    if not isinstance(request, dict):
        raise UsageError(f"malformed request: expected a JSON object, got {type(request).__name__}")
    action = request.get("action")
    if action not in _REQUEST_FIELDS:
        raise UsageError(f"unknown request {action!r}; known: savepoint, stop, cancel")
    unknown = sorted(set(request) - _REQUEST_FIELDS[action])
    if unknown:
        raise UsageError(
            f"request {action!r} has unknown fields {unknown}; it takes {sorted(_REQUEST_FIELDS[action])}"
        )
    target = request.get("target")
    if target is not None and not (isinstance(target, str) and os.path.isabs(target)):
        raise UsageError(f"request {action!r}: target must be an absolute path (a string), got {target!r}")
    if request.get("format", "canonical") not in ("canonical", "native"):
        raise UsageError(
            f"request {action!r}: format must be 'canonical' or 'native', got {request['format']!r}"
        )
    if not isinstance(request.get("drain", False), bool):
        raise UsageError(f"request {action!r}: drain must be true or false, got {request['drain']!r}")
    return request


def _check_trusted_dir(target: str, path: Path, st: os.stat_result) -> None:
    """A level of a savepoint target: a directory of the job's user or root that nobody else
    can rename things in (not writable by group or others unless sticky)."""
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"savepoint target {target}: {path} is not a directory")
    if st.st_uid not in (os.getuid(), 0):
        raise UsageError(
            f"savepoint target {target}: {path} is owned by uid {st.st_uid}, not by the job's user "
            f"(uid {os.getuid()}) or root; weir writes savepoints only into directories that "
            "nobody else controls (choose a directory of your own)"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise UsageError(
            f"savepoint target {target}: {path} has mode {stat.S_IMODE(st.st_mode):04o}, writable by group "
            "or others without the sticky bit, so another user could replace what weir writes there "
            f"(run: chmod go-w {path}, or choose another directory)"
        )


def checked_savepoint_target(target: str) -> Path:
    """The real directory a requested savepoint goes under, made by the job's user if missing.

    Walks ``target`` level by level from ``/`` (see the theory of operation): missing levels
    are created without group or other write whatever the umask; symlinks are followed only
    when owned by the job's user or root. Returns a path with no symlink in it."""
    if not os.path.isabs(target):
        raise UsageError(f"savepoint target must be an absolute path, got {target!r}")
    real = Path("/")
    _check_trusted_dir(target, real, os.lstat(real))
    pending = list(Path(os.path.normpath(target)).parts[1:])
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            real = real.parent  # a level already checked on the way down
            continue
        here = real / part
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):  # made just now: checked like any other level
                os.mkdir(here, 0o755)  # the umask can take bits away, never add group or other write
            pending.insert(0, part)
            continue
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (os.getuid(), 0):
                raise UsageError(
                    f"savepoint target {target}: {here} is a symlink owned by uid {st.st_uid}, not by the "
                    f"job's user (uid {os.getuid()}) or root; weir does not follow another user's links "
                    "(give the real directory)"
                )
            hops += 1
            if hops > _MAX_SYMLINK_HOPS:
                raise UsageError(f"savepoint target {target}: too many levels of symlinks")
            link = Path(os.readlink(here))
            if link.is_absolute():
                real = Path("/")
            pending[:0] = list(link.parts[1:] if link.is_absolute() else link.parts)
            continue
        _check_trusted_dir(target, here, st)
        real = here
    return real


# ---------------------------------------------------------------------- the job's side


async def _carry_out(job_master: Any, request: dict[str, Any]) -> dict[str, Any]:
    action = request["action"]
    if action == "cancel":
        job_master.cancel()
        return {"cancelled": True}
    target = request.get("target")
    if target is not None:
        target = str(await trio.to_thread.run_sync(checked_savepoint_target, target))
    stop = None if action == "savepoint" else "drain" if request.get("drain") else "no_drain"
    path = await job_master.trigger_savepoint(target, request.get("format", "canonical"), stop)
    return {"savepoint": path}


def _remove(path: Path) -> None:
    """Remove whatever is at ``path`` (a file, a link, a planted directory), never what a link points to."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)  # rmtree does not follow links inside either
    else:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _take_request(path: Path) -> dict[str, Any] | str | None:
    """Read and remove one request: the request, an error to answer with, or None when the
    file is not this user's own regular file (refused unread, never answered)."""
    try:
        data = read_private(path, max_bytes=MAX_MESSAGE_BYTES)
    except (OSError, UsageError) as exc:
        print(f"weir: refused control request {path}: {exc}", file=sys.stderr)
        return None
    finally:
        _remove(path)
    try:
        return parse_request(data)
    except UsageError as exc:
        return str(exc)


def job_control_observer() -> Callable[[Any, Any], Awaitable[None]]:
    """``serve_job_control``, once the weir home and its ``jobs/`` are known to be private
    (made 0700 when missing); raises ``UsageError`` before any job starts otherwise."""
    private_dir(jobs_dir().parent)
    private_dir(jobs_dir())
    return serve_job_control


async def serve_job_control(cluster: Any, handle: Any) -> None:
    """An observer (``client.observe_jobs``): keep the job's mailbox while it runs.
    Cancellation: the mailbox is removed."""
    box = jobs_dir() / handle.job_id
    requests = box / "requests"
    responses = box / "responses"
    try:
        if not _TOKEN.fullmatch(handle.job_id):
            raise UsageError(f"job id {handle.job_id!r} is not a plain token, so it names no mailbox")
        for level in (jobs_dir().parent, jobs_dir(), box, requests, responses):
            private_dir(level)
    except UsageError as exc:  # the job goes on; only its mailbox is missing
        print(f"weir: `weir savepoint/stop/cancel` cannot reach job {handle.job_id}: {exc}", file=sys.stderr)
        return
    _write_json(
        box / "job.json",
        {
            "job_id": handle.job_id,
            "name": handle.job_master.job_graph.job_name,
            "pid": os.getpid(),
            "started": time.time(),
        },
    )

    async def answer(name: str, request: dict[str, Any]) -> None:
        # shielded: a stop-with-savepoint ends the job (and so this observer) right after the
        # savepoint completes, and the client must still get its answer
        try:
            with trio.CancelScope(shield=True), trio.fail_after(3600):
                result = {"ok": True, **await _carry_out(handle.job_master, request)}
        except WeirError as exc:
            result = {"ok": False, "error": str(exc)}
        except Exception as exc:  # the request failed; the job goes on
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        _write_json(responses / name, result)

    try:
        async with trio.open_nursery() as nursery:
            while True:
                try:
                    names = sorted(os.listdir(requests))
                except FileNotFoundError:
                    print(f"weir: the mailbox of job {handle.job_id} was removed; it is off", file=sys.stderr)
                    return
                for name in names:
                    if name.startswith("."):
                        continue  # a client's temporary, renamed into place when complete
                    taken = _take_request(requests / name)
                    if taken is None:
                        continue
                    if not (name.endswith(".json") and _TOKEN.fullmatch(name[: -len(".json")])):
                        continue  # not a name a client gives; there is no safe name to answer under
                    if isinstance(taken, str):
                        _write_json(responses / name, {"ok": False, "error": taken})
                    else:
                        nursery.start_soon(answer, name, taken)
                await trio.sleep(POLL_S)
    finally:
        with trio.CancelScope(shield=True):  # give clients a moment to collect their last answers
            for _ in range(50):
                if not any(responses.glob("*.json")):
                    break
                await trio.sleep(POLL_S)
        shutil.rmtree(box, ignore_errors=True)


def combine_observers(*observers: Callable[[Any, Any], Awaitable[None]] | None) -> Any:
    """One observer running all the given ones side by side."""
    chosen = [o for o in observers if o is not None]

    async def observe(cluster: Any, handle: Any) -> None:
        async with trio.open_nursery() as nursery:
            for observer in chosen:
                nursery.start_soon(observer, cluster, handle)

    return observe


# ---------------------------------------------------------------------- the client's side


def _mailbox(job_id: str) -> Path:
    """The private mailbox of the running job ``job_id``; ``UsageError`` if there is none."""
    if not _TOKEN.fullmatch(job_id):
        raise UsageError(f"job id {job_id!r} is not a job id (letters, digits, '-' and '_'; see `weir list`)")
    running = running_jobs()
    if job_id not in {j["job_id"] for j in running}:
        known = ", ".join(f"{j['job_id']} ({j['name']})" for j in running) or "none"
        raise UsageError(
            f"no running job {job_id} under {jobs_dir()} (running jobs: {known}); "
            "jobs started with `weir run` in another shell show up here while they run "
            "(set WEIR_HOME the same way in both shells)"
        )
    box = jobs_dir() / job_id
    for level in (box / "requests", box / "responses"):
        check_private_dir(level)
    return box


def send_request(job_id: str, request: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Any]:
    """Hand ``request`` to the running job ``job_id`` and wait for its answer (blocking)."""
    box = _mailbox(job_id)
    name = f"{int(time.time() * 1000)}-{secrets.token_hex(4)}.json"
    _write_json(box / "requests" / name, request)
    answer = box / "responses" / name
    deadline = time.monotonic() + timeout_s
    while not os.path.lexists(answer):
        if time.monotonic() > deadline:
            raise UsageError(f"job {job_id} did not answer within {timeout_s:.0f} s")
        if not os.path.lexists(box):
            raise UsageError(f"job {job_id} ended before it answered")
        time.sleep(POLL_S)
    try:
        result = _read_json(answer)
    finally:
        answer.unlink(missing_ok=True)
    if not isinstance(result, dict):
        raise UsageError(f"job {job_id} answered with {result!r}, not a JSON object")
    if not result.get("ok"):
        raise UsageError(f"job {job_id}: {result.get('error')}")
    return result

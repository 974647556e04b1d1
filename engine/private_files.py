"""Files that control jobs or prove who wrote a checkpoint: private to the user who runs weir.

Theory of operation
-------------------
Everything weir keeps for one user lives under the weir home directory (``$WEIR_HOME``,
default ``~/.weir``): the job control mailboxes and the key that signs checkpoints.
Another local user must not be able to read or plant anything there, so:

- a private directory is created with mode 0700 (whatever the umask) and, when it already
  exists, used only if it is a real directory (not a symlink) owned by the current user
  and not writable by group or others; otherwise ``UsageError`` says what is wrong and
  how to fix it;
- missing parents of a private directory are created 0700 too, so no level weir made
  itself is one another user can rename or replace;
- a private file is opened with ``O_NOFOLLOW`` (a symlink planted in its place is refused,
  not followed) and created with mode 0600 and ``O_EXCL``, so a temporary file is never
  one somebody else made first; a file is read only if it is a regular file of the
  current user (``O_NONBLOCK``: a FIFO planted in its place cannot hang the reader);
- a file is replaced atomically: written to a fresh ``O_EXCL`` temporary beside it, then
  renamed over it (a rename replaces a planted symlink instead of writing through it).

Pure of Trio; the functions do blocking file I/O and are cheap.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from weir.errors import UsageError

__all__ = [
    "check_private_dir",
    "open_private",
    "private_dir",
    "read_private",
    "weir_home",
    "write_private",
]

_OPEN_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def weir_home() -> Path:
    """The weir home directory of the current user (``$WEIR_HOME``, default ``~/.weir``); not created."""
    return Path(os.environ.get("WEIR_HOME") or Path.home() / ".weir")


def check_private_dir(path: Path, st: os.stat_result | None = None) -> None:
    """Raise ``UsageError`` unless ``path`` is a directory of this user that nobody else can write."""
    if st is None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise UsageError(f"private directory {path} does not exist") from None
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(
            f"{path} is a symlink; weir keeps its private files only in a real directory "
            "(remove the link, or point WEIR_HOME at a directory of your own)"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{path} is not a directory; weir needs a private directory there")
    if st.st_uid != os.getuid():
        raise UsageError(
            f"{path} is owned by uid {st.st_uid}, not by you (uid {os.getuid()}); weir refuses to keep "
            "its private files in another user's directory (set WEIR_HOME to a directory of your own)"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UsageError(
            f"{path} has mode {stat.S_IMODE(st.st_mode):04o}, writable by group or others; weir needs "
            f"it private (run: chmod 700 {path})"
        )


def private_dir(path: Path) -> Path:
    """``path`` as a private directory: created 0700 (parents included) when missing, else checked."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]
        for level in reversed(missing):
            try:
                os.mkdir(level, 0o700)
            except FileExistsError:
                continue  # somebody made it just now: ``path`` is checked below like any existing one
            os.chmod(level, 0o700)  # the umask may have taken bits away; never adds any
        st = os.lstat(path)
    check_private_dir(path, st)
    return path


def open_private(path: Path, flags: int = _OPEN_READ) -> int:
    """``os.open`` that never follows a symlink at ``path``; raises ``UsageError`` for one."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a symlink
            raise UsageError(
                f"{path} is a symlink; weir does not follow links in its private files"
            ) from None
        raise


def read_private(path: Path, *, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file of the current user at ``path``, opened without following
    symlinks; ``UsageError`` for anything else, or for a file longer than ``max_bytes``."""
    fd = open_private(path)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{path} is not a regular file")
        if st.st_uid != os.getuid():
            raise UsageError(
                f"{path} is owned by uid {st.st_uid}, not by you (uid {os.getuid()}); "
                "weir reads its private files only when you wrote them"
            )
        if max_bytes is not None and st.st_size > max_bytes:
            raise UsageError(f"{path} holds {st.st_size} bytes, more than the {max_bytes} expected")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes, *, exclusive: bool = False) -> None:
    """Write ``data`` to ``path`` with mode 0600, atomically (an ``O_EXCL`` temporary, then a rename).

    ``exclusive``: create ``path`` itself with ``O_EXCL`` instead (fails if anything is there)."""
    target = path if exclusive else path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = open_private(target, _CREATE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(target)
        raise
    os.close(fd)
    if not exclusive:
        os.replace(target, path)

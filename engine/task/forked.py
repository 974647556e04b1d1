"""The asynchronous part of a checkpoint in a forked child process.

Theory of operation
-------------------
Every task of a weir process shares one thread, and a Python worker thread that encodes
a snapshot holds the GIL for most of its work: at a million keys the asynchronous part
of a window's snapshot (pane keys and accumulators encoded, timers sorted, the state file
packed and checksummed) takes seconds of the job's own CPU time, so the job runs at a
fraction of its speed while a checkpoint is written. ``write_in_child`` moves that work
out of the process: it forks, the child writes the state files exactly as the worker
thread would (``write_operator_snapshots``) and exits, and the job's process waits for
it without holding anything. The child runs on the machine's other core, with its own
GIL.

``fork`` is a copy-on-write snapshot of the whole process done by the kernel: the child
sees the job's memory as it was at the fork, and pages the job writes afterwards are
copied for the job, not for the child. So once the child runs, the heap backend's own
copy-on-write bookkeeping for the checkpoint is no longer needed in the job's process
(``PendingHeapSnapshot.release``): writes after the fork go straight to the tables.
The fork itself copies the process's page tables (milliseconds per GiB of resident
memory); it happens on the job's thread and is measured as ``fork_ms``.

What may cross the fork. The child must not use anything whose owner is another thread
or the parent's handles to outside state: an LMDB environment (LMDB forbids using an
environment, or its transactions, in a forked child), the bookkeeping an incremental run
leaves in its backend. So:

- the heap backend's pending snapshot, taken snapshots, timer snapshots, operator and
  channel state, and frozen panes merged into any of these go to the child as they are;
- an LMDB snapshot's pinned view (``weir.state.lmdb_backend.PinnedView``) is claimed for
  the child on the task's thread right before the fork; the child opens the environment
  itself, pins the barrier's state with its own read transaction, answers ``PINNED``, and
  only then reads and writes. Until that answer the backend does not commit full batches,
  so the child's transaction sees exactly the barrier's commit (it checks the id and fails
  the checkpoint otherwise). A thread of the job's process (``_AnswerWatch``) waits for the
  answer and hands the views over, so a commit that must wait for the child never waits
  for the task's own thread. A view a snapshot thread already has (a commit gave it one
  before the fork) is read in a worker thread first, as before;
- for an incremental LMDB run the child reads the planned entries, merges the frozen
  panes and writes the run; the job's process records the new chain from the child's
  answer (``record_written``). The next delta reads the panes' keys again; it encodes
  them where it is read (``weir.state.incremental.ChangedKeys``), so nothing per pane
  happens in the job's process.

What comes back. The child answers on a pipe only it and the job's process hold: the
byte ``PINNED`` once its views are pinned, then one JSON object: per operator the written file's path, size and SHA-256, the files of its
incremental chain, and the bytes written, or the error (its type, its message, whether it was a frozen pane's mutable
accumulator, whether the task was closing). The job's process builds the
acknowledgement from its own copy of the snapshots and that JSON; nothing is unpickled.
The child closes its end of the pipe once it has answered, and the job's process acts on
a complete answer at once: the child's exit tears down its copy of the job's address
space, which takes seconds at a few GiB, so a thread reaps it afterwards. A child that
dies without answering (or in the middle of it) fails the checkpoint (declined with its exit
status); one that has not answered after ``CHILD_DEADLINE_S`` ends by its alarm (a lock
some other thread of the parent held at the fork would otherwise hang it, and the task
that waits for it, for good). A task cancelled while its child writes kills the child and reaps it.

The child does nothing but pin and write: it closes every file descriptor it inherited but its
answer pipe (a copy of a socket held by the child would keep a peer from seeing the job's
process close that connection), resets the signal handlers the event loop set, replaces
the locks its snapshots use (another thread of the parent may have held one at
the fork) and leaves with ``os._exit``, so no ``atexit`` handler, buffered output or
finaliser of the parent runs twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from typing import Any

import trio

from weir.checkpoint.metadata import FileHandle
from weir.checkpoint.storage import CheckpointStorage
from weir.errors import WeirError
from weir.state.incremental import PendingIncrementalSnapshot
from weir.task.snapshots import OperatorAck, OperatorSnapshot, operator_ack, write_operator_snapshots

__all__ = [
    "FORK_MIN_ENTRIES",
    "ChildSnapshotError",
    "entries_to_write",
    "forkable",
    "use_child",
    "write_in_child",
]


#: Seconds a child may take before it is ended (the default checkpoint timeout).
CHILD_DEADLINE_S = 600
#: how much lower than the job a checkpoint-writing child runs (``os.nice``)
CHILD_NICENESS = 5
_MAX_FD = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1 << 16


class ChildSnapshotError(WeirError):
    """The child process that wrote a checkpoint's files failed; ``task_closing`` as the thread path."""

    def __init__(self, message: str, task_closing: bool = False) -> None:
        super().__init__(message)
        self.task_closing = task_closing


def can_fork() -> bool:
    """Whether this platform forks (POSIX)."""
    return hasattr(os, "fork")


def forkable(snapshots: list[OperatorSnapshot]) -> bool:
    """Whether the asynchronous part of ``snapshots`` may run in a forked child (module
    docstring): every kind of snapshot may, once ``_read_here`` did its reads."""
    return True


#: Under ``AUTO``, the entries (panes, keyed entries, timers) from which a snapshot is
#: written by a child: a fork costs the job's thread ~10-20 ms per GiB of resident memory,
#: encoding costs it 1-8 microseconds an entry (more for LMDB, read in Python), so below this
#: a worker thread is cheaper. Measured on the rolling reduce at p=2 (entries per subtask):
#: at 5,000 the thread kept 0.95-0.98x of the throughput, a child 0.84-0.95x; at 25,000 a
#: child kept 0.82-0.91x, the thread 0.68-0.82x (LMDB's job CPU 1.56x).
FORK_MIN_ENTRIES = 20_000


def entries_to_write(snapshots: list[OperatorSnapshot]) -> int:
    """An estimate of the asynchronous part's work: the entries it will still encode."""
    from weir.state.heap import PendingHeapSnapshot
    from weir.state.panes import _MergedTimerSnapshot, _NativeKeyedSnapshot
    from weir.time.timers import PendingTimerSnapshot

    total = 0
    for snap in snapshots:
        if isinstance(snap.keyed, PendingIncrementalSnapshot):
            run = snap.keyed.entries_to_write()
            total += FORK_MIN_ENTRIES if run < 0 else run  # a full run: as big as the state
        inner, panes = _merged_parts(snap.keyed)
        if panes is not None and not isinstance(snap.keyed, _NativeKeyedSnapshot):
            total += len(panes)  # a native section is written as it is, with the GIL let go
        if isinstance(inner, PendingHeapSnapshot) or hasattr(inner, "__len__"):
            total += len(inner)  # the heap's pending snapshot, or LMDB's (its entries at the barrier)
        timers = snap.timers
        if isinstance(timers, _MergedTimerSnapshot):
            timers = timers._pending
        if isinstance(timers, PendingTimerSnapshot):
            total += len(timers)
    return total


def use_child(mode: str, snapshots: list[OperatorSnapshot]) -> bool:
    """Whether ``weir.checkpointing.async-snapshot`` = ``mode`` has a child write ``snapshots``."""
    if mode == "thread" or not can_fork() or not forkable(snapshots):
        return False
    return mode == "process" or entries_to_write(snapshots) >= FORK_MIN_ENTRIES


def _merged_parts(keyed: Any) -> tuple[Any, Any]:
    """``(inner pending snapshot, panes)`` of a keyed snapshot with frozen panes merged in, else ``(keyed, None)``."""
    from weir.state.panes import _MergedKeyedSnapshot

    if isinstance(keyed, _MergedKeyedSnapshot):
        return keyed._pending, keyed._panes
    return keyed, None


def _views(pending: Any) -> list[Any] | None:
    """The pinned LMDB views (``PinnedView``) a pending keyed snapshot reads, or None if it reads none."""
    child_views = getattr(pending, "child_views", None)
    return None if child_views is None else list(child_views())


def _must_resolve_first(pending: Any) -> bool:
    """A pending keyed snapshot the child may not compute: it reads an LMDB view a thread of
    this process has already, or it is of a kind the child cannot read."""
    from weir.state.backend import PendingKeyedStateSnapshot, _DoneSnapshot
    from weir.state.heap import PendingHeapSnapshot

    views = _views(pending)
    if views is not None:
        return not all(v.can_go_to_child() for v in views)
    return isinstance(pending, PendingKeyedStateSnapshot) and not isinstance(
        pending, PendingHeapSnapshot | _DoneSnapshot
    )


def _keyed_pending(snap: OperatorSnapshot) -> Any:
    if isinstance(snap.keyed, PendingIncrementalSnapshot):
        return snap.keyed
    return _merged_parts(snap.keyed)[0]


def _resolve_unforkable(snapshots: list[OperatorSnapshot]) -> None:
    """Do (in this thread) the reads the child may not do (``_must_resolve_first``)."""
    from weir.state.panes import _MergedKeyedSnapshot

    for snap in snapshots:
        if not _must_resolve_first(_keyed_pending(snap)):
            continue
        if isinstance(snap.keyed, PendingIncrementalSnapshot):
            snap.keyed.read_here()
            continue
        inner, panes = _merged_parts(snap.keyed)
        done = inner.result()
        if panes is not None:
            assert isinstance(snap.keyed, _MergedKeyedSnapshot)
            snap.keyed._pending = done
        else:
            object.__setattr__(snap, "keyed", done)


def _claim_views(snapshots: list[OperatorSnapshot]) -> list[Any] | None:
    """On the task's thread, with no checkpoint of the event loop until the fork: the views the
    child will pin, claimed; None (nothing claimed) if a commit gave one to a thread meanwhile."""
    views = [v for snap in snapshots for v in _views(_keyed_pending(snap)) or ()]
    if not all(v.can_go_to_child() for v in views):
        return None
    for v in views:
        claimed = v.claim_for_child()
        assert claimed, "a view changed hands on the task's own thread"
    return views


def _heap_pendings(snapshots: list[OperatorSnapshot]) -> list[Any]:
    from weir.state.heap import PendingHeapSnapshot

    out = []
    for snap in snapshots:
        inner, _ = _merged_parts(snap.keyed)
        if isinstance(inner, PendingHeapSnapshot):
            out.append(inner)
    return out


def _panes_of(snap: OperatorSnapshot) -> Any:
    return _merged_parts(snap.keyed)[1]


def _prepare_child(snapshots: list[OperatorSnapshot], mutable: list[int]) -> None:
    """In the child: new locks for its snapshots (a thread of the parent may have held one),
    and frozen panes that note in ``mutable`` which operator held a mutable accumulator."""
    for pending in _heap_pendings(snapshots):
        pending._backend._cow_lock = threading.Lock()
    for i, snap in enumerate(snapshots):
        panes = _panes_of(snap)
        if panes is not None:
            panes._lock = threading.RLock()
            panes._on_mutable = lambda i=i: mutable.append(i)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _child(
    write_fd: int,
    storage: CheckpointStorage,
    checkpoint_id: int,
    snapshots: list[OperatorSnapshot],
    views: list[Any],
) -> None:
    """The child's whole life: pin its views, write, answer, leave. Never returns."""
    status = 0
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        # the parent's sockets, pipes and environments: a copy held here would keep a peer
        # from seeing the parent close its connection, and a port bound, until the child ends
        os.closerange(3, write_fd)
        os.closerange(write_fd + 1, _MAX_FD)
        # a lock another thread held at the fork (say inside a library) would hang the child
        # for good, and the task with it: past the deadline the alarm's default action ends it
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(CHILD_DEADLINE_S)
        _yield_to_the_job()
        mutable: list[int] = []
        _prepare_child(snapshots, mutable)
        try:
            for view in views:
                view.pin_in_child()
            _write_all(write_fd, PINNED)  # the job's process may commit again
            acks, total = write_operator_snapshots(storage, checkpoint_id, snapshots)
            answer: dict[str, Any] = {
                "files": [_file_json(a.handle.file) for a in acks],
                "shared": [[_file_json(f) for f in a.handle.shared_files] for a in acks],
                "total": total,
            }
        except BaseException as exc:  # every failure is reported to the parent, as data
            answer = {
                "error": f"{type(exc).__name__}: {exc}",
                "task_closing": bool(getattr(exc, "task_closing", False)),
                "mutable": mutable,
            }
        finally:
            for view in views:
                view.close_in_child()
        _write_all(write_fd, json.dumps(answer).encode())
        os.close(write_fd)  # the job's process reads to the end now, not once this process is gone
    except BaseException:
        status = 70
    finally:
        os._exit(status)


async def write_in_child(
    storage: CheckpointStorage, checkpoint_id: int, snapshots: list[OperatorSnapshot]
) -> tuple[list[OperatorAck], int, float]:
    """``write_operator_snapshots`` in a forked child (module docstring); also the fork's
    milliseconds. Cancellation: the child is killed and reaped, nothing is acknowledged."""
    while True:
        if any(_must_resolve_first(_keyed_pending(s)) for s in snapshots):
            await trio.to_thread.run_sync(_resolve_unforkable, snapshots)
        for snap in snapshots:
            panes = _panes_of(snap)
            if panes is not None:
                panes.warm_up()  # once per process: the children inherit the compiled kernels
        views = _claim_views(snapshots)  # no checkpoint of the event loop from here to the fork
        if views is not None:
            break
    try:
        read_fd, write_fd = os.pipe()
    except BaseException:
        _hand_over(views)
        raise
    started = time.perf_counter()
    try:
        pid = os.fork()
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        _hand_over(views)
        raise
    if pid == 0:  # pragma: no cover - the child leaves through os._exit
        os.close(read_fd)
        _child(write_fd, storage, checkpoint_id, snapshots, views)
    fork_ms = (time.perf_counter() - started) * 1000
    os.close(write_fd)
    for pending in _heap_pendings(snapshots):
        pending.release()  # the child has its own copy of the state at the fork
    reaped = False
    answer = _AnswerWatch(read_fd, views)  # owns the pipe's read end from here
    try:
        data = await trio.to_thread.run_sync(answer.wait, abandon_on_cancel=True)
        if _complete_answer(data) is not None:
            # the child closed its end once it answered; its exit (the teardown of its copy
            # of the job's address space: seconds at a few GiB) is not waited for
            _reap_later(pid, views)
            status = 0
        else:
            _, status = await trio.to_thread.run_sync(os.waitpid, pid, 0)
        reaped = True
    finally:
        if not reaped:
            with trio.CancelScope(shield=True):
                _kill_and_reap(pid)  # an abandoned watch then reads the end of the pipe and closes it
                answer.close_unless_started()
                _hand_over(views)
    if views and os.WIFSIGNALED(status):
        views[0].after_child_died()
    closing = any(v.backend_closing() for v in views)  # say, its files went with the task
    acks, total = _acks(snapshots, data, status, closing)
    return acks, total, fork_ms


#: The child's first byte when it has pinned its views (its answer, JSON, starts with ``{``).
PINNED = b"P"


def _complete_answer(data: bytes) -> dict[str, Any] | None:
    """The child's JSON answer, or None if it gave none or a part (it died while answering)."""
    try:
        answer = json.loads(data) if data else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def _reap_later(pid: int, views: list[Any]) -> None:
    """Wait for a child that has answered on a thread of its own, so it leaves no zombie."""

    def reap() -> None:
        with contextlib.suppress(ChildProcessError):
            _, status = os.waitpid(pid, 0)
            if views and os.WIFSIGNALED(status):
                views[0].after_child_died()

    threading.Thread(target=reap, name=f"weir-checkpoint-reap-{pid}", daemon=True).start()


def _hand_over(views: list[Any]) -> None:
    for view in views:
        view.hand_over()


def _yield_to_the_job() -> None:
    """Run the child at a lower priority than the job (``CHILD_NICENESS``): every task of a
    job forks its own child at a barrier, so at parallelism 2 two children and the job's
    thread want the machine's two cores at once, and at equal priority the job's thread,
    the one thing that keeps records moving, gets two thirds of a core."""
    with contextlib.suppress(OSError):
        os.nice(CHILD_NICENESS)


class _AnswerWatch:
    """Reads the child's answer on a worker thread: the first byte, ``PINNED``, hands the
    views over at once -- so a commit on the task's thread that waits for the child's pin
    (``LmdbKeyedStateBackend._settle_views``) never waits for the task's thread itself --
    then the rest, to the end of the pipe. It owns the pipe's read end and closes it, also
    when the task was cancelled meanwhile and abandoned it (the killed child ends the pipe)."""

    def __init__(self, read_fd: int, views: list[Any]) -> None:
        self._fd = read_fd
        self._views = views
        self._lock = threading.Lock()
        self._started = self._closed = False

    def close_unless_started(self) -> None:
        """The task's side, once the child is gone: close the pipe if no thread ever took it."""
        with self._lock:
            if not self._started and not self._closed:
                self._closed = True
                os.close(self._fd)

    def wait(self) -> bytes:
        with self._lock:
            if self._closed:
                return b""
            self._started = True
        chunks: list[bytes] = []
        try:
            first = os.read(self._fd, 1)
            _hand_over(self._views)
            if first and first != PINNED:
                chunks.append(first)
            while first and (chunk := os.read(self._fd, 1 << 16)):
                chunks.append(chunk)
        finally:
            os.close(self._fd)
            _hand_over(self._views)
        return b"".join(chunks)


def _acks(
    snapshots: list[OperatorSnapshot], data: bytes, status: int, backend_closing: bool = False
) -> tuple[list[OperatorAck], int]:
    """The acknowledgement from the child's answer, or ``ChildSnapshotError``."""
    answer = _complete_answer(data)
    if answer is None:
        raise ChildSnapshotError(
            f"the process writing the checkpoint's files ended without an answer ({_describe(status)})"
        )
    if "error" in answer:
        for i in answer.get("mutable", []):
            panes = _panes_of(snapshots[i])
            if panes is not None and panes._on_mutable is not None:
                panes._on_mutable()  # later snapshots of this operator take the synchronous way
        raise ChildSnapshotError(answer["error"], backend_closing or bool(answer.get("task_closing")))
    acks = []
    for snap, file, shared in zip(snapshots, answer["files"], answer["shared"], strict=True):
        chain = tuple(FileHandle(*f) for f in shared)
        if isinstance(snap.keyed, PendingIncrementalSnapshot):
            snap.keyed.record_written(chain)  # what the run's write recorded in the child
        acks.append(operator_ack(snap, FileHandle(*file), chain))
    return acks, int(answer["total"])


def _file_json(f: FileHandle) -> list[Any]:
    return [f.path, f.size_bytes, f.sha256, f.shared]


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def _kill_and_reap(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)

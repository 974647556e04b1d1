"""The asynchronous part of a checkpoint in a forked child writes what a worker thread writes,
keeps writing after the job's process changes its state, and fails cleanly."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.property.test_pane_snapshots import deferred_snapshot, make
from tests.unit.operators.test_vector_window import Run
from tests.unit.operators.test_window_perf_fast_mode import TUMBLING
from weir.checkpoint.storage import CheckpointStorage
from weir.keys import KeyGroupRange
from weir.state import create_keyed_backend
from weir.state.state_file import decode_state_file
from weir.task.forked import ChildSnapshotError, entries_to_write, use_child, write_in_child
from weir.task.snapshots import OperatorSnapshot, write_operator_snapshots


def operator_snapshot(keyed: Any, timers: Any, **extra: Any) -> OperatorSnapshot:
    return OperatorSnapshot(
        "w", 1, 128, 0, keyed=keyed, key_group_range=KeyGroupRange(0, 127), timers=timers, **extra
    )


def files_of(storage: CheckpointStorage, acks: Any) -> list[bytes]:
    return [storage.path_of(a.handle.file).read_bytes() for a in acks]


def window_run(kind: str = "tuple-reduce", backend: str = "hashmap", path: Path | None = None) -> Run:
    store = create_keyed_backend(backend, "op", 128, KeyGroupRange(0, 127), path=path)
    run = Run(make(kind, TUMBLING), store)
    run.batch([((k, k * 10), 1_000 + k) for k in range(300)] + [((k, 1), 6_000) for k in range(0, 300, 7)])
    return run


@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
async def test_a_child_writes_the_bytes_a_thread_writes_even_as_the_job_goes_on(
    backend: str, tmp_path: Path
) -> None:
    run = window_run(backend=backend, path=tmp_path / "state")
    keyed, timers = deferred_snapshot(run)
    by_child = operator_snapshot(keyed, timers, operator_state=None, source_position={"offset": 7})
    storage = CheckpointStorage(tmp_path / "child", "job")
    acks, size, fork_ms = await write_in_child(storage, 1, [by_child])
    run.batch([((k, 5), 1_500) for k in range(300)])  # after the barrier: not in the snapshot
    again = window_run(backend=backend, path=tmp_path / "again")
    keyed, timers = deferred_snapshot(again)
    thread_storage = CheckpointStorage(tmp_path / "thread", "job")
    thread_acks, thread_size = write_operator_snapshots(
        thread_storage, 1, [operator_snapshot(keyed, timers, source_position={"offset": 7})]
    )
    run.backend.dispose()
    again.backend.dispose()
    assert files_of(storage, acks) == files_of(thread_storage, thread_acks)
    assert size == thread_size and fork_ms > 0
    assert acks[0].source_position == {"offset": 7} and acks[0].handle.key_group_range == KeyGroupRange(
        0, 127
    )
    payload = decode_state_file(files_of(storage, acks)[0], "child's file", trusted=False)
    assert payload["keyed"].number_of_entries() == 300 + 43 and len(payload["timers"]) == 300 + 43


async def test_a_heap_snapshot_written_by_a_child_needs_no_copy_on_write_in_the_job(tmp_path: Path) -> None:
    run = window_run("list-aggregate")  # mutable accumulators: written into the backend at the barrier
    keyed, _ = deferred_snapshot(run)
    assert run.op.shares_state_objects and keyed.number_of_entries() == 300 + 43
    pending = run.backend.snapshot_async()
    assert run.backend._cow_snapshots and entries_to_write([operator_snapshot(pending, None)]) == 300 + 43
    storage = CheckpointStorage(tmp_path, "job")
    acks, _, _ = await write_in_child(storage, 1, [operator_snapshot(pending, None)])
    assert not run.backend._cow_snapshots and not run.backend._cow_todo  # released after the fork
    payload = decode_state_file(files_of(storage, acks)[0], "child's file", trusted=False)
    assert payload["keyed"].number_of_entries() == run.backend.number_of_keys()


async def test_a_mutable_accumulator_fails_the_checkpoint_and_turns_the_operator_synchronous(
    tmp_path: Path,
) -> None:
    run = Run(make("sneaky-aggregate", TUMBLING))
    run.batch([((k, 1), 1_000) for k in range(0, 30, 3)])  # keys 0 mod 3: tuples
    keyed, timers = deferred_snapshot(run)
    run.batch([((1, 1), 1_200)])  # a key 1 mod 3 after the barrier: the frozen panes stay tuples
    assert not run.op.shares_state_objects
    run2 = Run(make("sneaky-aggregate", TUMBLING))
    run2.batch([((k, 1), 1_000) for k in range(30)])  # lists among the panes at the barrier
    keyed2, timers2 = deferred_snapshot(run2)
    with pytest.raises(ChildSnapshotError, match="MutableAccumulatorError"):
        await write_in_child(CheckpointStorage(tmp_path, "job"), 1, [operator_snapshot(keyed2, timers2)])
    assert not run2.op._deferrable  # the parent's operator learned it from the child: synchronous from now on
    acks, _, _ = await write_in_child(
        CheckpointStorage(tmp_path, "job"), 2, [operator_snapshot(keyed, timers)]
    )
    assert acks


class KillsTheWriter:
    """Its encoding (pickled: weir has no data form for it) kills the process that encodes it."""

    def __reduce__(self) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)
        return (KillsTheWriter, ())


class SignalsThenSleeps:
    """Its encoding tells its pid through a named pipe (the child keeps no inherited
    descriptor), then takes a minute."""

    def __init__(self, fifo: str) -> None:
        self.fifo = fifo

    def __reduce__(self) -> Any:
        with open(self.fifo, "w") as out:
            out.write(f"{os.getpid()}\n")

        time.sleep(60)
        return (SignalsThenSleeps, (self.fifo,))


async def test_a_child_that_dies_fails_the_checkpoint_with_its_signal(tmp_path: Path) -> None:
    snapshot = OperatorSnapshot("op", 1, 128, 0, operator_state=KillsTheWriter())
    with pytest.raises(ChildSnapshotError, match="killed by signal 9"):
        await write_in_child(CheckpointStorage(tmp_path, "job"), 1, [snapshot])


async def test_a_child_past_its_deadline_ends_and_fails_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import weir.task.forked as forked

    monkeypatch.setattr(forked, "CHILD_DEADLINE_S", 1)
    os.mkfifo(tmp_path / "f")
    snapshot = OperatorSnapshot("op", 1, 128, 0, operator_state=SignalsThenSleeps(str(tmp_path / "f")))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, _drain, tmp_path / "f")
        with pytest.raises(ChildSnapshotError, match=f"killed by signal {int(signal.SIGALRM)}"):
            await write_in_child(CheckpointStorage(tmp_path, "job"), 1, [snapshot])


def _drain(fifo: Path) -> None:
    with open(fifo) as started:
        started.read()


async def test_cancelling_the_task_kills_and_reaps_its_child(tmp_path: Path) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    snapshot = OperatorSnapshot("op", 1, 128, 0, operator_state=SignalsThenSleeps(str(fifo)))
    async with trio.open_nursery() as nursery:

        async def write() -> None:
            await write_in_child(CheckpointStorage(tmp_path, "job"), 1, [snapshot])

        nursery.start_soon(write)
        read_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        async with trio.lowlevel.FdStream(read_fd) as started:
            line = b""
            while not line.endswith(b"\n"):
                line += await started.receive_some(64)  # the child is encoding
        nursery.cancel_scope.cancel()
    with pytest.raises(ChildProcessError):
        os.waitpid(int(line), os.WNOHANG)  # killed and reaped: no such child any more


def test_a_child_keeps_no_descriptor_of_the_job_open(tmp_path: Path) -> None:
    """A peer sees the job's process close a connection even while a child writes."""
    import socket

    ours, peer = socket.socketpair()
    peer.settimeout(10)
    snapshot = OperatorSnapshot("op", 1, 128, 0, operator_state=SignalsThenSleeps(str(tmp_path / "f")))
    os.mkfifo(tmp_path / "f")

    async def main() -> None:
        async with trio.open_nursery() as nursery:

            async def write() -> None:
                await write_in_child(CheckpointStorage(tmp_path, "job"), 1, [snapshot])

            nursery.start_soon(write)
            read_fd = os.open(tmp_path / "f", os.O_RDONLY | os.O_NONBLOCK)
            async with trio.lowlevel.FdStream(read_fd) as started:
                while not (await started.receive_some(64)).endswith(b"\n"):
                    pass
            ours.close()  # the child is alive: only its own copy could keep the socket open
            assert peer.recv(1) == b""  # end of stream at once
            nursery.cancel_scope.cancel()

    trio.run(main)
    peer.close()


def test_auto_forks_only_for_large_snapshots() -> None:
    run = window_run()
    keyed, timers = deferred_snapshot(run)
    small = [operator_snapshot(keyed, timers)]
    assert entries_to_write(small) == 300 + 43  # the panes (their timers come with them)
    assert not use_child("auto", small) and use_child("process", small) and not use_child("thread", small)


async def test_an_incremental_run_with_frozen_panes_written_by_a_child_is_the_threads(tmp_path: Path) -> None:
    from weir.core.state import ValueStateDescriptor
    from weir.state import LmdbKeyedStateBackend

    runs = {}
    for writer in ("thread", "child"):
        backend = LmdbKeyedStateBackend(
            "op", 128, KeyGroupRange(0, 127), path=tmp_path / writer, incremental=True
        )
        run = Run(make("tuple-reduce", TUMBLING), backend)
        other = backend.get_state(ValueStateDescriptor("other"))
        for k in range(1_000):  # more entries than panes: the next snapshot is a delta
            backend.set_current_key(k)
            other.update(k)
        run.batch([((k, k * 10), 1_000 + k) for k in range(300)])
        op = run.op
        op.defer_pane_snapshots = True
        op.prepare_snapshot_pre_barrier(1)
        panes, op.pane_snapshot = op.pane_snapshot, None
        snap = operator_snapshot(
            backend.snapshot_incremental(1, lambda _: False, panes), panes.pending_timers(None)
        )
        storage = CheckpointStorage(tmp_path / f"{writer}-checkpoints", "job")
        if writer == "child":
            acks, _, fork_ms = await write_in_child(storage, 1, [snap])
            assert fork_ms > 0
        else:
            acks, _ = write_operator_snapshots(storage, 1, [snap])
        run.batch([((k, 1), 1_500) for k in range(300)])  # after the barrier
        (shared,) = acks[0].handle.shared_files
        runs[writer] = storage.path_of(shared).read_bytes()
        # the next snapshot's delta builds on this run (recorded in this process, whoever
        # wrote it) and reads the panes' keys again
        following = backend.snapshot_incremental(2, lambda c: c == 1)
        assert following.plan.kind == "delta" and following.plan.base_chain == (shared,), following.plan
        again = following.plan.keys[panes.state_name]
        assert len(panes.raw_keys()) == 300 and panes.raw_keys() <= set(again)
        following.read_here()
        backend.dispose()
    assert runs["child"] == runs["thread"]


def lmdb_backend(path: Path, incremental: bool = False) -> Any:
    from weir.core.state import ListStateDescriptor, ValueStateDescriptor
    from weir.state import LmdbKeyedStateBackend

    backend = LmdbKeyedStateBackend(
        "op", 128, KeyGroupRange(0, 127), path=path, commit_every_ops=50, incremental=incremental
    )
    value = backend.get_state(ValueStateDescriptor("value"))
    listed = backend.get_state(ListStateDescriptor("list"))
    for k in range(2_000):
        backend.set_current_key(k)
        value.update(f"v{k}")
        listed.add(k)
    return backend, value


def write_after_barrier(backend: Any, value: Any, n: int = 1_000) -> None:
    for k in range(n):
        backend.set_current_key(k)
        value.update("after the barrier")
    backend.set_current_key(10_000 + n)
    value.update("a new key")


@pytest.mark.parametrize("incremental", [False, True], ids=["full", "incremental"])
async def test_a_child_reads_the_lmdb_state_of_the_barrier_itself(incremental: bool, tmp_path: Path) -> None:
    """The child opens the environment and pins the barrier's state; the job's process holds
    its full batches until then, and commits again once the child has it."""
    files = {}
    for writer in ("thread", "child"):
        backend, value = lmdb_backend(tmp_path / writer, incremental)
        keyed = backend.snapshot_incremental(1, lambda _: False) if incremental else backend.snapshot_async()
        commits = backend._commits
        write_after_barrier(backend, value)  # 20 batches' worth: none committed while the view waits
        assert backend._commits == commits and len(backend._log) > 1_000
        storage = CheckpointStorage(tmp_path / f"{writer}-checkpoints", "job")
        snap = operator_snapshot(keyed, None)
        if writer == "child":
            acks, _, _ = await write_in_child(storage, 1, [snap])
        else:
            acks, _ = await trio.to_thread.run_sync(write_operator_snapshots, storage, 1, [snap])
        write_after_barrier(backend, value, 10)  # the view has its reader: batches commit again
        assert backend._commits > commits and backend._pinned == 0 and not backend._views
        shared = acks[0].handle.shared_files
        files[writer] = [storage.path_of(f).read_bytes() for f in shared] or files_of(storage, acks)
        backend.dispose()
    assert files["child"] == files["thread"]
    if not incremental:
        payload = decode_state_file(files["child"][0], "child's file", trusted=False)
        assert payload["keyed"].number_of_entries() == 2 * 2_000  # nothing written after the barrier


async def test_a_commit_before_the_childs_pin_fails_the_checkpoint_not_the_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that must happen while the child is starting (here: the next checkpoint's)
    waits for the child only so long; the child then finds a later state than the barrier's
    and declines instead of writing it."""
    from weir.state import lmdb_backend as lmdb_module

    backend, value = lmdb_backend(tmp_path / "live")
    go = tmp_path / "committed"
    os.mkfifo(go)  # the child's descriptors are closed at its start: it opens this by name
    real_fork, real_pin = os.fork, lmdb_module.PinnedView.pin_in_child

    def pin_once_committed(view: Any) -> None:  # in the child: wait for the parent's commit
        with open(go, "rb") as fifo:
            fifo.read(1)
        real_pin(view)

    def fork_then_commit() -> int:
        pid = real_fork()
        if pid:
            write_after_barrier(backend, value, 10)
            backend.snapshot_async()  # commits: waits HAND_OVER_WAIT_S for the child, then goes on
            with open(go, "wb") as fifo:
                fifo.write(b"x")
        return pid

    monkeypatch.setattr(lmdb_module, "HAND_OVER_WAIT_S", 0.05)
    monkeypatch.setattr(lmdb_module.PinnedView, "pin_in_child", pin_once_committed)
    monkeypatch.setattr(os, "fork", fork_then_commit)
    pending = backend.snapshot_async()
    with pytest.raises(ChildSnapshotError, match=r"ViewMovedError: .*committed .* after the barrier"):
        await write_in_child(
            CheckpointStorage(tmp_path / "checkpoints", "job"), 1, [operator_snapshot(pending, None)]
        )
    monkeypatch.undo()
    assert backend._pinned == 1 and len(backend._views) == 1  # the second snapshot's view, unread
    backend.dispose()


async def test_the_acknowledgement_does_not_wait_for_the_child_to_be_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child's exit tears down its copy of the job's address space (seconds at a few GiB):
    the checkpoint is acknowledged from its answer, and the child is reaped afterwards."""
    keyed, timers = deferred_snapshot(window_run())
    may_exit = tmp_path / "may-exit"
    os.mkfifo(may_exit)  # the child's descriptors are closed at its start: it opens this by name
    real_exit, real_fork, pids = os._exit, os.fork, []

    def slow_exit(status: int) -> None:  # only the child leaves through os._exit
        with open(may_exit, "rb") as fifo:
            fifo.read(1)  # until the test writes
        real_exit(status)

    def fork() -> int:
        pid = real_fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(os, "_exit", slow_exit)
    monkeypatch.setattr(os, "fork", fork)
    storage = CheckpointStorage(tmp_path / "checkpoints", "job")
    acks, _, _ = await write_in_child(storage, 1, [operator_snapshot(keyed, timers)])
    monkeypatch.undo()
    assert len(acks) == 1 and storage.path_of(acks[0].handle.file).exists()
    (pid,) = pids
    os.kill(pid, 0)  # still there: it answered, and has not left
    with open(may_exit, "wb") as fifo:
        fifo.write(b"x")
    with trio.fail_after(30):
        while True:  # reaped by the job's process, so no zombie stays behind
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            await trio.sleep(0.01)


def test_a_checkpoint_child_runs_below_the_job() -> None:
    from weir.task.forked import CHILD_NICENESS, _yield_to_the_job

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its niceness after yielding
        try:
            _yield_to_the_job()
            os.write(write_fd, str(os.nice(0)).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    os.waitpid(pid, 0)
    with os.fdopen(read_fd, "rb") as answer:
        assert int(answer.read()) == min(os.nice(0) + CHILD_NICENESS, 19)


def test_a_run_read_here_leaves_no_view_for_the_child(tmp_path: Path) -> None:
    """Frozen panes merged into an incremental run that was read in this process: the child
    gets no view to pin, and writes the same run."""
    from weir.state import LmdbKeyedStateBackend

    backend = LmdbKeyedStateBackend("op", 128, KeyGroupRange(0, 127), path=tmp_path / "b", incremental=True)
    try:
        run = Run(make("tuple-reduce", TUMBLING), backend)
        run.batch([((k, k), 1_000 + k) for k in range(50)])
        run.op.defer_pane_snapshots = True
        run.op.prepare_snapshot_pre_barrier(1)
        panes, run.op.pane_snapshot = run.op.pane_snapshot, None
        pending = backend.snapshot_incremental(1, lambda _: False, panes)
        assert pending.child_views()  # the pinned view, for a child to read
        pending.read_here()
        assert pending.child_views() == []
        storage = CheckpointStorage(tmp_path / "checkpoints", "job")
        written = pending.write(storage)
        assert written.uploaded is not None and written.uploaded.size_bytes > 0
    finally:
        backend.dispose()

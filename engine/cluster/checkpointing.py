"""Checkpointing in the runtime: the tasks' side (snapshot, write, acknowledge) and the
JobMaster's side (a Trio driver around the pure CheckpointCoordinator).

Theory of operation
-------------------
The driver asks the coordinator on every interval tick; a ``TriggerCheckpoint`` reaches
the source tasks, which record their emitted position and operator state under the task
lock and then emit a CheckpointBarrier in line with their records. Other tasks align the
barrier on their input channels (``weir.checkpoint.barrier_handler``): data from a
channel whose barrier arrived is held back until every channel's barrier is in, so the
snapshot sees exactly the records before the barrier. Then the task snapshots (the
synchronous part: keyed state and timers are copied out), forwards the barrier, and goes
on processing while a worker thread writes one checksummed file per operator (the
asynchronous part) and acknowledges with the file handles. When every task has
acknowledged, the driver writes ``_metadata`` atomically — the commit point — and only then
tells the tasks the checkpoint is complete. Retention discards subsumed checkpoints.

This first version is aligned only, keeps held-back data in memory (it does not block the
channel in the network), and does not yet restore from a checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from weir.checkpoint.coordinator import (
    CheckpointCoordinator,
    CheckpointCoordinatorConfig,
    DiscardCheckpoint,
    FailJob,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    ScheduleNextTrigger,
    SubsumeCheckpoints,
    TriggerCheckpoint,
    WriteMetadata,
)
from weir.checkpoint.metadata import CheckpointMetadata, OperatorCheckpointState
from weir.checkpoint.registry import SharedStateRegistry
from weir.checkpoint.storage import CHECKPOINT_DIR_PREFIX, METADATA_FILE_NAME, CheckpointStorage
from weir.cluster.checkpoint_stats import HISTORY_FILE_NAME, CheckpointHistory
from weir.errors import UsageError
from weir.task.snapshots import OperatorAck


def build_metadata(
    job_id: str, checkpoint_id: int, timestamp_ms: int, acks: list[OperatorAck]
) -> CheckpointMetadata:
    by_operator: dict[str, list[OperatorAck]] = {}
    for ack in acks:
        by_operator.setdefault(ack.operator_id, []).append(ack)
    operators = []
    for operator_id, items in sorted(by_operator.items()):
        items.sort(key=lambda a: a.handle.subtask_index)
        positions = {
            a.handle.subtask_index: a.source_position for a in items if a.source_position is not None
        }
        operators.append(
            OperatorCheckpointState(
                operator_id=operator_id,
                parallelism=items[0].parallelism,
                max_parallelism=items[0].max_parallelism,
                state_handles=tuple(a.handle for a in items),
                source_positions=positions,
            )
        )
    return CheckpointMetadata(
        job_id=job_id, checkpoint_id=checkpoint_id, timestamp_ms=timestamp_ms, operators=tuple(operators)
    )


#: Flink's CheckpointProperties per ExternalizedCheckpointRetention: the terminal job statuses
#: that discard a job's checkpoints (a FINISHED job's are discarded under every policy)
_DISCARDED_ON: dict[str, frozenset[str]] = {
    "NO_EXTERNALIZED_CHECKPOINTS": frozenset({"FINISHED", "CANCELED", "FAILED"}),
    "DELETE_ON_CANCELLATION": frozenset({"FINISHED", "CANCELED"}),
    "RETAIN_ON_CANCELLATION": frozenset({"FINISHED"}),
}


def discards_checkpoints_on(retention: str, job_status: str) -> bool:
    """Whether a job that ended with ``job_status`` loses its checkpoints under ``retention``. Pure."""
    if retention not in _DISCARDED_ON:
        raise UsageError(f"checkpoint retention must be one of {', '.join(_DISCARDED_ON)}, got {retention!r}")
    return job_status in _DISCARDED_ON[retention]


def discard_job_checkpoints(storage: CheckpointStorage) -> None:
    """Delete every checkpoint of the job (``_metadata`` first) and its shared and task-owned
    files; the checkpoint history (statistics, no state) stays for ``weir checkpoints``."""
    import shutil

    if not storage.job_dir.is_dir():
        return
    for entry in sorted(storage.job_dir.iterdir()):
        if entry.name.startswith(CHECKPOINT_DIR_PREFIX) and entry.is_dir():
            storage.discard(int(entry.name.removeprefix(CHECKPOINT_DIR_PREFIX)), missing_ok=True)
    for directory in (storage.shared_dir, storage.taskowned_dir):
        shutil.rmtree(directory, ignore_errors=True)


def _newest_mtime_ns(path: Path) -> int:
    """The newest modification time of ``path`` and, for a directory, of everything in it (0 if gone)."""
    try:
        newest = path.stat().st_mtime_ns
        if path.is_dir():
            for child in path.rglob("*"):
                newest = max(newest, child.stat().st_mtime_ns)
    except FileNotFoundError:
        return 0
    return newest


@dataclass
class SavepointRequest:
    """A savepoint somebody waits for: where it goes, and how it ended."""

    target_dir: Path
    savepoint_format: str
    done: trio.Event
    checkpoint_id: int = 0
    path: Path | None = None
    error: str | None = None

    def finish(self, path: Path | None = None, error: str | None = None) -> None:
        if not self.done.is_set():
            self.path, self.error = path, error
            self.done.set()


class CheckpointDriver:
    """The JobMaster's checkpointing: ticks the coordinator on the Trio clock and carries out its actions."""

    def __init__(
        self,
        job_id: str,
        storage_root: Path,
        config: CheckpointCoordinatorConfig,
        sources: list[str],
        tasks: list[str],
        now_ms: Any,
        trigger: Any,
        notify_complete: Any,
        fail_job: Any,
        notify_aborted: Any = None,
    ) -> None:
        self.job_id = job_id
        self.storage = CheckpointStorage(storage_root, job_id)
        self.coordinator = CheckpointCoordinator(job_id, sources, tasks, config)
        self.config = config
        self.now_ms = now_ms
        self.trigger = trigger
        self.notify_complete = notify_complete
        self.fail_job = fail_job
        self.notify_aborted = notify_aborted
        self.completed: list[int] = []
        self.cleanup_failures: list[str] = []
        self._wake = trio.Event()
        self._actions: list[Any] = []
        self.savepoints: dict[int, SavepointRequest] = {}
        self.history = CheckpointHistory(self.storage.job_dir / HISTORY_FILE_NAME)
        self.failure_injector: Any = None  # weir.cluster.failure_injector (tests, --inject-failures)
        #: shared (incremental) files per retained checkpoint; deletes a file when no checkpoint needs it
        self.registry = SharedStateRegistry(delete=self.storage.delete_shared_file)
        self._inherited: list[
            int
        ] = []  # completed checkpoints found on disk at start (a restart), oldest first

    async def trigger_savepoint(self, target_dir: Path, savepoint_format: str = "canonical") -> Path:
        """Take a savepoint into a new directory under ``target_dir`` and return its path.
        Raises CheckpointError when it fails or is aborted. Cancellation: stops waiting."""
        from weir.cluster.savepoints import new_savepoint_dir
        from weir.errors import CheckpointError

        if savepoint_format not in ("canonical", "native"):
            raise UsageError(f"savepoint format must be 'canonical' or 'native', got {savepoint_format!r}")
        actions = self.coordinator.trigger_checkpoint(self.now_ms(), is_savepoint=True)
        trigger = next(a for a in actions if isinstance(a, TriggerCheckpoint))
        request = SavepointRequest(
            new_savepoint_dir(target_dir, self.job_id), savepoint_format, trio.Event(), trigger.checkpoint_id
        )
        self.savepoints[trigger.checkpoint_id] = request
        self._actions += actions
        self._wake.set()
        await request.done.wait()
        if request.error is not None or request.path is None:
            raise CheckpointError(f"savepoint {trigger.checkpoint_id} failed: {request.error}")
        return request.path

    def fail_savepoints(self, reason: str) -> None:
        for request in self.savepoints.values():
            request.finish(error=reason)

    def on_task_metrics(self, task_id: str, checkpoint_id: int, metrics: dict[str, Any]) -> None:
        self.history.on_task_metrics(checkpoint_id, metrics)

    def on_acknowledge(
        self, task_id: str, checkpoint_id: int, acks: list[OperatorAck], size_bytes: int
    ) -> None:
        self._actions += self.coordinator.on_acknowledge(
            task_id, checkpoint_id, acks, {"state_size_bytes": size_bytes}, now_ms=self.now_ms()
        )
        self._wake.set()

    def on_task_finished(self, task_id: str) -> None:
        """A task ended before acknowledging: its pending checkpoints can never complete."""
        for pending in self.coordinator.pending_checkpoints():
            if task_id in pending.not_yet_acknowledged:
                self.on_decline(
                    task_id,
                    pending.checkpoint_id,
                    "a task finished before it acknowledged the checkpoint",
                    counts=False,
                )

    def on_decline(self, task_id: str, checkpoint_id: int, reason: str, counts: bool = True) -> None:
        self._actions += self.coordinator.on_decline(
            task_id, checkpoint_id, reason, now_ms=self.now_ms(), counts=counts
        )
        self._wake.set()

    async def run(self, ready: Any) -> None:
        """Trigger checkpoints while the job runs. Cancellation: pending checkpoints are abandoned."""
        interval = self.config.interval_ms
        periodic = interval is not None
        next_tick = self.now_ms() + (interval or 0)
        if self._leftovers_on_disk():  # a restart: checkpoints of the previous attempt are there
            await self._run_cleanup(self._recover_shared_state)
        try:
            while True:
                self._wake = trio.Event()
                now = self.now_ms()
                if periodic and now >= next_tick:
                    if ready():
                        self._actions += self.coordinator.on_timer(now)
                    next_tick = now + (interval or 0)
                self._actions += self.coordinator.on_expire_check(now)
                while self._actions:  # one at a time: what a cancellation leaves is still queued
                    await self._carry_out(self._actions.pop(0))
                expiry = self.coordinator.next_expiry_ms()
                deadlines = [t for t in (next_tick if periodic else None, expiry) if t is not None]
                if deadlines:
                    with trio.move_on_after(max(0, min(deadlines) - self.now_ms()) / 1000):
                        await self._wake.wait()
                else:
                    await self._wake.wait()
        finally:
            self.fail_savepoints("the job stopped running before the savepoint completed")
            with trio.CancelScope(shield=True):
                await self._finish_cleanup()

    def _write_savepoint(self, metadata: CheckpointMetadata, request: SavepointRequest) -> Path:
        """Copy the savepoint's files out of the checkpoint storage into its own directory,
        then drop the temporary copy. Runs in a worker thread."""
        path = self.storage.savepoint_from_metadata(
            metadata, request.target_dir, metadata.timestamp_ms, request.savepoint_format
        )
        self.storage.discard(metadata.checkpoint_id, missing_ok=True)
        return path

    async def _discard(self, checkpoint_id: int) -> None:
        """Best-effort cleanup, as in Flink: a late task write racing the removal must not fail the job."""
        try:
            await trio.to_thread.run_sync(self.storage.discard, checkpoint_id, True)
        except OSError as exc:
            self.cleanup_failures.append(f"checkpoint {checkpoint_id}: {exc}")

    # -- shared state of incremental checkpoints (docs/incremental-checkpoints.md) ---------------
    async def _run_cleanup(self, fn: Any, *args: Any) -> None:
        """Run a cleanup step in a worker thread; a failure is recorded, never fatal."""
        try:
            await trio.to_thread.run_sync(fn, *args)
        except OSError as exc:
            self.cleanup_failures.append(f"{getattr(fn, '__name__', fn)}: {exc}")

    async def _finish_cleanup(self) -> None:
        """When the driver stops: carry out the retention the coordinator already decided (the job
        may end right after a checkpoint completed), then sweep what no checkpoint uses. Checkpoints
        of an earlier attempt stay until this attempt completes one: recovery may need them again."""
        leftover = [a for a in self._actions if isinstance(a, SubsumeCheckpoints | DiscardCheckpoint)]
        self._actions = []
        for action in leftover:
            await self._carry_out(action)
        if self._leftovers_on_disk(complete_ok=True):
            await self._run_cleanup(self._sweep)

    def _in_flight(self) -> list[int]:
        return [p.checkpoint_id for p in self.coordinator.pending_checkpoints()]

    def _leftovers_on_disk(self, complete_ok: bool = False) -> bool:
        """Whether a sweep could find anything: shared files, or checkpoint directories (only
        those without ``_metadata`` when ``complete_ok``). A few stats, no reads."""
        try:
            if any(self.storage.shared_dir.iterdir()):
                return True
            for entry in self.storage.job_dir.iterdir():
                if (
                    entry.name.startswith(CHECKPOINT_DIR_PREFIX)
                    and entry.is_dir()
                    and (not complete_ok or not (entry / METADATA_FILE_NAME).exists())
                ):
                    return True
        except FileNotFoundError:
            return False
        return False

    def _recover_shared_state(self) -> None:
        """At start (and after a restart): register the completed checkpoints on disk, which
        retention then treats as the oldest retained ones -- damaged ones (those recovery skips)
        are dropped first, since nothing can restore from them -- and sweep what nothing can use."""
        completed = sorted(self.storage.list_checkpoints().completed, key=lambda m: m.checkpoint_id)
        damaged = {s.checkpoint_id for s in self.storage.latest_valid(verify_checksums=True).skipped}
        for metadata in completed:
            if metadata.checkpoint_id not in self.registry.retained_checkpoints():
                self.registry.register(metadata.checkpoint_id, [f.path for f in metadata.shared_files()])
                self._inherited.append(metadata.checkpoint_id)
        self._inherited.sort(key=lambda c: (c not in damaged, c))
        self._sweep()

    def _sweep(self) -> None:
        """Delete checkpoint directories that never got a ``_metadata`` and shared files that no
        completed checkpoint on disk lists: uploads of checkpoints that never completed. Only
        what existed when the sweep began (a new attempt's files are never touched)."""
        import time

        started_ns = time.time_ns()
        listing = self.storage.list_checkpoints()
        for incomplete in listing.incomplete:
            directory = incomplete.directory
            if (directory / METADATA_FILE_NAME).exists() or _newest_mtime_ns(directory) > started_ns:
                continue  # a damaged commit is left for people to look at; a new one is in progress
            self.storage.discard(incomplete.checkpoint_id, missing_ok=True)
        referenced = {f.path for m in listing.completed for f in m.shared_files()}
        for path in self.storage.list_shared_files():
            if path not in referenced and _newest_mtime_ns(self.storage.job_dir / path) <= started_ns:
                self.storage.delete_shared_file(path)

    async def _release(self, checkpoint_id: int) -> None:
        """A retained checkpoint is dropped: delete the shared files only it needed (held while
        checkpoints in flight may still build on them)."""
        if checkpoint_id not in self.registry.retained_checkpoints():
            return
        if self.registry.files_of(checkpoint_id):
            await self._run_cleanup(self.registry.release, checkpoint_id, self._in_flight())
        else:
            self.registry.release(checkpoint_id)  # no shared files: nothing to delete

    async def _drop_uploads(self, checkpoint_id: int, handles: Any) -> None:
        """An aborted checkpoint: delete the shared files uploaded for it (run files are named
        ``...-chk<N>-...``) that no checkpoint uses; the older files of its chains stay."""
        uploaded_for = f"-chk{checkpoint_id}-"
        pending = {
            f.path
            for p in self.coordinator.pending_checkpoints()
            for acks in p.state_handles.values()
            for ack in acks or []
            for f in getattr(getattr(ack, "handle", None), "shared_files", ())
        }
        paths = {
            f.path
            for acks in (handles or {}).values()
            for ack in acks or []
            for f in getattr(getattr(ack, "handle", None), "shared_files", ())
            if uploaded_for in f.path
        }
        if paths - pending:
            await self._run_cleanup(self.registry.delete_unreferenced, paths - pending)

    async def _flush_held(self) -> None:
        """Delete held shared files that no checkpoint in flight can use any more."""
        if self.registry.held_files():
            await self._run_cleanup(self.registry.on_in_flight_changed, self._in_flight())

    async def _trim_inherited(self) -> None:
        """Retention over checkpoints completed before a restart, which the new coordinator does not
        know; called when this attempt completes a checkpoint (never before: until then the restored
        checkpoint may be needed by the next recovery, even if a newer, damaged one is on disk)."""
        retained = [c for c in self.coordinator.completed_checkpoints() if not c.is_savepoint]
        excess = len(self._inherited) + len(retained) - self.config.num_retained
        while excess > 0 and self._inherited:
            checkpoint_id = self._inherited.pop(0)
            await self._discard(checkpoint_id)
            await self._release(checkpoint_id)
            excess -= 1

    async def _carry_out(self, action: Any) -> None:
        if isinstance(action, TriggerCheckpoint):
            self.history.on_trigger(
                action.checkpoint_id, action.timestamp, action.is_savepoint, action.unaligned
            )
            self.trigger(action)
        elif isinstance(action, WriteMetadata):
            pending = action.pending
            acks = [ack for handles in pending.state_handles.values() for ack in (handles or [])]
            metadata = build_metadata(self.job_id, action.checkpoint_id, pending.timestamp, acks)
            request = self.savepoints.get(action.checkpoint_id)
            try:
                if request is not None:
                    request.path = await trio.to_thread.run_sync(self._write_savepoint, metadata, request)
                else:
                    injector = self.failure_injector
                    if injector is not None and await injector.intercept_metadata_write(
                        self, action.checkpoint_id, metadata
                    ):
                        return  # an injected JobManager crash: this checkpoint is never completed nor notified
                    await trio.to_thread.run_sync(self.storage.write_metadata, action.checkpoint_id, metadata)
                    self.registry.register(action.checkpoint_id, [f.path for f in metadata.shared_files()])
            except Exception as exc:
                if request is not None:
                    request.finish(error=f"{type(exc).__name__}: {exc}")
                self._actions += self.coordinator.on_metadata_failed(
                    action.checkpoint_id, str(exc), now_ms=self.now_ms()
                )
            else:
                self._actions += self.coordinator.on_metadata_written(
                    action.checkpoint_id, now_ms=self.now_ms()
                )
        elif isinstance(action, NotifyCheckpointComplete):
            self.history.on_end(action.checkpoint_id, self.now_ms())
            request = self.savepoints.get(action.checkpoint_id)
            if request is None:
                self.completed.append(action.checkpoint_id)
            self.notify_complete(action.checkpoint_id)
            if request is not None:
                request.finish(path=request.path)
            else:
                await self._trim_inherited()
            await self._flush_held()
        elif isinstance(action, SubsumeCheckpoints):
            for checkpoint_id in action.checkpoint_ids:
                await self._discard(checkpoint_id)
                await self._release(checkpoint_id)
        elif isinstance(action, DiscardCheckpoint):
            await self._discard(action.checkpoint_id)
            await self._drop_uploads(action.checkpoint_id, action.handles)
            await self._flush_held()
            if action.checkpoint_id in self.savepoints:
                self.savepoints[action.checkpoint_id].finish(error=getattr(action, "reason", "discarded"))
        elif isinstance(action, FailJob):
            self.fail_savepoints(action.reason)
            self.fail_job(action.reason)
        elif isinstance(action, NotifyCheckpointAborted):
            self.history.on_end(action.checkpoint_id, self.now_ms(), action.reason)
            if action.checkpoint_id in self.savepoints:
                self.savepoints[action.checkpoint_id].finish(error=action.reason)
            if self.notify_aborted is not None:
                self.notify_aborted(action.checkpoint_id)
        elif isinstance(action, ScheduleNextTrigger):
            pass

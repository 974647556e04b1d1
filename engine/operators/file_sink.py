"""The exactly-once FileSink operator: part files committed with two-phase commit.

Theory of operation
-------------------
A part file lives in three states, as in Flink's FileSink:

- **in-progress**: open for appending under a hidden name in its bucket directory,
  ``.<prefix>-<subtask>-<n><suffix>.inprogress.<token>``;
- **pending**: closed, flushed and fsynced ("rolled"), still under its hidden name, waiting
  for a checkpoint to complete;
- **finished**: renamed to ``<prefix>-<subtask>-<n><suffix>``: visible, final, never touched
  again. ``n`` counts the subtask's part files; it is part of the checkpointed state, so a
  restarted subtask never reuses a name.

Events, all in the task's own loop (no locks, no threads):

- *records*: the bucket assigner names the bucket; the rolling policy may roll the bucket's
  in-progress file first; the encoded lines are appended.
- *processing time* (every bucket check interval): files the policy finds too old or
  inactive roll.
- ``snapshot_state(N)`` — **pre-commit**: files the policy rolls on checkpoints roll; the
  others are flushed and fsynced and their length is recorded (resumable); every pending
  file not yet claimed by a checkpoint is claimed by N. The subtask's pending and
  in-progress files and its part counter go into one element of a union list state.
- ``notify_checkpoint_complete(N)`` — **commit**: every pending file claimed by a
  checkpoint <= N is renamed to its final name (then the directories are fsynced).
  Renaming is idempotent: a file whose hidden name is gone and whose final name exists was
  committed before. ``notify_checkpoint_aborted`` does nothing: those files are committed
  with the next checkpoint that completes.
- ``initialize_state`` after a **restore**: every subtask gets the union of all old
  subtasks' elements. It handles the elements whose old subtask index ``j`` it owns
  (``j % parallelism == subtask``): commits their pending files (the restored checkpoint is
  complete, so its pre-committed files are due), truncates their in-progress files back to
  the recorded length and resumes appending to the one it wrote itself (same index) or
  commits the others. It then deletes the in-progress files it owns by name (writer index
  ``j % parallelism == subtask``) that no element mentions: what was written after the
  checkpoint, which the sources replay. Ownership by index means nothing is committed or
  deleted twice, also at a different parallelism; a restart without a checkpoint (attempt
  > 0) deletes the same way.
- a restore **behind committed output** (recovery fell back past a damaged newer checkpoint,
  or a retained checkpoint or savepoint is restored after the job went on): a finished file
  of an owned old subtask ``j`` whose counter is at or above ``j``'s restored counter was
  committed after the restored checkpoint, and a resumable in-progress file of the restored
  state may have been committed later with more bytes. Both are renamed aside to
  ``.<final name>.superseded.<token>`` (hidden, never deleted; the resumed file gets back its
  checkpointed prefix), and one line naming them goes to the job's result: the replay then
  writes their records exactly once. A fresh start counts past every finished file of its
  index, so files of an earlier run are never taken for later output, and a first attempt
  records the counter it started at (``.<prefix>-<subtask><suffix>.first-part``, removed at
  the job's end): a restart from the beginning (no valid checkpoint left) moves aside from
  there.
- ``finish()`` — **end of input**: every in-progress file rolls and the subtask writes an
  end-of-input manifest (``.<prefix>-<subtask><suffix>.end-of-input``, atomically) listing
  its uncommitted files. They are committed by ``commit_end_of_input`` once the JOB has
  FINISHED (the JobMaster calls it), not when this subtask finishes: another task may still
  fail and restart the job from the last checkpoint, and files committed early would then
  be written twice. This stands in for Flink's final checkpoint (FLIP-147). Manifests of
  attempts that did not finish are deleted by the next attempt's owners.

Bulk formats (``FileSink.for_bulk_format`` with a Parquet or CSV writer factory) write whole
batches through a part writer (``weir.operators.columnar_io``) and roll on every checkpoint,
as Flink's bulk formats do: a part file is complete only when its writer finished it (a
footer), so no bulk file is ever resumed; the protocol above is otherwise the same.

Invariants: a finished file's content is final; every record of a completed checkpoint is
in exactly one pending-or-finished file; hidden files are the sink's working space.

Compaction (``enable_compact(strategy, compactor)``): a rolled file does not wait for a
checkpoint to commit it; it is *held* (still hidden) in its bucket's list until the strategy
fires at a checkpoint's pre-commit (that many checkpoints since the bucket's first held file,
or that many held bytes). Then the compactor writes the held files into one new hidden part
file, which becomes pending like a rolled one and names them as its *sources*; when it is
committed its sources are deleted. Held files and the sources of pending files are in the
checkpointed entry, so a restore holds them again (their owner compacts them) or commits and
deletes as the checkpoint says. At the end of input every bucket's held files are compacted
and the manifest lists the sources to delete after the commit. A restore from a checkpoint
older than a compaction that was later committed finds held files gone and fails, naming
them (their records are before that checkpoint's source positions, so no replay brings them).

What it does not do: custom bucket assigners, and
taking back what readers already read from a file that a restore later moved aside.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from weir.codec.batch import Batch
from weir.core.references import load_reference
from weir.errors import WeirError
from weir.operators.sinks import SinkOperator

STATE_NAME = "weir-file-sink"


@dataclass(frozen=True)
class PartFileNames:
    """Names of a sink's files. Pure: ``owns`` decides which subtask handles which file."""

    prefix: str
    suffix: str
    _in_progress: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _manifest: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _final: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _first_part: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        p, s = re.escape(self.prefix), re.escape(self.suffix)
        object.__setattr__(self, "_final", re.compile(rf"^{p}-(\d+)-(\d+){s}$"))
        object.__setattr__(self, "_first_part", re.compile(rf"^\.{p}-(\d+){s}\.first-part$"))
        object.__setattr__(
            self, "_in_progress", re.compile(rf"^\.{p}-(\d+)-(\d+){s}\.inprogress\.[0-9a-f]+$")
        )
        object.__setattr__(self, "_manifest", re.compile(rf"^\.{p}-(\d+){s}\.end-of-input$"))

    def final(self, subtask: int, counter: int) -> str:
        return f"{self.prefix}-{subtask}-{counter}{self.suffix}"

    def in_progress(self, subtask: int, counter: int, token: str) -> str:
        return f".{self.final(subtask, counter)}.inprogress.{token}"

    def manifest(self, subtask: int) -> str:
        return f".{self.prefix}-{subtask}{self.suffix}.end-of-input"

    def first_part(self, subtask: int) -> str:
        """The marker holding the counter a job's first attempt started at (a restart from the
        beginning moves aside what the job committed from there on)."""
        return f".{self.prefix}-{subtask}{self.suffix}.first-part"

    def first_part_writer(self, name: str) -> int | None:
        m = self._first_part.match(name)
        return int(m.group(1)) if m else None

    @staticmethod
    def superseded(final_name: str, token: str) -> str:
        """The hidden name a finished file is moved to when a restore puts it out of sight."""
        return f".{final_name}.superseded.{token}"

    def finished_part(self, name: str) -> tuple[int, int] | None:
        """(writer subtask, counter) of the finished part file ``name`` (None: not one of ours)."""
        m = self._final.match(name)
        return (int(m.group(1)), int(m.group(2))) if m else None

    def in_progress_writer(self, name: str) -> int | None:
        """The subtask index that wrote the in-progress file ``name`` (None: not one of ours)."""
        m = self._in_progress.match(name)
        return int(m.group(1)) if m else None

    def manifest_writer(self, name: str) -> int | None:
        m = self._manifest.match(name)
        return int(m.group(1)) if m else None

    @staticmethod
    def owns(subtask: int, parallelism: int, writer: int) -> bool:
        """Whether ``subtask`` (of ``parallelism``) is the one that recovers ``writer``'s files."""
        return writer % parallelism == subtask


@dataclass
class _OpenPart:
    bucket: str
    in_progress: str  # relative to the base path
    final: str
    file: BinaryIO
    size: int
    created_ms: int
    last_write_ms: int
    writer: Any = None  # a bulk format's part writer (None: row format)


@dataclass(frozen=True)
class PendingFile:
    """A rolled part file. ``checkpoint_id``: the checkpoint that pre-committed it (None: none
    yet); ``sources``: the held files a compacted file was made of, deleted once it is committed."""

    checkpoint_id: int | None
    in_progress: str
    final: str
    sources: tuple[str, ...] = ()


@dataclass
class _Held:
    """A bucket's rolled files waiting to be compacted (paths relative to the base, sizes),
    and how many checkpoints have passed since the first of them arrived."""

    files: list[tuple[str, int]] = field(default_factory=list)
    checkpoints: int = 0

    @property
    def size(self) -> int:
        return sum(size for _, size in self.files)


def _fsync_dirs(directories: set[Path]) -> None:
    for directory in directories:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def commit_part(base: Path, in_progress: str, final: str) -> bool:
    """Rename a pending file to its final name. False if it was committed already (idempotent);
    a WeirError if neither name exists (its data is lost) or both do (a name clash)."""
    src, dst = base / in_progress, base / final
    if not src.exists():
        if dst.exists():
            return False
        raise WeirError(
            f"FileSink: pending part file {src} is missing and its final name {dst} does not exist; "
            "the data it held is lost (was the output directory changed outside the job?)"
        )
    if dst.exists():
        raise WeirError(
            f"FileSink: cannot commit {src}: the final name {dst} already exists; "
            "two jobs (or runs) may be writing part files with the same names into one base path"
        )
    os.rename(src, dst)
    return True


class FileSinkOperator(SinkOperator):
    """Runs one subtask of a ``FileSink``; see the module docstring."""

    def __init__(self, name: str, sink: Any) -> None:
        super().__init__(name)
        self.sink = sink
        self.base = Path(sink.base_path)
        cfg = sink.output_file_config
        self.names = PartFileNames(cfg.part_prefix, cfg.part_suffix)
        self.encoder = sink.encoder
        #: a bulk format's writer factory (None: the row format, ``encoder``)
        self.bulk = getattr(sink, "bulk_writer_factory", None)
        self._part_writer = None if self.bulk is None else load_reference(self.bulk.writer_factory)
        self.policy = sink.rolling_policy
        self.assigner = sink.bucket_assigner
        self.check_interval_ms = sink.bucket_check_interval_ms
        self._open: dict[str, _OpenPart] = {}
        self._pending: list[PendingFile] = []
        self._counter = 0
        self._state: Any = None
        self._next_check_ms: int | None = None
        self.committed: list[str] = []  # final names this subtask committed (tests, metrics)
        #: (final name, hidden name) of finished files a restore moved out of sight (see _supersede)
        self.superseded: list[tuple[str, str]] = []
        self._notes: list[str] = []
        #: compaction (``enable_compact``): when, how, and each bucket's files waiting for it
        self.strategy: Any = getattr(sink, "compact_strategy", None)
        self.compactor: Any = getattr(sink, "file_compactor", None)
        self._held: dict[str, _Held] = {}

    # -- state ---------------------------------------------------------------------------------
    def _descriptor(self) -> Any:
        from weir.common.typeinfo import Types
        from weir.core.state import ListStateDescriptor

        return ListStateDescriptor(STATE_NAME, Types.STRING())

    def initialize_state(self) -> None:
        ctx = self.context
        self._state = ctx.operator_state().get_union_list_state(self._descriptor())
        entries = [json.loads(s) for s in self._state.get()] if ctx.is_restored else []
        self._state.clear()
        self.base.mkdir(parents=True, exist_ok=True)
        self._recover(entries, clean=ctx.is_restored or ctx.attempt_number > 0)

    def _recover(self, entries: list[dict[str, Any]], clean: bool) -> None:
        """Commit what the restored checkpoint pre-committed, resume or commit its in-progress
        files, and delete the in-progress files and manifests this subtask owns that no entry names."""
        ctx = self.context
        me, parallelism = ctx.subtask_index, ctx.parallelism
        referenced = (
            {p[1] for e in entries for p in e["pending"]}
            | {f[1] for e in entries for f in e["in_progress"]}
            | {src for e in entries for p in e["pending"] if len(p) > 3 for src in p[3]}
            | {f for e in entries for _b, _n, files in e.get("held", []) for f, _size in files}
        )
        self._counter = max((int(e["counter"]) for e in entries), default=0)
        #: the restored counter of every old subtask this one owns: its finished files at or
        #: above it were committed after the restored checkpoint
        restored_counters = {
            int(e["subtask"]): int(e["counter"])
            for e in entries
            if self.names.owns(me, parallelism, int(e["subtask"]))
        }
        if not ctx.is_restored and ctx.attempt_number > 0:  # a restart from the beginning
            restored_counters = self._first_parts(me, parallelism)
        touched: set[Path] = set()
        now = ctx.processing_time_ms()
        for entry in entries:
            writer = int(entry["subtask"])
            if not self.names.owns(me, parallelism, writer):
                continue
            for pending in entry["pending"]:
                in_progress, final = pending[1], pending[2]
                if commit_part(self.base, in_progress, final):
                    self.committed.append(final)
                    touched.add((self.base / final).parent)
                touched |= self._delete_sources(pending[3] if len(pending) > 3 else [])
            for bucket, checkpoints, files in entry.get("held", []):
                held = self._held.setdefault(bucket, _Held())
                held.checkpoints = max(held.checkpoints, checkpoints)
                for name, size in files:
                    if not (self.base / name).exists():
                        raise WeirError(
                            f"FileSink: part file {self.base / name} was waiting for compaction at the restored "
                            "checkpoint and is gone: a later compaction was committed and deleted it. "
                            "Restore from the latest checkpoint instead"
                        )
                    held.files.append((name, size))
            for bucket, in_progress, final, length, created_ms in entry["in_progress"]:
                path = self.base / in_progress
                if not path.exists():
                    done = self.base / final
                    if done.exists() and done.stat().st_size == length:
                        continue  # committed before the failure, as checkpointed
                    if done.exists() and done.stat().st_size > length:
                        self._take_back(final, in_progress, length)  # committed later, with more
                        touched.add(done.parent)
                    else:
                        raise WeirError(
                            f"FileSink: in-progress part file {path} of the restored checkpoint is missing "
                            f"(and its final name {done} holds less); it held {length} bytes of checkpointed output"
                        )
                with open(path, "r+b") as f:
                    f.truncate(length)  # drop what was written after the checkpoint
                    f.flush()
                    os.fsync(f.fileno())
                if writer == me and bucket not in self._open:
                    handle = open(path, "ab")  # noqa: SIM115 - kept open while the part is in progress
                    self._open[bucket] = _OpenPart(
                        bucket, in_progress, final, handle, length, created_ms, now
                    )
                else:
                    if commit_part(self.base, in_progress, final):
                        self.committed.append(final)
                        touched.add((self.base / final).parent)
        highest_own = -1
        for directory, _dirs, files in os.walk(self.base):
            for name in files:
                path = Path(directory) / name
                part = self.names.finished_part(name)
                if part is not None:
                    writer, counter = part
                    if writer == me:
                        highest_own = max(highest_own, counter)
                    if writer in restored_counters and counter >= restored_counters[writer]:
                        self._supersede(path)
                        touched.add(path.parent)
                    continue
                manifest_writer = self.names.manifest_writer(name)
                if manifest_writer is not None and self.names.owns(me, parallelism, manifest_writer):
                    path.unlink(missing_ok=True)  # an attempt that did not finish
                    touched.add(path.parent)
                    continue
                file_writer = self.names.in_progress_writer(name)
                if (
                    clean
                    and file_writer is not None
                    and self.names.owns(me, parallelism, file_writer)
                    and str(path.relative_to(self.base)) not in referenced
                ):
                    path.unlink(missing_ok=True)  # written after the restored checkpoint
                    touched.add(path.parent)
        if not ctx.is_restored:  # start past every file of this index, in every bucket
            self._counter = max(self._counter, highest_own + 1)
            if ctx.attempt_number == 0:
                self._write_first_part()
        _fsync_dirs(touched)
        if self.superseded:
            self._report_superseded()

    def _write_first_part(self) -> None:
        """Record (atomically) the counter this job starts at; ``commit_end_of_input`` removes it."""
        marker = self.base / self.names.first_part(self.context.subtask_index)
        tmp = marker.with_name(marker.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(str(self._counter))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, marker)

    def _first_parts(self, me: int, parallelism: int) -> dict[int, int]:
        """The starting counters of the old subtasks this one owns, from their markers."""
        counters = {}
        for path in self.base.iterdir():
            writer = self.names.first_part_writer(path.name)
            if writer is not None and self.names.owns(me, parallelism, writer):
                counters[writer] = int(path.read_text(encoding="utf-8"))
        return counters

    def _supersede(self, path: Path) -> str:
        """Move the finished file ``path`` out of sight (a hidden name beside it, never deleted):
        it was committed after the restored checkpoint, and the sources replay its records."""
        aside = path.with_name(self.names.superseded(path.name, secrets.token_hex(8)))
        os.rename(path, aside)
        self.superseded.append((str(path.relative_to(self.base)), aside.name))
        return aside.name

    def _take_back(self, final: str, in_progress: str, length: int) -> None:
        """An in-progress file of the restored checkpoint was committed later with more data:
        move the committed file aside and put its checkpointed ``length`` bytes back in progress."""
        aside = self.base / final
        aside = aside.with_name(self._supersede(aside))
        with open(aside, "rb") as src, open(self.base / in_progress, "xb") as dst:
            dst.write(src.read(length))
            dst.flush()
            os.fsync(dst.fileno())

    def _report_superseded(self) -> None:
        """One line for the job's result (and ``recovery_notes``) naming what was moved aside."""
        moved = ", ".join(f"{final} -> {aside}" for final, aside in self.superseded)
        note = (
            f"FileSink '{self.name}' subtask {self.context.subtask_index}: the restored checkpoint is "
            f"older than output already committed; moved {len(self.superseded)} finished part file(s) "
            f"aside so that the replay writes their records once: {moved}"
        )
        self._notes.append(note)
        report = getattr(self.context, "report_recovery", None)
        if report is not None:
            report(note)

    def recovery_notes(self) -> list[str]:
        """What this subtask's restore did beyond the usual (finished files moved aside)."""
        return list(self._notes)

    def snapshot_state(self, checkpoint_id: int) -> None:
        """Pre-commit: roll or persist every open file, and claim the pending files for this checkpoint."""
        for bucket, part in list(self._open.items()):
            if part.writer is not None or self.policy.should_roll_on_checkpoint(part.size):
                self._roll(bucket)
            else:
                part.file.flush()
                os.fsync(part.file.fileno())
        if self.strategy is not None:
            self._hold_rolled()
            for bucket, held in list(self._held.items()):
                held.checkpoints += 1
                if self._compaction_fires(held):
                    self._compact(bucket)
        self._pending = [
            PendingFile(checkpoint_id, p.in_progress, p.final, p.sources) if p.checkpoint_id is None else p
            for p in self._pending
        ]
        entry: dict[str, Any] = {
            "subtask": self.context.subtask_index,
            "counter": self._counter,
            "pending": [
                [p.checkpoint_id, p.in_progress, p.final, *([list(p.sources)] if p.sources else [])]
                for p in self._pending
            ],
            "in_progress": [
                [p.bucket, p.in_progress, p.final, p.size, p.created_ms] for p in self._open.values()
            ],
        }
        if self._held:
            entry["held"] = [
                [bucket, held.checkpoints, [list(f) for f in held.files]]
                for bucket, held in self._held.items()
            ]
        assert self._state is not None
        self._state.update([json.dumps(entry, sort_keys=True)])

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Commit: rename every file pre-committed by a checkpoint up to ``checkpoint_id``."""
        due = [p for p in self._pending if p.checkpoint_id is not None and p.checkpoint_id <= checkpoint_id]
        if not due:
            return
        self._pending = [p for p in self._pending if p not in due]
        touched = set()
        for p in due:
            if commit_part(self.base, p.in_progress, p.final):
                self.committed.append(p.final)
                touched.add((self.base / p.final).parent)
            touched |= self._delete_sources(p.sources)
        _fsync_dirs(touched)

    # -- compaction ----------------------------------------------------------------------------
    def _delete_sources(self, sources: Any) -> set[Path]:
        """Delete the files a committed compacted file was made of (idempotent)."""
        touched = set()
        for name in sources:
            path = self.base / name
            if path.exists():
                path.unlink()
                touched.add(path.parent)
        return touched

    def _hold_rolled(self) -> None:
        """Move the files rolled since the last checkpoint to their bucket's compaction list."""
        for p in [p for p in self._pending if p.checkpoint_id is None and not p.sources]:
            self._pending.remove(p)
            bucket = os.path.dirname(p.in_progress)
            self._held.setdefault(bucket, _Held()).files.append(
                (p.in_progress, (self.base / p.in_progress).stat().st_size)
            )

    def _compaction_fires(self, held: _Held) -> bool:
        """Flink's CompactTrigger: N checkpoints since the first held file, or the size threshold."""
        n, threshold = self.strategy.num_checkpoints_before_compaction, self.strategy.size_threshold
        return (n > 0 and held.checkpoints >= n) or (0 <= threshold <= held.size)

    def _compact(self, bucket: str) -> None:
        """Write the bucket's held files into one new hidden part file, pending with them as sources."""
        held = self._held.pop(bucket)
        if not held.files:
            return
        directory, prefix, in_progress, final = self._next_part_names(bucket)
        with open(directory / in_progress, "xb") as out:
            self.compactor.compact([self.base / name for name, _ in held.files], out)
            out.flush()
            os.fsync(out.fileno())
        self._pending.append(
            PendingFile(None, prefix + in_progress, prefix + final, tuple(name for name, _ in held.files))
        )

    # -- writing -------------------------------------------------------------------------------
    def _next_part_names(self, bucket: str) -> tuple[Path, str, str, str]:
        """The bucket's directory (made), its path prefix, and the next part's hidden and final names."""
        directory = self.base / bucket if bucket else self.base
        directory.mkdir(parents=True, exist_ok=True)
        me = self.context.subtask_index
        while (directory / self.names.final(me, self._counter)).exists():
            self._counter += 1  # never overwrite a finished file (e.g. of an earlier run)
        final = self.names.final(me, self._counter)
        in_progress = self.names.in_progress(me, self._counter, secrets.token_hex(8))
        self._counter += 1
        return directory, f"{bucket}/" if bucket else "", in_progress, final

    def _new_part(self, bucket: str, now_ms: int) -> _OpenPart:
        directory, prefix, in_progress, final = self._next_part_names(bucket)
        handle = open(directory / in_progress, "xb")  # noqa: SIM115 - kept open while the part is in progress
        part = _OpenPart(bucket, prefix + in_progress, prefix + final, handle, 0, now_ms, now_ms)
        if self._part_writer is not None:
            part.writer = self._part_writer(self.bulk, handle)
        self._open[bucket] = part
        return part

    def _roll(self, bucket: str) -> None:
        part = self._open.pop(bucket)
        if part.writer is not None:
            part.writer.finish()  # the footer: only now is the file a complete Parquet/CSV file
        part.file.flush()
        os.fsync(part.file.fileno())
        part.file.close()
        self._pending.append(PendingFile(None, part.in_progress, part.final))

    def process_batch(self, batch: Batch) -> None:
        n = len(batch)
        self.metrics.records_in += n
        if not n:
            return
        now = self.context.processing_time_ms()
        bucket = self.assigner.bucket_id(now)  # records of one batch arrive at one processing time
        part = self._open.get(bucket)
        if self._part_writer is not None:  # a bulk format: the whole batch, columns as they are
            if part is None:
                part = self._new_part(bucket, now)
            part.writer.write_batch(batch)
            part.size = part.file.tell()
            part.last_write_ms = now
            return
        values = batch.as_list()
        data = self.encoder.encode(values)
        if part is not None and not self.policy.should_roll_on_event(part.size + len(data)):
            part.file.write(data)  # no record of the batch would see the file over its size limit
            part.size += len(data)
            part.last_write_ms = now
            return
        for value in values:
            line = self.encoder.encode([value])
            if part is None or self.policy.should_roll_on_event(part.size):
                if part is not None:
                    self._roll(bucket)
                part = self._new_part(bucket, now)
            part.file.write(line)
            part.size += len(line)
            part.last_write_ms = now

    def open(self) -> None:
        if self.policy.uses_processing_time():
            self._next_check_ms = self.context.processing_time_ms() + self.check_interval_ms

    def next_processing_time_deadline(self) -> int | None:
        return self._next_check_ms if self._open else None

    def on_processing_time(self, now_ms: int) -> None:
        if self._next_check_ms is None or now_ms < self._next_check_ms:
            return
        for bucket, part in list(self._open.items()):
            if self.policy.should_roll_on_processing_time(part.created_ms, part.last_write_ms, now_ms):
                self._roll(bucket)
        self._next_check_ms = now_ms + self.check_interval_ms

    def finish(self) -> None:
        """End of input: roll everything and leave a manifest for the commit at the job's end."""
        for bucket in list(self._open):
            self._roll(bucket)
        if self.strategy is not None:  # every bucket compacts what it holds, as Flink's end of input
            self._hold_rolled()
            for bucket in list(self._held):
                self._compact(bucket)
        if not self._pending:
            return
        ctx = self.context
        manifest = self.base / self.names.manifest(ctx.subtask_index)
        body = {
            "subtask": ctx.subtask_index,
            "attempt": ctx.attempt_number,
            "files": [[p.in_progress, p.final] for p in self._pending],
            "delete": [src for p in self._pending for src in p.sources],
        }
        tmp = manifest.with_name(manifest.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(body, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, manifest)
        _fsync_dirs({self.base})

    def close(self) -> None:
        for part in self._open.values():
            if part.writer is not None:
                with contextlib.suppress(Exception):  # the file stays hidden; recovery deletes it
                    part.writer.finish()
            with contextlib.suppress(OSError):
                part.file.close()
        self._open.clear()  # files stay: the next attempt's recovery decides about them


def file_sink_operator(sink: Any, name: str) -> FileSinkOperator:
    """The runtime side of a ``FileSink`` (its ``operator_factory``): exactly-once, two-phase commit."""
    return FileSinkOperator(name, sink)


def commit_end_of_input(sink: Any) -> list[str]:
    """Commit every file listed in the end-of-input manifests of ``sink`` (a FileSink) and
    delete the manifests. Idempotent. Returns the final names committed now."""
    base = Path(sink.base_path)
    if not base.is_dir():
        return []
    cfg = sink.output_file_config
    names = PartFileNames(cfg.part_prefix, cfg.part_suffix)
    committed: list[str] = []
    touched: set[Path] = set()
    for manifest in sorted(base.iterdir()):
        if names.first_part_writer(manifest.name) is not None:  # the job is over: no restart will need it
            manifest.unlink()
            touched.add(base)
            continue
        if names.manifest_writer(manifest.name) is None:
            continue
        body = json.loads(manifest.read_text(encoding="utf-8"))
        for in_progress, final in body["files"]:
            if commit_part(base, in_progress, final):
                committed.append(final)
                touched.add((base / final).parent)
        for name in body.get("delete", []):  # the inputs of compacted files, now committed
            if (base / name).exists():
                (base / name).unlink()
                touched.add((base / name).parent)
        manifest.unlink()
        touched.add(base)
    _fsync_dirs(touched)
    return committed


def commit_finished_job(job_graph: Any) -> list[str]:
    """The job FINISHED: commit the end-of-input output of every sink of ``job_graph`` that
    has such a commit (``commit_on_job_finished``). Runs in a worker thread."""
    committed: list[str] = []
    for node in job_graph.stream_graph.nodes.values():
        sink = getattr(node.transformation, "sink", None)
        commit = getattr(sink, "commit_on_job_finished", None)
        if commit is not None:
            committed += commit()
    return committed

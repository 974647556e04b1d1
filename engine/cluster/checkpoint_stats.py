"""Checkpoint statistics: one record per checkpoint, kept with the checkpoints on disk.

Theory of operation
-------------------
Each task reports, with its acknowledgement, how its part went: how long alignment
took (first barrier to snapshot, processing time), the synchronous snapshot, the
asynchronous write and the fork of the process that wrote the files, if one did
(wall-clock milliseconds), the bytes it wrote for this checkpoint
(the incremental size), the bytes of every file its state needs (the full size) and
the in-flight bytes an unaligned checkpoint persisted. The driver folds those into one
record per checkpoint (maxima of the durations, sums of the sizes) and, when the
checkpoint completes or fails, appends it as a JSON line to
``<checkpoint dir>/<job id>/_history.jsonl`` -- Flink keeps the same numbers in the
JobManager's checkpoint statistics; weir writes them next to the checkpoints so that
``weir checkpoints DIR`` shows them after the job is gone.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HISTORY_FILE_NAME = "_history.jsonl"

_MAX_FIELDS = ("alignment_ms", "sync_ms", "async_ms", "fork_ms")
_SUM_FIELDS = ("checkpointed_size_bytes", "full_size_bytes", "persisted_in_flight_bytes")


@dataclass
class CheckpointRecord:
    checkpoint_id: int
    kind: str  # "checkpoint" | "savepoint"
    unaligned: bool
    trigger_ms: int
    status: str = "IN_PROGRESS"  # COMPLETED | FAILED
    end_ms: int | None = None
    acknowledged: int = 0
    alignment_ms: float = 0.0
    sync_ms: float = 0.0
    async_ms: float = 0.0
    fork_ms: float = (
        0.0  # the job's thread forking the process that writes the files (0: a thread wrote them)
    )
    checkpointed_size_bytes: int = 0
    full_size_bytes: int = 0
    persisted_in_flight_bytes: int = 0
    failure: str | None = None

    @property
    def duration_ms(self) -> int | None:
        return None if self.end_ms is None else self.end_ms - self.trigger_ms

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "duration_ms": self.duration_ms}


class CheckpointHistory:
    """The records of one job's checkpoints; finished ones are appended to ``path``."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.records: dict[int, CheckpointRecord] = {}
        self.finished: list[CheckpointRecord] = []

    def on_trigger(self, checkpoint_id: int, trigger_ms: int, is_savepoint: bool, unaligned: bool) -> None:
        kind = "savepoint" if is_savepoint else "checkpoint"
        self.records[checkpoint_id] = CheckpointRecord(checkpoint_id, kind, unaligned, trigger_ms)

    def on_task_metrics(self, checkpoint_id: int, metrics: dict[str, Any]) -> None:
        record = self.records.get(checkpoint_id)
        if record is None:
            return
        record.acknowledged += 1
        for name in _MAX_FIELDS:
            setattr(record, name, max(getattr(record, name), float(metrics.get(name, 0.0))))
        for name in _SUM_FIELDS:
            setattr(record, name, getattr(record, name) + int(metrics.get(name, 0)))

    def on_end(self, checkpoint_id: int, end_ms: int, failure: str | None = None) -> None:
        record = self.records.pop(checkpoint_id, None)
        if record is None:
            return
        record.end_ms = end_ms
        record.status = "FAILED" if failure is not None else "COMPLETED"
        record.failure = failure
        self.finished.append(record)
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(record.to_json(), sort_keys=True) + "\n")
            except OSError:
                pass  # statistics are best effort: they never fail a checkpoint


def read_history(path: Path) -> list[dict[str, Any]]:
    """The records of a ``_history.jsonl`` (lines that do not parse are skipped)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out

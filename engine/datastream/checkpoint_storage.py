"""Checkpoint storage, as ``pyflink.datastream.checkpoint_storage``.

``FileSystemCheckpointStorage(path)`` is where weir writes checkpoints anyway (files under a
directory, ``_metadata`` written atomically); given to ``CheckpointConfig.set_checkpoint_storage``
it sets ``execution.checkpointing.dir``. ``JobManagerCheckpointStorage`` keeps Flink's
parameters; weir's embedded cluster writes checkpoints to files either way (to its path when
one is given, else to the configured directory). The small-state and buffer sizes are kept
and read back as Flink reports them (its defaults when unset).
"""

from __future__ import annotations

from abc import ABC

from weir.errors import UsageError

__all__ = ["CheckpointStorage", "FileSystemCheckpointStorage", "JobManagerCheckpointStorage"]


class CheckpointStorage(ABC):  # noqa: B024 - a marker base, as PyFlink's
    """Where a job's checkpoints go."""

    def get_checkpoint_path(self) -> str | None:
        return None


def _path(what: str, path: object) -> str:
    if not isinstance(path, str) or not path:
        raise UsageError(f"{what} needs a checkpoint path such as 'file:///data/checkpoints', got {path!r}")
    return path


class JobManagerCheckpointStorage(CheckpointStorage):
    """Flink keeps these checkpoints in the JobManager's memory, at most ``max_state_size``
    bytes per state (5 MiB by default)."""

    DEFAULT_MAX_STATE_SIZE = 5 * 1024 * 1024

    def __init__(self, checkpoint_path: str | None = None, max_state_size: int | None = None) -> None:
        if checkpoint_path is not None:
            _path("JobManagerCheckpointStorage", checkpoint_path)
        if max_state_size is None:
            max_state_size = self.DEFAULT_MAX_STATE_SIZE
        if isinstance(max_state_size, bool) or not isinstance(max_state_size, int) or max_state_size <= 0:
            raise UsageError(
                f"JobManagerCheckpointStorage max_state_size must be a positive int, got {max_state_size!r}"
            )
        self._checkpoint_path = checkpoint_path
        self._max_state_size = max_state_size

    def get_checkpoint_path(self) -> str | None:
        return self._checkpoint_path

    def get_max_state_size(self) -> int:
        return self._max_state_size

    def get_savepoint_path(self) -> str | None:
        return None

    def __str__(self) -> str:
        return (
            f"JobManagerCheckpointStorage (checkpoints to JobManager) ( maxStateSize: {self._max_state_size})"
        )


class FileSystemCheckpointStorage(CheckpointStorage):
    """Checkpoints as files under ``checkpoint_path``. State smaller than
    ``file_state_size_threshold`` bytes (at most 1 MiB; 20 KiB by default) goes into the
    metadata in Flink; ``write_buffer_size`` is its stream buffer (4 KiB by default)."""

    MAX_FILE_STATE_THRESHOLD = 1024 * 1024
    DEFAULT_FILE_STATE_THRESHOLD = 20 * 1024
    DEFAULT_WRITE_BUFFER_SIZE = 4 * 1024

    def __init__(
        self,
        checkpoint_path: str,
        file_state_size_threshold: int | None = None,
        write_buffer_size: int = -1,
    ) -> None:
        if checkpoint_path is None:
            raise UsageError("FileSystemCheckpointStorage needs a checkpoint_path, got None")
        self._checkpoint_path = _path("FileSystemCheckpointStorage", checkpoint_path)
        threshold = -1 if file_state_size_threshold is None else file_state_size_threshold
        if not isinstance(threshold, int) or not -1 <= threshold <= self.MAX_FILE_STATE_THRESHOLD:
            raise UsageError(
                f"file_state_size_threshold must be within 0..{self.MAX_FILE_STATE_THRESHOLD} bytes "
                f"(or None for the default), got {file_state_size_threshold!r}"
            )
        if not isinstance(write_buffer_size, int) or write_buffer_size < -1:
            raise UsageError(
                f"write_buffer_size must be -1 (the default) or a size in bytes, got {write_buffer_size!r}"
            )
        self._threshold = threshold
        self._write_buffer_size = write_buffer_size

    def get_checkpoint_path(self) -> str:
        return self._checkpoint_path

    def get_savepoint_path(self) -> str | None:
        return None

    def get_min_file_size_threshold(self) -> int:
        return self._threshold if self._threshold >= 0 else self.DEFAULT_FILE_STATE_THRESHOLD

    def get_write_buffer_size(self) -> int:
        """The size given, else 4096 (Flink writes with the larger of this and the threshold)."""
        return self._write_buffer_size if self._write_buffer_size >= 0 else self.DEFAULT_WRITE_BUFFER_SIZE

    def __str__(self) -> str:
        return (
            f"File State Backend (checkpoints: '{self._checkpoint_path}', savepoints: 'null', "
            f"fileStateThreshold: {self.get_min_file_size_threshold()})"
        )

"""``CheckpointConfig``: a typed view over the environment's Configuration (``ExecutionConfig``,
the other such view, is in ``weir.common.execution_config``, where PyFlink has it).

Flink 2.x keeps every setting in the job's configuration; these classes only read and
write the matching keys, so ``env.configure(conf)`` and the typed setters agree.
"""

from __future__ import annotations

from typing import Any

from weir.common import config_options as opts
from weir.common.configuration import Configuration
from weir.common.time import Duration, to_millis
from weir.datastream.checkpoint_storage import CheckpointStorage
from weir.datastream.execution_mode import CheckpointingMode, ExternalizedCheckpointRetention
from weir.errors import UsageError


class CheckpointConfig:
    def __init__(self, configuration: Configuration) -> None:
        self._conf = configuration
        self._force_unaligned = False

    def is_checkpointing_enabled(self) -> bool:
        return self.get_checkpoint_interval() > 0

    def get_checkpoint_interval(self) -> int:
        value = self._conf.get_option(opts.CHECKPOINTING_INTERVAL)
        return -1 if value is None else int(value)

    def set_checkpoint_interval(self, checkpoint_interval: int) -> CheckpointConfig:
        if (
            isinstance(checkpoint_interval, bool)
            or not isinstance(checkpoint_interval, int)
            or checkpoint_interval < 10
        ):
            raise UsageError(f"checkpoint interval must be at least 10 ms, got {checkpoint_interval!r}")
        self._conf.set_string(opts.CHECKPOINTING_INTERVAL.key, f"{checkpoint_interval} ms")
        return self

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return CheckpointingMode[self._conf.get_option(opts.CHECKPOINTING_MODE)]

    def set_checkpointing_mode(self, checkpointing_mode: CheckpointingMode) -> CheckpointConfig:
        if not isinstance(checkpointing_mode, CheckpointingMode):
            raise UsageError(f"checkpointing mode must be a CheckpointingMode, got {checkpointing_mode!r}")
        self._conf.set_string(opts.CHECKPOINTING_MODE.key, checkpointing_mode.name)
        return self

    def get_checkpoint_timeout(self) -> int:
        return int(self._conf.get_option(opts.CHECKPOINTING_TIMEOUT))

    def set_checkpoint_timeout(self, checkpoint_timeout: int) -> CheckpointConfig:
        self._conf.set_string(
            opts.CHECKPOINTING_TIMEOUT.key, f"{_ms('checkpoint timeout', checkpoint_timeout)} ms"
        )
        return self

    def get_min_pause_between_checkpoints(self) -> int:
        return int(self._conf.get_option(opts.CHECKPOINTING_MIN_PAUSE))

    def set_min_pause_between_checkpoints(self, min_pause_between_checkpoints: int) -> CheckpointConfig:
        value = _ms("min pause between checkpoints", min_pause_between_checkpoints)
        self._conf.set_string(opts.CHECKPOINTING_MIN_PAUSE.key, f"{value} ms")
        return self

    def get_max_concurrent_checkpoints(self) -> int:
        return int(self._conf.get_option(opts.CHECKPOINTING_MAX_CONCURRENT))

    def set_max_concurrent_checkpoints(self, max_concurrent_checkpoints: int) -> CheckpointConfig:
        self._conf.set_integer(opts.CHECKPOINTING_MAX_CONCURRENT.key, max_concurrent_checkpoints)
        return self

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return int(self._conf.get_option(opts.CHECKPOINTING_TOLERABLE_FAILURES))

    def set_tolerable_checkpoint_failure_number(
        self, tolerable_checkpoint_failure_number: int
    ) -> CheckpointConfig:
        self._conf.set_integer(opts.CHECKPOINTING_TOLERABLE_FAILURES.key, tolerable_checkpoint_failure_number)
        return self

    def get_num_retained_checkpoints(self) -> int:
        return int(self._conf.get_option(opts.CHECKPOINTING_RETAINED))

    def set_num_retained_checkpoints(self, num: int) -> CheckpointConfig:
        self._conf.set_integer(opts.CHECKPOINTING_RETAINED.key, num)
        return self

    def enable_unaligned_checkpoints(self, enabled: bool = True) -> CheckpointConfig:
        self._conf.set_boolean(opts.CHECKPOINTING_UNALIGNED.key, enabled)
        return self

    def disable_unaligned_checkpoints(self) -> CheckpointConfig:
        return self.enable_unaligned_checkpoints(False)

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return bool(self._conf.get_option(opts.CHECKPOINTING_UNALIGNED))

    def set_aligned_checkpoint_timeout(self, alignment_timeout: Duration) -> CheckpointConfig:
        value = _ms("aligned checkpoint timeout", alignment_timeout)
        self._conf.set_string(opts.CHECKPOINTING_ALIGNED_TIMEOUT.key, f"{value} ms")
        return self

    def get_aligned_checkpoint_timeout(self) -> Duration:
        return Duration.of_millis(int(self._conf.get_option(opts.CHECKPOINTING_ALIGNED_TIMEOUT)))

    def set_checkpoint_storage_dir(self, checkpoint_path: str) -> CheckpointConfig:
        self._conf.set_string(opts.CHECKPOINTS_DIRECTORY.key, checkpoint_path)
        return self

    def set_checkpoint_storage(self, storage: CheckpointStorage) -> CheckpointConfig:
        """PyFlink 1.x's setter: a storage with a path sets ``execution.checkpointing.dir``."""
        if not isinstance(storage, CheckpointStorage):
            raise UsageError(
                f"set_checkpoint_storage needs a CheckpointStorage such as "
                f"FileSystemCheckpointStorage('file:///data/checkpoints'), got {storage!r}"
            )
        self._storage = storage
        path = storage.get_checkpoint_path()
        if path is not None:
            self.set_checkpoint_storage_dir(path)
        return self

    def get_checkpoint_storage(self) -> CheckpointStorage | None:
        return getattr(self, "_storage", None)

    def get_checkpoint_storage_dir(self) -> str | None:
        value = self._conf.get_option(opts.CHECKPOINTS_DIRECTORY)
        return None if value is None else str(value)

    def set_externalized_checkpoint_retention(
        self, retention: ExternalizedCheckpointRetention
    ) -> CheckpointConfig:
        """What happens to the job's checkpoints when it ends (Flink's
        ``execution.checkpointing.externalized-checkpoint-retention``; docs/checkpoints.md)."""
        if not isinstance(retention, ExternalizedCheckpointRetention):
            raise UsageError(f"retention must be an ExternalizedCheckpointRetention, got {retention!r}")
        self._conf.set_string(opts.CHECKPOINTING_RETENTION.key, retention.name)
        return self

    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        return ExternalizedCheckpointRetention[self._conf.get_option(opts.CHECKPOINTING_RETENTION)]

    def is_externalized_checkpoints_enabled(self) -> bool:
        """Checkpoints outlive the job (a retention other than NO_EXTERNALIZED_CHECKPOINTS)."""
        return (
            self.get_externalized_checkpoint_retention()
            is not ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS
        )

    # PyFlink's older names for the settings above
    def set_alignment_timeout(self, alignment_timeout: Duration) -> CheckpointConfig:
        return self.set_aligned_checkpoint_timeout(alignment_timeout)

    def get_alignment_timeout(self) -> Duration:
        return self.get_aligned_checkpoint_timeout()

    def set_fail_on_checkpointing_errors(self, fail_on_checkpointing_errors: bool) -> CheckpointConfig:
        """True: a failed checkpoint fails the job (no tolerable failures); False: never."""
        return self.set_tolerable_checkpoint_failure_number(0 if fail_on_checkpointing_errors else 2**31 - 1)

    def is_fail_on_checkpointing_errors(self) -> bool:
        return self.get_tolerable_checkpoint_failure_number() == 0

    def set_force_unaligned_checkpoints(self, force_unaligned_checkpoints: bool = True) -> CheckpointConfig:
        """Kept for PyFlink jobs: weir checkpoints every edge unaligned when unaligned
        checkpoints are on (custom partitioners included; it has no iterations), so forcing
        changes nothing."""
        self._force_unaligned = bool(force_unaligned_checkpoints)
        return self

    def is_force_unaligned_checkpoints(self) -> bool:
        return self._force_unaligned


def _ms(what: str, value: Any) -> int:
    millis = to_millis(what, value)
    if millis < 0:
        raise UsageError(f"{what} must not be negative, got {millis} ms")
    return millis

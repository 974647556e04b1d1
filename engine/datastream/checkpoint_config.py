"""``CheckpointConfig`` and ``ExecutionConfig``: typed views over the environment's Configuration.

Flink 2.x keeps every setting in the job's configuration; these classes only read and
write the matching keys, so ``env.configure(conf)`` and the typed setters agree.
"""

from __future__ import annotations

from typing import Any

from weir.common import config_options as opts
from weir.common.configuration import Configuration
from weir.common.time import Duration, to_millis
from weir.datastream.execution_mode import CheckpointingMode, ExternalizedCheckpointRetention
from weir.errors import UsageError


class CheckpointConfig:
    def __init__(self, configuration: Configuration) -> None:
        self._conf = configuration

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


class ExecutionConfig:
    def __init__(self, configuration: Configuration) -> None:
        self._conf = configuration
        self._global_job_parameters: dict[str, str] = {}

    def set_auto_watermark_interval(self, interval: int) -> ExecutionConfig:
        self._conf.set_string(
            opts.AUTO_WATERMARK_INTERVAL.key, f"{_ms('auto watermark interval', interval)} ms"
        )
        return self

    def get_auto_watermark_interval(self) -> int:
        return int(self._conf.get_option(opts.AUTO_WATERMARK_INTERVAL))

    def set_global_job_parameters(self, global_job_parameters_dict: dict[str, str]) -> ExecutionConfig:
        self._global_job_parameters = {str(k): str(v) for k, v in global_job_parameters_dict.items()}
        return self

    def get_global_job_parameters(self) -> dict[str, str]:
        return dict(self._global_job_parameters)


def _ms(what: str, value: Any) -> int:
    millis = to_millis(what, value)
    if millis < 0:
        raise UsageError(f"{what} must not be negative, got {millis} ms")
    return millis

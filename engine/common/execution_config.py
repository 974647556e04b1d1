"""``ExecutionConfig``: ``env.get_config()``, a typed view over the environment's
Configuration, as ``pyflink.common.ExecutionConfig``.

Settings weir acts on: the auto-watermark interval, the global job parameters, the
default parallelism and max parallelism (the same keys as the environment's setters).
The serializer and JVM switches of Flink (object reuse, Kryo/Avro forcing, generic
types, closure cleaner, auto-generated UIDs, latency tracking, task cancellation,
snapshot compression) are kept and read back so a PyFlink job runs unchanged, and change
nothing in weir: records are Python objects copied per subtask, serializers follow the
stream's type information, and every operator's ID is derived from its position unless
given a uid (docs/decisions.md).
"""

from __future__ import annotations

from typing import Any

from weir.common import config_options as opts
from weir.common.configuration import Configuration
from weir.common.time import to_millis
from weir.errors import UsageError


class ExecutionConfig:
    def __init__(self, configuration: Configuration) -> None:
        self._conf = configuration
        self._global_job_parameters: dict[str, str] = {}
        self._flags: dict[str, Any] = {
            "object_reuse": False,
            "closure_cleaner": True,
            "force_avro": False,
            "force_kryo": False,
            "generic_types": True,
            "auto_generated_uids": True,
            "latency_tracking_interval": 0,
            "task_cancellation_interval": 30_000,
            "task_cancellation_timeout": 180_000,
            "snapshot_compression": False,
        }

    # -- what weir acts on -----------------------------------------------------------------------
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

    def set_parallelism(self, parallelism: int) -> ExecutionConfig:
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise UsageError(f"ExecutionConfig.set_parallelism needs a positive integer, got {parallelism!r}")
        self._conf.set_integer(opts.PARALLELISM_DEFAULT.key, parallelism)
        return self

    def get_parallelism(self) -> int:
        return int(self._conf.get_option(opts.PARALLELISM_DEFAULT))

    def set_max_parallelism(self, max_parallelism: int) -> ExecutionConfig:
        if isinstance(max_parallelism, bool) or not isinstance(max_parallelism, int) or max_parallelism < 1:
            raise UsageError(
                f"ExecutionConfig.set_max_parallelism needs a positive integer, got {max_parallelism!r}"
            )
        self._conf.set_integer(opts.MAX_PARALLELISM.key, max_parallelism)
        return self

    def get_max_parallelism(self) -> int:
        return int(self._conf.get_option(opts.MAX_PARALLELISM))

    # -- Flink's switches: kept, no effect in weir (see the module docstring) --------------------
    def _set(self, name: str, value: Any) -> ExecutionConfig:
        self._flags[name] = value
        return self

    def enable_object_reuse(self) -> ExecutionConfig:
        return self._set("object_reuse", True)

    def disable_object_reuse(self) -> ExecutionConfig:
        return self._set("object_reuse", False)

    def is_object_reuse_enabled(self) -> bool:
        return bool(self._flags["object_reuse"])

    def enable_closure_cleaner(self) -> ExecutionConfig:
        return self._set("closure_cleaner", True)

    def disable_closure_cleaner(self) -> ExecutionConfig:
        return self._set("closure_cleaner", False)

    def is_closure_cleaner_enabled(self) -> bool:
        return bool(self._flags["closure_cleaner"])

    def enable_force_avro(self) -> None:
        self._set("force_avro", True)

    def disable_force_avro(self) -> None:
        self._set("force_avro", False)

    def is_force_avro_enabled(self) -> bool:
        return bool(self._flags["force_avro"])

    def enable_force_kryo(self) -> None:
        self._set("force_kryo", True)

    def disable_force_kryo(self) -> None:
        self._set("force_kryo", False)

    def is_force_kryo_enabled(self) -> bool:
        return bool(self._flags["force_kryo"])

    def enable_generic_types(self) -> None:
        self._set("generic_types", True)

    def disable_generic_types(self) -> None:
        self._set("generic_types", False)

    def has_generic_types_disabled(self) -> bool:
        return not self._flags["generic_types"]

    def enable_auto_generated_uids(self) -> None:
        self._set("auto_generated_uids", True)

    def disable_auto_generated_uids(self) -> None:
        self._set("auto_generated_uids", False)

    def has_auto_generated_uids_enabled(self) -> bool:
        return bool(self._flags["auto_generated_uids"])

    def set_latency_tracking_interval(self, interval: int) -> ExecutionConfig:
        return self._set("latency_tracking_interval", _ms("latency tracking interval", interval))

    def get_latency_tracking_interval(self) -> int:
        return int(self._flags["latency_tracking_interval"])

    def set_task_cancellation_interval(self, interval: int) -> ExecutionConfig:
        return self._set("task_cancellation_interval", _ms("task cancellation interval", interval))

    def get_task_cancellation_interval(self) -> int:
        return int(self._flags["task_cancellation_interval"])

    def set_task_cancellation_timeout(self, timeout: int) -> ExecutionConfig:
        return self._set("task_cancellation_timeout", _ms("task cancellation timeout", timeout))

    def get_task_cancellation_timeout(self) -> int:
        return int(self._flags["task_cancellation_timeout"])

    def set_use_snapshot_compression(self, use_snapshot_compression: bool) -> None:
        self._set("snapshot_compression", bool(use_snapshot_compression))

    def is_use_snapshot_compression(self) -> bool:
        return bool(self._flags["snapshot_compression"])

    def get_default_kryo_serializer_classes(self) -> dict[str, str]:
        return {}

    def get_registered_kryo_types(self) -> list[str]:
        return []

    def get_registered_pojo_types(self) -> list[str]:
        return []


def _ms(what: str, value: Any) -> int:
    millis = to_millis(what, value)
    if millis < 0:
        raise UsageError(f"{what} must not be negative, got {millis} ms")
    return millis

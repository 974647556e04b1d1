"""``weir.common``: the names of ``pyflink.common`` that weir implements."""

from __future__ import annotations

from weir.common.completable_future import CompletableFuture
from weir.common.config_options import ConfigOption, ConfigOptions
from weir.common.configuration import Configuration
from weir.common.execution_config import ExecutionConfig
from weir.common.input_dependency_constraint import InputDependencyConstraint
from weir.common.job_client import JobClient, JobExecutionResult, JobID
from weir.common.job_status import JobStatus
from weir.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from weir.common.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    Encoder,
    SerializationSchema,
    SimpleStringSchema,
)
from weir.common.serializer import TypeSerializer
from weir.common.time import Duration, Instant, Time
from weir.common.typeinfo import TypeInformation, Types
from weir.common.types import Row, RowKind
from weir.common.watermark_strategy import TimestampAssigner, WatermarkStrategy

__all__ = [
    "ByteArraySchema",
    "CompletableFuture",
    "ConfigOption",
    "ConfigOptions",
    "Configuration",
    "DeserializationSchema",
    "Duration",
    "Encoder",
    "ExecutionConfig",
    "InputDependencyConstraint",
    "Instant",
    "JobClient",
    "JobExecutionResult",
    "JobID",
    "JobStatus",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "Row",
    "RowKind",
    "SerializationSchema",
    "SimpleStringSchema",
    "Time",
    "TimestampAssigner",
    "TypeInformation",
    "TypeSerializer",
    "Types",
    "WatermarkStrategy",
]

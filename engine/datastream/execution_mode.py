"""``RuntimeExecutionMode`` and ``CheckpointingMode``, as in PyFlink."""

from __future__ import annotations

from enum import Enum


class RuntimeExecutionMode(Enum):
    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2


class CheckpointingMode(Enum):
    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1


class ExternalizedCheckpointRetention(Enum):
    DELETE_ON_CANCELLATION = 0
    RETAIN_ON_CANCELLATION = 1
    NO_EXTERNALIZED_CHECKPOINTS = 2

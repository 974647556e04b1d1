"""``engine.common``: the names of ``pyflink.common`` that weir implements."""

from __future__ import annotations

from engine.common.configuration import Configuration
from engine.common.time import Duration, Time
from engine.common.typeinfo import TypeInformation, Types
from engine.common.types import Row, RowKind
from engine.common.watermark_strategy import TimestampAssigner, WatermarkStrategy

__all__ = [
    "Configuration",
    "Duration",
    "Row",
    "RowKind",
    "Time",
    "TimestampAssigner",
    "TypeInformation",
    "Types",
    "WatermarkStrategy",
]

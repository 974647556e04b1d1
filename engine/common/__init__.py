"""``weir.common``: the names of ``pyflink.common`` that weir implements."""

from __future__ import annotations

from weir.common.configuration import Configuration
from weir.common.time import Duration, Time
from weir.common.typeinfo import TypeInformation, Types
from weir.common.types import Row, RowKind
from weir.common.watermark_strategy import TimestampAssigner, WatermarkStrategy

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

"""``WatermarkStrategy`` and ``TimestampAssigner``, as in ``pyflink.common.watermark_strategy``.

A strategy is configuration only: which watermarks to generate (none, monotonous,
bounded out-of-orderness), how to read a record's timestamp, and when an input
counts as idle. The generators that run inside tasks live in ``weir.time``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from weir.common.time import Duration, to_millis
from weir.errors import UsageError


class TimestampAssigner:
    """Extracts the event timestamp (epoch milliseconds) from a record."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        raise NotImplementedError


class _CallableTimestampAssigner(TimestampAssigner):
    def __init__(self, fn: Callable[..., int]) -> None:
        self._fn = fn

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return self._fn(value, record_timestamp)


@dataclass(frozen=True)
class WatermarkAlignmentParams:
    """Flink's ``WatermarkAlignmentParams``: a source group and how far apart its watermarks may drift."""

    watermark_group: str
    max_allowed_watermark_drift_ms: int
    update_interval_ms: int


class WatermarkStrategy:
    """How a source (or ``assign_timestamps_and_watermarks``) produces watermarks."""

    NONE = "none"
    MONOTONOUS = "monotonous"
    BOUNDED_OUT_OF_ORDERNESS = "bounded_out_of_orderness"

    def __init__(
        self,
        kind: str,
        max_out_of_orderness_ms: int = 0,
        timestamp_assigner: TimestampAssigner | None = None,
        idle_timeout_ms: int | None = None,
        alignment: WatermarkAlignmentParams | None = None,
    ) -> None:
        self.kind = kind
        self.max_out_of_orderness_ms = max_out_of_orderness_ms
        self.timestamp_assigner = timestamp_assigner
        self.idle_timeout_ms = idle_timeout_ms
        self.alignment = alignment

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        return WatermarkStrategy(WatermarkStrategy.MONOTONOUS)

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration) -> WatermarkStrategy:
        millis = to_millis("for_bounded_out_of_orderness(max_out_of_orderness)", max_out_of_orderness)
        if millis < 0:
            raise UsageError(f"max out-of-orderness must not be negative, got {millis} ms")
        return WatermarkStrategy(WatermarkStrategy.BOUNDED_OUT_OF_ORDERNESS, millis)

    @staticmethod
    def no_watermarks() -> WatermarkStrategy:
        return WatermarkStrategy(WatermarkStrategy.NONE)

    def with_timestamp_assigner(
        self, timestamp_assigner: TimestampAssigner | Callable[..., int]
    ) -> WatermarkStrategy:
        if isinstance(timestamp_assigner, TimestampAssigner):
            assigner = timestamp_assigner
        elif callable(timestamp_assigner):
            assigner = _CallableTimestampAssigner(timestamp_assigner)
        else:
            raise UsageError(
                f"with_timestamp_assigner needs a TimestampAssigner or a callable (value, record_timestamp) -> int, "
                f"got {timestamp_assigner!r}"
            )
        return WatermarkStrategy(
            self.kind, self.max_out_of_orderness_ms, assigner, self.idle_timeout_ms, self.alignment
        )

    def with_idleness(self, idle_timeout: Duration) -> WatermarkStrategy:
        millis = to_millis("with_idleness(idle_timeout)", idle_timeout)
        if millis <= 0:
            raise UsageError(f"idle timeout must be positive, got {millis} ms")
        return WatermarkStrategy(
            self.kind, self.max_out_of_orderness_ms, self.timestamp_assigner, millis, self.alignment
        )

    def with_watermark_alignment(
        self,
        watermark_group: str,
        max_allowed_watermark_drift: Duration,
        update_interval: Duration | None = None,
    ) -> WatermarkStrategy:
        """Join the sources of this strategy to ``watermark_group``, whose sources may drift at
        most ``max_allowed_watermark_drift`` apart, checked every ``update_interval`` (default
        1 s). Recorded (``get_alignment_parameters``, ``weir plan``); weir's sources are not
        paused when they run ahead of their group (docs/decisions.md)."""
        if not isinstance(watermark_group, str) or not watermark_group:
            raise UsageError(
                f"with_watermark_alignment needs a watermark group name, got {watermark_group!r}"
            )
        drift = to_millis(
            "with_watermark_alignment(max_allowed_watermark_drift)", max_allowed_watermark_drift
        )
        if drift <= 0:
            raise UsageError(f"max allowed watermark drift must be positive, got {drift} ms")
        interval = (
            1000
            if update_interval is None
            else to_millis("with_watermark_alignment(update_interval)", update_interval)
        )
        if interval <= 0:
            raise UsageError(f"watermark alignment update interval must be positive, got {interval} ms")
        return WatermarkStrategy(
            self.kind,
            self.max_out_of_orderness_ms,
            self.timestamp_assigner,
            self.idle_timeout_ms,
            WatermarkAlignmentParams(watermark_group, drift, interval),
        )

    def get_alignment_parameters(self) -> WatermarkAlignmentParams | None:
        """The watermark group, drift and update interval, or None without alignment."""
        return self.alignment

    def describe(self) -> str:
        parts = [self.kind]
        if self.kind == WatermarkStrategy.BOUNDED_OUT_OF_ORDERNESS:
            parts.append(f"{self.max_out_of_orderness_ms} ms")
        if self.idle_timeout_ms is not None:
            parts.append(f"idle after {self.idle_timeout_ms} ms")
        if self.alignment is not None:
            a = self.alignment
            parts.append(
                f"aligned in {a.watermark_group!r} within {a.max_allowed_watermark_drift_ms} ms "
                f"(every {a.update_interval_ms} ms)"
            )
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"WatermarkStrategy({self.describe()})"

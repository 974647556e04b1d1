"""The watermark valve: a task's watermark from its input channels' watermarks.

Theory of operation
-------------------
Each input channel reports watermarks (non-decreasing per channel; a lower one is
ignored) and may be marked idle. The task's watermark is the minimum over the channels
that are active; idle channels do not hold it back. The output only moves forward: an
event that would lower or not change it produces nothing. When every channel is idle
the valve emits nothing until one becomes active again. Pure: events in, the new
watermark (or None) out.
"""

from __future__ import annotations

from engine.errors import ProtocolViolation

MIN_WATERMARK = -(1 << 63)


class WatermarkValve:
    def __init__(self, num_channels: int) -> None:
        if num_channels < 1:
            raise ProtocolViolation(f"a watermark valve needs at least one channel, got {num_channels}")
        self.channel_watermarks = [MIN_WATERMARK] * num_channels
        self.idle = [False] * num_channels
        self.current = MIN_WATERMARK

    def _check(self, channel: int) -> None:
        if not 0 <= channel < len(self.channel_watermarks):
            raise ProtocolViolation(
                f"watermark valve has channels 0..{len(self.channel_watermarks) - 1}, got channel {channel}"
            )

    def on_watermark(self, channel: int, timestamp: int) -> int | None:
        """A watermark arrived on ``channel``; returns the task's new watermark if it advanced."""
        self._check(channel)
        if timestamp > self.channel_watermarks[channel]:
            self.channel_watermarks[channel] = timestamp
        if self.idle[channel]:
            self.idle[channel] = False
        return self._advance()

    def on_idle(self, channel: int, idle: bool) -> int | None:
        self._check(channel)
        self.idle[channel] = idle
        return self._advance()

    def _advance(self) -> int | None:
        active = [wm for wm, idle in zip(self.channel_watermarks, self.idle) if not idle]
        if not active:
            return None
        candidate = min(active)
        if candidate > self.current:
            self.current = candidate
            return candidate
        return None

"""The watermark valve: a task's watermark from its input channels' watermarks.

Theory of operation
-------------------
As Flink's ``StatusWatermarkValve``. Each input channel has a watermark (non-decreasing;
a lower one is ignored), a status (active or idle) and an ``aligned`` flag. The valve's
output is a watermark and a status.

Events:

- ``input_watermark(channel, ts)``: the channel's watermark rises to ``ts``. A channel
  that is not aligned becomes aligned once its watermark reaches the output watermark.
  The output becomes the minimum over aligned channels, if that is higher.
- ``input_watermark_status(channel, idle=True)``: the channel stops counting (it is no
  longer aligned). If it was the one holding the output back, the output moves to the
  minimum of the remaining aligned channels. If it was the last active channel, the
  output "flushes" to the maximum over all channels (nothing can advance any more, so
  downstream gets everything known) and the valve's status becomes idle.
- ``input_watermark_status(channel, idle=False)``: the channel counts again, but it is
  aligned only if its watermark is not behind the output; a channel that comes back
  behind does not drag the output back or hold it until it catches up (it re-joins
  the minimum when it does). If the valve was idle, its status becomes active. A channel
  that comes back aligned may lift the output to the new minimum of the aligned channels
  at once (Flink waits for the next watermark; the output is the same, only earlier).

A watermark on an idle channel makes the channel active first (weir's upstreams
announce ``active`` before the first watermark after idleness, so this only matters for
a lenient peer; Flink drops such a watermark).

Invariants: the output watermark never decreases; it is emitted only when it rises;
when it rises (except in the all-idle flush) no active, aligned channel is behind it;
the status is idle exactly when every channel is idle. Pure: events in, actions out
(:class:`~weir.time.watermarks.EmitWatermark`,
:class:`~weir.time.watermarks.EmitWatermarkStatus`, in the order to send them). Not
here: the end-of-input Long.MAX watermark is an ordinary watermark on every channel.
"""

from __future__ import annotations

from weir.errors import ProtocolViolation
from weir.time.watermarks import EmitWatermark, EmitWatermarkStatus, WatermarkAction

MIN_WATERMARK = -(1 << 63)


class WatermarkValve:
    """Combines ``num_channels`` input channels' watermarks and statuses into one output."""

    def __init__(self, num_channels: int) -> None:
        if num_channels < 1:
            raise ProtocolViolation(f"a watermark valve needs at least one channel, got {num_channels}")
        self.channel_watermarks = [MIN_WATERMARK] * num_channels
        self.idle = [False] * num_channels
        self.aligned = [True] * num_channels
        self.current = MIN_WATERMARK  # the last output watermark
        self.output_idle = False  # the last output status

    def _check(self, channel: int) -> None:
        if not 0 <= channel < len(self.channel_watermarks):
            raise ProtocolViolation(
                f"watermark valve has channels 0..{len(self.channel_watermarks) - 1}, got channel {channel}"
            )

    # ------------------------------------------------------------------ typed events

    def input_watermark(self, channel: int, timestamp: int) -> list[WatermarkAction]:
        """A watermark arrived on ``channel``; the actions to send downstream, in order."""
        self._check(channel)
        actions: list[WatermarkAction] = []
        if self.idle[channel]:
            actions.extend(self.input_watermark_status(channel, idle=False))
        if timestamp > self.channel_watermarks[channel]:
            self.channel_watermarks[channel] = timestamp
            if not self.aligned[channel] and timestamp >= self.current:
                self.aligned[channel] = True
            self._advance_to_min_of_aligned(actions)
        return actions

    def input_watermark_status(self, channel: int, idle: bool) -> list[WatermarkAction]:
        """``channel`` became idle (``idle=True``) or active; the actions to send, in order."""
        self._check(channel)
        actions: list[WatermarkAction] = []
        if idle and not self.idle[channel]:
            self.idle[channel] = True
            self.aligned[channel] = False
            if not self.has_active_channels():
                # No channel can advance any more: flush everything known downstream. Only
                # needed if this channel was the one holding the output (otherwise the
                # earlier idleness of the others already moved it as far as it goes).
                if self.channel_watermarks[channel] == self.current:
                    self._advance_to(max(self.channel_watermarks), actions)
                self.output_idle = True
                actions.append(EmitWatermarkStatus(idle=True))
            elif self.channel_watermarks[channel] == self.current:
                self._advance_to_min_of_aligned(actions)
        elif not idle and self.idle[channel]:
            self.idle[channel] = False
            if self.output_idle:
                self.output_idle = False
                actions.append(EmitWatermarkStatus(idle=False))
            if self.channel_watermarks[channel] >= self.current:
                self.aligned[channel] = True
                # it may now be the slowest aligned channel, and ahead of the output (the
                # channel that held the output went idle with no aligned channel left to
                # advance to): the output follows at once rather than at its next watermark
                self._advance_to_min_of_aligned(actions)
        return actions

    # ------------------------------------------------------------------ the original API

    def on_watermark(self, channel: int, timestamp: int) -> int | None:
        """A watermark arrived on ``channel``; returns the task's new watermark if it advanced."""
        return _watermark_of(self.input_watermark(channel, timestamp))

    def on_idle(self, channel: int, idle: bool) -> int | None:
        """``channel`` became idle or active; returns the task's new watermark if it advanced.

        Status changes of the output are dropped here; use ``input_watermark_status``
        to forward them.
        """
        return _watermark_of(self.input_watermark_status(channel, idle))

    # ------------------------------------------------------------------ queries

    def has_active_channels(self) -> bool:
        return not all(self.idle)

    def statistics(self) -> dict[str, object]:
        return {
            "current": self.current,
            "idle": self.output_idle,
            "channel_watermarks": tuple(self.channel_watermarks),
            "channel_idle": tuple(self.idle),
            "channel_aligned": tuple(self.aligned),
        }

    # ------------------------------------------------------------------ internals

    def _advance_to_min_of_aligned(self, actions: list[WatermarkAction]) -> None:
        aligned = [
            wm for wm, ok, idle in zip(self.channel_watermarks, self.aligned, self.idle) if ok and not idle
        ]
        if aligned:
            self._advance_to(min(aligned), actions)

    def _advance_to(self, candidate: int, actions: list[WatermarkAction]) -> None:
        if candidate > self.current:
            self.current = candidate
            actions.append(EmitWatermark(candidate))

    def __repr__(self) -> str:
        return (
            f"WatermarkValve(current={self.current}, idle={self.output_idle}, "
            f"channels={list(zip(self.channel_watermarks, self.idle, self.aligned))})"
        )


def _watermark_of(actions: list[WatermarkAction]) -> int | None:
    for action in reversed(actions):
        if isinstance(action, EmitWatermark):
            return action.timestamp
    return None


class CombinedWatermark:
    """A two-input (or n-input) operator's watermark from its inputs' watermarks, as Flink's
    ``IndexedCombinedWatermarkStatus``: each input (already the output of its own valve) has
    a watermark and an idle flag; the combined watermark is the minimum over the inputs
    that are not idle, and only rises. When every input is idle the combined status is
    idle and the watermark stays where it is. Pure."""

    def __init__(self, num_inputs: int) -> None:
        self.watermarks = [MIN_WATERMARK] * num_inputs
        self.idle = [False] * num_inputs
        self.current = MIN_WATERMARK
        self.combined_idle = False

    def _update(self) -> int | None:
        active = [wm for wm, idle in zip(self.watermarks, self.idle) if not idle]
        self.combined_idle = not active
        if active and min(active) > self.current:
            self.current = min(active)
            return self.current
        return None

    def update_watermark(self, index: int, timestamp: int) -> int | None:
        """Input ``index`` reached ``timestamp``: the new combined watermark when it rose, else None."""
        if timestamp > self.watermarks[index]:
            self.watermarks[index] = timestamp
        return self._update()

    def update_status(self, index: int, idle: bool) -> tuple[int | None, bool]:
        """Input ``index`` became idle (or active): (the new combined watermark when it rose,
        whether the combined idle status changed)."""
        was_idle = self.combined_idle
        self.idle[index] = idle
        return self._update(), was_idle != self.combined_idle

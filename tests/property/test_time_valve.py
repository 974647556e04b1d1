"""Properties of the watermark valve over random per-channel event sequences."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from weir.time.valve import MIN_WATERMARK, WatermarkValve
from weir.time.watermarks import EmitWatermark, EmitWatermarkStatus

# An event: (channel, kind, value). kind 0: watermark += value; 1: idle; 2: active.
events = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from([0, 0, 0, 1, 2]), st.integers(-5, 20)),
    max_size=80,
)


@settings(max_examples=300)
@given(st.integers(1, 4), events)
# the channel holding the output goes idle with no aligned channel left, then a channel that
# is ahead comes back: the output must follow it
@example(3, [(0, 0, 2), (0, 1, 0), (1, 1, 0), (2, 0, 1), (1, 0, 0), (2, 1, 0), (0, 0, 0)])
def test_watermark_never_advances_past_the_slowest_non_idle_channel(n: int, sequence: list) -> None:
    valve = WatermarkValve(n)
    marks = [0] * n
    ever_idle = [False] * n
    last = MIN_WATERMARK
    for channel, kind, value in sequence:
        channel %= n
        if kind == 0:
            marks[channel] += value
            actions = valve.input_watermark(channel, marks[channel])
        else:
            if kind == 1:
                ever_idle[channel] = True
            actions = valve.input_watermark_status(channel, idle=kind == 1)
        flushed = EmitWatermarkStatus(idle=True) in actions
        for action in actions:
            if isinstance(action, EmitWatermark):
                # Rises only, and only as far as some channel has got.
                assert action.timestamp > last
                last = action.timestamp
                assert last <= max(valve.channel_watermarks)
                if not flushed:
                    for c in range(n):
                        if not valve.idle[c] and valve.aligned[c]:
                            assert valve.channel_watermarks[c] >= last
                        if not ever_idle[c]:
                            assert valve.channel_watermarks[c] >= last
        assert valve.current == last
        # The status is idle exactly when every channel is.
        assert valve.output_idle == all(valve.idle)
        # Liveness: the output is never behind every active, aligned channel.
        counted = [
            wm for wm, idle, ok in zip(valve.channel_watermarks, valve.idle, valve.aligned) if ok and not idle
        ]
        if counted:
            assert valve.current >= min(counted)


@settings(max_examples=200)
@given(st.integers(1, 4), st.lists(st.tuples(st.integers(0, 3), st.integers(-5, 20)), max_size=60))
def test_without_idleness_the_output_is_the_minimum_of_all_channels(n: int, sequence: list) -> None:
    valve = WatermarkValve(n)
    marks = [MIN_WATERMARK] * n
    for channel, value in sequence:
        channel %= n
        ts = value if marks[channel] == MIN_WATERMARK else marks[channel] + value
        marks[channel] = max(marks[channel], ts)
        result = valve.on_watermark(channel, ts)
        assert valve.current == min(marks)
        assert result is None or result == min(marks)

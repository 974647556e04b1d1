"""CombinedWatermark: a two-input operator's event time from its two inputs (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from weir.time.valve import MIN_WATERMARK, CombinedWatermark


def test_the_slower_input_holds_event_time_back() -> None:
    combined = CombinedWatermark(2)
    assert combined.update_watermark(0, 100) is None  # input 2 has said nothing yet
    assert combined.update_watermark(1, 40) == 40
    assert combined.update_watermark(1, 70) == 70
    assert combined.update_watermark(1, 300) == 100  # now input 1 is the slower one
    assert combined.current == 100


def test_an_idle_input_stops_counting_and_all_idle_is_idle() -> None:
    combined = CombinedWatermark(2)
    combined.update_watermark(0, 500)
    assert combined.update_status(1, idle=True) == (500, False)  # input 2 idle: input 1 alone decides
    assert combined.update_status(0, idle=True) == (None, True)  # both idle: the status changes
    assert combined.combined_idle and combined.current == 500
    assert combined.update_status(1, idle=False) == (None, True)  # active again, behind: no regression
    assert combined.current == 500


def test_a_lower_watermark_on_an_input_is_ignored() -> None:
    combined = CombinedWatermark(2)
    combined.update_watermark(0, 10)
    combined.update_watermark(1, 10)
    assert combined.update_watermark(0, 5) is None
    assert combined.watermarks == [10, 10]


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(-1000, 1000), st.booleans()), max_size=60))
def test_combined_equals_min_over_active_inputs_and_never_falls(events: list[tuple[int, int, bool]]) -> None:
    combined = CombinedWatermark(2)
    seen = [MIN_WATERMARK, MIN_WATERMARK]
    idle = [False, False]
    expected = MIN_WATERMARK
    for index, value, is_status in events:
        before = combined.current
        if is_status:
            idle[index] = not idle[index]
            combined.update_status(index, idle[index])
        else:
            seen[index] = max(seen[index], value)
            combined.update_watermark(index, value)
        active = [w for w, i in zip(seen, idle) if not i]
        if active:
            expected = max(expected, min(active))
        assert combined.current == expected >= before
        assert combined.combined_idle == all(idle)

"""Testing a KeyedCoProcessFunction: a two-input harness, and the whole job on TestStreams.

.venv/bin/pytest examples/testing -q
"""

from __future__ import annotations

import pytest
from rides_and_fares import (
    FARE,
    FARE_TYPE,
    RIDE,
    RIDE_TYPE,
    UNMATCHED_FARES,
    UNMATCHED_RIDES,
    WAIT_MS,
    EnrichRides,
    build,
)

from weir.common import WatermarkStrategy
from weir.testing import (
    KeyedTwoInputStreamOperatorTestHarness,
    RegisteredTimer,
    TestStream,
    TimestampedValue,
    assert_output,
    collect,
)


def harness(parallelism: int = 1, subtask_index: int = 0) -> KeyedTwoInputStreamOperatorTestHarness:
    return KeyedTwoInputStreamOperatorTestHarness(
        EnrichRides(),
        key_selector1=lambda ride: ride[0],
        key_selector2=lambda fare: fare[0],
        parallelism=parallelism,
        subtask_index=subtask_index,
    )


def test_a_ride_waits_in_state_for_its_fare() -> None:
    with harness() as h:
        h.process_element1((1, "alice"), timestamp=1_000)
        assert h.get_keyed_state(RIDE, 1) == (1, "alice")
        assert h.event_time_timers() == [RegisteredTimer(1_000 + WAIT_MS, 1)]
        h.process_element2((1, 12.5), timestamp=2_000)
        assert h.extract_output_values() == [(1, "alice", 12.5)]
        assert h.get_keyed_state(RIDE, 1) is None and h.get_keyed_state(FARE, 1) is None


def test_an_unmatched_fare_goes_to_the_side_output_once_both_inputs_pass_its_timer() -> None:
    with harness() as h:
        h.process_element2((7, 3.0), timestamp=5_000)
        h.process_watermark2(10 * WAIT_MS)  # the fares are far ahead ...
        assert h.get_side_output_values(UNMATCHED_FARES) == []  # ... but the rides hold event time back
        h.process_watermark1(5_000 + WAIT_MS)
        assert h.get_side_output_values(UNMATCHED_FARES) == [(7, 3.0)]
        assert h.extract_watermarks() == [5_000 + WAIT_MS]


def test_snapshot_and_restore_at_another_parallelism_give_the_same_output() -> None:
    def drive_first_half(h: KeyedTwoInputStreamOperatorTestHarness) -> None:
        for ride_id in range(10):
            h.process_element1((ride_id, f"driver-{ride_id}"), timestamp=ride_id * 1_000)

    def drive_second_half(hs: list[KeyedTwoInputStreamOperatorTestHarness]) -> None:
        for ride_id in range(0, 10, 2):  # every other ride gets its fare
            (owner,) = [h for h in hs if h.owns_key(ride_id)]
            owner.process_element2((ride_id, float(ride_id)), timestamp=ride_id * 1_000 + 500)
        for h in hs:
            h.process_both_watermarks(100 * WAIT_MS)

    straight = harness()
    straight.open()
    drive_first_half(straight)
    drive_second_half([straight])

    before = harness()
    before.open()
    drive_first_half(before)
    snapshot = before.snapshot()
    after = [harness(parallelism=3, subtask_index=i).restore(snapshot) for i in range(3)]
    for h in after:
        h.open()
    drive_second_half(after)

    assert_output([v for h in after for v in h.extract_output_values()], straight.extract_output_values())
    assert_output(
        [v for h in after for v in h.get_side_output_values(UNMATCHED_RIDES)],
        straight.get_side_output_values(UNMATCHED_RIDES),
    )
    assert len(straight.get_side_output_values(UNMATCHED_RIDES)) == 5


@pytest.mark.weir(parallelism=[1, 2])
def test_the_job_enriches_rides_and_reports_the_unmatched(weir_env) -> None:
    rides = (
        TestStream(type_info=RIDE_TYPE)
        .add_elements(TimestampedValue((1, "alice"), 1_000), TimestampedValue((2, "bob"), 2_000))
        .add_elements(TimestampedValue((3, "carol"), 3_000))
        .advance_watermark_to_infinity()
    )
    fares = (
        TestStream(type_info=FARE_TYPE)
        .add_elements(TimestampedValue((2, 8.0), 2_500), TimestampedValue((1, 20.0), 1_500))
        .add_elements(TimestampedValue((4, 5.0), 4_000))
        .advance_watermark_to_infinity()
    )
    enriched, lonely_rides, lonely_fares = build(
        weir_env.from_source(rides, WatermarkStrategy.no_watermarks(), "rides"),
        weir_env.from_source(fares, WatermarkStrategy.no_watermarks(), "fares"),
    )
    out, no_fare, no_ride = collect(enriched), collect(lonely_rides), collect(lonely_fares)
    weir_env.execute()
    assert_output(out, [(1, "alice", 20.0), (2, "bob", 8.0)])
    assert_output(no_fare, [(3, "carol")])
    assert_output(no_ride, [(4, 5.0)])

"""HdrHistogram recording a batch at a time agrees with hdrh's own per-value recording."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.harness.latency import HIGHEST_US, LatencyHistogram

values = st.lists(st.integers(min_value=-5, max_value=2 * HIGHEST_US), min_size=1, max_size=300)


@settings(max_examples=60, deadline=None)
@given(values)
def test_batch_recording_fills_the_same_buckets_as_the_reference(vs: list[int]) -> None:
    fast, slow = LatencyHistogram(), LatencyHistogram()
    fast.record_array(np.array(vs, dtype=np.int64))
    slow.record_reference(vs)
    assert np.array_equal(fast.counts_array(), slow.counts_array())
    assert fast.total_count == slow.total_count == len(vs)
    assert fast.clamped == slow.clamped
    assert (fast.h.min_value, fast.h.max_value) == (slow.h.min_value, slow.h.max_value)
    assert fast.percentiles_us() == slow.percentiles_us()


def test_percentiles_merge_and_encoding_round_trip() -> None:
    a, b = LatencyHistogram(), LatencyHistogram()
    a.record_array(np.arange(1, 1001))  # 1 .. 1000 µs
    b.record_array(np.full(1000, 5000))
    merged = LatencyHistogram.merged([a, b])
    assert merged.total_count == 2000
    p = merged.percentiles_us()
    assert 495 <= p["p50"] <= 1001 and 4990 <= p["p99"] <= 5010 and p["max"] >= 5000
    decoded = LatencyHistogram.decode(merged.encode())
    assert decoded.percentiles_us() == p
    assert LatencyHistogram.decode("").total_count == 0 and LatencyHistogram().encode() == ""


def test_the_edges_of_the_range_are_recorded_like_the_reference() -> None:
    edges = [-5, 0, 1, 2047, 2048, HIGHEST_US - 1, HIGHEST_US, HIGHEST_US + 1]
    fast, slow = LatencyHistogram(), LatencyHistogram()
    fast.record_array(edges)
    slow.record_reference(edges)
    assert np.array_equal(fast.counts_array(), slow.counts_array())
    assert fast.clamped == slow.clamped == 1
    assert (fast.h.min_value, fast.h.max_value) == (slow.h.min_value, slow.h.max_value) == (0, HIGHEST_US)

"""Latency histograms: HdrHistogram, recorded a batch at a time.

Theory of operation: a ``LatencyHistogram`` wraps an ``hdrh`` HdrHistogram (microseconds,
1 µs … 1 h, 3 significant digits: every value within 0.1% of what was recorded). The
sink records a whole batch of latencies in one numba call (``_record``): one pass
computes each value's counts index with the HdrHistogram formula and adds it to the
histogram's counts in place, so recording costs a few ns per record instead of a Python
call each. (The numpy version, a pass per step of the formula and a ``bincount``, took
32-62 ns a value: a quarter to half a millisecond of the sink's flush, in the one thread, for
each histogram.) ``record_reference`` is the plain twin (``hdrh``'s own ``record_value``
per value); a property test says both fill the same buckets.

Histograms of several subtasks merge with ``add``; ``encode``/``decode`` give the
compressed base64 form stored in report.json (HdrHistogram's V2 format, readable by
any HdrHistogram implementation).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.ctypeslib  # numpy loads it lazily, ~30 ms: not inside a measured run
import numpy.typing as npt
from hdrh.histogram import HdrHistogram
from numba import njit

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_DIGITS = 3
PERCENTILES = (50.0, 90.0, 99.0, 99.9, 100.0)


class LatencyHistogram:
    """Latencies in microseconds. Values above one hour are clamped to one hour (and counted)."""

    def __init__(self, histogram: HdrHistogram | None = None) -> None:
        self.h = histogram or HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        self._counts = np.ctypeslib.as_array(self.h.counts)
        self.clamped = 0

    # -- recording -----------------------------------------------------------------------------
    def record_array(self, values_us: npt.NDArray[np.int64] | Sequence[int]) -> None:
        """Record many latencies (µs) at once; negative values count as 0."""
        values = np.ascontiguousarray(values_us, dtype=np.int64)
        if values.size == 0:
            return
        h = self.h
        clamped, low, high = _record(
            values,
            self._counts,
            h.unit_magnitude,
            h.sub_bucket_mask,
            h.sub_bucket_half_count_magnitude,
            h.sub_bucket_half_count,
            HIGHEST_US,
        )
        self.clamped += clamped
        h.total_count += int(values.size)
        h.min_value = min(h.min_value, low)
        h.max_value = max(h.max_value, high)

    def record_reference(self, values_us: Iterable[int]) -> None:
        """The per-value twin of ``record_array`` (hdrh's own code path)."""
        for v in values_us:
            v = max(0, int(v))
            if v > HIGHEST_US:
                self.clamped += 1
                v = HIGHEST_US
            self.h.record_value(v)

    # -- reading -------------------------------------------------------------------------------
    @property
    def total_count(self) -> int:
        return int(self.h.total_count)

    def value_at(self, percentile: float) -> int:
        return int(self.h.get_value_at_percentile(percentile)) if self.total_count else 0

    def percentiles_us(self, percentiles: Iterable[float] = PERCENTILES) -> dict[str, int]:
        """{"p50": …, "p90": …, "p99": …, "p99.9": …, "max": …} in µs (empty histogram: zeros)."""
        out: dict[str, int] = {}
        for p in percentiles:
            name = "max" if p == 100.0 else f"p{p:g}"
            out[name] = int(self.h.get_max_value()) if p == 100.0 and self.total_count else self.value_at(p)
        return out

    def mean_us(self) -> float:
        return float(self.h.get_mean_value()) if self.total_count else 0.0

    def counts_array(self) -> npt.NDArray[Any]:
        return self._counts.copy()

    # -- merging and storage -------------------------------------------------------------------
    def add(self, other: LatencyHistogram) -> LatencyHistogram:
        if other.total_count:
            self.h.add(other.h)
        self.clamped += other.clamped
        return self

    @staticmethod
    def merged(histograms: Iterable[LatencyHistogram]) -> LatencyHistogram:
        out = LatencyHistogram()
        for h in histograms:
            out.add(h)
        return out

    def encode(self) -> str:
        """Compressed base64 (HdrHistogram V2); an empty histogram encodes to ''."""
        if not self.total_count:
            return ""
        encoded = self.h.encode()
        return encoded.decode() if isinstance(encoded, bytes) else str(encoded)

    @staticmethod
    def decode(encoded: str) -> LatencyHistogram:
        if not encoded:
            return LatencyHistogram()
        return LatencyHistogram(HdrHistogram.decode(encoded))


def warm_up() -> None:
    """Compile the recording kernel, or load it from numba's cache, outside any measured run
    (the first call takes tens of milliseconds even from the cache)."""
    LatencyHistogram().record_array(np.zeros(1, dtype=np.int64))


@njit(cache=True)
def _record(
    values: npt.NDArray[np.int64],
    counts: npt.NDArray[np.uint64],
    unit_magnitude: int,
    sub_bucket_mask: int,
    sub_bucket_half_count_magnitude: int,
    sub_bucket_half_count: int,
    highest: int,
) -> tuple[int, int, int]:  # pragma: no cover - compiled; the property test checks it
    """Add each value (clamped to [0, highest]) to ``counts`` at HdrHistogram's counts index;
    the number clamped from above, and the lowest and highest value recorded."""
    clamped = 0
    low = highest
    high = 0
    for i in range(values.size):
        v = values[i]
        if v < 0:
            v = 0
        elif v > highest:
            v = highest
            clamped += 1
        low = min(low, v)
        high = max(high, v)
        # bit length of v | mask: frexp is exact for integers below 2**53
        exponent = math.frexp(float(v | sub_bucket_mask))[1]
        bucket = exponent - unit_magnitude - (sub_bucket_half_count_magnitude + 1)
        sub_bucket = v >> (bucket + unit_magnitude)
        counts[((bucket + 1) << sub_bucket_half_count_magnitude) + sub_bucket - sub_bucket_half_count] += 1
    return clamped, low, high

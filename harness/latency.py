"""Latency histograms: HdrHistogram, recorded a batch at a time.

Theory of operation: a ``LatencyHistogram`` wraps an ``hdrh`` HdrHistogram (microseconds,
1 µs … 1 h, 3 significant digits: every value within 0.1% of what was recorded). The
sink records a whole batch of latencies in one numpy pass: the bucket index of every
value is computed with the HdrHistogram formula on arrays (``counts_indexes``) and the
counts are added with ``bincount``, so recording costs a few ns per record instead of a
Python call each. ``record_reference`` is the plain twin (``hdrh``'s own
``record_value`` per value); a property test says both fill the same buckets.

Histograms of several subtasks merge with ``add``; ``encode``/``decode`` give the
compressed base64 form stored in report.json (HdrHistogram's V2 format, readable by
any HdrHistogram implementation).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.ctypeslib  # numpy loads it lazily, ~30 ms: not inside a measured run
import numpy.typing as npt
from hdrh.histogram import HdrHistogram

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
    def counts_indexes(self, values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """HdrHistogram's counts index of each value (non-negative, below the highest trackable)."""
        h = self.h
        masked = values | h.sub_bucket_mask
        # bit length of each value: frexp is exact for integers below 2**53
        _, exponent = np.frexp(masked.astype(np.float64))
        bucket = exponent.astype(np.int64) - h.unit_magnitude - (h.sub_bucket_half_count_magnitude + 1)
        sub_bucket = values >> (bucket + h.unit_magnitude)
        base = (bucket + 1) << h.sub_bucket_half_count_magnitude
        return base + sub_bucket - h.sub_bucket_half_count

    def record_array(self, values_us: npt.NDArray[np.int64] | Sequence[int]) -> None:
        """Record many latencies (µs) at once; negative values count as 0."""
        values = np.asarray(values_us, dtype=np.int64)
        if values.size == 0:
            return
        values = np.maximum(values, 0)
        over = values > HIGHEST_US
        if over.any():
            self.clamped += int(over.sum())
            values = np.minimum(values, HIGHEST_US)
        indexes = self.counts_indexes(values)
        lo = int(indexes.min())
        added = np.bincount(indexes - lo)
        self._counts[lo : lo + added.size] += added.astype(self._counts.dtype)
        h = self.h
        h.total_count += int(values.size)
        h.min_value = min(h.min_value, int(values.min()))
        h.max_value = max(h.max_value, int(values.max()))

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

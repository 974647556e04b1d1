"""Routing int64 keys to subtasks: the numba kernels against the plain-Python reference.

Run with ``make bench`` (or ``pytest tests/bench -m bench -s``); each test
prints its records/s, and the second of the two prints the kernel/reference ratio.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from weir.keys import assign_key_to_parallel_operator, channels_for_hashes, hash_int64_array

pytestmark = pytest.mark.bench

MAX_PARALLELISM = 128
PARALLELISM = 4
KERNEL_KEYS = 1_000_000
REFERENCE_KEYS = 10_000

_RECORDS_PER_SECOND: dict[str, float] = {}


def _keys(n: int) -> npt.NDArray[np.int64]:
    # Ids up to +-2**40: both the Integer.hashCode and the Long.hashCode path.
    return np.random.default_rng(7).integers(-(2**40), 2**40, size=n, dtype=np.int64)


def _route_with_kernels(keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
    channels: npt.NDArray[np.int32] = channels_for_hashes(
        hash_int64_array(keys), MAX_PARALLELISM, PARALLELISM
    )
    return channels


def _route_with_reference(keys: list[int]) -> list[int]:
    return [assign_key_to_parallel_operator(k, MAX_PARALLELISM, PARALLELISM) for k in keys]


def _report(benchmark: Any, capsys: pytest.CaptureFixture[str], name: str, records: int) -> None:
    if benchmark.stats is None:  # --benchmark-disable: nothing was measured
        return
    rate = records / benchmark.stats.stats.median
    _RECORDS_PER_SECOND[name] = rate
    with capsys.disabled():
        print(f"\n{name}: {rate:,.0f} records/s ({records:,} int64 keys, hash -> channel)")
        if {"kernel", "reference"} <= _RECORDS_PER_SECOND.keys():
            ratio = _RECORDS_PER_SECOND["kernel"] / _RECORDS_PER_SECOND["reference"]
            print(f"kernel / reference: {ratio:,.0f}x")


def test_route_int64_keys_with_the_kernels(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    keys = _keys(KERNEL_KEYS)
    _route_with_kernels(keys[:16])  # compile (or load from the cache) outside the timing
    channels = benchmark(_route_with_kernels, keys)
    assert channels.tolist()[:1000] == _route_with_reference(keys[:1000].tolist())
    _report(benchmark, capsys, "kernel", KERNEL_KEYS)


def test_route_int64_keys_with_the_reference(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    keys = _keys(REFERENCE_KEYS).tolist()
    channels = benchmark(_route_with_reference, keys)
    assert len(channels) == REFERENCE_KEYS
    _report(benchmark, capsys, "reference", REFERENCE_KEYS)

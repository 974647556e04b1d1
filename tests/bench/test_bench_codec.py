"""Records/s through the codec: encode_partitioned to 4 channels, then every frame read back.

Run with ``make bench`` (or ``pytest tests/bench/test_bench_codec.py -m bench -s``). Each round
routes 1,000,000 records to 4 channels with ``encode_partitioned`` and feeds each channel's frame to
a ``FrameReader`` in 32 KiB network buffers, so the frames span buffers and are reassembled as in
the network stack. The typed columnar path and the pickle fallback run on the same records in the
same session; the last test prints them side by side with the ratio typed / pickle.

Targets (end to end, encode + decode): LONG >= 20 M records/s, (STRING, LONG) tuples >= 2 M records/s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from weir.codec.batch import Batch
from weir.codec.reader import FrameReader
from weir.codec.serializers import BatchSerializer, serializer_for
from weir.common.typeinfo import TypeInformation, Types

pytestmark = pytest.mark.bench

RECORDS = 1_000_000
NUM_CHANNELS = 4
BUFFER_SIZE = 32 * 1024

_RECORDS_PER_SECOND: dict[str, float] = {}
_ROWS = [
    ("LONG", "LONG (numpy array)", "LONG pickled (list)"),
    ("LONG from a list", "LONG (list)", "LONG pickled (list)"),
    ("(STRING, LONG)", "(STRING, LONG) tuples", "(STRING, LONG) pickled"),
]


def _longs() -> npt.NDArray[np.int64]:
    return np.random.default_rng(11).integers(-(2**40), 2**40, size=RECORDS, dtype=np.int64)


def _channels() -> npt.NDArray[np.int32]:
    return np.random.default_rng(12).integers(0, NUM_CHANNELS, size=RECORDS, dtype=np.int32)


def _tuples() -> list[tuple[str, int]]:
    return [(f"user-{i % 50_000}", v) for i, v in enumerate(_longs().tolist())]


def _through_the_network(serializer: BatchSerializer, batch: Batch, channels: np.ndarray) -> int:
    frames = serializer.encode_partitioned(batch, channels, NUM_CHANNELS)
    received = 0
    for frame in frames:
        if frame is None:
            continue
        reader = FrameReader(serializer)
        view = memoryview(frame)
        for start in range(0, len(frame), BUFFER_SIZE):
            for decoded in reader.feed(view[start : start + BUFFER_SIZE]):
                received += len(decoded)
    return received


def _run(
    benchmark: Any,
    capsys: pytest.CaptureFixture[str],
    name: str,
    type_info: TypeInformation | None,
    values: Any,
    rounds: int,
) -> None:
    serializer = serializer_for(type_info)
    batch = Batch(values)
    channels = _channels()
    # Compile (or load from numba's cache) outside the timing.
    _through_the_network(serializer, Batch(values[:100]), channels[:100])
    received = benchmark.pedantic(
        _through_the_network, args=(serializer, batch, channels), rounds=rounds, iterations=1, warmup_rounds=1
    )
    assert received == RECORDS
    if benchmark.stats is None:  # --benchmark-disable: nothing was measured
        return
    rate = RECORDS / benchmark.stats.stats.median
    _RECORDS_PER_SECOND[name] = rate
    with capsys.disabled():
        print(f"\n{name}: {rate:,.0f} records/s ({serializer.describe()})")


def test_long_typed(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _run(benchmark, capsys, "LONG (numpy array)", Types.LONG(), _longs(), rounds=7)


def test_long_typed_from_a_list(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _run(benchmark, capsys, "LONG (list)", Types.LONG(), _longs().tolist(), rounds=5)


def test_long_pickled(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _run(benchmark, capsys, "LONG pickled (list)", None, _longs().tolist(), rounds=3)


def test_string_long_tuples_typed(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _run(
        benchmark,
        capsys,
        "(STRING, LONG) tuples",
        Types.TUPLE([Types.STRING(), Types.LONG()]),
        _tuples(),
        rounds=5,
    )


def test_string_long_tuples_pickled(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _run(benchmark, capsys, "(STRING, LONG) pickled", None, _tuples(), rounds=3)
    with capsys.disabled():
        print(f"\nencode_partitioned to {NUM_CHANNELS} channels + FrameReader, {RECORDS:,} records, median:")
        print(f"{'records':<20}{'typed records/s':>18}{'pickle records/s':>18}{'typed / pickle':>16}")
        for label, typed, pickled in _ROWS:
            if typed in _RECORDS_PER_SECOND and pickled in _RECORDS_PER_SECOND:
                t, p = _RECORDS_PER_SECOND[typed], _RECORDS_PER_SECOND[pickled]
                print(f"{label:<20}{t:>18,.0f}{p:>18,.0f}{t / p:>15.1f}x")

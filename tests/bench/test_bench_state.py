"""Keyed ValueState per record: heap against LMDB.

One operation is what a keyed counter does per record: ``set_current_key``,
``value()``, ``update(value + 1)``, over 10,000 distinct int keys. Run with
``make bench`` (or ``pytest tests/bench/test_bench_state.py -m bench -s``); each
test prints its ops/s, and the second prints the LMDB/heap ratio.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.common.typeinfo import Types
from engine.datastream.state import ValueStateDescriptor
from engine.keys import KeyGroupRange
from engine.state import KeyedStateBackend, create_keyed_backend

pytestmark = pytest.mark.bench

KEYS = 10_000
_OPS_PER_SECOND: dict[str, float] = {}


@pytest.fixture(params=["hashmap", "lmdb"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyedStateBackend]:
    b = create_keyed_backend(request.param, "bench", 128, KeyGroupRange(0, 127), path=tmp_path / "lmdb")
    yield b
    b.dispose()


def _count_all(backend: KeyedStateBackend, state: Any, keys: list[int]) -> None:
    set_key = backend.set_current_key
    for k in keys:
        set_key(k)
        v = state.value()
        state.update(1 if v is None else v + 1)


def test_value_state_update(
    benchmark: Any, backend: KeyedStateBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    state = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
    keys = list(range(KEYS))
    _count_all(backend, state, keys)  # warm: every key exists, as in a steady state
    benchmark.pedantic(_count_all, args=(backend, state, keys), rounds=5, iterations=1)
    backend.set_current_key(7)
    assert state.value() == 6
    if benchmark.stats is None:
        return
    name = backend.backend_name
    rate = KEYS / benchmark.stats.stats.median
    _OPS_PER_SECOND[name] = rate
    with capsys.disabled():
        print(f"\n{name}: {rate:,.0f} ValueState ops/s (set_current_key + value + update, {KEYS:,} keys)")
        if {"hashmap", "lmdb"} <= _OPS_PER_SECOND.keys():
            ratio = _OPS_PER_SECOND["lmdb"] / _OPS_PER_SECOND["hashmap"]
            print(f"lmdb / heap: {ratio:.2f}")

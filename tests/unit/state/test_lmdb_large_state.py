"""LMDB state larger than the Python heap: 5,000,000 keys, and the Python heap does not grow with them."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from weir.datastream.state import ValueStateDescriptor
from weir.keys import KeyGroupRange
from weir.state import LmdbKeyedStateBackend

N_KEYS = 5_000_000


def _memory_kib() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            out[name] = int(rest.split()[0])
    return out


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_five_million_keys_do_not_grow_the_python_heap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = LmdbKeyedStateBackend("big", 128, KeyGroupRange(0, 127), path=tmp_path / "lmdb")
    try:
        state = backend.get_state(ValueStateDescriptor("v"))
        gc.collect()
        before = _memory_kib()
        set_key = backend.set_current_key
        update = state.update
        for k in range(N_KEYS):
            set_key(k)
            update(k)
        backend.commit()
        gc.collect()
        after = _memory_kib()
        file_bytes = backend.file_size_bytes()
        assert backend.number_of_keys() == N_KEYS
        backend.set_current_key(4_321_987)
        assert state.value() == 4_321_987
        anon_growth = (after["RssAnon"] - before["RssAnon"]) * 1024
        with capsys.disabled():
            print(
                f"\n{N_KEYS:,} keys: LMDB file {file_bytes / 2**20:,.0f} MiB; "
                f"RSS {after['VmRSS'] / 1024:,.0f} MiB (anonymous {after['RssAnon'] / 1024:,.0f} MiB, "
                f"file-backed/page cache {after['RssFile'] / 1024:,.0f} MiB); "
                f"Python heap growth {anon_growth / 2**20:,.1f} MiB"
            )
        # the anonymous memory (the Python heap, LMDB's dirty pages of one batch) stays far below the state
        assert anon_growth < file_bytes / 10
    finally:
        backend.dispose()

"""What the replay tests share: a small keyed data set and a way to read a reader dry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from weir.harness.replay import ReplayReader
from weir.workloads.testing import keyed_rows_dataset

#: (key, value, event time ms): 1,000 rows, event time 10 ms a row
KEYED_ROWS = [(f"k{i % 5}", i, 10 * i) for i in range(1000)]

Drain = Callable[..., Awaitable[list[Any]]]  # the type of the drain fixture


@pytest.fixture
def keyed_rows() -> list[tuple[str, int, int]]:
    return list(KEYED_ROWS)


@pytest.fixture
def keyed_dir(tmp_path: Path) -> Path:
    return keyed_rows_dataset(tmp_path / "keyed", KEYED_ROWS, event_rate=100)


async def _drain(reader: ReplayReader, limit: int | None = None) -> list[Any]:
    out: list[Any] = []
    while limit is None or len(out) < limit:
        batch = await reader.next_batch()
        if batch is None:
            break
        out.extend(batch.as_list())
    return out


@pytest.fixture
def drain() -> Drain:
    """Read ``reader`` until it ends (or holds ``limit`` rows) and return its rows."""
    return _drain

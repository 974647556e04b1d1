"""What an incremental checkpoint uploads is proportional to what changed, not to the state.

With 1% of the keys changed between checkpoints, the LMDB incremental checkpoint
must upload at most 5% of what a full checkpoint of the same state uploads. Both
sizes are printed; the 1,000,000-key run is slow (loading the keys dominates).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.checkpoint.storage import CheckpointStorage
from weir.datastream.state import ValueStateDescriptor
from weir.keys import KeyGroupRange
from weir.state import LmdbKeyedStateBackend
from weir.task.snapshots import OperatorSnapshot, write_operator_snapshots

MAX_PAR = 128
ALL = KeyGroupRange(0, MAX_PAR - 1)


def _uploaded(storage: CheckpointStorage, checkpoint_id: int, keyed: object) -> int:
    snapshot = OperatorSnapshot("counts", 1, MAX_PAR, 0, keyed=keyed, key_group_range=ALL)
    _, size = write_operator_snapshots(storage, checkpoint_id, [snapshot])
    return size


def _compare(tmp_path: Path, n_keys: int, capsys: pytest.CaptureFixture[str]) -> None:
    backend = LmdbKeyedStateBackend("counts", MAX_PAR, ALL, path=tmp_path / "lmdb", incremental=True)
    incremental = CheckpointStorage(tmp_path / "checkpoints", "incremental")
    full = CheckpointStorage(tmp_path / "checkpoints", "full")
    try:
        state = backend.get_state(ValueStateDescriptor("count"))
        set_key, update = backend.set_current_key, state.update
        for k in range(n_keys):
            set_key(k)
            update(k)
        base_size = _uploaded(incremental, 1, backend.snapshot_incremental(1, incremental.is_complete))
        for k in range(0, n_keys, 100):  # 1% of the keys change
            set_key(k)
            update(-k)
        pending = backend.snapshot_incremental(2, lambda c: c == 1)  # checkpoint 1 completed
        assert pending.kind == "delta" and pending.plan.number_of_keys() == n_keys // 100
        delta_size = _uploaded(incremental, 2, pending)
        full_size = _uploaded(full, 2, backend.snapshot())
    finally:
        backend.dispose()
    ratio = delta_size / full_size
    with capsys.disabled():
        print(
            f"\n{n_keys:,} keys, 1% changed: full checkpoint uploads {full_size:,} bytes, "
            f"incremental {delta_size:,} bytes ({ratio:.2%}); the incremental base was {base_size:,} bytes"
        )
    assert ratio <= 0.05
    assert base_size > full_size * 0.5  # the first incremental checkpoint is a full one


def test_one_percent_changed_uploads_a_small_fraction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _compare(tmp_path, 50_000, capsys)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_one_million_keys_one_percent_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _compare(tmp_path, 1_000_000, capsys)

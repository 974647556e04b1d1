"""The shared state registry: a shared file is deleted once, when the last retained checkpoint releases it."""

from __future__ import annotations

import pytest

from weir.checkpoint.registry import SharedStateRegistry
from weir.errors import UsageError


def test_file_is_deleted_when_the_last_checkpoint_releases_it() -> None:
    deleted: list[str] = []
    registry = SharedStateRegistry(delete=deleted.append)
    registry.register(1, ["shared/1.sst", "shared/2.sst"])
    registry.register(2, ["shared/1.sst", "shared/2.sst", "shared/3.sst"])
    registry.register(3, ["shared/2.sst", "shared/3.sst", "shared/4.sst"])
    assert registry.reference_count("shared/2.sst") == 3
    assert registry.release(1) == []
    assert registry.release(2) == ["shared/1.sst"]
    assert deleted == ["shared/1.sst"]
    assert registry.retained_checkpoints() == [3]
    assert registry.release(3) == ["shared/2.sst", "shared/3.sst", "shared/4.sst"]
    assert deleted == ["shared/1.sst", "shared/2.sst", "shared/3.sst", "shared/4.sst"]
    stats = registry.statistics()
    assert (stats.number_of_checkpoints, stats.number_of_files, stats.number_of_deleted_files) == (0, 0, 4)


def test_duplicates_in_one_checkpoint_count_once() -> None:
    registry = SharedStateRegistry()
    registry.register(1, ["a", "a"])
    assert registry.reference_count("a") == 1
    assert registry.release(1) == ["a"]


def test_unused_files_are_orphans() -> None:
    registry = SharedStateRegistry()
    registry.register(5, ["a", "b"])
    assert registry.unused_files(["a", "b", "c", "z", "c"]) == ["c", "z"]
    assert registry.files_of(5) == frozenset({"a", "b"})


def test_errors_name_the_checkpoint() -> None:
    registry = SharedStateRegistry()
    registry.register(1, [])
    with pytest.raises(UsageError, match="checkpoint 1 is already registered"):
        registry.register(1, [])
    with pytest.raises(UsageError, match=r"checkpoint 2 is not registered \(retained: \[1\]\)"):
        registry.release(2)
    with pytest.raises(UsageError, match="checkpoint_id must be an integer"):
        registry.register(-1, [])
    with pytest.raises(UsageError, match="invalid file"):
        registry.register(3, [""])
    with pytest.raises(UsageError, match="not registered"):
        registry.files_of(9)

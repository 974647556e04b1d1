"""The shared state registry with checkpoints in flight: released files are held, aborted uploads dropped."""

from __future__ import annotations

from weir.checkpoint.registry import SharedStateRegistry


def test_files_released_while_checkpoints_are_in_flight_are_held_until_those_end() -> None:
    deleted: list[str] = []
    registry = SharedStateRegistry(delete=deleted.append)
    registry.register(1, ["base", "d1"])
    registry.register(2, ["base2"])
    assert registry.release(1, in_flight=[3, 4]) == []
    assert deleted == [] and registry.held_files() == {"base", "d1"}
    assert registry.on_in_flight_changed([4, 5]) == []  # 4 may still use them
    registry.register(4, ["base", "d4"])  # 4 completes and lists "base": it is referenced again
    assert registry.held_files() == {"d1"}
    assert registry.on_in_flight_changed([5]) == ["d1"]
    assert deleted == ["d1"] and registry.reference_count("base") == 1
    assert registry.statistics().number_of_held_files == 0


def test_without_checkpoints_in_flight_release_deletes_at_once() -> None:
    deleted: list[str] = []
    registry = SharedStateRegistry(delete=deleted.append)
    registry.register(1, ["a"])
    assert registry.release(1, in_flight=[]) == ["a"] == deleted


def test_an_aborted_checkpoint_loses_only_what_nobody_references() -> None:
    deleted: list[str] = []
    registry = SharedStateRegistry(delete=deleted.append)
    registry.register(1, ["base"])
    registry.register(2, ["held"])
    registry.release(2, in_flight=[3])
    # checkpoint 3 was aborted; its chain was base + its own new delta (+ a held file)
    assert registry.delete_unreferenced(["base", "held", "new-delta"]) == ["new-delta"]
    assert deleted == ["new-delta"]
    assert registry.statistics().number_of_deleted_files == 1

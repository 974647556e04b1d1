"""SnapshotHistory: what the next incremental snapshot builds on and which keys it must cover."""

from __future__ import annotations

import pytest

from weir.checkpoint.metadata import FileHandle
from weir.errors import UsageError
from weir.state import StateMetaInfo
from weir.state.incremental import DELTA, FULL, UNCHANGED, SnapshotHistory

STATES = (StateMetaInfo("s", "value", False),)


def _file(name: str, size: int = 100) -> FileHandle:
    return FileHandle(f"shared/{name}", size, "0" * 64, shared=True)


def _written(history: SnapshotHistory, plan: object, name: str, size: int = 100) -> None:
    chain = (*plan.base_chain, _file(name, size))  # type: ignore[attr-defined]
    history.on_written(plan, chain)  # type: ignore[arg-type]


def test_first_snapshot_is_full_then_deltas_on_the_last_complete_checkpoint() -> None:
    h = SnapshotHistory(max_chain_length=5)
    complete: set[int] = set()
    p1 = h.plan(1, {"s": {b"a"}}, STATES, complete.__contains__)
    assert p1.kind == FULL and p1.keys is None
    _written(h, p1, "1")
    complete.add(1)
    p2 = h.plan(2, {"s": {b"b"}}, STATES, complete.__contains__)
    assert p2.kind == DELTA and p2.base_chain == (_file("1"),) and p2.keys == {"s": frozenset({b"b"})}
    assert h.base_checkpoint_id == 1


def test_changes_of_an_aborted_or_unfinished_attempt_go_into_the_next_delta() -> None:
    h = SnapshotHistory()
    complete = {1}
    p1 = h.plan(1, {}, STATES, complete.__contains__)
    _written(h, p1, "1")
    p2 = h.plan(2, {"s": {b"two"}}, STATES, complete.__contains__)
    _written(h, p2, "2")  # written, but checkpoint 2 never completes (aborted)
    p3 = h.plan(3, {"s": {b"three"}}, STATES, complete.__contains__)  # its upload fails: never written
    p4 = h.plan(4, {"s": {b"four"}}, STATES, complete.__contains__)
    assert p3.kind == p4.kind == DELTA
    assert p4.base_chain == (_file("1"),)  # never on the aborted 2 or the failed 3
    assert p4.keys == {"s": frozenset({b"two", b"three", b"four"})}
    assert h.pending_checkpoint_ids() == [2, 3, 4]
    _written(h, p4, "4")
    complete.add(4)
    p5 = h.plan(5, {}, STATES, complete.__contains__)
    assert h.base_checkpoint_id == 4 and h.pending_checkpoint_ids() == [5]
    assert p5.kind == UNCHANGED and p5.base_chain == (_file("1"), _file("4"))


def test_a_written_attempt_becomes_the_base_only_once_its_metadata_exists() -> None:
    h = SnapshotHistory()
    complete: set[int] = set()
    _written(h, h.plan(1, {}, STATES, complete.__contains__), "1")
    p2 = h.plan(2, {"s": {b"x"}}, STATES, complete.__contains__)
    assert p2.kind == FULL  # checkpoint 1 is written but not complete yet
    _written(h, p2, "2")
    complete.add(2)
    assert h.plan(3, {"s": {b"y"}}, STATES, complete.__contains__).base_chain == (_file("2"),)


def test_a_long_chain_or_heavy_deltas_materialize_a_new_base() -> None:
    h = SnapshotHistory(max_chain_length=3)
    complete: set[int] = set()
    kinds = []
    for cid in range(1, 8):
        plan = h.plan(cid, {"s": {b"k"}}, STATES, complete.__contains__)
        kinds.append(plan.kind)
        _written(h, plan, str(cid))
        complete.add(cid)
    assert kinds == [FULL, DELTA, DELTA, FULL, DELTA, DELTA, FULL]

    heavy = SnapshotHistory(max_chain_length=10)
    plan = heavy.plan(1, {}, STATES, lambda c: True)
    _written(heavy, plan, "base", size=100)
    plan = heavy.plan(2, {"s": {b"k"}}, STATES, lambda c: True)
    _written(heavy, plan, "big", size=150)  # one delta larger than its base
    plan = heavy.plan(3, {"s": {b"k"}}, STATES, lambda c: True)
    assert plan.kind == FULL and "outweigh" in plan.reason


def test_a_new_state_alone_is_a_change() -> None:
    h = SnapshotHistory()
    _written(h, h.plan(1, {}, STATES, lambda c: True), "1")
    more = (*STATES, StateMetaInfo("t", "list", False))
    assert h.plan(2, {}, more, lambda c: True).kind == DELTA


def test_adopting_a_restored_chain_continues_it() -> None:
    h = SnapshotHistory()
    h.adopt(7, (_file("b"), _file("d")), STATES)
    plan = h.plan(8, {"s": {b"z"}}, STATES, lambda c: c == 7)
    assert plan.kind == DELTA and plan.base_chain == (_file("b"), _file("d"))
    h.reset()
    assert h.plan(9, {}, STATES, lambda c: True).kind == FULL


def test_a_chain_restored_from_elsewhere_is_not_continued() -> None:
    h = SnapshotHistory()
    h.adopt(7, (_file("b"),), STATES)  # e.g. a savepoint: checkpoint 7 is not in this job's storage
    assert h.plan(8, {}, STATES, lambda c: False).kind == FULL


def test_errors_name_the_problem() -> None:
    with pytest.raises(UsageError, match="max chain length"):
        SnapshotHistory(0)
    h = SnapshotHistory()
    h.plan(5, {}, STATES, lambda c: False)
    with pytest.raises(UsageError, match="checkpoint ids must rise"):
        h.plan(5, {}, STATES, lambda c: False)


def test_a_delta_of_every_key_is_a_full_run() -> None:
    h = SnapshotHistory()
    complete: set[int] = set()
    _written(h, h.plan(1, {}, STATES, complete.__contains__, entries=3), "1")
    complete.add(1)
    few = h.plan(2, {"s": {b"a"}}, STATES, complete.__contains__, entries=3)
    assert few.kind == DELTA
    _written(h, few, "2")
    complete.add(2)
    every = h.plan(3, {"s": {b"a", b"b", b"c"}}, STATES, complete.__contains__, entries=3)
    assert every.kind == FULL and "as many keys" in every.reason

"""Arrays kept from forked checkpoint children (``weir.state.unforked``)."""

from __future__ import annotations

import faulthandler
import gc
import os
import signal

import numpy as np
import pytest

from weir.operators.window import kernels as wk
from weir.state import unforked

BIG = unforked.MIN_BYTES // 8  # int64s in the smallest array kept from children


@pytest.fixture(autouse=True)
def _enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a process whose tasks' checkpoints children may write (``unforked.enable``)."""
    monkeypatch.setattr(unforked, "_enabled", True)


def test_a_process_that_forks_no_checkpoint_child_keeps_numpys_arrays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(unforked, "_enabled", False)
    assert not unforked.enabled()
    assert not unforked.is_unforked(unforked.zeros(4 * BIG, np.int64))
    assert not unforked.is_unforked(unforked.empty(4 * BIG, np.int64))
    unforked.enable()
    assert unforked.enabled() is unforked.SUPPORTED
    assert unforked.is_unforked(unforked.zeros(4 * BIG, np.int64)) is unforked.SUPPORTED


@pytest.mark.parametrize("make", [unforked.zeros, unforked.empty])
def test_a_big_array_is_a_writable_numpy_array_of_its_own_mapping(make: object) -> None:
    a = make((BIG // 4, 4), np.int64)  # type: ignore[operator]
    assert (a.shape, a.dtype, a.flags.c_contiguous, a.flags.writeable) == (
        (BIG // 4, 4),
        np.int64,
        True,
        True,
    )
    assert unforked.is_unforked(a) is unforked.SUPPORTED
    assert make is unforked.empty or not a.any()
    a[:, 2] = np.arange(BIG // 4)
    assert int(a[:, 2].sum()) == (BIG // 4) * (BIG // 4 - 1) // 2
    assert unforked.is_unforked(a[10:, 1:]) is unforked.SUPPORTED  # a view too


def test_small_and_object_arrays_stay_numpys_own() -> None:
    assert not unforked.is_unforked(unforked.zeros(BIG - 1, np.int64))
    assert not unforked.is_unforked(unforked.empty((BIG // 2 - 1, 2), np.int64))
    objects = unforked.zeros(BIG, object)
    assert not unforked.is_unforked(objects) and objects[0] == 0
    assert not unforked.is_unforked(np.zeros(BIG, np.int64))


def test_a_pane_table_is_kept_from_children_once_it_is_big() -> None:
    table = wk.empty_table(1 << 16, wk.PANE_INT)
    assert unforked.is_unforked(table) is unforked.SUPPORTED
    assert (table["seq"] == -1).all() and not table["count"].any()
    assert not unforked.is_unforked(wk.empty_table(16, wk.PANE_INT))


def _child_reads(array: np.ndarray) -> int:
    """Fork; the child sums ``array`` and exits with 7 if the sum is right. Its wait status."""
    expected = int(array.sum())
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            faulthandler.disable()  # a crash is what the test may expect, not worth a traceback
            code = 7 if int(array.sum()) == expected else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status


def test_a_forked_child_has_no_mapping_where_the_array_is_but_reads_a_copy() -> None:
    live = unforked.zeros(BIG, np.int64)
    live[::512] = 5
    copy = live.copy()  # what a snapshot takes at the barrier
    assert os.waitstatus_to_exitcode(_child_reads(copy)) == 7
    status = _child_reads(live)
    if unforked.SUPPORTED:
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV, status
    else:
        assert os.waitstatus_to_exitcode(status) == 7


def test_a_gone_arrays_mapping_is_kept_for_the_next_of_its_size_and_zeroed_for_zeros(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not unforked.SUPPORTED:
        assert not unforked.is_unforked(unforked.zeros(BIG, np.int64))
        return
    gc.collect()  # arrays of earlier tests go to the kept ones first
    unforked.release()
    monkeypatch.setattr(unforked, "KEPT_BYTES", 3 * unforked.MIN_BYTES)
    a = unforked.zeros(BIG, np.int64)
    a[:] = 9
    view = a[::2]
    del a
    assert unforked.kept_bytes() == 0  # a view still holds it
    del view
    gc.collect()
    assert unforked.kept_bytes() == unforked.MIN_BYTES
    again = unforked.zeros(BIG, np.int64)  # the same mapping, zeroed
    assert unforked.kept_bytes() == 0 and not again.any() and unforked.is_unforked(again)
    other = unforked.empty(2 * BIG, np.int64)  # another size: a mapping of its own
    assert unforked.kept_bytes() == 0
    del again, other
    gc.collect()
    assert unforked.kept_bytes() == 3 * unforked.MIN_BYTES
    more = unforked.zeros(BIG // 2 * 3, np.int64)  # past KEPT_BYTES: the oldest kept one goes
    del more
    gc.collect()
    assert unforked.kept_bytes() <= unforked.KEPT_BYTES
    unforked.release()
    assert unforked.kept_bytes() == 0


def test_a_size_whose_kept_mappings_were_all_taken_again_is_no_obstacle_to_dropping_the_oldest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not unforked.SUPPORTED:
        return
    gc.collect()
    unforked.release()
    monkeypatch.setattr(unforked, "KEPT_BYTES", 2 * unforked.MIN_BYTES)
    first = unforked.zeros(BIG, np.int64)
    del first
    gc.collect()
    taken = unforked.zeros(BIG, np.int64)  # takes the one kept mapping of its size back
    assert unforked.kept_bytes() == 0
    others = [unforked.empty(2 * BIG, np.int64), unforked.empty(2 * BIG, np.int64)]
    errors: list[BaseException] = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: errors.append(u.exc_value))
    del others  # the second goes past KEPT_BYTES: the oldest kept mapping is dropped
    gc.collect()
    assert errors == []
    assert 0 < unforked.kept_bytes() <= unforked.KEPT_BYTES
    del taken
    gc.collect()
    assert errors == [] and unforked.kept_bytes() <= unforked.KEPT_BYTES
    unforked.release()

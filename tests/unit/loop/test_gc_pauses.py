"""The collector's settings while jobs run (``weir.loop.gc_pauses``)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from weir.loop.gc_pauses import JOB_THRESHOLDS, frozen_heap


@pytest.fixture(autouse=True)
def python_defaults() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def test_a_job_freezes_the_heap_and_collects_less_often_until_the_last_job_ends() -> None:
    with frozen_heap():
        assert gc.get_threshold() == JOB_THRESHOLDS and gc.get_freeze_count() > 0
        with frozen_heap():  # a second job at the same time
            assert gc.get_threshold() == JOB_THRESHOLDS
        assert gc.get_threshold() == JOB_THRESHOLDS and gc.get_freeze_count() > 0
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_a_higher_threshold_someone_set_stays() -> None:
    gc.set_threshold(50_000, 5, 100)
    with frozen_heap():
        assert gc.get_threshold() == (50_000, JOB_THRESHOLDS[1], 100)
    assert gc.get_threshold() == (50_000, 5, 100)


def test_a_failing_job_restores_the_settings() -> None:
    with pytest.raises(RuntimeError), frozen_heap():
        raise RuntimeError("the job failed")
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


class _Cycle:
    def __init__(self) -> None:
        self.me = self  # operators and their state refer to one another


def test_what_the_jobs_left_in_cycles_is_collected_when_the_last_job_ends() -> None:
    was_enabled = gc.isenabled()
    gc.disable()  # only the collection at the job's end may free it
    try:
        with frozen_heap():
            left = _Cycle()
            gone = weakref.ref(left)
            del left
        assert gone() is None
    finally:
        if was_enabled:
            gc.enable()

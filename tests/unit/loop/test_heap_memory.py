"""Freed memory kept for reuse once jobs run (``weir.loop.heap_memory``)."""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from weir.loop import heap_memory


def _faults_of_a_fresh_block(megabytes: int) -> int:
    """Page faults of allocating, touching and freeing ``megabytes`` MiB, after doing it once."""
    np.ones(megabytes << 17).sum()  # the first time may grow the heap in any case
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    np.ones(megabytes << 17).sum()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.fixture
def released() -> Iterator[None]:
    was_kept = heap_memory.kept()
    heap_memory.release()
    try:
        yield
    finally:
        if was_kept:
            heap_memory.keep_freed_memory()


def test_glibc_is_told_on_linux() -> None:
    assert heap_memory.supported() == sys.platform.startswith("linux")


@pytest.mark.skipif(not heap_memory.supported(), reason="glibc's mallopt only")
def test_a_freed_block_is_reused_without_page_faults_until_released(released: None) -> None:
    # glibc's fixed default threshold: a 64 MiB block is mapped anew every time
    assert _faults_of_a_fresh_block(64) >= 64 * 256 // 2 // 512  # at least huge-page faults
    heap_memory.keep_freed_memory()
    assert heap_memory.kept()
    assert _faults_of_a_fresh_block(64) < 64  # the pages stayed with the process
    heap_memory.release()
    assert not heap_memory.kept()
    assert _faults_of_a_fresh_block(64) >= 64 * 256 // 2 // 512


def test_a_job_keeps_freed_memory(released: None) -> None:
    from weir.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    with env.from_collection([1, 2, 3]).map(lambda x: x + 1).execute_and_collect() as results:
        assert sorted(results) == [2, 3, 4]
    assert heap_memory.kept() == heap_memory.supported()

"""Shared fixtures for weir's own tests."""

from __future__ import annotations

import pytest

from weir.datastream import StreamExecutionEnvironment


@pytest.fixture
def env() -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment()


@pytest.fixture(autouse=True, scope="session")
def _weir_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Job mailboxes of `weir run` (weir.cluster.control) go to a temporary WEIR_HOME."""
    import os

    os.environ["WEIR_HOME"] = str(tmp_path_factory.mktemp("weir-home"))


def _thread_aware_mock_clock() -> object:
    """Trio's MockClock with autojump, except that it does not jump while a worker thread
    of trio's default limiter is busy (a checkpoint being written, an LMDB snapshot being
    read): it waits in real time, a few milliseconds at a time, until the thread is done.

    A plain autojump clock counts a task waiting on a thread as blocked and jumps to the
    next deadline, so how far virtual time runs ahead while a file is written depends on
    the disk and the machine's load, and tests of checkpoints flake. Threads that live as
    long as a task (a SourceFunction's) take another limiter (``weir.loop.threads``); a
    thread of the default one busy for longer than 30 real seconds stops the wait, so time
    cannot freeze for good. (MockClock cannot be subclassed; its autojump hook is replaced
    on the instance.)
    """
    import time

    import trio
    import trio.testing

    wait_s, long_s = 0.002, 30.0
    clock = trio.testing.MockClock(autojump_threshold=0)
    jump = clock._autojump
    busy_since: list[float] = []

    def autojump() -> None:
        if trio.to_thread.current_default_thread_limiter().statistics().borrowed_tokens > 0:
            now = time.monotonic()
            if not busy_since:
                busy_since.append(now)
            if now - busy_since[0] < long_s:
                if clock.autojump_threshold != wait_s:
                    clock.autojump_threshold = wait_s
                return
        else:
            busy_since.clear()
        if clock.autojump_threshold != 0:
            clock.autojump_threshold = 0
        jump()

    clock._autojump = autojump  # type: ignore[method-assign]
    return clock


@pytest.fixture
def autojump_clock() -> object:
    """pytest-trio's ``autojump_clock``, made thread aware (see ``_thread_aware_mock_clock``)."""
    return _thread_aware_mock_clock()


# Data sets for tests/workloads and tests/harness: generated once per session with one Spark
# session (see weir.workloads.testing); imported lazily so that other tests never load Spark.


@pytest.fixture(scope="session")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> object:
    return tmp_path_factory.getbasetemp() / "weir-datasets"


def _dataset(data_root: object, name: str) -> object:
    from weir.workloads import testing

    return testing.spark_dataset(data_root, **getattr(testing, name))


@pytest.fixture(scope="session")
def keyed_uniform(data_root: object) -> object:
    return _dataset(data_root, "SMALL_KEYED_UNIFORM")


@pytest.fixture(scope="session")
def keyed_zipf(data_root: object) -> object:
    return _dataset(data_root, "SMALL_KEYED_ZIPF")


@pytest.fixture(scope="session")
def nexmark_small(data_root: object) -> object:
    return _dataset(data_root, "SMALL_NEXMARK")

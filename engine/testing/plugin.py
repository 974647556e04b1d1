"""weir's pytest plugin (entry point ``pytest11``: ``weir``): fixtures and the ``weir`` marker.

Fixtures:

- ``weir_env``: a fresh StreamExecutionEnvironment (a ``TestEnvironment``) whose jobs run on
  an in-process MiniCluster that starts once per session and is shared by every test.
  Its buffer timeout is 0 (every batch leaves at once, so records never wait for a flush
  timer and an idle job has no flusher ticking); a test may set another.
  ``@pytest.mark.weir(parallelism=2, taskmanagers=2)`` sets the job's default parallelism
  and the cluster's TaskManagers for one test; lists (``parallelism=[1, 2, 4]``) run the
  test once per value (and per combination), as bytewax's fixture does.
- ``weir_clock``: jobs of this test run on Trio's MockClock with autojump: processing
  time, watermark intervals, buffer timeouts, checkpoint intervals and restart delays pass
  instantly and deterministically; each job's processing time starts at 0 ms.
- ``weir_env_factory``: a callable making more such environments (same marker options).
- ``weir_cluster``: the session's ``SharedCluster`` itself (jobs run, mock-time switch).

Loading the plugin imports nothing heavy: the engine is imported when a fixture is used.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

MARKER_OPTIONS = ("parallelism", "taskmanagers", "slots_per_taskmanager", "max_parallelism", "config")
MARKER_HELP = (
    "weir(parallelism=1, taskmanagers=1, slots_per_taskmanager=16, max_parallelism=None, config=None): "
    "how weir_env runs this test's jobs; list values run the test once per value; config is a dict of "
    "Flink configuration keys"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)


def _marker_options(node: Any) -> dict[str, Any]:
    marker = node.get_closest_marker("weir")
    if marker is None:
        return {}
    if marker.args:
        raise pytest.UsageError(
            f"@pytest.mark.weir takes keyword arguments ({', '.join(MARKER_OPTIONS)}), got {marker.args!r}"
        )
    unknown = sorted(set(marker.kwargs) - set(MARKER_OPTIONS))
    if unknown:
        raise pytest.UsageError(
            f"@pytest.mark.weir got unknown option(s) {', '.join(unknown)}; it knows {', '.join(MARKER_OPTIONS)}"
        )
    return dict(marker.kwargs)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "weir_options" not in metafunc.fixturenames:
        return
    options = _marker_options(metafunc.definition)
    varying = {k: v for k, v in options.items() if isinstance(v, list | tuple) and k != "config"}
    if not varying:
        return
    names = sorted(varying)
    combos = []
    ids = []
    for values in itertools.product(*(varying[n] for n in names)):
        combo = dict(options)
        combo.update(zip(names, values))
        combos.append(combo)
        ids.append("-".join(f"{_short(n)}{v}" for n, v in zip(names, values)))
    metafunc.parametrize("weir_options", combos, indirect=True, ids=ids)


def _short(name: str) -> str:
    return {
        "parallelism": "p",
        "taskmanagers": "tm",
        "slots_per_taskmanager": "slots",
        "max_parallelism": "maxp",
    }[name]


class WeirClock:
    """What ``weir_clock`` gives a test: the shared cluster runs on mock time until the test
    ends. ``virtual_seconds`` / ``real_seconds`` say how much time passed for the jobs and
    for the test since the fixture started."""

    def __init__(self, shared: Any) -> None:
        self._shared = shared
        self._virtual_start = shared.current_time()
        self._real_start = time.perf_counter()

    @property
    def virtual_seconds(self) -> float:
        return float(self._shared.current_time() - self._virtual_start)

    @property
    def real_seconds(self) -> float:
        return time.perf_counter() - self._real_start

    def __repr__(self) -> str:
        return f"WeirClock(mock time: {self.virtual_seconds:.3f} s passed in {self.real_seconds:.3f} s of wall time)"


@pytest.fixture(scope="session")
def weir_cluster() -> Iterator[Any]:
    """The session's SharedCluster (started on first use, stopped at the session's end)."""
    from weir.testing.cluster import SharedCluster

    shared = SharedCluster().start()
    try:
        yield shared
    finally:
        shared.stop()


@pytest.fixture
def weir_clock(weir_cluster: Any) -> Iterator[WeirClock]:
    """Mock time with autojump for this test's jobs (see the module docstring)."""
    weir_cluster.set_mock_time(True)
    try:
        yield WeirClock(weir_cluster)
    finally:
        weir_cluster.set_mock_time(False)


@pytest.fixture
def weir_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """This test's ``weir`` marker options (one combination when the marker lists values)."""
    return dict(getattr(request, "param", None) or _marker_options(request.node))


def _new_env(options: dict[str, Any], shared: Any, clients: list[Any]) -> Any:
    from weir.common.configuration import Configuration
    from weir.testing.cluster import (
        DEFAULT_SLOTS_PER_TASKMANAGER,
        ClusterClient,
        ClusterSize,
        TestEnvironment,
    )

    conf = Configuration()
    for key, value in (options.get("config") or {}).items():
        conf.set_string(str(key), str(value).lower() if isinstance(value, bool) else str(value))
    size = ClusterSize(
        taskmanagers=options.get("taskmanagers", 1),
        slots_per_taskmanager=options.get("slots_per_taskmanager", DEFAULT_SLOTS_PER_TASKMANAGER),
    )
    client = ClusterClient(shared, size)
    clients.append(client)
    env = TestEnvironment(client, conf)
    if not conf.contains_key("execution.buffer-timeout.interval"):
        env.set_buffer_timeout(0)  # records never wait for a flush timer (the test may set another)
    if "parallelism" in options:
        env.set_parallelism(options["parallelism"])
    if options.get("max_parallelism") is not None:
        env.set_max_parallelism(options["max_parallelism"])
    return env


@pytest.fixture
def weir_env(weir_options: dict[str, Any], weir_cluster: Any) -> Iterator[Any]:
    """A fresh StreamExecutionEnvironment on the shared cluster (see the module docstring)."""
    clients: list[Any] = []
    env = _new_env(weir_options, weir_cluster, clients)
    try:
        yield env
    finally:
        for client in clients:
            client.cancel_all()


@pytest.fixture
def weir_env_factory(weir_options: dict[str, Any], weir_cluster: Any) -> Iterator[Callable[[], Any]]:
    """A callable making fresh environments like ``weir_env`` (same marker options), e.g. for
    ``assert_exactly_once(build, env_factory=weir_env_factory)``."""
    clients: list[Any] = []
    try:
        yield lambda: _new_env(weir_options, weir_cluster, clients)
    finally:
        for client in clients:
            client.cancel_all()

"""``weir cluster add-taskmanager`` waits for the JobManager's answer that the new process
registered, raced against that process's exit and a timeout (``standalone._registered_or_exited``).
A listener that accepts and never answers stands in for a JobManager still waiting."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from weir.cluster import rpc, standalone
from weir.errors import UsageError


@pytest.fixture
def silent_jobmanager(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, int]]:
    monkeypatch.setenv("WEIR_HOME", str(tmp_path / "home"))
    rpc.create_cluster_secret()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield ("127.0.0.1", listener.getsockname()[1])


def _process(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def test_a_process_that_exits_before_registering_ends_the_wait(silent_jobmanager: tuple[str, int]) -> None:
    process = _process("raise SystemExit(3)")
    outcome = trio.run(standalone._registered_or_exited, process, silent_jobmanager, "taskmanager-1", 60.0)
    assert outcome == "exited" and process.returncode == 3


def test_a_process_that_never_registers_times_out(silent_jobmanager: tuple[str, int]) -> None:
    process = _process("import time; time.sleep(60)")
    try:
        outcome = trio.run(standalone._registered_or_exited, process, silent_jobmanager, "taskmanager-1", 0.5)
        assert outcome == "timeout" and process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_an_unreachable_jobmanager_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEIR_HOME", str(tmp_path / "home"))
    rpc.create_cluster_secret()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, not listening: the connection is refused
        process = _process("import time; time.sleep(60)")
        try:
            with pytest.raises(UsageError, match=rf"cannot reach the JobManager at 127.0.0.1:{port}"):
                trio.run(
                    standalone._registered_or_exited, process, ("127.0.0.1", port), "taskmanager-1", 60.0
                )
        finally:
            process.kill()
            process.wait()

"""Restoring never runs code from a checkpoint or savepoint file (MockClock).

A savepoint signed by this user's weir restores everything; one made under another
``$WEIR_HOME`` (another user or machine) restores its plain data, and refuses pickled
values unless the user accepts the risk; a crafted file that would run code when
unpickled fails the restore, naming the file, and nothing runs."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.checkpoint.metadata import body_checksum
from weir.checkpoint.storage import load_savepoint
from weir.checkpoint.trust import is_signed_by_this_user
from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, open_minicluster
from weir.cluster.savepoints import load_savepoint_restore_state
from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.errors import UsageError
from weir.graph.job_graph import generate_job_graph
from weir.state.serde import encode_value
from weir.state.state_file import MAGIC, UntrustedStateError

EVENTS = 4_000


class Total:
    """A user's accumulator type: weir has no data encoding for it, so its state is pickled."""

    def __init__(self, key: int, value: int) -> None:
        self.key, self.value = key, value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Total) and (self.key, self.value) == (other.key, other.value)


class RunsCode:
    """What an attacker pickles: unpickling it calls ``os.system``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def build(out: list, typed: bool, savepoint: str | None = None, allow_untrusted_pickle: bool = False):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    events = env.from_source(
        DataGeneratorSource(lambda i: (i % 5, i), EVENTS, rate_limit=2000.0,
                            type_info=Types.TUPLE([Types.LONG(), Types.LONG()])),
        WatermarkStrategy.no_watermarks(),
        "events",
    ).uid("events")  # fmt: skip
    keyed = events.key_by(lambda e: e[0])
    if typed:
        sums = keyed.reduce(lambda a, b: (a[0], a[1] + b[1]))
    else:
        sums = (
            keyed.map(lambda e: Total(e[0], e[1]))
            .key_by(lambda t: t.key)
            .reduce(lambda a, b: Total(a.key, a.value + b.value))
        )
    sums.uid("sums").add_sink(out.append)
    if savepoint is not None:
        env._restore_from(savepoint, False)
        if allow_untrusted_pickle:
            env.get_configuration().set_string("weir.savepoint.allow-untrusted-pickle", "true")
    return env, generate_job_graph(env.get_stream_graph("untrusted state"))


async def take_savepoint(env: Any, job_graph: Any, target: Path) -> str:
    async with open_minicluster(ClusterConfig(taskmanagers=1, slots_per_taskmanager=4)) as cluster:
        handle = cluster.submit(job_graph, job_settings_for(env))
        await trio.sleep(1.0)
        path = await handle.job_master.trigger_savepoint(str(target), "canonical", "no_drain")
        result = await handle.wait()
    assert result.status.name == "FINISHED", result.failure
    return path


def keyed_handle(path: str) -> Any:
    metadata = load_savepoint(path)
    handles = [h for op in metadata.operators for h in op.state_handles if h.state_kind == "keyed"]
    return handles[0]


def rewrite_file(savepoint: str, relative: str, data: bytes) -> None:
    """Replace one state file and make ``_metadata`` agree, as somebody who can write the directory can."""
    Path(savepoint, relative).write_bytes(data)
    meta_path = Path(savepoint, "_metadata")
    doc = json.loads(meta_path.read_text())
    for op in doc["operators"]:
        for handle in op["state_handles"]:
            if handle["file"]["path"] == relative:
                handle["file"]["size_bytes"] = len(data)
                handle["file"]["sha256"] = __import__("hashlib").sha256(data).hexdigest()
    doc["checksum"] = body_checksum(doc)
    meta_path.write_text(json.dumps(doc))


@pytest.fixture
def other_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Switch ``$WEIR_HOME`` to a second one: what another user (or machine) restores under."""

    def switch() -> None:
        monkeypatch.setenv("WEIR_HOME", str(tmp_path / "other-home"))

    monkeypatch.setenv("WEIR_HOME", str(tmp_path / "home"))
    return switch


async def test_a_foreign_savepoint_of_typed_state_restores(
    tmp_path: Path, other_home: Any, autojump_clock: object
) -> None:
    env, graph = build([], typed=True)
    path = await take_savepoint(env, graph, tmp_path)
    assert is_signed_by_this_user(load_savepoint(path))
    other_home()
    assert not is_signed_by_this_user(load_savepoint(path))
    state = load_savepoint_restore_state(path, graph)
    sums = [p["keyed"] for p in state[keyed_operator(graph)]]
    assert sum(s.number_of_entries() for s in sums) == 5  # one running sum per key, all plain data


def keyed_operator(graph: Any) -> str:
    return next(op.id for v in graph.vertices for op in v.operators if op.name.startswith("Keyed Reduce"))


async def test_pickled_state_of_a_foreign_savepoint_needs_the_users_consent(
    tmp_path: Path, other_home: Any, autojump_clock: object
) -> None:
    env, graph = build([], typed=False)
    path = await take_savepoint(env, graph, tmp_path)
    assert load_savepoint_restore_state(path, graph)  # signed by this user: restores
    other_home()
    with pytest.raises(UntrustedStateError) as refused:
        load_savepoint_restore_state(path, graph)
    message = str(refused.value)
    assert keyed_handle(path).file.path in message and "pickled" in message
    assert "--allow-untrusted-pickle" in message and "not signed" in message
    state = load_savepoint_restore_state(path, graph, allow_untrusted_pickle=True)
    totals = [v for p in state[keyed_operator(graph)] for v in p["keyed"].key_groups]
    assert totals  # restored, with the user's consent


async def test_the_flag_restores_a_foreign_savepoint_end_to_end(
    tmp_path: Path, other_home: Any, autojump_clock: object
) -> None:
    env, graph = build([], typed=False)
    path = await take_savepoint(env, graph, tmp_path)
    other_home()
    out: list = []
    env, graph = build(out, typed=False, savepoint=path, allow_untrusted_pickle=True)
    async with open_minicluster(ClusterConfig(taskmanagers=1, slots_per_taskmanager=4)) as cluster:
        result = await cluster.submit(graph, job_settings_for(env)).wait()
    assert result.status.name == "FINISHED", result.failure
    final = {t.key: t.value for t in out}
    assert final == {k: sum(i for i in range(EVENTS) if i % 5 == k) for k in range(5)}


def crafted_files(marker: Path) -> dict[str, bytes]:
    """State files that run ``touch marker`` if anything unpickles or imports what they name."""
    evil = pickle.dumps(RunsCode(marker), protocol=5)
    leaf = b"\xff" + len(evil).to_bytes(4, "big") + evil
    named = b"\x08" + encode_value("os:system") + encode_value((f"touch {marker}",))
    envelope = MAGIC + (1).to_bytes(2, "big")
    return {
        "a pickle instead of a state file": evil,
        "a pickled value inside weir's format": envelope + b"\x0a" + (5).to_bytes(4, "big")
        + encode_value("keyed") + leaf + b"".join(encode_value(k) + b"\x00" for k in
        ("timers", "source_position", "operator_state", "channel_state")),
        "a named type that is a function": envelope + b"\x0a" + (5).to_bytes(4, "big")
        + encode_value("keyed") + named + b"".join(encode_value(k) + b"\x00" for k in
        ("timers", "source_position", "operator_state", "channel_state")),
    }  # fmt: skip


@pytest.mark.parametrize("kind", list(crafted_files(Path("x"))))
async def test_a_crafted_savepoint_runs_nothing_and_names_the_file(
    tmp_path: Path, other_home: Any, kind: str, autojump_clock: object
) -> None:
    env, graph = build([], typed=True)
    path = await take_savepoint(env, graph, tmp_path)
    marker = tmp_path / "pwned"
    relative = keyed_handle(path).file.path
    rewrite_file(path, relative, crafted_files(marker)[kind])
    with pytest.raises(UsageError) as refused:
        load_savepoint_restore_state(path, graph)
    assert relative in str(refused.value)
    assert not marker.exists(), "restoring ran code from the savepoint"

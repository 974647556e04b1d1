"""The executor registry: env.execute() hands a StreamGraph and frozen settings to the
executor ``execution.target`` names."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from weir.cluster.client import LocalExecutor
from weir.common.configuration import Configuration
from weir.core import execution
from weir.core.execution import ExecutionSettings, get_executor, register_executor
from weir.core.state_backend import LmdbStateBackend
from weir.datastream import StreamExecutionEnvironment
from weir.errors import UsageError


class Recording:
    """An executor that runs nothing and keeps what it was handed."""

    def __init__(self) -> None:
        self.handed: list[tuple[str, Any, ExecutionSettings]] = []

    def execute(self, graph: Any, settings: ExecutionSettings) -> Any:
        self.handed.append(("execute", graph, settings))
        return "done"

    def execute_async(self, graph: Any, settings: ExecutionSettings) -> Any:
        self.handed.append(("execute_async", graph, settings))
        return "client"

    def execute_and_collect(
        self, graph: Any, settings: ExecutionSettings, sink_node_id: int, limit: int | None
    ) -> Any:
        self.handed.append(("execute_and_collect", graph, settings))
        return [sink_node_id, limit]


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> Recording:
    executor = Recording()
    monkeypatch.setattr(execution, "_registered", {})
    register_executor("recording", lambda: executor)
    return executor


def test_local_is_found_by_name() -> None:
    assert isinstance(get_executor("local"), LocalExecutor)


def test_an_unknown_target_names_the_known_ones() -> None:
    with pytest.raises(UsageError, match=r"'nowhere' names no executor; known: .*local"):
        get_executor("nowhere")


def test_execute_hands_the_graph_and_frozen_settings_to_the_target(
    recording: Recording, tmp_path: Path
) -> None:
    conf = Configuration().set_string("execution.target", "recording")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_state_backend(LmdbStateBackend(str(tmp_path / "lmdb")))
    env.enable_checkpointing(500)
    env.from_collection([1, 2, 3]).map(lambda v: v + 1).print()
    assert env.execute("job") == "done"
    ((how, graph, settings),) = recording.handed
    assert how == "execute" and graph.job_name == "job"
    assert isinstance(settings.state_backend, LmdbStateBackend)
    assert settings.checkpoint_interval_ms == 500
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.checkpoint_interval_ms = 0  # type: ignore[misc]
    env.get_configuration().set_string("pipeline.name", "later")  # the settings kept a copy
    assert settings.configuration.get_string("pipeline.name") is None


def test_execute_async_and_collect_go_through_it_too(recording: Recording) -> None:
    conf = Configuration().set_string("execution.target", "recording")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.from_collection([1, 2]).print()
    assert env.execute_async() == "client"
    node_id, limit = env.from_collection([1]).execute_and_collect(limit=1)
    assert limit == 1 and node_id > 0
    assert [how for how, _, _ in recording.handed] == ["execute_async", "execute_and_collect"]

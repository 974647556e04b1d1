"""How ``env.execute()`` reaches the runtime without the API importing it.

The API compiles its transformations into a StreamGraph and freezes what the runtime
reads of the environment into ``ExecutionSettings``; it then hands both to the
``PipelineExecutor`` that the ``execution.target`` option names (Flink's
``PipelineExecutor``, found by ``PipelineExecutorFactory`` through Java's ServiceLoader).

Executors are found through the setuptools entry point group ``weir.executors``
(``name = "module:factory"``, a factory called without arguments). weir registers
``local`` there (``weir.cluster.client:LocalExecutor``: an embedded MiniCluster, or the
cluster ``settings.cluster`` names); ``BUILTIN_EXECUTORS`` names the same factory so a
source checkout without installed metadata still finds it. ``register_executor`` adds
one at run time (tests, embedding programs); it wins over an entry point of that name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol

from weir.common.configuration import Configuration
from weir.core.references import load_reference
from weir.errors import UsageError

__all__ = [
    "BUILTIN_EXECUTORS",
    "DEFAULT_EXECUTOR",
    "EXECUTOR_ENTRY_POINT_GROUP",
    "CloseableIterator",
    "ExecutionSettings",
    "PipelineExecutor",
    "get_executor",
    "register_executor",
]

EXECUTOR_ENTRY_POINT_GROUP = "weir.executors"
DEFAULT_EXECUTOR = "local"
BUILTIN_EXECUTORS = {"local": "weir.cluster.client:LocalExecutor"}

_registered: dict[str, Callable[[], PipelineExecutor]] = {}


class CloseableIterator:
    """What ``execute_and_collect()`` returns without a limit (PyFlink's name): the records
    as they arrive; ``close()`` (or leaving a ``with`` block) stops the job early. An
    executor returns its own subclass."""

    def __iter__(self) -> CloseableIterator:
        return self

    def __next__(self) -> Any:
        raise NotImplementedError

    def next(self) -> Any:
        """The next record (PyFlink's name; ``next(iterator)`` works too)."""
        return self.__next__()

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> CloseableIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class ExecutionSettings:
    """What the runtime reads of an environment, frozen when a job is handed over.

    ``configuration`` is a copy of the environment's (options the runtime reads itself:
    network memory, restart strategy, checkpointing, savepoint restore, state backend type,
    busy polling, ...); the other fields are what the environment holds outside it.
    """

    configuration: Configuration
    state_backend: Any = None  # the set_state_backend() choice; None: state.backend.type decides
    checkpoint_interval_ms: int = -1  # <= 0: no periodic checkpoints
    checkpoint_storage_dir: str | None = None
    buffer_timeout_ms: int = 100
    auto_watermark_interval_ms: int = 200
    job_parameters: dict[str, Any] = field(default_factory=dict)
    cluster: Any = None  # a running cluster to submit to (weir.testing's); None: the executor's own

    def get_configuration(self) -> Configuration:
        return self.configuration


class PipelineExecutor(Protocol):
    """Runs a StreamGraph with the settings it came with (Flink's ``PipelineExecutor``)."""

    def execute(self, graph: Any, settings: ExecutionSettings) -> Any:
        """Run the job to its end; returns a JobExecutionResult."""
        ...

    def execute_async(self, graph: Any, settings: ExecutionSettings) -> Any:
        """Start the job; returns a JobClient at once."""
        ...

    def execute_and_collect(
        self, graph: Any, settings: ExecutionSettings, sink_node_id: int, limit: int | None
    ) -> Any:
        """Run the job and stream the records of the collect sink ``sink_node_id`` back."""
        ...


def register_executor(name: str, factory: Callable[[], PipelineExecutor]) -> None:
    """Make ``factory()`` the executor of ``execution.target: name`` in this process."""
    _registered[name] = factory


def get_executor(name: str = DEFAULT_EXECUTOR) -> PipelineExecutor:
    """A new executor for ``name``: registered in this process, else by entry point, else built in."""
    factory = _registered.get(name)
    if factory is not None:
        return factory()
    for point in entry_points(group=EXECUTOR_ENTRY_POINT_GROUP):
        if point.name == name:
            return point.load()()
    if name in BUILTIN_EXECUTORS:
        return load_reference(BUILTIN_EXECUTORS[name])()
    known = sorted({*_registered, *(p.name for p in entry_points(group=EXECUTOR_ENTRY_POINT_GROUP))})
    known = sorted({*known, *BUILTIN_EXECUTORS})
    raise UsageError(f"execution.target {name!r} names no executor; known: {', '.join(known)}")

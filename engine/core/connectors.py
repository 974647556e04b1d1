"""What every source and sink tells the graph, and how it names its runtime side.

``Source`` and ``Sink`` are the user-facing descriptions that go into transformations: a
name, boundedness, parallelism limits. The runtime side -- a source's reader, a sink's
operator -- is built by the task (``weir.operators.factory``) through
``Source.create_reader`` and ``Sink.create_operator``. A connector either overrides
those, or names a factory as a ``"module:name"`` reference (``reader_factory``,
``operator_factory``) that is imported only when the task builds it; so the
descriptions, and the API that holds them, import nothing of the runtime, and the runtime
needs no list of connector classes.
"""

from __future__ import annotations

from typing import Any

from weir.common.typeinfo import TypeInformation
from weir.core.references import load_reference
from weir.errors import UsageError

__all__ = ["Sink", "Source", "has_runtime_side"]


class Source:
    """A FLIP-27-style source, used with ``env.from_source``."""

    #: a non-parallel source always runs with parallelism 1
    is_parallel = True
    #: ``"module:name"`` of ``factory(source, subtask, parallelism)`` -> this subtask's reader
    #: (a ``weir.operators.sources.SourceReader``); None: the class overrides ``create_reader``
    reader_factory: str | None = None

    def is_bounded(self) -> bool:
        return True

    def default_name(self) -> str:
        return type(self).__name__

    def produced_type(self) -> TypeInformation | None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"class": type(self).__name__}

    def create_reader(self, subtask: int, parallelism: int) -> Any:
        """The reader of subtask ``subtask`` of ``parallelism`` (called by the task)."""
        if self.reader_factory is None:
            raise UsageError(f"weir cannot run sources of type {type(self).__name__}")
        return load_reference(self.reader_factory)(self, subtask, parallelism)


class Sink:
    """A sink, used with ``DataStream.sink_to``."""

    #: ``"module:name"`` of ``factory(sink, name)`` -> the operator of one sink subtask;
    #: None: the class overrides ``create_operator``
    operator_factory: str | None = None

    def default_name(self) -> str:
        return type(self).__name__

    def describe(self) -> dict[str, Any]:
        return {"class": type(self).__name__}

    def create_operator(self, name: str) -> Any:
        """The operator of one subtask of this sink, named ``name`` (called by the task)."""
        if self.operator_factory is None:
            raise UsageError(f"weir cannot run sinks of type {type(self).__name__}")
        return load_reference(self.operator_factory)(self, name)


def has_runtime_side(connector: Any) -> bool:
    """Whether the task can build ``connector``'s reader or operator: it names a factory,
    or overrides ``create_reader``/``create_operator`` (or is no Source/Sink but has one)."""
    if isinstance(connector, Source):
        return (
            connector.reader_factory is not None or type(connector).create_reader is not Source.create_reader
        )
    if isinstance(connector, Sink):
        return (
            connector.operator_factory is not None
            or type(connector).create_operator is not Sink.create_operator
        )
    return hasattr(connector, "create_reader") or hasattr(connector, "create_operator")

"""The sources and sinks behind environment and DataStream helpers (``from_collection``,
``add_source``, ``print``, ``add_sink``, ``execute_and_collect``)."""

from __future__ import annotations

from typing import Any

from weir.common.typeinfo import TypeInformation
from weir.core.connectors import Sink, Source


class CollectionSource(Source):
    """``env.from_collection``: a non-parallel, bounded source of the given elements."""

    is_parallel = False
    reader_factory = "weir.operators.sources:collection_reader"

    def __init__(self, elements: list[Any], type_info: TypeInformation | None) -> None:
        self.elements = elements
        self.type_info = type_info

    def default_name(self) -> str:
        return "Collection Source"

    def produced_type(self) -> TypeInformation | None:
        return self.type_info

    def describe(self) -> dict[str, Any]:
        return {"class": "CollectionSource", "elements": len(self.elements)}


class FunctionSource(Source):
    """``env.add_source``: wraps a SourceFunction; parallel unless it says otherwise."""

    reader_factory = "weir.operators.sources:function_source_reader"

    def __init__(self, function: Any, bounded: bool, parallel: bool) -> None:
        self.function = function
        self.bounded = bounded
        self.is_parallel = parallel

    def is_bounded(self) -> bool:
        return self.bounded

    def default_name(self) -> str:
        return "Custom Source"


class InputFormatSource(Source):
    """``env.create_input``: a bounded, parallel source that reads an ``InputFormat``."""

    def __init__(self, input_format: Any) -> None:
        self.input_format = input_format

    def default_name(self) -> str:
        return "Custom Source"

    def produced_type(self) -> TypeInformation | None:
        produced: TypeInformation | None = self.input_format.produced_type()
        return produced

    def describe(self) -> dict[str, Any]:
        return {"class": "InputFormatSource", "input_format": self.input_format.describe()}

    def create_reader(self, subtask: int, parallelism: int) -> Any:
        return self.input_format.create_reader(subtask, parallelism)


class PrintSink(Sink):
    """``DataStream.print``: one line per record on stdout (stderr if asked)."""

    operator_factory = "weir.operators.sinks:print_sink_operator"

    def __init__(
        self, sink_identifier: str | None = None, to_stderr: bool = False, type_info: Any = None
    ) -> None:
        self.sink_identifier = sink_identifier
        self.to_stderr = to_stderr
        self.type_info = type_info  # the printed stream's: decides the format, as in PyFlink

    def default_name(self) -> str:
        return "Print to Std. Err" if self.to_stderr else "Print to Std. Out"


class FunctionSink(Sink):
    """``DataStream.add_sink``: wraps a SinkFunction or a callable."""

    operator_factory = "weir.operators.sinks:function_sink_operator"

    def __init__(self, function: Any) -> None:
        self.function = function

    def default_name(self) -> str:
        return "Unnamed"


class CollectSink(Sink):
    """``execute_and_collect``: streams records back to the client."""

    operator_factory = "weir.operators.sinks:collect_sink_operator"

    def default_name(self) -> str:
        return "Collect Stream Sink"


class DiscardingSink(Sink):
    """Drops every record (Flink's DiscardingSink); for benchmarks and tests."""

    operator_factory = "weir.operators.sinks:discarding_sink_operator"

    def default_name(self) -> str:
        return "Discarding Sink"

"""``InputFormat``, as in ``pyflink.common.io``: a bounded source of records read by
``StreamExecutionEnvironment.create_input``.

In PyFlink an InputFormat wraps a Java one; in weir it names its runtime side the way a
``Source`` does (``reader_factory``, a ``"module:name"`` of ``factory(input_format,
subtask, parallelism)`` returning a ``weir.operators.sources.SourceReader``), or overrides
``create_reader``. weir's input formats: ``weir.datastream.formats.avro.AvroInputFormat``.
"""

from __future__ import annotations

import importlib
from typing import Any

from weir.errors import UsageError

__all__ = ["InputFormat"]


class InputFormat:
    """Reads a bounded input, split among the source's subtasks."""

    #: ``"module:name"`` of ``factory(input_format, subtask, parallelism)`` -> a reader
    reader_factory: str | None = None

    def produced_type(self) -> Any:
        """The TypeInformation of the records (None: pickled Python objects)."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"class": type(self).__name__}

    def create_reader(self, subtask: int, parallelism: int) -> Any:
        if self.reader_factory is None:
            raise UsageError(
                f"weir cannot read the InputFormat {type(self).__name__}: it names no reader "
                "(reader_factory) and does not override create_reader; weir's input formats are "
                "AvroInputFormat, or use env.from_source with a FileSource"
            )
        module, _, name = self.reader_factory.partition(":")
        factory: Any = getattr(importlib.import_module(module), name)  # weir.common sits below weir.core
        return factory(self, subtask, parallelism)

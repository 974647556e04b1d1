"""Sinks: print, user sink functions and discard; collect (back to the client) is in ``collect``, file sinks in ``file_sink``.

The ``*_sink_operator`` functions are the runtime sides that the built-in sinks of
``weir.datastream.connectors.builtin`` name as their ``operator_factory``.
"""

from __future__ import annotations

import sys
from typing import Any

from weir.codec.batch import Batch
from weir.columnar.functions import columns_of
from weir.core.functions import SinkFunction
from weir.operators.base import StreamOperator, copy_function
from weir.operators.printing import formatter_for


class SinkOperator(StreamOperator):
    """A sink consumes batches and emits nothing. ``drain`` runs after each input batch."""

    async def drain(self) -> None:
        """Push queued records out (for sinks that talk to something async). Cancellation: drops nothing already pushed."""

    def process_watermark(self, timestamp: int) -> None:
        self.current_watermark = timestamp


class PrintSinkOperator(SinkOperator):
    """One line per record; prefixed like Flink: ``identifier:subtask> `` when there are several subtasks."""

    def __init__(
        self, name: str, sink_identifier: str | None, to_stderr: bool, type_info: Any = None
    ) -> None:
        super().__init__(name)
        self.sink_identifier = sink_identifier
        self.to_stderr = to_stderr
        self.format = formatter_for(type_info)

    def open(self) -> None:
        ctx = self.context
        subtask = f"{ctx.subtask_index + 1}" if ctx.parallelism > 1 else ""
        ident = self.sink_identifier or ""
        if ident and subtask:
            self._prefix = f"{ident}:{subtask}> "
        elif ident or subtask:
            self._prefix = f"{ident or subtask}> "
        else:
            self._prefix = ""
        self._stream = sys.stderr if self.to_stderr else sys.stdout

    def process_batch(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        prefix, format_ = self._prefix, self.format
        self._stream.write("".join(f"{prefix}{format_(v)}\n" for v in batch.as_list()))


class FunctionSinkOperator(SinkOperator):
    """``add_sink``: a SinkFunction's ``invoke(value, context)`` or a plain callable per record."""

    def __init__(self, name: str, function: Any) -> None:
        super().__init__(name)
        self.function = function

    def open(self) -> None:
        if isinstance(self.function, SinkFunction):
            self.function.open(self.context.runtime_context())

    def process_batch(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        if callable(getattr(self.function, "invoke_batch", None)):  # weir.columnar.BatchSinkFunction
            self._process_columns(batch)
        elif isinstance(self.function, SinkFunction):
            invoke = self.function.invoke
            for v in batch.as_list():
                invoke(v, None)
        else:
            f = self.function
            for v in batch.as_list():
                f(v)

    def _process_columns(self, batch: Batch) -> None:
        """A columnar batch in one ``invoke_batch``; a batch of records through ``invoke``, with
        each record's timestamp in its context."""
        if not len(batch):
            return
        columns = columns_of(batch.values)
        if columns is not None:
            self.function.invoke_batch(columns, batch.timestamps)
            return
        invoke = self.function.invoke
        for value, timestamp in zip(batch.as_list(), batch.timestamp_list()):
            invoke(value, _RecordContext(timestamp))

    def close(self) -> None:
        if isinstance(self.function, SinkFunction):
            self.function.close()


class _RecordContext:
    """What a sink function's ``invoke`` learns about its record (PyFlink's ``SinkFunction.Context``)."""

    __slots__ = ("_timestamp",)

    def __init__(self, timestamp: int | None) -> None:
        self._timestamp = timestamp

    def timestamp(self) -> int | None:
        return self._timestamp


class DiscardingSinkOperator(SinkOperator):
    def process_batch(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)


def print_sink_operator(sink: Any, name: str) -> PrintSinkOperator:
    return PrintSinkOperator(name, sink.sink_identifier, sink.to_stderr, getattr(sink, "type_info", None))


def function_sink_operator(sink: Any, name: str) -> FunctionSinkOperator:
    return FunctionSinkOperator(name, copy_function(name, sink.function))


def discarding_sink_operator(sink: Any, name: str) -> DiscardingSinkOperator:
    return DiscardingSinkOperator(name)


def collect_sink_operator(sink: Any, name: str) -> Any:
    """Without a channel: the task attaches the one ``execute_and_collect`` opened for its node
    (``weir.operators.collect``)."""
    from weir.operators.collect import CollectSinkOperator

    return CollectSinkOperator(name)

"""The runtime side of ``weir.datastream.connectors.jdbc.JdbcSink``: one operator per sink
subtask, with a connection of its own.

Theory of operation: records wait in ``pending`` as parameter tuples. ``flush`` runs the
statement over all of them (DB-API ``executemany``) and commits; on a database error it
rolls back, reconnects if the connection no longer answers, waits ``i`` seconds before the
``i``-th retry (Flink's JdbcOutputFormat) and tries the whole batch again, at most
``max_retries`` times, then fails the task. A flush happens when ``pending`` reaches
``batch_size``, when the processing-time interval passes (if it is not 0 and the batch size
is not 1), before a checkpoint's snapshot and at the end of input; so a checkpoint that
completes has every record before its barrier in the database (at least once: records
written after it are written again on recovery).

What it does not do: it keeps no state in checkpoints (nothing is pending at a snapshot),
and it does not de-duplicate replayed records (an upsert statement does).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import decimal
import time
from collections.abc import Callable
from typing import Any

from weir.codec.batch import Batch
from weir.errors import UsageError
from weir.operators.sinks import SinkOperator


def sqlite_parameter(value: Any) -> Any:
    """A field as sqlite3 binds it: decimals as text, dates and times in ISO format."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, _dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, _dt.date | _dt.time):
        return value.isoformat()
    return value


class JdbcSinkOperator(SinkOperator):
    def __init__(
        self,
        name: str,
        sink: Any,
        connect: Callable[[], Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(name)
        self.sql = sink.sql
        self.field_count = sink.field_count
        options = sink.execution_options
        self.batch_size = options.batch_size
        self.batch_interval_ms = options.batch_interval_ms
        self.max_retries = options.max_retries
        self.url = sink.connection_options.url
        self._connect = connect or sink.connection_options.connect
        self._sleep = sleep  # the wait before a retry; tests pass their own
        self.pending: list[tuple[Any, ...]] = []
        self.connection: Any = None
        self.flushes = 0
        self._next_flush_ms: int | None = None

    def open(self) -> None:
        self.connection = self._connect()
        if self.batch_interval_ms != 0 and self.batch_size != 1:
            self._next_flush_ms = self.context.processing_time_ms() + self.batch_interval_ms

    def _parameters(self, record: Any) -> tuple[Any, ...]:
        try:
            fields = tuple(record)
        except TypeError:
            fields = (record,)
        if len(fields) != self.field_count:
            raise UsageError(
                f"JdbcSink '{self.name}': the record {record!r} has {len(fields)} fields, the row type "
                f"given to JdbcSink.sink has {self.field_count}"
            )
        return tuple(sqlite_parameter(f) for f in fields)

    def process_batch(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        for record in batch.as_list():
            self.pending.append(self._parameters(record))
            if self.batch_size > 0 and len(self.pending) >= self.batch_size:
                self.flush()

    def flush(self) -> None:
        """Write ``pending`` in one transaction, with retries (see the module docstring)."""
        if not self.pending:
            return
        for attempt in range(self.max_retries + 1):
            try:
                self.connection.executemany(self.sql, self.pending)
                self.connection.commit()
            except Exception as e:  # the DB-API's errors (sqlite3.Error and others)
                self._rollback()
                if attempt >= self.max_retries:
                    raise RuntimeError(
                        f"JdbcSink '{self.name}': writing {len(self.pending)} records to {self.url} failed "
                        f"after {attempt + 1} attempts: {e}"
                    ) from e
                self._reconnect_if_broken()
                self._sleep(attempt)
            else:
                self.flushes += 1
                self.pending.clear()
                return

    def _rollback(self) -> None:
        try:
            self.connection.rollback()
        except Exception:
            self._reconnect()

    def _reconnect_if_broken(self) -> None:
        try:
            self.connection.execute("SELECT 1")
        except Exception:
            self._reconnect()

    def _reconnect(self) -> None:
        with contextlib.suppress(Exception):
            self.connection.close()
        self.connection = self._connect()

    def next_processing_time_deadline(self) -> int | None:
        return self._next_flush_ms

    def on_processing_time(self, now_ms: int) -> None:
        if self._next_flush_ms is not None and now_ms >= self._next_flush_ms:
            self.flush()
            self._next_flush_ms = now_ms + self.batch_interval_ms

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        self.flush()

    def finish(self) -> None:
        self.flush()

    def close(self) -> None:
        """Closes the connection; what was not flushed is replayed from the last checkpoint."""
        if self.connection is not None:
            try:
                self.connection.close()
            finally:
                self.connection = None


def jdbc_sink_operator(sink: Any, name: str) -> JdbcSinkOperator:
    return JdbcSinkOperator(name, sink)

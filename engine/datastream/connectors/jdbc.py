"""``JdbcSink``, ``JdbcConnectionOptions`` and ``JdbcExecutionOptions``, as in
``pyflink.datastream.connectors.jdbc``.

``ds.add_sink(JdbcSink.sink(sql, type_info, connection_options, execution_options))`` runs
``sql`` (an INSERT, UPDATE or upsert with JDBC's ``?`` placeholders) once per record, with
the record's fields as the parameters, in batches, as Flink's JdbcSink does: a batch is
written when it holds ``batch_size`` records, every ``batch_interval_ms`` of processing time
(when that is not 0), at every checkpoint (before the barrier goes on, so a completed
checkpoint never leaves records behind: at least once), and at the end of input. A batch
that fails is rolled back and tried again up to ``max_retries`` times, waiting ``i`` seconds
before the ``i``-th retry; then the job fails.

weir runs no JVM, so no JDBC driver: the sink talks to the database through Python's
DB-API. ``jdbc:sqlite:<path>`` URLs work (the standard library's ``sqlite3``); another URL
is refused when the sink is built, naming the URL. The runtime side is
``weir.operators.jdbc_sink``.
"""

from __future__ import annotations

from typing import Any

from weir.common.typeinfo import RowTypeInfo, TupleTypeInfo
from weir.core.connectors import Sink
from weir.core.functions import SinkFunction
from weir.errors import UsageError

__all__ = ["JdbcConnectionOptions", "JdbcExecutionOptions", "JdbcSink"]

SQLITE_PREFIX = "jdbc:sqlite:"


def _int(what: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"JdbcExecutionOptions: {what} must be an int >= {minimum}, got {value!r}")
    return value


def sqlite_path(url: str) -> str:
    """The database file of a ``jdbc:sqlite:`` URL (a ``file:`` URI stays a URI)."""
    path = url[len(SQLITE_PREFIX) :]
    if not path or path.startswith(":memory:") or "mode=memory" in path:
        raise UsageError(
            f"JdbcConnectionOptions: {url!r} names an in-memory SQLite database, which every sink "
            "subtask would open on its own and lose at the end; use a file, e.g. 'jdbc:sqlite:out.db'"
        )
    return path


class JdbcConnectionOptions:
    """Where the sink connects: the JDBC URL, and the driver name, user and password."""

    def __init__(
        self,
        url: str,
        driver_name: str | None = None,
        user_name: str | None = None,
        password: str | None = None,
        connection_check_timeout_seconds: int = 60,
    ) -> None:
        if not isinstance(url, str) or not url:
            raise UsageError(f"JdbcConnectionOptions needs a JDBC URL (with_url), got {url!r}")
        if not url.startswith(SQLITE_PREFIX):
            raise UsageError(
                f"JdbcConnectionOptions: weir cannot connect to {url!r}: it has no JVM and so no JDBC "
                f"driver, and writes through Python's sqlite3; use a '{SQLITE_PREFIX}<path>' URL"
            )
        sqlite_path(url)
        self.url = url
        self.driver_name = driver_name
        self.user_name = user_name
        self.password = password
        self.connection_check_timeout_seconds = connection_check_timeout_seconds

    def get_db_url(self) -> str:
        return self.url

    def get_driver_name(self) -> str | None:
        return self.driver_name

    def get_user_name(self) -> str | None:
        return self.user_name

    def get_password(self) -> str | None:
        return self.password

    def connect(self, timeout_s: float = 5.0) -> Any:
        """A new DB-API connection (sqlite3; user and password do not apply to SQLite)."""
        import sqlite3

        path = sqlite_path(self.url)
        return sqlite3.connect(
            path, timeout=timeout_s, uri=path.startswith("file:"), isolation_level="DEFERRED"
        )

    def describe(self) -> dict[str, Any]:
        return {"url": self.url, "driver_name": self.driver_name, "user_name": self.user_name}

    def __repr__(self) -> str:  # no password in logs
        return f"JdbcConnectionOptions(url={self.url!r}, driver_name={self.driver_name!r})"

    class JdbcConnectionOptionsBuilder:
        def __init__(self) -> None:
            self._url: str | None = None
            self._driver: str | None = None
            self._user: str | None = None
            self._password: str | None = None
            self._check_timeout_s = 60

        def with_url(self, url: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            self._url = url
            return self

        def with_driver_name(self, driver_name: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            self._driver = driver_name
            return self

        def with_user_name(self, user_name: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            self._user = user_name
            return self

        def with_password(self, password: str) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            self._password = password
            return self

        def with_connection_check_timeout_seconds(
            self, seconds: int
        ) -> JdbcConnectionOptions.JdbcConnectionOptionsBuilder:
            if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds <= 0:
                raise UsageError(
                    f"connection check timeout must be a positive int of seconds, got {seconds!r}"
                )
            self._check_timeout_s = seconds
            return self

        def build(self) -> JdbcConnectionOptions:
            return JdbcConnectionOptions(
                self._url,  # type: ignore[arg-type]  # checked there
                self._driver,
                self._user,
                self._password,
                self._check_timeout_s,
            )


class JdbcExecutionOptions:
    """How the sink batches: ``batch_size`` records (default 5000), every
    ``batch_interval_ms`` (default 0: no timed flushes), ``max_retries`` (default 3)."""

    DEFAULT_SIZE = 5000
    DEFAULT_INTERVAL_MILLIS = 0
    DEFAULT_MAX_RETRY_TIMES = 3

    def __init__(self, batch_interval_ms: int, batch_size: int, max_retries: int) -> None:
        self.batch_interval_ms = _int("batch_interval_ms", batch_interval_ms, 0)
        self.batch_size = _int("batch_size", batch_size, 0)
        self.max_retries = _int("max_retries", max_retries, 0)

    def get_batch_interval_ms(self) -> int:
        return self.batch_interval_ms

    def get_batch_size(self) -> int:
        return self.batch_size

    def get_max_retries(self) -> int:
        return self.max_retries

    @staticmethod
    def defaults() -> JdbcExecutionOptions:
        return JdbcExecutionOptions.builder().build()

    @staticmethod
    def builder() -> JdbcExecutionOptions.Builder:
        return JdbcExecutionOptions.Builder()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JdbcExecutionOptions) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((self.batch_interval_ms, self.batch_size, self.max_retries))

    def __repr__(self) -> str:
        return (
            f"JdbcExecutionOptions(batch_size={self.batch_size}, batch_interval_ms={self.batch_interval_ms}, "
            f"max_retries={self.max_retries})"
        )

    class Builder:
        def __init__(self) -> None:
            self._size = JdbcExecutionOptions.DEFAULT_SIZE
            self._interval_ms = JdbcExecutionOptions.DEFAULT_INTERVAL_MILLIS
            self._max_retries = JdbcExecutionOptions.DEFAULT_MAX_RETRY_TIMES

        def with_batch_size(self, size: int) -> JdbcExecutionOptions.Builder:
            self._size = size
            return self

        def with_batch_interval_ms(self, interval_ms: int) -> JdbcExecutionOptions.Builder:
            self._interval_ms = interval_ms
            return self

        def with_max_retries(self, max_retries: int) -> JdbcExecutionOptions.Builder:
            self._max_retries = max_retries
            return self

        def build(self) -> JdbcExecutionOptions:
            return JdbcExecutionOptions(self._interval_ms, self._size, self._max_retries)


class JdbcSinkConnector(Sink):
    """What ``JdbcSink`` runs as (the sink added by ``add_sink``)."""

    operator_factory = "weir.operators.jdbc_sink:jdbc_sink_operator"

    def __init__(
        self,
        sql: str,
        field_count: int,
        connection_options: JdbcConnectionOptions,
        execution_options: JdbcExecutionOptions,
    ) -> None:
        self.sql = sql
        self.field_count = field_count
        self.connection_options = connection_options
        self.execution_options = execution_options

    def default_name(self) -> str:
        return "JDBC Sink"

    def describe(self) -> dict[str, Any]:
        return {
            "class": "JdbcSink",
            "sql": self.sql,
            "connection": self.connection_options.describe(),
            "execution": repr(self.execution_options),
        }


class JdbcSink(SinkFunction):
    """Writes each record with a SQL statement; make it with ``JdbcSink.sink(...)``."""

    def __init__(self, sink: JdbcSinkConnector) -> None:
        self.sink_connector = sink

    def as_sink(self) -> JdbcSinkConnector:
        """The sink that ``DataStream.add_sink`` adds for this function."""
        return self.sink_connector

    def invoke(self, value: Any, context: Any) -> None:
        raise UsageError("JdbcSink runs as a sink of its own: add it with DataStream.add_sink(sink)")

    @staticmethod
    def sink(
        sql: str,
        type_info: RowTypeInfo,
        jdbc_connection_options: JdbcConnectionOptions,
        jdbc_execution_options: JdbcExecutionOptions | None = None,
    ) -> JdbcSink:
        """``sql``: any DML statement with one ``?`` per field of ``type_info`` (a RowTypeInfo
        of the records, as in PyFlink; a TupleTypeInfo is taken too)."""
        if not isinstance(sql, str) or not sql.strip():
            raise UsageError(f"JdbcSink.sink needs a SQL statement, got {sql!r}")
        if not isinstance(type_info, RowTypeInfo | TupleTypeInfo):
            raise UsageError(
                "JdbcSink.sink needs the records' row type, e.g. "
                f"Types.ROW([Types.INT(), Types.STRING()]), got {type_info!r}"
            )
        if not isinstance(jdbc_connection_options, JdbcConnectionOptions):
            raise UsageError(
                "JdbcSink.sink needs JdbcConnectionOptions "
                "(JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(...).build()), "
                f"got {jdbc_connection_options!r}"
            )
        if jdbc_execution_options is None:
            jdbc_execution_options = JdbcExecutionOptions.defaults()
        if not isinstance(jdbc_execution_options, JdbcExecutionOptions):
            raise UsageError(
                f"JdbcSink.sink needs JdbcExecutionOptions or None, got {jdbc_execution_options!r}"
            )
        fields = len(type_info.get_field_types())
        return JdbcSink(JdbcSinkConnector(sql, fields, jdbc_connection_options, jdbc_execution_options))

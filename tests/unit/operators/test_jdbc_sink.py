"""The JDBC sink operator over sqlite3: when batches are written, retries, and the options."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from weir.common import Row, Types
from weir.datastream.connectors.jdbc import JdbcConnectionOptions, JdbcExecutionOptions, JdbcSink
from weir.errors import UsageError
from weir.operators.jdbc_sink import JdbcSinkOperator

from .operator_harness import Harness

ROW = Types.ROW([Types.INT(), Types.STRING()])


def database(tmp_path: Path, check: str = "") -> str:
    path = tmp_path / "out.db"
    with sqlite3.connect(path) as db:
        db.execute(f"CREATE TABLE books (id INTEGER, title TEXT {check})")
    return str(path)


def rows(path: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return sorted(db.execute("SELECT id, title FROM books").fetchall())


def sink_operator(path: str, sleeps: list[float] | None = None, **options: int) -> JdbcSinkOperator:
    execution = JdbcExecutionOptions.builder()
    if "size" in options:
        execution.with_batch_size(options["size"])
    if "interval" in options:
        execution.with_batch_interval_ms(options["interval"])
    if "retries" in options:
        execution.with_max_retries(options["retries"])
    connection = JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(f"jdbc:sqlite:{path}").build()
    sink = JdbcSink.sink("INSERT INTO books (id, title) VALUES (?, ?)", ROW, connection, execution.build())
    record = sleeps if sleeps is not None else []
    return JdbcSinkOperator(
        "jdbc", sink.as_sink(), connect=lambda: connection.connect(timeout_s=0), sleep=record.append
    )


def test_a_batch_is_written_when_it_reaches_the_batch_size(tmp_path: Path) -> None:
    path = database(tmp_path)
    h = Harness(sink_operator(path, size=3))
    h.elements((Row(1, "a"), 0), (Row(2, "b"), 0))
    assert rows(path) == []
    h.elements((Row(3, "c"), 0), (Row(4, "d"), 0))
    assert rows(path) == [(1, "a"), (2, "b"), (3, "c")]
    h.operator.finish()
    assert rows(path) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]


def test_the_batch_interval_flushes_on_processing_time(tmp_path: Path) -> None:
    path = database(tmp_path)
    h = Harness(sink_operator(path, size=100, interval=1000))
    assert h.operator.next_processing_time_deadline() == 1000
    h.elements((Row(1, "a"), 0))
    h.advance_processing_time(999)
    assert rows(path) == []
    h.advance_processing_time(1000)
    assert rows(path) == [(1, "a")]
    assert h.operator.next_processing_time_deadline() == 2000


def test_without_an_interval_there_is_no_timer(tmp_path: Path) -> None:
    h = Harness(sink_operator(database(tmp_path), size=100))
    assert h.operator.next_processing_time_deadline() is None


def test_a_checkpoint_flushes_before_its_barrier(tmp_path: Path) -> None:
    path = database(tmp_path)
    h = Harness(sink_operator(path, size=100))
    h.elements((Row(1, "a"), 0), (Row(2, None), 0))
    h.operator.prepare_snapshot_pre_barrier(1)
    assert rows(path) == [(1, "a"), (2, None)]


def test_a_failed_batch_is_retried_after_a_wait(tmp_path: Path) -> None:
    path = database(tmp_path)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    sleeps: list[float] = []

    def release(seconds: float) -> None:
        sleeps.append(seconds)
        blocker.execute("COMMIT")

    op = sink_operator(path, size=2, retries=3)
    op._sleep = release
    h = Harness(op)
    h.elements((Row(1, "a"), 0), (Row(2, "b"), 0))
    assert sleeps == [0]
    assert rows(path) == [(1, "a"), (2, "b")]
    blocker.close()


def test_after_the_last_retry_the_task_fails_and_nothing_half_written_stays(tmp_path: Path) -> None:
    path = database(tmp_path, check="CHECK (id > 0)")
    sleeps: list[float] = []
    h = Harness(sink_operator(path, sleeps, size=100, retries=2))
    h.elements((Row(1, "a"), 0), (Row(-1, "bad"), 0))
    with pytest.raises(RuntimeError, match=r"failed after 3 attempts.*CHECK constraint"):
        h.operator.finish()
    assert sleeps == [0, 1]
    assert rows(path) == []


def test_a_record_with_the_wrong_number_of_fields_is_named(tmp_path: Path) -> None:
    h = Harness(sink_operator(database(tmp_path)))
    with pytest.raises(UsageError, match=r"has 3 fields, the row type given to JdbcSink\.sink has 2"):
        h.elements((Row(1, "a", "extra"), 0))


def test_execution_options_default_like_flinks() -> None:
    defaults = JdbcExecutionOptions.defaults()
    assert (defaults.get_batch_size(), defaults.get_batch_interval_ms(), defaults.get_max_retries()) == (
        5000,
        0,
        3,
    )
    built = (
        JdbcExecutionOptions.builder()
        .with_batch_size(10)
        .with_batch_interval_ms(200)
        .with_max_retries(0)
        .build()
    )
    assert (built.get_batch_size(), built.get_batch_interval_ms(), built.get_max_retries()) == (10, 200, 0)
    with pytest.raises(UsageError, match="max_retries"):
        JdbcExecutionOptions.builder().with_max_retries(-1).build()


def test_connection_options_keep_what_the_builder_was_given() -> None:
    options = (
        JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .with_url("jdbc:sqlite:x.db")
        .with_driver_name("org.sqlite.JDBC")
        .with_user_name("me")
        .with_password("secret")
        .build()
    )
    assert options.get_db_url() == "jdbc:sqlite:x.db"
    assert options.get_driver_name() == "org.sqlite.JDBC"
    assert (options.get_user_name(), options.get_password()) == ("me", "secret")
    assert "secret" not in repr(options)


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("jdbc:postgresql://localhost/db", "no JDBC driver.*jdbc:sqlite:"),
        ("jdbc:sqlite::memory:", "in-memory SQLite database"),
        (None, "needs a JDBC URL"),
    ],
)
def test_urls_weir_cannot_use_are_refused_when_built(url: Any, match: str) -> None:
    builder = JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
    if url is not None:
        builder.with_url(url)
    with pytest.raises(UsageError, match=match):
        builder.build()


def test_sink_needs_a_row_type() -> None:
    options = JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url("jdbc:sqlite:x.db").build()
    with pytest.raises(UsageError, match="row type"):
        JdbcSink.sink("INSERT INTO t VALUES (?)", Types.INT(), options)  # type: ignore[arg-type]

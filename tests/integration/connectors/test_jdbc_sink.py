"""``JdbcSink`` in jobs: every record reaches the database, also across a restart."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from weir.common import RestartStrategies, Row, Types
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.jdbc import JdbcConnectionOptions, JdbcExecutionOptions, JdbcSink

ROW = Types.ROW([Types.LONG(), Types.STRING()])
ARMED = {"fail_at": -1}


def fail_once(row: Row) -> Row:
    if row[0] == ARMED["fail_at"]:
        ARMED["fail_at"] = -1
        raise RuntimeError("injected failure")
    return row


def run(tmp_path: Path, sql: str, parallelism: int, fail_at: int = -1) -> list[tuple[int, str]]:
    path = tmp_path / "out.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE words (id INTEGER PRIMARY KEY, word TEXT)"
            if "REPLACE" in sql
            else "CREATE TABLE words (id INTEGER, word TEXT)"
        )
    ARMED["fail_at"] = fail_at
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    options = JdbcConnectionOptions.JdbcConnectionOptionsBuilder().with_url(f"jdbc:sqlite:{path}").build()
    execution = JdbcExecutionOptions.builder().with_batch_size(4).build()
    (
        env.from_collection([Row(i, f"w{i}") for i in range(40)], type_info=ROW)
        .map(fail_once, output_type=ROW)
        .add_sink(JdbcSink.sink(sql, ROW, options, execution))
    )
    env.execute("jdbc")
    with sqlite3.connect(path) as db:
        return sorted(db.execute("SELECT id, word FROM words").fetchall())


@pytest.mark.parametrize("parallelism", [1, 2])
def test_every_record_is_inserted(tmp_path: Path, parallelism: int) -> None:
    got = run(tmp_path, "INSERT INTO words (id, word) VALUES (?, ?)", parallelism)
    assert got == [(i, f"w{i}") for i in range(40)]


def test_after_a_restart_the_sink_reconnects_and_an_upsert_keeps_the_table_exact(tmp_path: Path) -> None:
    assert run(tmp_path, "INSERT OR REPLACE INTO words (id, word) VALUES (?, ?)", 1, fail_at=30) == [
        (i, f"w{i}") for i in range(40)
    ]

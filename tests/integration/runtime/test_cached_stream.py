"""DataStream.cache(): computed by the first job that needs it, reused by later jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.common import Types
from weir.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from weir.datastream.data_stream import CachedDataStream
from weir.errors import UsageError


class _Logged:
    """A map that notes every call in a file (the tasks run in this process, but functions
    travel as copies: a file is what they share)."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def __call__(self, x: int) -> int:
        with self.log.open("a") as f:
            f.write(f"{x}\n")
        return x * 10


def _batch_env() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(2)
    return env


def test_later_jobs_read_the_kept_records_without_running_the_upstream(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    env = _batch_env()
    cached = env.from_collection([1, 2, 3], Types.INT()).map(_Logged(log), Types.INT()).cache()
    assert isinstance(cached, CachedDataStream)
    assert sorted(cached.map(lambda x: x + 1, Types.INT()).execute_and_collect()) == [11, 21, 31]
    assert sorted(log.read_text().split()) == ["1", "2", "3"]
    assert sorted(cached.filter(lambda x: x > 10).execute_and_collect()) == [20, 30]
    out = tmp_path / "sink"
    cached.map(str, Types.STRING()).add_sink(lambda v: out.open("a").write(v + "\n"))
    env.execute("third job")
    assert sorted(out.read_text().split()) == ["10", "20", "30"]
    assert sorted(log.read_text().split()) == ["1", "2", "3"]  # the upstream ran once


def test_invalidate_drops_the_records_and_the_next_job_computes_them_again(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    env = _batch_env()
    cached = env.from_collection([1, 2], Types.INT()).map(_Logged(log), Types.INT()).cache()
    assert sorted(cached.execute_and_collect()) == [10, 20]
    cached.invalidate()
    assert sorted(cached.execute_and_collect()) == [10, 20]
    assert sorted(log.read_text().split()) == ["1", "1", "2", "2"]


def test_a_plan_runs_nothing(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    env = _batch_env()
    cached = env.from_collection([1], Types.INT()).map(_Logged(log), Types.INT()).cache()
    cached.print()
    assert "Map" in env.get_execution_plan()
    assert not log.exists()


def test_cache_needs_batch_mode() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(UsageError, match=r"cache\(\) needs RuntimeExecutionMode.BATCH"):
        env.from_collection([1]).cache()

"""Checkpoints and savepoints at ``file://`` URIs land in the directory the URI names."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.checkpoint.storage import load_savepoint
from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource


def _env(
    checkpoint_uri: str, events: int, out: list[int], source_uid: str = "numbers"
) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_string("execution.checkpointing.dir", checkpoint_uri)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.enable_checkpointing(100)
    source = DataGeneratorSource(lambda i: i, events, rate_limit=2000.0, type_info=Types.LONG())
    env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid(source_uid).key_by(
        lambda n: n % 3, key_type=Types.LONG()
    ).reduce(lambda a, b: a + b).uid("sum").add_sink(out.append)
    return env


def test_checkpoints_and_savepoints_go_where_the_file_uris_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a URI taken as a relative path would land here as ./file:
    out: list[int] = []
    client = _env((tmp_path / "chk").as_uri(), 200_000, out).execute_async("uris")
    taken = client.stop_with_savepoint(False, (tmp_path / "savepoints").as_uri()).result()
    client.get_job_execution_result().result(60)
    assert Path(taken).parent == tmp_path / "savepoints"
    assert load_savepoint(taken).kind == "savepoint"
    assert (tmp_path / "chk").is_dir()
    assert not (tmp_path / "file:").exists()
    resumed: list[int] = []
    env = _env((tmp_path / "chk").as_uri(), 3, resumed, source_uid="fresh numbers")
    env.execute("resumed", savepoint_path=Path(taken).as_uri(), allow_non_restored_state=True)
    assert len(resumed) == 3  # restored from the savepoint the URI names (a wrong path fails)

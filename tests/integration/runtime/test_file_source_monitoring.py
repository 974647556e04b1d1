"""FileSource.monitor_continuously: files that appear later are read too; the source never ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.common import Duration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.file_system import FileSource, StreamFormat
from weir.errors import UsageError


class _DropNextFile:
    """Passes lines on; after the line ``trigger`` it writes ``(path, text)`` (hidden first,
    then renamed, so the source sees the file whole) - the job makes the file it will read."""

    def __init__(self, trigger: str, path: Path, text: str) -> None:
        self.trigger, self.path, self.text = trigger, path, text

    def __call__(self, line: str) -> str:
        if line == self.trigger:
            hidden = self.path.with_name("." + self.path.name)
            hidden.write_text(self.text)
            hidden.rename(self.path)
        return line


def test_a_file_that_appears_while_the_job_runs_is_read(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "a.txt").write_text("a1\na2\n")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(inbox))
        .monitor_continuously(Duration.of_millis(20))
        .build()
    )
    assert not source.is_bounded()
    lines = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "inbox")
        .map(_DropNextFile("a2", inbox / "b.txt", "b1\nb2\n"), Types.STRING())
        .execute_and_collect(limit=4)
    )
    assert lines == ["a1", "a2", "b1", "b2"]


def test_an_empty_directory_is_watched_until_a_file_comes(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    seed = tmp_path / "seed.txt"
    seed.write_text("go\n")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    watched = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(inbox))
        .monitor_continuously(Duration.of_millis(20))
        .build()
    )
    starter = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(seed)).build()
    env.from_source(starter, WatermarkStrategy.no_watermarks(), "seed").map(
        _DropNextFile("go", inbox / "late.txt", "late\n"), Types.STRING()
    ).print()
    out = env.from_source(watched, WatermarkStrategy.no_watermarks(), "inbox").execute_and_collect(limit=1)
    assert out == ["late"]


def test_static_file_set_is_bounded_and_the_interval_must_be_positive(tmp_path: Path) -> None:
    builder = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path))
    assert builder.monitor_continuously(Duration.of_seconds(1)).process_static_file_set().build().is_bounded()
    with pytest.raises(UsageError, match="discovery interval must be positive"):
        builder.monitor_continuously(Duration.of_millis(0))

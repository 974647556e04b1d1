"""HybridSource: its sources one after the other, as one source that checkpoints where it is."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.file_system import FileSource, StreamFormat
from weir.datastream.connectors.hybrid_source import HybridSource
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.errors import UsageError


def _lines(path: Path, text: str) -> FileSource:
    path.write_text(text)
    return FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(path)).build()


def test_the_sources_are_read_one_after_the_other(tmp_path: Path) -> None:
    history = _lines(tmp_path / "history.txt", "h1\nh2\nh3\n")
    recent = _lines(tmp_path / "recent.txt", "r1\n")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    source = HybridSource.builder(history).add_source(recent).build()
    out = env.from_source(source, WatermarkStrategy.no_watermarks(), "hybrid").execute_and_collect()
    assert list(out) == ["h1", "h2", "h3", "r1"]
    assert source.is_bounded() and source.produced_type() == Types.STRING()


def test_a_restored_reader_continues_in_the_source_it_was_in(tmp_path: Path) -> None:
    first = NumberSequenceSource(1, 3)
    second = NumberSequenceSource(10, 12)
    source = HybridSource.builder(first).add_source(second).build()

    async def read(reader: object, batches: int) -> list[int]:
        out: list[int] = []
        for _ in range(batches):
            batch = await reader.next_batch()  # type: ignore[attr-defined]
            if batch is None:
                break
            out.extend(int(v) for v in batch.as_list())
        return out

    reader = source.create_reader(0, 1)
    reader.batch_size = 2  # as the task sets it; each source's reader takes it
    seen = trio.run(read, reader, 3)  # [1, 2], [3], then the second source's [10, 11]
    assert seen == [1, 2, 3, 10, 11]
    position = reader.position()
    assert position["source"] == 1
    again = source.create_reader(0, 1)
    again.restore(position)
    assert trio.run(read, again, 10) == [12]


def test_sources_of_two_types_or_an_unbounded_one_before_the_last_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="needs sources of one type"):
        HybridSource.builder(NumberSequenceSource(1, 2)).add_source(_lines(tmp_path / "x.txt", "x\n")).build()
    endless = DataGeneratorSource(lambda i: i, None, type_info=Types.LONG())
    with pytest.raises(UsageError, match="only the last source may be unbounded"):
        HybridSource.builder(endless).add_source(NumberSequenceSource(1, 2))
    with pytest.raises(UsageError, match="takes sources"):
        HybridSource.builder(NumberSequenceSource(1, 2)).add_source("file.txt")  # type: ignore[arg-type]

"""WindowWordCount, Flink's worked example of the four graph levels.

The flat_map runs at parallelism 4 in slot sharing group ``flatMap_sg``; the count
window and its sink run at parallelism 3 in ``sum_sg``. The source cannot chain with the
flat_map (different group and parallelism), the window cannot chain with the flat_map
(hash partitioning), and the sink chains into the window: three JobVertices.

    weir plan examples/window_word_count.py --level job
"""

from __future__ import annotations

from pathlib import Path

from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.file_system import FileSource, StreamFormat

TEXT = Path(__file__).parent / "data" / "words.txt"
WORD_COUNT = Types.TUPLE([Types.STRING(), Types.LONG()])


def split(line: str) -> list[tuple[str, int]]:
    return [(word, 1) for word in line.lower().split() if word]


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    lines = env.from_source(
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(TEXT)).build(),
        WatermarkStrategy.no_watermarks(),
        "file-source",
    )
    counts = (
        lines.flat_map(split, output_type=WORD_COUNT)
        .slot_sharing_group("flatMap_sg")
        .set_parallelism(4)
        .key_by(lambda pair: pair[0], key_type=Types.STRING())
        .count_window(10, 5)
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .slot_sharing_group("sum_sg")
        .set_parallelism(3)
    )
    counts.print().set_parallelism(3)
    env.execute("WindowWordCount")


if __name__ == "__main__":
    main()

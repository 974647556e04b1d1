"""Jobs from the seeds, built with the public API, shared by the graph tests."""

from __future__ import annotations

from weir.common import Time, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.file_system import FileSource, StreamFormat
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.window import TumblingEventTimeWindows


def my_job(parallelism: int = 2) -> StreamExecutionEnvironment:
    """Flink's MyJob example: source+map at ``parallelism``, key_by, 10 s tumbling window, sink at 1."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    (
        env.from_source(
            NumberSequenceSource(1, 1000), WatermarkStrategy.for_monotonous_timestamps(), "source"
        )
        .map(lambda n: (n % 10, n), output_type=Types.TUPLE([Types.LONG(), Types.LONG()]))
        .key_by(lambda t: t[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .print()
        .set_parallelism(1)
    )
    return env


def window_word_count(source_parallelism: int = 1) -> StreamExecutionEnvironment:
    """Flink's WindowWordCount example: flatMap at 4 in flatMap_sg; count-window sum and sink at 3 in sum_sg."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(source_parallelism)
    text = env.from_source(
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), "words.txt").build(),
        WatermarkStrategy.no_watermarks(),
        "file-source",
    )
    (
        text.flat_map(lambda line: [(w, 1) for w in line.split()])
        .slot_sharing_group("flatMap_sg")
        .set_parallelism(4)
        .key_by(lambda pair: pair[0])
        .count_window(10, 5)
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .slot_sharing_group("sum_sg")
        .set_parallelism(3)
        .print()
        .set_parallelism(3)
    )
    return env

"""The count-and-sum window query written with weir.columnar: columns from the source to the sink.

Event i has key (i * 2654435761) mod 1000, value i mod 100 and event time i ms, out of order by up
to 50 ms; per key and 1 s tumbling event-time window the job emits (key, window_start, count, sum).
`weir plan examples/columnar_query.py` shows which operators run vectorized; `weir bench query`
times the same query against per-record functions and hand-written loops.
"""

from weir import columnar as col
from weir.common import Duration, Time, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.window import TumblingEventTimeWindows

EVENTS = 100_000
KEYS = 1_000


def events(i):  # one batch of indexes -> the (key, value, event time) columns
    return (i * 2654435761) % KEYS, i % 100, i - (i * 7919) % 51


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
numbers = env.from_source(NumberSequenceSource(0, EVENTS - 1), WatermarkStrategy.no_watermarks(), "numbers")
rows = numbers.map(col.batch_map(events), output_type=Types.TUPLE([Types.LONG(), Types.LONG(), Types.LONG()]))
(
    rows.assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(50)).with_timestamp_assigner(
            col.timestamp_field(2)
        )
    )
    .key_by(col.field(0))
    .window(TumblingEventTimeWindows.of(Time.seconds(1)))
    .aggregate(col.Aggregates(col.key(), col.window_start(), col.count(), col.sum(1)))
    .name("count and sum")
    .print()
)

if __name__ == "__main__":
    env.execute("columnar query")

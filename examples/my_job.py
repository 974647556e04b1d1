"""MyJob, the reference job of Flink's internals walk-through.

source -> map -> key_by -> tumbling event-time window of 10 s -> sink

Source and map run at parallelism 2 and chain into one task; key_by shuffles into the
window at parallelism 2; the sink runs at parallelism 1. That gives 4 operators in 3
JobVertices. Events are generated deterministically with up to 2 s of disorder.

    weir plan examples/my_job.py --level job
"""

from __future__ import annotations

from collections import Counter

from weir.common import Duration, Time, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.window import TumblingEventTimeWindows

EVENTS = 50_000
KEYS = 50
EVENT_SPACING_MS = 10
MAX_DISORDER_MS = 2_000

EVENT_TYPE = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])
COUNT_TYPE = Types.TUPLE([Types.STRING(), Types.LONG()])


def make_event(index: int) -> tuple[str, int, int]:
    """Event ``index``: (sensor key, value, event time in ms), at most MAX_DISORDER_MS out of order."""
    key = f"sensor-{(index * 7919) % KEYS:02d}"
    jitter = (index * 104_729) % MAX_DISORDER_MS
    return key, index % 10, index * EVENT_SPACING_MS + jitter - MAX_DISORDER_MS // 2


def build(env: StreamExecutionEnvironment, sink: object = None) -> None:
    env.set_parallelism(2)
    env.enable_checkpointing(100)  # aligned checkpoints every 100 ms while the job runs
    watermarks = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(MAX_DISORDER_MS)
    ).with_timestamp_assigner(lambda event, _: event[2])
    events = env.from_source(
        DataGeneratorSource(make_event, EVENTS, type_info=EVENT_TYPE), watermarks, "Events"
    )
    counts = (
        events.map(lambda e: (e[0], e[1]), output_type=COUNT_TYPE)
        .key_by(lambda e: e[0], key_type=Types.STRING())
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("window")
    )
    out = counts.print() if sink is None else counts.add_sink(sink)
    out.set_parallelism(1)


def oracle() -> Counter[tuple[str, int]]:
    """The answer computed by a plain Python loop: value sums per (key, 10 s window)."""
    sums: Counter[tuple[str, int]] = Counter()
    for i in range(EVENTS):
        key, value, ts = make_event(i)
        sums[(key, ts - ts % 10_000)] += value
    return sums


def main() -> None:
    results: list[tuple[str, int]] = []
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, results.append)
    outcome = env.execute("MyJob")
    expected = oracle()
    got = Counter(results)
    want = Counter((key, total) for (key, _), total in expected.items())
    verdict = "matches" if got == want else "DOES NOT match"
    checkpoints = outcome.get_accumulator_result("checkpoints_completed")
    print(
        f"MyJob: {len(results)} window results from {EVENTS} events; {verdict} the Python oracle; "
        f"{checkpoints} checkpoints completed ({outcome})"
    )
    if got != want:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

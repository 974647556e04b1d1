"""The per-record window job of issue 26 next to a plain-Python dict loop, in one run.

Event i: key = (i * 2654435761) % K, value = i % 100, ts = i - ((i * 7919) % 51); source →
assign_timestamps_and_watermarks (bounded out-of-orderness 50 ms, ``lambda e, ts: e[2]``) →
key_by(e[0]) → 1 s tumbling event-time window → aggregate(count and sum, with a
ProcessWindowFunction emitting (key, window_start, count, sum)) → discarding sink. No
weir.columnar: this is what a PyFlink user writes.

    python tests/bench/per_record_window.py --keys 10000 --parallelism 1 [--profile]

Rates are per CPU second of this process (``time.process_time``): the machine is shared,
and wall-clock rates swing with other work more than CPU time does. Not collected by
pytest (no ``test_`` prefix); a script to read figures and profiles from.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from typing import Any

from weir.common import Configuration, Duration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.builtin import DiscardingSink
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.functions import AggregateFunction, ProcessWindowFunction
from weir.datastream.window import TumblingEventTimeWindows

MULT = 2654435761


class CountSum(AggregateFunction):
    def create_accumulator(self) -> Any:
        return (0, 0)

    def add(self, value: Any, accumulator: Any) -> Any:
        return (accumulator[0] + 1, accumulator[1] + value[1])

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return (a[0] + b[0], a[1] + b[1])


class Emit(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        count, total = next(iter(elements))
        yield (key, context.window().start, count, total)


def build(
    n: int, k: int, parallelism: int, source: str, typed: bool, extra_maps: int = 0
) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", 1)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    event_type = Types.TUPLE([Types.LONG(), Types.LONG(), Types.LONG()]) if typed else None
    out_type = Types.TUPLE([Types.LONG(), Types.LONG(), Types.LONG(), Types.LONG()]) if typed else None

    def event(i: int) -> tuple[int, int, int]:
        return ((i * MULT) % k, i % 100, i - ((i * 7919) % 51))

    if source == "datagen":
        stream = env.from_source(
            DataGeneratorSource(event, n, type_info=event_type), WatermarkStrategy.no_watermarks(), "events"
        )
    else:
        stream = env.from_source(
            NumberSequenceSource(0, n - 1), WatermarkStrategy.no_watermarks(), "numbers"
        ).map(event, output_type=event_type)
    for _ in range(extra_maps):  # chained stateless operators before the timestamps
        stream = stream.map(lambda e: e, output_type=event_type)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(50)).with_timestamp_assigner(
        lambda e, ts: e[2]
    )
    (
        stream.assign_timestamps_and_watermarks(strategy)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Duration.of_seconds(1)))
        .aggregate(CountSum(), window_function=Emit(), output_type=out_type)
        .sink_to(DiscardingSink())
    )
    return env


def flat_loop(n: int, k: int) -> float:
    """The same answer as plain Python (events/s): one dict ``(key, window_start) -> [count,
    sum]`` over the whole run (the brief's reference loop)."""
    started = time.process_time()
    panes: dict[Any, list[int]] = {}
    for i in range(n):
        key, value, ts = (i * MULT) % k, i % 100, i - ((i * 7919) % 51)
        pane = panes.get((key, ts - ts % 1000))
        if pane is None:
            panes[(key, ts - ts % 1000)] = [1, value]
        else:
            pane[0] += 1
            pane[1] += value
    rows = [(key, start, c, s) for (key, start), (c, s) in panes.items()]
    assert rows
    return n / (time.process_time() - started)


def streaming_loop(n: int, k: int) -> float:
    """The same answer as plain Python (events/s): one dict ``key -> [count, sum]`` per open
    window; a window's rows are emitted once the bounded-out-of-orderness watermark passes it
    (memory bounded, as the job; faster than ``flat_loop`` at many keys)."""
    started = time.process_time()
    windows: dict[int, dict[int, list[int]]] = {}
    rows: list[tuple[int, int, int, int]] = []
    top = -(1 << 63)
    for i in range(n):
        key, value, ts = (i * MULT) % k, i % 100, i - ((i * 7919) % 51)
        start = ts - ts % 1000
        panes = windows.get(start)
        if panes is None:
            panes = windows[start] = {}
        pane = panes.get(key)
        if pane is None:
            panes[key] = [1, value]
        else:
            pane[0] += 1
            pane[1] += value
        if ts > top:
            top = ts
            watermark = ts - 51
            for done in [w for w in windows if w + 999 <= watermark]:
                rows.extend((key, done, c, s) for key, (c, s) in windows.pop(done).items())
    for done in sorted(windows):
        rows.extend((key, done, c, s) for key, (c, s) in windows.pop(done).items())
    assert rows
    return n / (time.process_time() - started)


def run_job(n: int, k: int, parallelism: int, source: str, typed: bool, extra_maps: int = 0) -> float:
    env = build(n, k, parallelism, source, typed, extra_maps)
    started = time.process_time()
    env.execute("per-record window")
    return n / (time.process_time() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[10_000, 100])
    parser.add_argument("--parallelism", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--source", choices=["datagen", "sequence"], default="datagen")
    parser.add_argument("--untyped", action="store_true")
    parser.add_argument(
        "--extra-maps", type=int, default=0, help="identity maps chained before the timestamps"
    )
    parser.add_argument("--profile", action="store_true", help="profile the job (slower), print the top 25")
    args = parser.parse_args()
    run_job(20_000, 100, 1, args.source, not args.untyped)  # warm up: imports, numba caches
    for k in args.keys:
        for p in args.parallelism:
            if args.profile:
                profiler = cProfile.Profile()
                profiler.enable()
            rate = run_job(args.events, k, p, args.source, not args.untyped, args.extra_maps)
            if args.profile:
                profiler.disable()
            flat, streaming = flat_loop(args.events, k), streaming_loop(args.events, k)
            print(
                f"K={k:>6} p={p} {args.source} {'untyped' if args.untyped else 'typed'} "
                f"+{args.extra_maps} maps: "
                f"job {rate / 1e6:.3f} M events/s; flat dict loop {flat / 1e6:.3f} M/s "
                f"(job {rate / flat:.0%}); streaming dict loop {streaming / 1e6:.3f} M/s "
                f"(job {rate / streaming:.0%})",
                flush=True,
            )
            if args.profile:
                pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()

"""Event-time windows and timers end to end, against plain Python oracles."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import pytest

from weir.common import Configuration, Duration, Time, Types, WatermarkStrategy
from weir.datastream import KeyedProcessFunction, OutputTag, StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)

EVENT = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])
EVENTS = 6_000
MAX_DISORDER = 2_000


def make_event(i: int) -> tuple[str, int, int]:
    rng = random.Random(i)
    return (
        f"k{rng.randrange(8)}",
        rng.randrange(100),
        i * 10 + rng.randrange(MAX_DISORDER) - MAX_DISORDER // 2,
    )


def env_with(parallelism: int, taskmanagers: int = 2, backend: str = "hashmap") -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", taskmanagers)
    conf.set_string("state.backend.type", backend)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    return env


def events(env: StreamExecutionEnvironment, bound_ms: int = MAX_DISORDER):  # type: ignore[no-untyped-def]
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(bound_ms)
    ).with_timestamp_assigner(lambda e, _: e[2])
    return env.from_source(DataGeneratorSource(make_event, EVENTS, type_info=EVENT), strategy, "events")


def window_oracle(assign) -> Counter:  # type: ignore[no-untyped-def]
    sums: dict[tuple[str, int], int] = defaultdict(int)
    for i in range(EVENTS):
        key, value, ts = make_event(i)
        for start in assign(ts):
            sums[(key, start)] += value
    return Counter((k, v) for (k, _), v in sums.items())


@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_my_job_tumbling_window_equals_the_oracle(parallelism: int, backend: str) -> None:
    env = env_with(parallelism, backend=backend)
    results = (
        events(env)
        .map(lambda e: (e[0], e[1]), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .execute_and_collect(limit=100_000)
    )
    assert Counter(results) == window_oracle(lambda ts: [ts - ts % 10_000])


def test_sliding_windows_equal_the_oracle() -> None:
    env = env_with(2)
    results = (
        events(env)
        .key_by(lambda e: e[0])
        .window(SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5)))
        .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])))
        .map(lambda e: (e[0], e[1]))
        .execute_and_collect(limit=100_000)
    )
    assert Counter(results) == window_oracle(lambda ts: [ts - ts % 5_000, ts - ts % 5_000 - 5_000])


@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
def test_session_windows_equal_the_oracle(backend: str) -> None:
    gap = 25  # events of one key are ~80 ms apart on average: many sessions, some merges
    env = env_with(2, backend=backend)
    results = (
        events(env)
        .key_by(lambda e: e[0])
        .window(EventTimeSessionWindows.with_gap(Time.milliseconds(gap)))
        .reduce(lambda a, b: (a[0], a[1] + b[1], a[2]))
        .map(lambda e: (e[0], e[1]))
        .execute_and_collect(limit=100_000)
    )
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for i in range(EVENTS):
        key, value, ts = make_event(i)
        by_key[key].append((ts, value))
    expected: Counter = Counter()
    for key, items in by_key.items():
        items.sort()
        total, end = 0, None
        for ts, value in items:
            if end is not None and ts > end:  # windows that touch merge, as TimeWindow.intersects says
                expected[(key, total)] += 1
                total = 0
            total += value
            end = ts + gap if end is None or ts > end else max(end, ts + gap)
        expected[(key, total)] += 1
    assert Counter(results) == expected


def test_late_data_goes_to_the_side_output() -> None:
    env = env_with(1, 1)
    env.get_config().set_auto_watermark_interval(0)  # a watermark after every source batch
    late = OutputTag("late", EVENT)
    # a bound far below the disorder: many records arrive behind the watermark
    windowed = (
        events(env, bound_ms=0)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .allowed_lateness(200)
        .side_output_late_data(late)
        .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])))
    )
    late_records = windowed.get_side_output(late).execute_and_collect(limit=100_000)
    assert late_records  # some records were late beyond the allowed lateness
    seen = set(late_records)
    assert all(r in {make_event(i) for i in range(EVENTS)} for r in seen)


def ordered_event(i: int) -> tuple[str, int, int]:
    rng = random.Random(i)
    return f"k{rng.randrange(8)}", 1, i * 37 + rng.randrange(30)


class Sessionize(KeyedProcessFunction):
    """Counts events per key until 300 ms pass without one (event time), then emits the count."""

    def open(self, runtime_context):  # type: ignore[no-untyped-def]
        self.counts: dict = {}
        self.deadline: dict = {}

    def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
        key = ctx.get_current_key()
        if key in self.deadline and ctx.timestamp() >= self.deadline[key]:
            yield (key, self.counts.pop(key))  # the timer has not fired yet, but the session is over
            ctx.timer_service().delete_event_time_timer(self.deadline.pop(key))
        self.counts[key] = self.counts.get(key, 0) + 1
        old = self.deadline.get(key)
        if old is not None:
            ctx.timer_service().delete_event_time_timer(old)
        self.deadline[key] = ctx.timestamp() + 300
        ctx.timer_service().register_event_time_timer(self.deadline[key])

    def on_timer(self, timestamp, ctx):  # type: ignore[no-untyped-def]
        key = ctx.get_current_key()
        self.fired = getattr(self, "fired", 0) + 1
        if self.deadline.get(key) == timestamp:
            yield (key, self.counts.pop(key))
            del self.deadline[key]


def test_keyed_process_function_with_event_time_timers_matches_its_oracle() -> None:
    env = env_with(2)
    env.get_config().set_auto_watermark_interval(0)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[2])
    source = env.from_source(DataGeneratorSource(ordered_event, EVENTS, type_info=EVENT), strategy, "ordered")
    results = (
        source.set_parallelism(1)
        .key_by(lambda e: e[0])
        .process(Sessionize())
        .execute_and_collect(limit=100_000)
    )
    by_key: dict[str, list[int]] = defaultdict(list)
    for i in range(EVENTS):
        key, _, ts = ordered_event(i)
        by_key[key].append(ts)
    expected: Counter = Counter()
    for key, stamps in by_key.items():
        count = 0
        for a, b in zip(stamps, [*stamps[1:], None]):
            count += 1
            if b is None or b - a >= 300:
                expected[(key, count)] += 1
                count = 0
    assert len(expected) > 8  # the data really has several sessions per key
    assert Counter(results) == expected


def test_window_built_ins_equal_the_reduce_path() -> None:
    def run(apply):  # type: ignore[no-untyped-def]
        env = env_with(2)
        # one source subtask: each window subtask then reads one channel, so records arrive
        # in one order in every run, and sum/max/min_by, which keep fields of the first
        # record of a tie, are comparable run to run (two source channels interleave by timing)
        source = events(env).set_parallelism(1)
        windowed = source.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(10)))
        return Counter(apply(windowed).execute_and_collect(limit=100_000))

    assert run(lambda w: w.sum(1)) == run(lambda w: w.reduce(lambda a, b: (a[0], a[1] + b[1], a[2])))
    assert run(lambda w: w.max(1)) == run(lambda w: w.reduce(lambda a, b: (a[0], max(a[1], b[1]), a[2])))
    assert run(lambda w: w.min_by(1)) == run(lambda w: w.reduce(lambda a, b: b if b[1] < a[1] else a))
    sums = {(k, v) for (k, v, _), _n in run(lambda w: w.sum(1)).items()}
    counts = run(lambda w: w.count())
    means = run(lambda w: w.mean(1))
    assert sum(n for (_, n), m in counts.items() for _ in range(m)) == EVENTS
    assert {k for k, _ in means} == {k for k, _ in sums}


class SessionizeWithState(KeyedProcessFunction):
    """Sessionize, with its per-key count and deadline in keyed ValueState."""

    def open(self, runtime_context):  # type: ignore[no-untyped-def]
        from weir.datastream.state import ValueStateDescriptor

        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.deadline = runtime_context.get_state(ValueStateDescriptor("deadline", Types.LONG()))

    def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
        deadline = self.deadline.value()
        if deadline is not None and ctx.timestamp() >= deadline:
            yield (ctx.get_current_key(), self.count.value())
            ctx.timer_service().delete_event_time_timer(deadline)
            self.count.clear()
            deadline = None
        self.count.update((self.count.value() or 0) + 1)
        if deadline is not None:
            ctx.timer_service().delete_event_time_timer(deadline)
        self.deadline.update(ctx.timestamp() + 300)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 300)

    def on_timer(self, timestamp, ctx):  # type: ignore[no-untyped-def]
        if self.deadline.value() == timestamp:
            yield (ctx.get_current_key(), self.count.value())
            self.count.clear()
            self.deadline.clear()


@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
def test_keyed_state_and_timers_on_both_backends(backend: str) -> None:
    def run(function):  # type: ignore[no-untyped-def]
        env = env_with(2, backend=backend)
        env.get_config().set_auto_watermark_interval(0)
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[2])
        source = env.from_source(
            DataGeneratorSource(ordered_event, EVENTS, type_info=EVENT), strategy, "ordered"
        )
        return Counter(
            source.set_parallelism(1)
            .key_by(lambda e: e[0])
            .process(function)
            .execute_and_collect(limit=100_000)
        )

    assert run(SessionizeWithState()) == run(Sessionize())


def test_state_outside_a_keyed_stream_is_a_clear_error() -> None:
    from weir.datastream import MapFunction
    from weir.datastream.state import ValueStateDescriptor
    from weir.errors import JobExecutionError

    class Stateful(MapFunction):
        def open(self, runtime_context):  # type: ignore[no-untyped-def]
            self.state = runtime_context.get_state(ValueStateDescriptor("s", Types.LONG()))

        def map(self, value):  # type: ignore[no-untyped-def]
            return value

    env = env_with(1, 1)
    env.from_collection([1, 2]).map(Stateful()).print()
    with pytest.raises(JobExecutionError, match="only available in functions applied on a KeyedStream"):
        env.execute()

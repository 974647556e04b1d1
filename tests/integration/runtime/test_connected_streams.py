"""Two-input operators on the cluster: connect, co-map, keyed co-process with state and timers,
the watermark of two inputs, and exactly-once recovery of a keyed co-process job."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from weir.common import Time, Types, WatermarkStrategy
from weir.datastream import CoMapFunction, KeyedCoProcessFunction, StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.state import ValueStateDescriptor
from weir.datastream.window import TumblingEventTimeWindows
from weir.testing import TestStream, TimestampedValue, assert_exactly_once, assert_output, collect

PAIR = Types.TUPLE([Types.LONG(), Types.LONG()])
WAITING = ValueStateDescriptor("waiting", PAIR)


class Tag(CoMapFunction):
    def map1(self, value: int) -> Any:
        return ("even", value)

    def map2(self, value: int) -> Any:
        return ("odd", value)


class MatchPairs(KeyedCoProcessFunction):
    """Joins (id, a) of input 1 with (id, b) of input 2 into (id, a, b); whichever comes first
    waits in keyed state; an event-time timer reports what waited in vain as (id, a, -1) or
    (id, -1, b)."""

    def open(self, runtime_context: Any) -> None:
        self.waiting = runtime_context.get_state(WAITING)

    def _meet(self, value: tuple[int, int], ctx: Any, first: bool) -> Any:
        other = self.waiting.value()
        if other is None:
            self.waiting.update((value[1], 1 if first else 2))
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1_000)
            return
        self.waiting.clear()
        a, b = (value[1], other[0]) if first else (other[0], value[1])
        yield (value[0], a, b)

    def process_element1(self, value: tuple[int, int], ctx: Any) -> Any:
        yield from self._meet(value, ctx, True)

    def process_element2(self, value: tuple[int, int], ctx: Any) -> Any:
        yield from self._meet(value, ctx, False)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        waiting = self.waiting.value()
        if waiting is not None:
            self.waiting.clear()
            yield (
                (ctx.get_current_key(), waiting[0], -1)
                if waiting[1] == 1
                else (ctx.get_current_key(), -1, waiting[0])
            )


def expected_matches(left: list[int], right: list[int]) -> list[tuple[int, int, int]]:
    """Ids in both inputs meet; the rest report alone (a and b are the id times 10 and 100)."""
    both = set(left) & set(right)
    out = [(i, i * 10, i * 100) for i in sorted(both)]
    out += [(i, i * 10, -1) for i in left if i not in both]
    out += [(i, -1, i * 100) for i in right if i not in both]
    return out


def make_env(parallelism: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    return env


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_co_map_sees_every_record_of_both_inputs_once(parallelism: int) -> None:
    env = make_env(parallelism)
    evens = env.from_source(NumberSequenceSource(0, 2_000), WatermarkStrategy.no_watermarks(), "n").filter(
        lambda n: n % 2 == 0
    )
    odds = env.from_collection(list(range(1, 2_001, 2)))
    out = evens.connect(odds).map(Tag()).execute_and_collect(limit=None)
    with out:
        got = list(out)
    expected = [("even", n) for n in range(0, 2_001, 2)] + [("odd", n) for n in range(1, 2_001, 2)]
    assert Counter(got) == Counter(expected)


def pairs_job(env: StreamExecutionEnvironment, left: list[int], right: list[int]) -> Any:
    stamps = WatermarkStrategy.for_bounded_out_of_orderness(Time.milliseconds(50)).with_timestamp_assigner(
        lambda e, _: e[0]
    )
    ones = env.from_collection([(i, i * 10) for i in left], type_info=PAIR).assign_timestamps_and_watermarks(
        stamps
    )
    twos = env.from_collection(
        [(i, i * 100) for i in right], type_info=PAIR
    ).assign_timestamps_and_watermarks(stamps)
    return ones.connect(twos).key_by(lambda e: e[0], lambda e: e[0]).process(MatchPairs())


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_keyed_co_process_joins_by_key_and_times_out_the_rest(parallelism: int) -> None:
    left = list(range(0, 3_000, 2))  # ids 0, 2, 4, ...
    right = list(range(0, 3_000, 3))  # ids 0, 3, 6, ...
    out = pairs_job(make_env(parallelism), left, right).execute_and_collect(limit=None)
    with out:
        got = list(out)
    assert_output(got, expected_matches(left, right))


@pytest.mark.weir(parallelism=[1, 2])
def test_a_slow_input_holds_the_windows_after_a_co_map_back(weir_env, weir_clock) -> None:
    """Input 1 reaches the end of event time at once; input 2 starts a (virtual) minute later.
    If input 1's watermark went through alone, every record of input 2 would be late."""
    fast = (
        TestStream(type_info=Types.LONG())
        .add_elements(*(TimestampedValue(i, i * 100) for i in range(0, 100, 2)))
        .advance_watermark_to_infinity()
    )
    slow = (
        TestStream(type_info=Types.LONG())
        .advance_processing_time(60_000)
        .add_elements(*(TimestampedValue(i, i * 100) for i in range(1, 100, 2)))
        .advance_watermark_to_infinity()
    )
    fast_stream = weir_env.from_source(fast, WatermarkStrategy.no_watermarks(), "fast")
    slow_stream = weir_env.from_source(slow, WatermarkStrategy.no_watermarks(), "slow")
    sums = collect(
        fast_stream.connect(slow_stream)
        .map(Tag(), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
        .key_by(lambda t: "all")
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .reduce(lambda a, b: ("all", a[1] + b[1]))
    )
    weir_env.execute()
    assert_output(sums, [("all", sum(range(s, s + 10))) for s in range(0, 100, 10)])
    assert weir_clock.virtual_seconds >= 60


REGISTERED_AT = ValueStateDescriptor("registered-at", Types.LONG())


class FireTime(KeyedCoProcessFunction):
    """Registers a timer per record of input 1; reports how much processing time passed
    between registering and firing."""

    def open(self, runtime_context: Any) -> None:
        self.registered_at = runtime_context.get_state(REGISTERED_AT)

    def process_element1(self, value: int, ctx: Any) -> Any:
        self.registered_at.update(ctx.timer_service().current_processing_time())
        ctx.timer_service().register_event_time_timer(ctx.timestamp())

    def process_element2(self, value: int, ctx: Any) -> Any:
        return None

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield (timestamp, ctx.timer_service().current_processing_time() - self.registered_at.value())


@pytest.mark.weir(parallelism=1)
def test_an_idle_input_does_not_hold_timers_back(weir_env, weir_clock) -> None:
    def run(idle: bool) -> list[tuple[int, int]]:
        active = (
            TestStream(type_info=Types.LONG())
            .add_elements(TimestampedValue(1, 1_000))
            .advance_watermark_to(5_000)
            .advance_processing_time(120_000)
            .end()
        )
        quiet = TestStream(type_info=Types.LONG())
        if idle:
            quiet = quiet.mark_idle()
        quiet = quiet.advance_processing_time(60_000).end()
        fired = collect(
            weir_env.from_source(active, WatermarkStrategy.no_watermarks(), "active")
            .connect(weir_env.from_source(quiet, WatermarkStrategy.no_watermarks(), "quiet"))
            .key_by(lambda v: v, lambda v: v)
            .process(FireTime())
        )
        weir_env.execute()
        return list(fired.records)

    ((timestamp, after_ms),) = run(idle=True)
    assert timestamp == 1_000 and after_ms < 60_000  # fired while the other input was idle
    ((timestamp, after_ms),) = run(idle=False)
    assert timestamp == 1_000 and after_ms >= 60_000  # held back until the quiet input ended


@pytest.mark.weir(parallelism=2)
def test_a_keyed_co_process_job_is_exactly_once_under_failures(weir_env_factory, weir_clock) -> None:
    events = 600

    def build(env: Any) -> Any:
        stamps = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[0] * 10)
        ones = env.from_source(
            DataGeneratorSource(lambda i: (i, i * 10), events, rate_limit=300.0, type_info=PAIR),
            stamps,
            "ones",
        )
        twos = env.from_source(
            DataGeneratorSource(lambda i: (i * 2, i * 200), events // 2, rate_limit=150.0, type_info=PAIR),
            stamps,
            "twos",
        )
        joined = ones.connect(twos).key_by(lambda e: e[0], lambda e: e[0]).process(MatchPairs()).uid("match")
        return collect(joined, exactly_once=True)

    report = assert_exactly_once(
        build,
        env_factory=weir_env_factory,
        seed=5,
        failures=3,
        records_hint=200,
        checkpoint_interval_ms=250,
    )
    print(report)
    assert len(report.injected_failures) == 3
    assert_output(
        report.clean_output, expected_matches(list(range(events)), [i * 2 for i in range(events // 2)])
    )


def savepointed_pairs_job(parallelism: int, backend: str, out: list, savepoint: str | None = None) -> Any:
    from weir.common import Configuration
    from weir.graph.job_graph import generate_job_graph

    conf = Configuration()
    conf.set_string("state.backend.type", backend)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    stamps = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[0] * 10)
    ones = env.from_source(
        DataGeneratorSource(lambda i: (i, i * 10), 400, rate_limit=200.0, type_info=PAIR), stamps, "ones"
    ).uid("ones")
    twos = env.from_source(
        DataGeneratorSource(lambda i: (i * 3, i * 300), 150, rate_limit=75.0, type_info=PAIR), stamps, "twos"
    ).uid("twos")
    (
        ones.connect(twos)
        .key_by(lambda e: e[0], lambda e: e[0])
        .process(MatchPairs())
        .uid("match")
        .add_sink(out.append)
        .set_parallelism(1)
    )
    if savepoint is not None:
        env._restore_from(savepoint, False)
    return env, generate_job_graph(env.get_stream_graph("savepointed pairs"))


@pytest.mark.parametrize(("old_p", "new_p", "new_backend"), [(2, 3, "lmdb"), (2, 1, "hashmap")])
async def test_a_keyed_co_process_job_stops_with_a_savepoint_and_resumes_at_another_parallelism(
    old_p: int, new_p: int, new_backend: str, tmp_path: Any, autojump_clock: Any
) -> None:
    """Keyed state of both inputs and the pending timers move with their key groups."""
    import trio

    from weir.cluster.client import job_settings_for
    from weir.cluster.minicluster import ClusterConfig, open_minicluster

    first: list = []
    env, graph = savepointed_pairs_job(old_p, "hashmap", first)
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=4)) as cluster:
        handle = cluster.submit(graph, job_settings_for(env))
        await trio.sleep(1.0)
        path = await handle.job_master.trigger_savepoint(str(tmp_path), "canonical", "no_drain")
        result = await handle.wait()
    assert result.status.name == "FINISHED", result.failure
    expected = expected_matches(list(range(400)), [i * 3 for i in range(150)])
    assert 0 < len(first) < len(expected)  # stopped midway
    second: list = []
    env, graph = savepointed_pairs_job(new_p, new_backend, second, savepoint=path)
    async with open_minicluster(ClusterConfig(taskmanagers=2, slots_per_taskmanager=4)) as cluster:
        result = await cluster.submit(graph, job_settings_for(env)).wait()
    assert result.status.name == "FINISHED", result.failure
    assert_output(first + second, expected)

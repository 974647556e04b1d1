"""assert_exactly_once: it passes on exactly-once sinks and catches a sink that is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from weir.common import Time, Types, WatermarkStrategy
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.file_system import Encoder, FileSink
from weir.datastream.window import TumblingEventTimeWindows
from weir.testing import assert_exactly_once, collect

EVENTS = 1_000
TRIPLE = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])


def readings_and_window_sums(env: Any) -> Any:
    """Every reading passes through (stateless) and 100 ms event-time window sums per key
    (keyed state and timers); a rate-limited source spreads them over 2 s of processing time,
    so checkpoints (every 250 ms) and failures fall in the middle of the stream."""
    numbers = env.from_source(
        DataGeneratorSource(lambda i: i, EVENTS, rate_limit=1_000.0, type_info=Types.LONG()),
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda n, _: n),
        "numbers",
    )
    readings = numbers.map(lambda n: ("reading", n % 5, n), output_type=TRIPLE)
    sums = (
        readings.key_by(lambda r: r[1])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(100)))
        .reduce(lambda a, b: ("sum", a[1], a[2] + b[2]), output_type=TRIPLE)
    )
    return readings.union(sums)


@pytest.mark.weir(parallelism=2)
def test_a_sink_that_is_not_exactly_once_fails_the_check(weir_env_factory, weir_clock) -> None:
    def build(env: Any) -> list[Any]:
        written: list[Any] = []
        readings_and_window_sums(env).add_sink(written.append)  # at-least-once: replays write again
        return written

    with pytest.raises(AssertionError) as failure:
        assert_exactly_once(
            build,
            env_factory=weir_env_factory,
            seed=3,
            failures=3,
            records_hint=400,
            checkpoint_interval_ms=250,
        )
    message = str(failure.value)
    print(message[:1500])
    assert "not exactly-once" in message
    assert "duplicated" in message
    assert "injected failure 1" in message


@pytest.mark.weir(parallelism=2)
def test_the_exactly_once_collecting_sink_passes(weir_env_factory, weir_clock) -> None:
    report = assert_exactly_once(
        lambda env: collect(readings_and_window_sums(env), exactly_once=True),
        env_factory=weir_env_factory,
        seed=3,
        failures=3,
        records_hint=400,
        checkpoint_interval_ms=250,
    )
    print(report)
    assert len(report.injected_failures) == 3 and report.restarts == 3
    assert len(report.clean_output) == EVENTS + 10 * 5  # every reading, and 10 windows × 5 keys


@pytest.mark.weir(parallelism=2)
def test_the_exactly_once_file_sink_passes(weir_env_factory, weir_clock, tmp_path: Path) -> None:
    runs = iter(range(2))

    def build(env: Any) -> Path:
        directory = tmp_path / f"run-{next(runs)}"
        sink = FileSink.for_row_format(str(directory), Encoder.simple_string_encoder()).build()
        readings_and_window_sums(env).sink_to(sink)
        return directory

    report = assert_exactly_once(
        build, env_factory=weir_env_factory, seed=11, failures=3, records_hint=400, checkpoint_interval_ms=250
    )
    print(report)
    assert len(report.injected_failures) == 3
    assert len(report.clean_output) == EVENTS + 10 * 5


def test_a_check_that_injected_nothing_fails(weir_env_factory, weir_clock) -> None:
    def build(env: Any) -> Any:
        return collect(env.from_collection([1, 2, 3]).map(lambda x: x + 1), exactly_once=True)

    with pytest.raises(AssertionError, match="proved nothing"):
        assert_exactly_once(build, env_factory=weir_env_factory, spec="raise:operator=Map,after=1000")

"""``execute_and_collect`` keeps Flink's guarantees across failovers: with checkpointing every
record comes back exactly once however often the job restarts, in one process and with the
TaskManagers as processes. Real time (the iterator runs its own loop in a thread)."""

from __future__ import annotations

from collections import Counter

import pytest

from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource

EVENTS = 3_000
RATE = 3_000.0  # records/s: a second of input, several checkpoints, three failures


@pytest.mark.parametrize("processes", [False, True], ids=["one process", "taskmanager processes"])
def test_with_checkpointing_collected_records_come_back_exactly_once_across_restarts(processes: bool) -> None:
    conf = Configuration()
    conf.set_string("weir.taskmanager.processes", str(processes).lower())
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "10")
    conf.set_string("restart-strategy.fixed-delay.delay", "10 ms")
    conf.set_string(
        "weir.failure-injection.spec",
        "raise:operator=Doubled,after=300..900,attempt=0..3,times=3;crash-before-metadata:checkpoint=2",
    )
    conf.set_string("weir.failure-injection.seed", "11")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.enable_checkpointing(100)
    source = DataGeneratorSource(lambda i: i, EVENTS, rate_limit=RATE, type_info=Types.LONG())
    numbers = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
    doubled = numbers.rebalance().map(lambda n: 2 * n, output_type=Types.LONG()).name("Doubled")
    got = Counter(doubled.execute_and_collect("collect across restarts"))
    assert got == Counter(2 * i for i in range(EVENTS)), (
        f"missing {sorted(Counter(2 * i for i in range(EVENTS)) - got)[:10]}, "
        f"twice {sorted(n for n, c in got.items() if c > 1)[:10]}"
    )

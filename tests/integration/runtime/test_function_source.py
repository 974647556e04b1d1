"""``add_source(SourceFunction)``: records leave as the buffer timeout says, not when 256 of
them have piled up, and ``collect_with_timestamp`` stamps them."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from weir.common import Types
from weir.datastream import ProcessFunction, StreamExecutionEnvironment
from weir.datastream.functions import SourceFunction

DEADLINE_S = 20.0  # only reached when the record is held back (the bug); it never passes otherwise


class OneThenWait(SourceFunction):
    """Collects one record, then waits until the sink has it (or the deadline passes)."""

    def __init__(self, seen: threading.Event, outcome: list[bool]) -> None:
        self.seen = seen
        self.outcome = outcome

    def run(self, ctx: Any) -> None:
        ctx.collect(1)
        self.outcome.append(self.seen.wait(DEADLINE_S))
        ctx.collect(2)


@pytest.mark.parametrize("exchange", [False, True], ids=["chained", "exchange"])
def test_a_lone_record_reaches_the_sink_while_the_source_still_runs(exchange: bool) -> None:
    seen = threading.Event()
    outcome: list[bool] = []
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_buffer_timeout(10)
    stream = env.add_source(OneThenWait(seen, outcome), type_info=Types.LONG())
    if exchange:
        stream = stream.rebalance()
    received: list[int] = []

    def sink(value: int) -> None:
        received.append(value)
        seen.set()

    stream.add_sink(sink)
    env.execute("lone record")
    assert outcome == [True]  # the sink had record 1 before the source went on
    assert received == [1, 2]


class Stamped(SourceFunction):
    def run(self, ctx: Any) -> None:
        ctx.collect_with_timestamp("a", 1_000)
        ctx.collect("b")
        ctx.collect_with_timestamp("c", 3_000)


class WithTimestamp(ProcessFunction):
    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Any:
        yield value, ctx.timestamp()


def test_collect_with_timestamp_stamps_the_record() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    out = env.add_source(Stamped(), type_info=Types.STRING()).process(WithTimestamp()).execute_and_collect()
    with out:
        assert sorted(out, key=lambda r: r[0]) == [("a", 1_000), ("b", None), ("c", 3_000)]

"""A KeyedProcessFunction to test with a harness: Flink's fraud-detection walkthrough in weir.

An account is suspicious when a small transaction (under 1.00) is followed by a large one
(over 500.00) within one minute of processing time: the small one sets a flag in keyed
state and a processing-time timer that clears it a minute later.
"""

from __future__ import annotations

from typing import Any

from weir.common import Types
from weir.datastream import KeyedProcessFunction
from weir.datastream.state import ValueStateDescriptor

SMALL_AMOUNT = 1.00
LARGE_AMOUNT = 500.00
ONE_MINUTE_MS = 60_000

FLAG = ValueStateDescriptor("flag", Types.BOOLEAN())
TIMER = ValueStateDescriptor("timer-state", Types.LONG())


class FraudDetector(KeyedProcessFunction):
    """Input: (account_id, amount). Output: alerts as (account_id, "small then large")."""

    def open(self, runtime_context: Any) -> None:
        self.flag = runtime_context.get_state(FLAG)
        self.timer = runtime_context.get_state(TIMER)

    def process_element(self, value: tuple[str, float], ctx: Any) -> Any:
        account, amount = value
        if self.flag.value():
            if amount > LARGE_AMOUNT:
                yield (account, "small then large")
            self._clean_up(ctx)
        if amount < SMALL_AMOUNT:
            self.flag.update(True)
            deadline = ctx.timer_service().current_processing_time() + ONE_MINUTE_MS
            ctx.timer_service().register_processing_time_timer(deadline)
            self.timer.update(deadline)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        self.flag.clear()
        self.timer.clear()

    def _clean_up(self, ctx: Any) -> None:
        deadline = self.timer.value()
        if deadline is not None:
            ctx.timer_service().delete_processing_time_timer(deadline)
        self.flag.clear()
        self.timer.clear()

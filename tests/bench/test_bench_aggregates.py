"""The vectorized ``Aggregates`` window operator alone: records/s at K = 100 and 10,000 keys.

The team target's query: key_by field 0 -> 1 s tumbling event-time window ->
``Aggregates(key(), window_start(), count(), sum(1))``, 2 M events, one per ms, out of order
by up to 50 ms, in batches of 4,096 records as ``TupleColumns`` (as a typed stream is
decoded), a watermark after each batch (max seen - 50 ms), or after every 100th batch
(``rare``: ~400 windows open at once, as in ``weir bench query`` whose periodic watermark
fires rarely; at K = 10,000 the panes then move to the hash table). At K = 10,000 almost
every pane holds one record, so output rows ~ input records: the emit path is measured too
(the output ``TupleColumns`` are built, not turned into tuples). Prints records/s.

Run with ``pytest tests/bench/test_bench_aggregates.py -m bench -s``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from weir.codec.batch import Batch, TupleColumns
from weir.columnar import Aggregates, count, key, sum, window_start
from weir.common import Types
from weir.core.functions import wrap_key_selector
from weir.datastream.window import TumblingEventTimeWindows
from weir.keys import KeyGroupRange
from weir.operators.base import OperatorContext, Output
from weir.operators.window.aggregates import AggregatesWindowOperator, aggregates_plan
from weir.state import create_keyed_backend

pytestmark = pytest.mark.bench

EVENTS = 2_000_000
BATCH = 4_096
ROW = Types.TUPLE([Types.LONG(), Types.LONG()])


class Counting(Output):
    def __init__(self) -> None:
        self.rows = 0

    def emit(self, batch: Batch) -> None:
        self.rows += len(batch)


def batches(keys: int, every: int) -> list[tuple[Batch, int | None]]:
    rng = np.random.default_rng(7)
    times = np.arange(EVENTS, dtype=np.int64) + rng.integers(0, 50, EVENTS)
    k = rng.integers(0, keys, EVENTS)
    v = rng.integers(-100, 100, EVENTS)
    out: list[tuple[Batch, int | None]] = []
    for j, lo in enumerate(range(0, EVENTS, BATCH)):
        hi = min(lo + BATCH, EVENTS)
        watermark = int(times[:hi].max()) - 50 if j % every == every - 1 else None
        out.append((Batch(TupleColumns([k[lo:hi], v[lo:hi]]), times[lo:hi]), watermark))
    return out


def run(prepared: list[tuple[Batch, int | None]]) -> int:
    agg = Aggregates(key(), window_start(), count(), sum(1))
    assigner = TumblingEventTimeWindows.of(1_000)
    plan, _ = aggregates_plan(
        {"spec": agg.spec, "input_type": ROW}, assigner, assigner.get_default_trigger(), None
    )
    assert plan is not None
    op = AggregatesWindowOperator("w", wrap_key_selector(lambda r: r[0]), assigner, plan, ROW, None, agg)
    out = Counting()
    backend = create_keyed_backend("hashmap", "op", 128, KeyGroupRange(0, 127))
    op.setup(
        OperatorContext(
            task_name="t", operator_name="w", operator_id="op", subtask_index=0, parallelism=1,
            max_parallelism=128, attempt_number=0, batch_mode=False, processing_time_ms=lambda: 0,
            keyed_backend=backend,
        ),
        out,
    )  # fmt: skip
    op.initialize_state()
    op.open()
    for batch, watermark in prepared:
        op.process_batch(batch)
        if watermark is not None:
            op.process_watermark(watermark)
    op.process_watermark((1 << 63) - 1)
    return out.rows


@pytest.mark.parametrize("every", [1, 100], ids=["watermark-each-batch", "rare"])
@pytest.mark.parametrize("keys", [100, 10_000])
def test_aggregates_window_operator(benchmark: Any, keys: int, every: int) -> None:
    prepared = batches(keys, every)
    rows = benchmark.pedantic(run, args=(prepared,), rounds=3, iterations=1, warmup_rounds=1)
    assert rows > 0
    seconds = benchmark.stats.stats.median
    print(
        f"\nAggregates window, K = {keys:,}, a watermark every {every} batches: "
        f"{EVENTS / seconds / 1e6:.2f} M records/s ({rows:,} rows out)"
    )

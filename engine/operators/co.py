"""Two-input operators (``connect``): co-map, co-flat-map, co-process and keyed co-process.

A two-input operator takes batches of either input (``process_batch1`` /
``process_batch2``) and watermarks per input (``process_watermark1`` /
``process_watermark2``, each already the minimum over that input's channels). Its own
event time is the minimum over the inputs that are not idle (``CombinedWatermark``), so
a slow input holds the operator back and an idle one does not; the operator reacts to
it through the one-input hook ``process_watermark`` (timers fire there) and forwards it.

On keyed connected streams the operator has one keyed state for both inputs: a record's
key comes from its input's key selector, so the records of both inputs with equal keys
see the same state and timers.
"""

from __future__ import annotations

from typing import Any

from weir.codec.batch import Batch
from weir.operators.base import StreamOperator
from weir.operators.keyed import KeyedProcessOperator, _key_function
from weir.operators.stateless import (
    _keyed,
    _ProcessContext,
    flat_map_batch,
    map_batch,
    process_batch_with,
)
from weir.time.valve import CombinedWatermark


class TwoInputStreamOperator(StreamOperator):
    """Base of the two-input operators: per-input watermarks and idleness combined into one."""

    two_inputs = True

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.combined = CombinedWatermark(2)

    def process_batch(self, batch: Batch) -> None:  # pragma: no cover - the task calls 1 or 2
        raise AssertionError(f"operator '{self.name}' has two inputs: process_batch1 or process_batch2")

    def process_batch1(self, batch: Batch) -> None:
        raise NotImplementedError

    def process_batch2(self, batch: Batch) -> None:
        raise NotImplementedError

    def process_watermark1(self, timestamp: int) -> None:
        self._advance(self.combined.update_watermark(0, timestamp))

    def process_watermark2(self, timestamp: int) -> None:
        self._advance(self.combined.update_watermark(1, timestamp))

    def process_watermark_status1(self, idle: bool) -> None:
        self._on_status(0, idle)

    def process_watermark_status2(self, idle: bool) -> None:
        self._on_status(1, idle)

    def _advance(self, watermark: int | None) -> None:
        if watermark is not None:
            self.process_watermark(watermark)

    def _on_status(self, index: int, idle: bool) -> None:
        watermark, status_changed = self.combined.update_status(index, idle)
        self._advance(watermark)
        if status_changed:
            self.chain_output.emit_watermark_status(self.combined.combined_idle)


class _CoFunctionOperator(TwoInputStreamOperator):
    def __init__(
        self, name: str, function: Any, key_selector1: Any = None, key_selector2: Any = None
    ) -> None:
        super().__init__(name)
        self.function = function
        self.key_selector = key_selector1
        self.key_selector2 = key_selector2

    def open(self) -> None:
        if self.key_selector is not None:
            self.context.keyed_state_backend()  # created outside a task (test harnesses)
        self.function.open(self.context.runtime_context())

    def _keyed_pair(self, f1: Any, f2: Any) -> tuple[Any, Any]:
        """Each input's function with its records' keys current in the shared keyed state."""
        return _keyed(self, f1, self.key_selector), _keyed(self, f2, self.key_selector2)

    def close(self) -> None:
        self.function.close()


class CoMapOperator(_CoFunctionOperator):
    def open(self) -> None:
        super().open()
        self._map1, self._map2 = self._keyed_pair(self.function.map1, self.function.map2)

    def _map(self, f: Any, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        self._emit(map_batch(f, batch))

    def process_batch1(self, batch: Batch) -> None:
        self._map(self._map1, batch)

    def process_batch2(self, batch: Batch) -> None:
        self._map(self._map2, batch)


class CoFlatMapOperator(_CoFunctionOperator):
    def open(self) -> None:
        super().open()
        self._flat_map1, self._flat_map2 = self._keyed_pair(self.function.flat_map1, self.function.flat_map2)

    def _flat_map(self, f: Any, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        self._emit(flat_map_batch(f, batch))

    def process_batch1(self, batch: Batch) -> None:
        self._flat_map(self._flat_map1, batch)

    def process_batch2(self, batch: Batch) -> None:
        self._flat_map(self._flat_map2, batch)


class CoProcessOperator(_CoFunctionOperator):
    """A CoProcessFunction on inputs that are not both keyed: timestamps and side outputs, no timers."""

    def open(self) -> None:
        super().open()
        self._ctx = _ProcessContext(self)

    def _process(self, f: Any, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        self._emit(process_batch_with(f, self._ctx, batch))
        self._ctx.side.flush(self.chain_output)

    def process_batch1(self, batch: Batch) -> None:
        self._process(self.function.process_element1, batch)

    def process_batch2(self, batch: Batch) -> None:
        self._process(self.function.process_element2, batch)


class KeyedCoProcessOperator(TwoInputStreamOperator, KeyedProcessOperator):
    """A KeyedCoProcessFunction (or a CoProcessFunction on keyed inputs): keyed state shared by
    both inputs, event- and processing-time timers per key (``on_timer``), side outputs."""

    def __init__(self, name: str, key_selector1: Any, key_selector2: Any, function: Any) -> None:
        KeyedProcessOperator.__init__(self, name, key_selector1, function)
        self.combined = CombinedWatermark(2)
        self.key_selector2 = key_selector2

    def _bind_function(self) -> None:
        self._key_of2 = _key_function(self.key_selector2)
        self._process1 = self.function.process_element1
        self._process2 = self.function.process_element2

    def process_batch1(self, batch: Batch) -> None:
        self._process_keyed(self._key_of, self._process1, batch)

    def process_batch2(self, batch: Batch) -> None:
        self._process_keyed(self._key_of2, self._process2, batch)

    def process_batch(self, batch: Batch) -> None:  # pragma: no cover - the task calls 1 or 2
        TwoInputStreamOperator.process_batch(self, batch)

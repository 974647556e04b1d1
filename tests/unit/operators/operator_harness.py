"""Drive one operator without a cluster: batches and watermarks in, batches out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from weir.codec.batch import Batch
from weir.operators.base import OperatorContext, Output, StreamOperator


class CollectingOutput(Output):
    def __init__(self) -> None:
        self.records: list[tuple[Any, int | None]] = []
        self.side: dict[Any, list[tuple[Any, int | None]]] = {}
        self.watermarks: list[int] = []

    def emit(self, batch: Batch) -> None:
        self.records.extend(zip(batch.as_list(), batch.timestamp_list()))

    def emit_side(self, tag: Any, batch: Batch) -> None:
        self.side.setdefault(tag, []).extend(zip(batch.as_list(), batch.timestamp_list()))

    def emit_watermark(self, timestamp: int) -> None:
        self.watermarks.append(timestamp)


class Harness:
    def __init__(
        self,
        operator: StreamOperator,
        batch_mode: bool = False,
        prepare: Callable[[StreamOperator], None] | None = None,
    ) -> None:
        """``prepare(operator)`` runs after ``setup`` and before ``initialize_state`` (a restore)."""
        self.operator = operator
        self.now_ms = 0
        self.output = CollectingOutput()
        operator.setup(
            OperatorContext(
                task_name="test",
                operator_name=operator.name,
                operator_id="0" * 32,
                subtask_index=0,
                parallelism=1,
                max_parallelism=128,
                attempt_number=0,
                batch_mode=batch_mode,
                processing_time_ms=lambda: self.now_ms,
            ),
            self.output,
        )
        if prepare is not None:
            prepare(operator)
        operator.initialize_state()
        operator.open()

    def elements(self, *pairs: tuple[Any, int]) -> None:
        values = [v for v, _ in pairs]
        stamps = np.array([t for _, t in pairs], dtype=np.int64)
        self.operator.process_batch(Batch(values, stamps))

    def watermark(self, timestamp: int) -> None:
        self.operator.process_watermark(timestamp)

    def advance_processing_time(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self.operator.on_processing_time(now_ms)

    def values(self) -> list[Any]:
        return [v for v, _ in self.output.records]

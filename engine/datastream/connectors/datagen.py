"""``DataGeneratorSource``: weir's generator source (Flink's flink-connector-datagen).

``generator_function(index)`` makes record ``index`` for ``index`` in [0, count);
the indexes are split across subtasks, so the output is deterministic and replayable.
``rate_limit`` caps records per second over the whole source (None: as fast as possible).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weir.common.typeinfo import TypeInformation, check_type_info
from weir.core.connectors import Source
from weir.errors import UsageError


class DataGeneratorSource(Source):
    reader_factory = "weir.operators.sources:data_generator_reader"

    def __init__(
        self,
        generator_function: Callable[[int], Any],
        count: int | None,
        rate_limit: float | None = None,
        type_info: TypeInformation | None = None,
    ) -> None:
        if not callable(generator_function):
            raise UsageError(
                f"DataGeneratorSource needs a callable index -> record, got {generator_function!r}"
            )
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            raise UsageError(
                f"DataGeneratorSource count must be a non-negative integer or None, got {count!r}"
            )
        if rate_limit is not None and (not isinstance(rate_limit, (int, float)) or rate_limit <= 0):
            raise UsageError(
                f"DataGeneratorSource rate_limit must be positive records/s or None, got {rate_limit!r}"
            )
        self.generator_function = generator_function
        self.count = count
        self.rate_limit = rate_limit
        self.type_info = check_type_info("DataGeneratorSource type_info", type_info)

    def is_bounded(self) -> bool:
        return self.count is not None

    def default_name(self) -> str:
        return "Data Generator"

    def produced_type(self) -> TypeInformation | None:
        return self.type_info

    def describe(self) -> dict[str, Any]:
        return {"class": "DataGeneratorSource", "count": self.count, "rate_limit": self.rate_limit}

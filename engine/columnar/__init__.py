"""weir's own columnar API: what PyFlink does not have. A job file that imports it runs on
weir only (on Apache Flink the import fails, naming ``weir``); a PyFlink job never needs it.

Records stay typed columns from a columnar source to a columnar sink when the job is
written with these pieces; everything here is also a PyFlink function class, so a stream
that is not columnar runs it record by record with the same results. ``weir plan`` shows
which operators run vectorized, and why the others do not.

Functions over columns (``weir.columnar.functions``)
    batch_map, batch_filter, scalar_map, scalar_filter, field, timestamp_field
Declarative aggregates (``weir.columnar.aggregates``)
    Aggregates, RunningAggregates and their outputs: key, window_start, window_end,
    count, sum, min, max, mean, first, last
Sources and sinks (``weir.columnar.connectors``)
    ColumnGeneratorSource, ArrowFileSource, BatchSinkFunction
String columns (``weir.codec.strings``)
    Strings: UTF-8 bytes that a function over columns reads as a sequence of str
"""

from __future__ import annotations

from weir.codec.strings import Strings
from weir.columnar.aggregates import (
    Aggregates,
    RunningAggregates,
    count,
    first,
    key,
    last,
    max,
    mean,
    min,
    sum,
    window_end,
    window_start,
)
from weir.columnar.connectors import ArrowFileSource, BatchSinkFunction, ColumnGeneratorSource
from weir.columnar.functions import (
    batch_filter,
    batch_map,
    field,
    scalar_filter,
    scalar_map,
    timestamp_field,
)

__all__ = [
    "Aggregates",
    "ArrowFileSource",
    "BatchSinkFunction",
    "ColumnGeneratorSource",
    "RunningAggregates",
    "Strings",
    "batch_filter",
    "batch_map",
    "count",
    "field",
    "first",
    "key",
    "last",
    "max",
    "mean",
    "min",
    "scalar_filter",
    "scalar_map",
    "sum",
    "timestamp_field",
    "window_end",
    "window_start",
]

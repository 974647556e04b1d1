"""``pyflink.datastream.functions``: the function base classes, at PyFlink's path.

They live in ``weir.core.functions``, which the runtime imports too; this module
hands out the same classes.
"""

from __future__ import annotations

from weir.core.functions import (
    AggregateFunction,
    AllWindowFunction,
    BaseBroadcastProcessFunction,
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
    FunctionWrapper,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeyedStateStore,
    KeySelector,
    MapFunction,
    NullByteKeySelector,
    Partitioner,
    PassThroughAllWindowFunction,
    PassThroughWindowFunction,
    ProcessAllWindowFunction,
    ProcessFunction,
    ProcessWindowFunction,
    ReduceFunction,
    ReduceFunctionWrapper,
    RuntimeContext,
    SinkFunction,
    SourceFunction,
    TimeDomain,
    TimerService,
    WindowFunction,
)

__all__ = [
    "AggregateFunction",
    "AllWindowFunction",
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "FilterFunction",
    "FlatMapFunction",
    "Function",
    "FunctionWrapper",
    "KeySelector",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStateStore",
    "MapFunction",
    "NullByteKeySelector",
    "Partitioner",
    "PassThroughAllWindowFunction",
    "PassThroughWindowFunction",
    "ProcessAllWindowFunction",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "ReduceFunctionWrapper",
    "RuntimeContext",
    "SinkFunction",
    "SourceFunction",
    "TimeDomain",
    "TimerService",
    "WindowFunction",
]

# async I/O functions live in their own module; PyFlink imports them from here too
from weir.datastream.async_functions import (
    AsyncFunction,
    AsyncFunctionDescriptor,
    AsyncRetryPredicate,
    AsyncRetryStrategy,
)

__all__ += ["AsyncFunction", "AsyncFunctionDescriptor", "AsyncRetryPredicate", "AsyncRetryStrategy"]

"""``weir.datastream``: the names of ``pyflink.datastream`` that weir implements."""

from __future__ import annotations

from weir.common.execution_config import ExecutionConfig
from weir.datastream.checkpoint_config import CheckpointConfig
from weir.datastream.checkpoint_storage import (
    CheckpointStorage,
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
)
from weir.datastream.data_stream import (
    ConnectedStreams,
    DataStream,
    DataStreamSink,
    KeyedStream,
    WindowedStream,
)
from weir.datastream.execution_mode import (
    CheckpointingMode,
    ExternalizedCheckpointRetention,
    RuntimeExecutionMode,
)
from weir.datastream.functions import (
    AggregateFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    Partitioner,
    ProcessFunction,
    ProcessWindowFunction,
    ReduceFunction,
    RuntimeContext,
    SinkFunction,
    SourceFunction,
    TimeDomain,
    TimerService,
    WindowFunction,
)
from weir.datastream.output_tag import OutputTag
from weir.datastream.slot_sharing_group import MemorySize, SlotSharingGroup
from weir.datastream.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend, StateBackend
from weir.datastream.stream_execution_environment import StreamExecutionEnvironment
from weir.datastream.time_characteristic import TimeCharacteristic
from weir.datastream.window import GlobalWindow, MergingWindowAssigner, TimeWindow, Trigger, WindowAssigner

__all__ = [
    "AggregateFunction",
    "CheckpointConfig",
    "CheckpointStorage",
    "CheckpointingMode",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "ConnectedStreams",
    "DataStream",
    "DataStreamSink",
    "EmbeddedRocksDBStateBackend",
    "ExecutionConfig",
    "ExternalizedCheckpointRetention",
    "FileSystemCheckpointStorage",
    "FilterFunction",
    "FlatMapFunction",
    "GlobalWindow",
    "HashMapStateBackend",
    "JobManagerCheckpointStorage",
    "KeySelector",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStream",
    "MapFunction",
    "MemorySize",
    "MergingWindowAssigner",
    "OutputTag",
    "Partitioner",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "SinkFunction",
    "SlotSharingGroup",
    "SourceFunction",
    "StateBackend",
    "StreamExecutionEnvironment",
    "TimeCharacteristic",
    "TimeDomain",
    "TimeWindow",
    "TimerService",
    "Trigger",
    "WindowAssigner",
    "WindowFunction",
    "WindowedStream",
]

# -- issue 28 part 1 (windows, broadcast state) -------------------------------------------------
from weir.datastream.async_data_stream import AsyncDataStream
from weir.datastream.async_functions import AsyncFunction, AsyncRetryPredicate, AsyncRetryStrategy
from weir.datastream.data_stream import AllWindowedStream, BroadcastConnectedStream, BroadcastStream
from weir.datastream.functions import (
    AllWindowFunction,
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    ProcessAllWindowFunction,
)
from weir.datastream.window import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    CountWindow,
    SessionWindowTimeGapExtractor,
    TriggerResult,
    Window,
)

__all__ += [
    "AllWindowFunction",
    "AllWindowedStream",
    "BroadcastConnectedStream",
    "BroadcastProcessFunction",
    "BroadcastStream",
    "CountSlidingWindowAssigner",
    "CountTumblingWindowAssigner",
    "CountWindow",
    "KeyedBroadcastProcessFunction",
    "ProcessAllWindowFunction",
    "SessionWindowTimeGapExtractor",
    "TriggerResult",
    "Window",
]


__all__ += ["AsyncDataStream", "AsyncFunction", "AsyncRetryPredicate", "AsyncRetryStrategy"]

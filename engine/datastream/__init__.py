"""``weir.datastream``: the names of ``pyflink.datastream`` that weir implements."""

from __future__ import annotations

from weir.datastream.checkpoint_config import CheckpointConfig, ExecutionConfig
from weir.datastream.data_stream import (
    ConnectedStreams,
    DataStream,
    DataStreamSink,
    KeyedStream,
    SlotSharingGroup,
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
    ProcessFunction,
    ProcessWindowFunction,
    ReduceFunction,
    RuntimeContext,
    SinkFunction,
    SourceFunction,
    WindowFunction,
)
from weir.datastream.output_tag import OutputTag
from weir.datastream.stream_execution_environment import StreamExecutionEnvironment

__all__ = [
    "AggregateFunction",
    "CheckpointConfig",
    "CheckpointingMode",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "ConnectedStreams",
    "DataStream",
    "DataStreamSink",
    "ExecutionConfig",
    "ExternalizedCheckpointRetention",
    "FilterFunction",
    "FlatMapFunction",
    "KeySelector",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStream",
    "MapFunction",
    "OutputTag",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "SinkFunction",
    "SlotSharingGroup",
    "SourceFunction",
    "StreamExecutionEnvironment",
    "WindowFunction",
    "WindowedStream",
]

# -- issue 28 part 1 (windows, broadcast state) -------------------------------------------------
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
    TimeWindow,
    Trigger,
    TriggerResult,
    Window,
    WindowAssigner,
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
    "TimeWindow",
    "Trigger",
    "TriggerResult",
    "Window",
    "WindowAssigner",
]

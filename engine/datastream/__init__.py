"""``engine.datastream``: the names of ``pyflink.datastream`` that weir implements."""

from __future__ import annotations

from engine.datastream.checkpoint_config import CheckpointConfig, ExecutionConfig
from engine.datastream.data_stream import (
    ConnectedStreams,
    DataStream,
    DataStreamSink,
    KeyedStream,
    SlotSharingGroup,
    WindowedStream,
)
from engine.datastream.execution_mode import (
    CheckpointingMode,
    ExternalizedCheckpointRetention,
    RuntimeExecutionMode,
)
from engine.datastream.functions import (
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
from engine.datastream.output_tag import OutputTag
from engine.datastream.stream_execution_environment import StreamExecutionEnvironment

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

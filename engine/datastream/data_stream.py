"""``DataStream``, ``KeyedStream``, ``ConnectedStreams``, ``WindowedStream`` and ``DataStreamSink``, as in PyFlink.

Every call appends one Transformation to the environment and returns a stream that
wraps it. Settings such as ``name``, ``uid`` or ``set_parallelism`` apply to the
transformation the stream wraps; on a stream that has no operator of its own (after
``key_by``, ``union`` or a partitioning call) they are an error, as in PyFlink.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from weir.columnar.aggregates import Aggregates, AggregatesWindowFunction, RunningAggregates
from weir.columnar.functions import FieldKeySelector
from weir.common.typeinfo import RowTypeInfo, TupleTypeInfo, TypeInformation, check_type_info
from weir.common.watermark_strategy import WatermarkStrategy
from weir.core import functions as fn
from weir.core.aggregators import Count, FieldAggregator, Mean, WithKey
from weir.core.connectors import Sink
from weir.core.execution import CloseableIterator
from weir.core.state import MapStateDescriptor
from weir.core.window import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    Evictor,
    Trigger,
    WindowAssigner,
)
from weir.datastream.connectors.builtin import CollectSink, FunctionSink, PrintSink
from weir.datastream.execution_mode import RuntimeExecutionMode
from weir.datastream.output_tag import OutputTag
from weir.datastream.slot_sharing_group import SlotSharingGroup
from weir.datastream.window import WindowOperationDescriptor
from weir.errors import UsageError
from weir.graph import partitioners as parts
from weir.graph.transformations import (
    ChainingStrategy,
    OneInputTransformation,
    OperatorSpec,
    PartitionTransformation,
    SideOutputTransformation,
    SinkTransformation,
    Transformation,
    TwoInputTransformation,
    UnionTransformation,
)

if TYPE_CHECKING:
    from weir.datastream.stream_execution_environment import StreamExecutionEnvironment


def _group_name(value: str | SlotSharingGroup) -> str:
    if isinstance(value, SlotSharingGroup):
        return value.name
    if isinstance(value, str) and value:
        return value
    raise UsageError(f"slot_sharing_group needs a name or a SlotSharingGroup, got {value!r}")


class _Configurable:
    """Settings shared by DataStream and DataStreamSink; they change the wrapped transformation."""

    _transformation: Transformation

    def _physical(self, what: str) -> Transformation:
        t = self._transformation
        if not t.is_physical:
            raise UsageError(
                f"{what} is not supported on this stream: it has no operator of its own "
                f"(it comes from {type(t).__name__.removesuffix('Transformation').lower()}); "
                f"call it on the operator before or after"
            )
        return t

    def name(self, name: str) -> Any:
        if not isinstance(name, str) or not name:
            raise UsageError(f"name() needs a non-empty string, got {name!r}")
        self._physical("name()").name = name
        return self

    def get_name(self) -> str:
        return self._transformation.name

    def uid(self, uid: str) -> Any:
        if not isinstance(uid, str) or not uid:
            raise UsageError(f"uid() needs a non-empty string, got {uid!r}")
        self._physical("uid()").uid = uid
        return self

    def set_uid_hash(self, uid_hash: str) -> Any:
        text = str(uid_hash).lower()
        if len(text) != 32 or any(c not in "0123456789abcdef" for c in text):
            raise UsageError(f"set_uid_hash() needs 32 hexadecimal characters, got {uid_hash!r}")
        self._physical("set_uid_hash()").uid_hash = text
        return self

    def set_buffer_timeout(self, timeout_millis: int) -> Any:
        """How long this operator's output buffers may wait before they are sent: -1 only
        when full, 0 after every record, else at most ``timeout_millis`` ms (Flink's per
        operator buffer timeout; the job's ``env.set_buffer_timeout`` for the others)."""
        if isinstance(timeout_millis, bool) or not isinstance(timeout_millis, int) or timeout_millis < -1:
            raise UsageError(
                f"set_buffer_timeout needs -1 (flush only when full), 0 (flush every record) or positive ms, "
                f"got {timeout_millis!r}"
            )
        self._physical("set_buffer_timeout()").buffer_timeout_ms = timeout_millis
        return self

    def set_description(self, description: str) -> Any:
        self._physical("set_description()").description = str(description)
        return self

    def set_parallelism(self, parallelism: int) -> Any:
        self._physical("set_parallelism()").set_parallelism(parallelism)
        return self

    def set_max_parallelism(self, max_parallelism: int) -> Any:
        self._physical("set_max_parallelism()").set_max_parallelism(max_parallelism)
        return self

    def slot_sharing_group(self, slot_sharing_group: str | SlotSharingGroup) -> Any:
        self._physical("slot_sharing_group()").slot_sharing_group = _group_name(slot_sharing_group)
        return self

    def start_new_chain(self) -> Any:
        self._physical("start_new_chain()").chaining_strategy = ChainingStrategy.HEAD
        return self

    def disable_chaining(self) -> Any:
        self._physical("disable_chaining()").chaining_strategy = ChainingStrategy.NEVER
        return self

    def force_non_parallel(self) -> Any:
        """Parallelism and max parallelism 1, for good: a later ``set_parallelism(n)`` with
        ``n != 1`` is an error (Flink's ``forceNonParallel``)."""
        t = self._physical("force_non_parallel()")
        t.parallelism = 1
        t.max_parallelism = 1
        t.parallelism_fixed = True
        return self


class DataStream(_Configurable):
    def __init__(self, env: StreamExecutionEnvironment, transformation: Transformation) -> None:
        self._env = env
        self._transformation = transformation

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._env

    def get_execution_config(self) -> Any:
        """The environment's ExecutionConfig (as PyFlink: settings are per job)."""
        return self._env.get_config()

    def get_type(self) -> TypeInformation | None:
        return self._transformation.output_type

    def get_transformation(self) -> Transformation:
        return self._transformation

    # -- one-input operators -------------------------------------------------------------------
    def _one_input(
        self,
        name: str,
        operator: OperatorSpec,
        output_type: TypeInformation | None,
        state_key_selector: Any = None,
    ) -> DataStream:
        t = OneInputTransformation(
            id=self._env._new_id(),
            name=name,
            output_type=output_type,
            inputs=[self._transformation],
            operator=operator,
            state_key_selector=state_key_selector,
        )
        self._env._add_transformation(t)
        return DataStream(self._env, t)

    def _state_key(self) -> Any:
        return None

    def map(
        self, func: fn.MapFunction | Callable[[Any], Any], output_type: TypeInformation | None = None
    ) -> DataStream:
        output_type = check_type_info("map(output_type)", output_type)
        spec = OperatorSpec("map", fn.wrap_map(func), keyed=self._state_key() is not None)
        return self._one_input("Map", spec, output_type, self._state_key())

    def flat_map(
        self, func: fn.FlatMapFunction | Callable[[Any], Any], output_type: TypeInformation | None = None
    ) -> DataStream:
        output_type = check_type_info("flat_map(output_type)", output_type)
        spec = OperatorSpec("flat_map", fn.wrap_flat_map(func), keyed=self._state_key() is not None)
        return self._one_input("Flat Map", spec, output_type, self._state_key())

    def filter(self, func: fn.FilterFunction | Callable[[Any], Any]) -> DataStream:
        spec = OperatorSpec("filter", fn.wrap_filter(func), keyed=self._state_key() is not None)
        return self._one_input("Filter", spec, self.get_type(), self._state_key())

    def process(
        self, func: fn.ProcessFunction | Callable[..., Any], output_type: TypeInformation | None = None
    ) -> DataStream:
        output_type = check_type_info("process(output_type)", output_type)
        return self._one_input("Process", OperatorSpec("process", fn.wrap_process(func)), output_type)

    def assign_timestamps_and_watermarks(self, watermark_strategy: WatermarkStrategy) -> DataStream:
        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise UsageError(
                f"assign_timestamps_and_watermarks needs a WatermarkStrategy, got {watermark_strategy!r}"
            )
        spec = OperatorSpec("timestamps_watermarks", None, {"watermark_strategy": watermark_strategy})
        return self._one_input("Timestamps/Watermarks", spec, self.get_type())

    def get_side_output(self, output_tag: OutputTag) -> DataStream:
        if not isinstance(output_tag, OutputTag):
            raise UsageError(f"get_side_output needs an OutputTag, got {output_tag!r}")
        t = SideOutputTransformation(
            id=self._env._new_id(),
            name=f"SideOutput({output_tag.tag_id})",
            output_type=output_tag.type_info,
            inputs=[self._physical("get_side_output()")],
            tag=output_tag,
        )
        return DataStream(self._env, t)

    # -- keys, unions, partitioning ------------------------------------------------------------
    def key_by(
        self, key_selector: fn.KeySelector | Callable[[Any], Any], key_type: TypeInformation | None = None
    ) -> KeyedStream:
        selector = fn.wrap_key_selector(key_selector)
        key_type = check_type_info("key_by(key_type)", key_type)
        if key_type is None and isinstance(selector, FieldKeySelector):
            key_type = _field_type(self.get_type(), selector.index)
        t = PartitionTransformation(
            id=self._env._new_id(),
            name="Partition",
            output_type=self.get_type(),
            inputs=[self._transformation],
            partitioner=parts.key_group_partitioner(selector),
        )
        return KeyedStream(self._env, t, selector, key_type)

    def union(self, *streams: DataStream) -> DataStream:
        if not streams:
            raise UsageError("union() needs at least one other DataStream")
        inputs = [self._transformation]
        for s in streams:
            if not isinstance(s, DataStream):
                raise UsageError(f"union() takes DataStreams, got {s!r}")
            if s._env is not self._env:
                raise UsageError("union() cannot combine streams of different StreamExecutionEnvironments")
            if self.get_type() is not None and s.get_type() is not None and s.get_type() != self.get_type():
                raise UsageError(
                    f"union() needs streams of one type: cannot union {self.get_type()!r} with {s.get_type()!r}"
                )
            inputs.append(s._transformation)
        t = UnionTransformation(
            id=self._env._new_id(), name="Union", output_type=self.get_type(), inputs=inputs
        )
        return DataStream(self._env, t)

    def connect(self, ds: DataStream | BroadcastStream) -> Any:
        """Two streams, possibly of different types, as the two inputs of one operator
        (``map``/``flat_map``/``process`` with a Co*Function); state may be shared between them.
        With a ``BroadcastStream``: a ``BroadcastConnectedStream`` (broadcast state)."""
        if isinstance(ds, BroadcastStream):
            if ds._stream._env is not self._env:
                raise UsageError("connect() cannot combine streams of different StreamExecutionEnvironments")
            return BroadcastConnectedStream(self, ds)
        if not isinstance(ds, DataStream):
            raise UsageError(f"connect() takes a DataStream, got {ds!r}")
        if ds._env is not self._env:
            raise UsageError("connect() cannot combine streams of different StreamExecutionEnvironments")
        return ConnectedStreams(self, ds)

    def _partition(self, partitioner: parts.Partitioner) -> DataStream:
        t = PartitionTransformation(
            id=self._env._new_id(),
            name="Partition",
            output_type=self.get_type(),
            inputs=[self._transformation],
            partitioner=partitioner,
        )
        return DataStream(self._env, t)

    def forward(self) -> DataStream:
        return self._partition(parts.FORWARD)

    def rebalance(self) -> DataStream:
        return self._partition(parts.REBALANCE)

    def rescale(self) -> DataStream:
        return self._partition(parts.RESCALE)

    def shuffle(self) -> DataStream:
        return self._partition(parts.SHUFFLE)

    def broadcast(self, *broadcast_state_descriptors: MapStateDescriptor) -> Any:
        r"""Every record to every subtask of the next operator; with ``MapStateDescriptor``\ s a
        ``BroadcastStream`` to ``connect`` to another stream, whose function then keeps those
        broadcast states."""
        if not broadcast_state_descriptors or broadcast_state_descriptors == (None,):
            return self._partition(parts.BROADCAST)
        return BroadcastStream(self, list(broadcast_state_descriptors))

    def global_(self) -> DataStream:
        """All records to the first subtask (Java's ``global()``; ``global`` is a Python keyword)."""
        return self._partition(parts.GLOBAL)

    def partition_custom(
        self,
        partitioner: fn.Partitioner | Callable[[Any, int], int],
        key_selector: fn.KeySelector | Callable[[Any], Any],
    ) -> DataStream:
        """Each record to the subtask ``partitioner.partition(key, num_partitions)`` names, where
        ``key`` is ``key_selector``'s key of the record (Flink's ``partitionCustom``)."""
        return self._partition(
            parts.custom_partitioner(fn.wrap_partitioner(partitioner), fn.wrap_key_selector(key_selector))
        )

    def project(self, *field_indexes: int) -> DataStream:
        """Tuples of the fields at ``field_indexes``, in that order (a stream of Types.TUPLE only)."""
        t = self.get_type()
        if not isinstance(t, TupleTypeInfo):
            raise UsageError(
                f"Only Tuple DataStreams can be projected: project() needs a stream of "
                f"Types.TUPLE([...]), this stream is of {t!r}"
            )
        types = t.get_field_types()
        for i in field_indexes:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(types):
                raise UsageError(
                    f"project() field index {i!r} is out of range for {t!r}: expected 0..{len(types) - 1}"
                )
        if not field_indexes:
            raise UsageError(f"project() needs at least one field index of {t!r}")
        spec = OperatorSpec("map", fn.wrap_map(_Projection(tuple(field_indexes))))
        return self._one_input("Projection", spec, TupleTypeInfo([types[i] for i in field_indexes]))

    # -- windows on non-keyed streams ------------------------------------------------------------
    def window(self, window_assigner: WindowAssigner) -> WindowedStream:
        raise UsageError(
            "window() needs a KeyedStream: call key_by(...) before window(...), "
            "or use window_all(...) for a non-keyed window (parallelism 1)"
        )

    def count_window(self, size: int, slide: int = 0) -> WindowedStream:
        raise UsageError("count_window() needs a KeyedStream: call key_by(...) before count_window(...)")

    def window_all(self, window_assigner: WindowAssigner) -> AllWindowedStream:
        """A window over the whole stream: Flink runs it keyed by a constant at parallelism 1;
        its functions get no key (``ProcessAllWindowFunction``, ``AllWindowFunction``)."""
        return AllWindowedStream(self, window_assigner)

    def count_window_all(self, size: int, slide: int = 0) -> AllWindowedStream:
        """``window_all`` over windows of ``size`` elements (every ``slide`` elements when given)."""
        return AllWindowedStream(self, _count_assigner(size, slide))

    # -- sinks ---------------------------------------------------------------------------------
    def _sink(self, sink: Sink, name: str) -> DataStreamSink:
        t = SinkTransformation(
            id=self._env._new_id(),
            name=name,
            output_type=None,
            inputs=[self._transformation],
            sink=sink,
        )
        self._env._add_transformation(t)
        return DataStreamSink(t)

    def sink_to(self, sink: Sink) -> DataStreamSink:
        from weir.datastream.connectors.base import SupportsPreprocessing

        if not isinstance(sink, Sink):
            raise UsageError(f"sink_to needs a Sink such as FileSink, got {sink!r}")
        if isinstance(sink, SupportsPreprocessing) and (transformer := sink.get_transformer()) is not None:
            ds = transformer.apply(self)
            if not isinstance(ds, DataStream):
                raise UsageError(
                    f"the StreamTransformer of {type(sink).__name__} must return a DataStream, got {ds!r}"
                )
            return ds._sink(sink, sink.default_name())
        return self._sink(sink, sink.default_name())

    def add_sink(self, sink_func: fn.SinkFunction | Callable[[Any], Any]) -> DataStreamSink:
        if not isinstance(sink_func, fn.SinkFunction) and not callable(sink_func):
            raise UsageError(f"add_sink needs a SinkFunction or a callable, got {sink_func!r}")
        as_sink = getattr(
            sink_func, "as_sink", None
        )  # a sink function that runs as a Sink (StreamingFileSink)
        if callable(as_sink) and isinstance(sink := as_sink(), Sink):
            return self.sink_to(sink)
        return self._sink(FunctionSink(sink_func), "Unnamed")

    def print(self, sink_identifier: str | None = None) -> DataStreamSink:
        sink = PrintSink(sink_identifier, type_info=self.get_type())
        return self._sink(sink, sink.default_name())

    def cache(self) -> CachedDataStream:
        """This stream's records, computed once and reused by the environment's later jobs
        (BATCH mode, bounded input). The first job that needs them runs the stream's upstream
        on its own first and keeps the records in this process; ``invalidate()`` drops them."""
        if self._env.get_runtime_mode() is not RuntimeExecutionMode.BATCH:
            raise UsageError(
                "cache() needs RuntimeExecutionMode.BATCH (bounded input), as Flink's; "
                f"the environment runs {self._env.get_runtime_mode().name}: env.set_runtime_mode(RuntimeExecutionMode.BATCH)"
            )
        cached = CachedDataStream(self._env, self._transformation)
        self._env._caches[self._transformation.id] = cached
        return cached

    def execute_and_collect(
        self, job_execution_name: str | None = None, limit: int | None = None
    ) -> CloseableIterator | list[Any]:
        """Run the job and stream this stream's records back: a closeable iterator (a list with ``limit``)."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise UsageError(f"execute_and_collect(limit) must be a non-negative integer, got {limit!r}")
        sink = CollectSink()
        # one collecting subtask, as Flink's collect sink: a non-parallel upstream arrives in order
        self._sink(sink, sink.default_name())._transformation.set_parallelism(1)
        if self._env._capturing:
            from weir.datastream.stream_execution_environment import ProgramCaptured

            raise ProgramCaptured(self._env.get_stream_graph(self._env._job_name(job_execution_name)))
        return self._env._execute_and_collect(sink, job_execution_name, limit)


class CachedDataStream(DataStream):
    """A ``DataStream`` whose records are kept after the first job that computes them
    (``DataStream.cache()``); later jobs of the environment read the kept records instead of
    running the upstream again. Records are kept without their timestamps."""

    def __init__(self, env: StreamExecutionEnvironment, transformation: Transformation) -> None:
        super().__init__(env, transformation)
        self._records: list[Any] | None = None

    def invalidate(self) -> None:
        """Drop the kept records; a later job that uses this stream computes them again."""
        self._records = None


def _field_type(t: TypeInformation | None, index: int) -> TypeInformation | None:
    """The type of field ``index`` of a tuple or row type (None when unknown)."""
    if isinstance(t, TupleTypeInfo | RowTypeInfo) and -t.get_arity() <= index < t.get_arity():
        return t.get_field_types()[index]
    return None


def _constant_key(value: Any) -> int:
    return 0


def _count_assigner(size: int, slide: int) -> WindowAssigner:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise UsageError(f"count_window(size) must be a positive integer, got {size!r}")
    if isinstance(slide, bool) or not isinstance(slide, int) or slide < 0:
        raise UsageError(f"count_window(slide) must be a non-negative integer, got {slide!r}")
    if slide == 0:
        return CountTumblingWindowAssigner(size)
    return CountSlidingWindowAssigner(size, slide)


class _Projection(fn.MapFunction):
    def __init__(self, field_indexes: tuple[int, ...]) -> None:
        self.field_indexes = field_indexes

    def map(self, value: Any) -> Any:
        return tuple(value[i] for i in self.field_indexes)


class DataStreamSink(_Configurable):
    def __init__(self, transformation: SinkTransformation) -> None:
        self._transformation = transformation


class KeyedStream(DataStream):
    """A stream partitioned by key; operators on it see keyed state and timers."""

    def __init__(
        self,
        env: StreamExecutionEnvironment,
        transformation: PartitionTransformation,
        key_selector: fn.KeySelector,
        key_type: TypeInformation | None,
    ) -> None:
        super().__init__(env, transformation)
        self._key_selector = key_selector
        self._key_type = key_type

    def get_key_selector(self) -> fn.KeySelector:
        return self._key_selector

    def get_key_type(self) -> TypeInformation | None:
        return self._key_type

    def _state_key(self) -> Any:
        return self._key_selector

    def process(  # type: ignore[override]
        self, func: fn.KeyedProcessFunction | Callable[..., Any], output_type: TypeInformation | None = None
    ) -> DataStream:
        output_type = check_type_info("process(output_type)", output_type)
        options: dict[str, Any] = {}
        if isinstance(func, RunningAggregates):  # weir.columnar: may run vectorized
            func.spec.check_input(self.get_type())
            if output_type is None:
                output_type = func.spec.output_type(self.get_type(), self._key_type)
            options["columnar"] = {"spec": func.spec, "input_type": self.get_type()}
        spec = OperatorSpec("keyed_process", fn.wrap_keyed_process(func), options, keyed=True)
        return self._one_input("KeyedProcess", spec, output_type, self._key_selector)

    def reduce(self, func: fn.ReduceFunction | Callable[[Any, Any], Any]) -> DataStream:
        spec = OperatorSpec("reduce", fn.wrap_reduce("reduce()", func), keyed=True)
        return self._one_input("Keyed Reduce", spec, self.get_type(), self._key_selector)

    def _aggregate(self, agg: str, position: int | str) -> DataStream:
        if isinstance(position, bool) or not isinstance(position, (int, str)):
            raise UsageError(f"{agg}() needs a field position (int) or name (str), got {position!r}")
        t = self.get_type()
        if (
            isinstance(position, int)
            and isinstance(t, (RowTypeInfo, TupleTypeInfo))
            and not 0 <= position < t.get_arity()
        ):
            raise UsageError(
                f"{agg}({position}): field position out of range for {t!r} with {t.get_arity()} fields"
            )
        if isinstance(position, str) and isinstance(t, RowTypeInfo):
            t.get_field_index(position)  # raises a clear error when missing
        spec = OperatorSpec("aggregation", None, {"aggregation": agg, "field": position}, keyed=True)
        return self._one_input("Keyed Aggregation", spec, self.get_type(), self._key_selector)

    def sum(self, position_to_sum: int | str = 0) -> DataStream:
        return self._aggregate("sum", position_to_sum)

    def min(self, position_to_min: int | str = 0) -> DataStream:
        return self._aggregate("min", position_to_min)

    def max(self, position_to_max: int | str = 0) -> DataStream:
        return self._aggregate("max", position_to_max)

    def min_by(self, position_to_min_by: int | str = 0) -> DataStream:
        return self._aggregate("min_by", position_to_min_by)

    def max_by(self, position_to_max_by: int | str = 0) -> DataStream:
        return self._aggregate("max_by", position_to_max_by)

    def window(self, window_assigner: WindowAssigner) -> WindowedStream:
        if not isinstance(window_assigner, WindowAssigner):
            raise UsageError(
                f"window() needs a WindowAssigner such as TumblingEventTimeWindows.of(Time.seconds(10)), got {window_assigner!r}"
            )
        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> WindowedStream:
        """Windows of ``size`` elements per key, as PyFlink: tumbling (``CountTumblingWindowAssigner``),
        or with ``slide`` a new window every ``slide`` elements, each fired once when it holds
        ``size`` elements (``CountSlidingWindowAssigner``)."""
        return WindowedStream(self, _count_assigner(size, slide))

    def _keyed_unsupported(self, what: str) -> UsageError:
        return UsageError(
            f"{what} is not supported on a KeyedStream; call it on the operator after key_by(...)"
        )

    def _no_repartition(self, what: str) -> UsageError:
        return UsageError(
            f"Cannot override partitioning for KeyedStream: {what} after key_by(...) would undo "
            f"the keying; call it on the stream before key_by, or on an operator after it"
        )

    def forward(self) -> DataStream:
        raise self._no_repartition("forward()")

    def rebalance(self) -> DataStream:
        raise self._no_repartition("rebalance()")

    def rescale(self) -> DataStream:
        raise self._no_repartition("rescale()")

    def shuffle(self) -> DataStream:
        raise self._no_repartition("shuffle()")

    def broadcast(self, *args: Any, **kwargs: Any) -> Any:
        raise self._no_repartition("broadcast()")

    def global_(self) -> DataStream:
        raise self._no_repartition("global_()")

    def partition_custom(self, partitioner: Any, key_selector: Any) -> DataStream:
        raise self._no_repartition("partition_custom()")

    def force_non_parallel(self) -> Any:
        raise self._keyed_unsupported("force_non_parallel()")

    def set_buffer_timeout(self, timeout_millis: int) -> Any:
        raise self._keyed_unsupported("set_buffer_timeout()")

    def cache(self) -> Any:
        raise self._keyed_unsupported("cache()")

    def project(self, *field_indexes: int) -> DataStream:
        return self.map(lambda v: v, output_type=self.get_type()).project(*field_indexes)

    def name(self, name: str) -> Any:
        raise self._keyed_unsupported("name()")

    def uid(self, uid: str) -> Any:
        raise self._keyed_unsupported("uid()")

    def set_parallelism(self, parallelism: int) -> Any:
        raise self._keyed_unsupported("set_parallelism()")

    def set_max_parallelism(self, max_parallelism: int) -> Any:
        raise self._keyed_unsupported("set_max_parallelism()")

    def slot_sharing_group(self, slot_sharing_group: str | SlotSharingGroup) -> Any:
        raise self._keyed_unsupported("slot_sharing_group()")


class ConnectedStreams:
    """Two streams feeding one two-input operator (from ``DataStream.connect``).

    Keyed when both inputs are KeyedStreams (``key_by`` here keys both at once): the
    operator then has one keyed state, shared by the two inputs, and timers; a record of
    either input sees the state of its key.
    """

    def __init__(self, stream1: DataStream, stream2: DataStream) -> None:
        self.stream1 = stream1
        self.stream2 = stream2

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self.stream1._env

    def get_type1(self) -> TypeInformation | None:
        return self.stream1.get_type()

    def get_type2(self) -> TypeInformation | None:
        return self.stream2.get_type()

    def key_by(
        self,
        key_selector1: fn.KeySelector | Callable[[Any], Any],
        key_selector2: fn.KeySelector | Callable[[Any], Any],
        key_type: TypeInformation | None = None,
    ) -> ConnectedStreams:
        """Partition both inputs by key, so that records of the two with equal keys meet in one
        subtask (the key selectors must return keys of one type)."""
        return ConnectedStreams(
            self.stream1.key_by(key_selector1, key_type), self.stream2.key_by(key_selector2, key_type)
        )

    def _is_keyed(self) -> bool:
        k1, k2 = self.stream1, self.stream2
        if isinstance(k1, KeyedStream) and isinstance(k2, KeyedStream):
            t1, t2 = k1.get_key_type(), k2.get_key_type()
            if t1 is not None and t2 is not None and t1 != t2:
                raise UsageError(
                    f"the key types of the connected KeyedStreams differ: {t1!r} and {t2!r}; both inputs "
                    f"must be keyed by keys of one type"
                )
            return True
        return False

    def _two_input(
        self, name: str, operator: OperatorSpec, output_type: TypeInformation | None
    ) -> DataStream:
        env = self.stream1._env
        keyed = operator.keyed
        t = TwoInputTransformation(
            id=env._new_id(),
            name=name,
            output_type=output_type,
            inputs=[self.stream1._transformation, self.stream2._transformation],
            operator=operator,
            state_key_selector1=self.stream1._state_key() if keyed else None,
            state_key_selector2=self.stream2._state_key() if keyed else None,
        )
        env._add_transformation(t)
        return DataStream(env, t)

    def map(self, func: fn.CoMapFunction, output_type: TypeInformation | None = None) -> DataStream:
        """``map1`` on each record of input 1, ``map2`` on each of input 2, into one stream."""
        output_type = check_type_info("map(output_type)", output_type)
        spec = OperatorSpec("co_map", fn.wrap_co_map(func), keyed=self._is_keyed())
        return self._two_input("Co-Map", spec, output_type)

    def flat_map(self, func: fn.CoFlatMapFunction, output_type: TypeInformation | None = None) -> DataStream:
        output_type = check_type_info("flat_map(output_type)", output_type)
        spec = OperatorSpec("co_flat_map", fn.wrap_co_flat_map(func), keyed=self._is_keyed())
        return self._two_input("Co-Flat Map", spec, output_type)

    def process(
        self,
        func: fn.CoProcessFunction | fn.KeyedCoProcessFunction,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        """A CoProcessFunction (timestamps, side outputs), or on keyed inputs a
        KeyedCoProcessFunction (also keyed state and timers)."""
        output_type = check_type_info("process(output_type)", output_type)
        keyed = self._is_keyed()
        function = fn.wrap_co_process(func, keyed)
        if keyed:
            return self._two_input(
                "Keyed Co-Process", OperatorSpec("keyed_co_process", function, keyed=True), output_type
            )
        return self._two_input("Co-Process", OperatorSpec("co_process", function), output_type)


class WindowedStream:
    """A keyed stream cut into windows; ``reduce``/``aggregate``/``process``/``apply`` finish it."""

    def __init__(
        self, keyed_stream: KeyedStream, window_assigner: WindowAssigner, all_window: bool = False
    ) -> None:
        self._keyed = keyed_stream
        self._assigner = window_assigner
        self._trigger: Trigger | None = None
        self._allowed_lateness_ms = 0
        self._late_tag: OutputTag | None = None
        self._evictor: Evictor | None = None
        self._all_window = all_window

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._keyed._env

    def get_input_type(self) -> TypeInformation | None:
        return self._keyed.get_type()

    def trigger(self, trigger: Trigger) -> WindowedStream:
        if not isinstance(trigger, Trigger):
            raise UsageError(f"trigger() needs a Trigger such as CountTrigger.of(100), got {trigger!r}")
        if self._assigner.is_merging and not trigger.can_merge():
            raise UsageError(
                f"trigger {trigger.describe()} cannot be used with merging windows ({self._assigner.describe()}): "
                f"its can_merge() is false; a trigger for sessions must implement on_merge and return True there"
            )
        self._trigger = trigger
        return self

    def evictor(self, evictor: Evictor) -> WindowedStream:
        """Remove elements when a window fires (``CountEvictor``, ``TimeEvictor`` or an
        ``Evictor`` of the user's); the window then keeps every element, as in Flink."""
        if not isinstance(evictor, Evictor):
            raise UsageError(f"evictor() needs an Evictor such as CountEvictor.of(10), got {evictor!r}")
        if self._assigner.is_merging:
            raise UsageError(
                f"evictor() cannot be used with merging windows ({self._assigner.describe()}), as in Flink"
            )
        self._evictor = evictor
        return self

    def allowed_lateness(self, time_ms: int) -> WindowedStream:
        if isinstance(time_ms, bool) or not isinstance(time_ms, int) or time_ms < 0:
            raise UsageError(f"allowed_lateness needs non-negative milliseconds, got {time_ms!r}")
        if time_ms > 0 and not self._assigner.is_event_time:
            raise UsageError(
                f"allowed_lateness only applies to event-time windows, got {self._assigner.describe()}"
            )
        self._allowed_lateness_ms = time_ms
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> WindowedStream:
        if not isinstance(output_tag, OutputTag):
            raise UsageError(f"side_output_late_data needs an OutputTag, got {output_tag!r}")
        self._late_tag = output_tag
        return self

    def _build(
        self, function_kind: str, options: dict[str, Any], output_type: TypeInformation | None, label: str
    ) -> DataStream:
        trigger = self._trigger or self._assigner.get_default_trigger(self._keyed._env)
        spec = OperatorSpec(
            "window",
            options.get("function"),
            {
                "assigner": self._assigner,
                "trigger": trigger,
                "allowed_lateness_ms": self._allowed_lateness_ms,
                "late_data_tag": self._late_tag,
                "evictor": self._evictor,
                "function_kind": function_kind,
                **options,
            },
            keyed=True,
        )
        evictor = "" if self._evictor is None else f", {self._evictor.describe()}"
        name = f"Window({self._assigner.describe()}, {trigger.describe()}{evictor}, {label})"
        stream = self._keyed._one_input(name, spec, output_type, self._keyed._key_selector)
        descriptor = WindowOperationDescriptor(
            self._assigner,
            trigger,
            self._allowed_lateness_ms,
            self._late_tag,
            None,  # weir's window operators keep their state themselves
            self._assigner.get_window_serializer(),
            options.get("function"),
        )
        stream._transformation.description = descriptor.generate_op_desc(
            "AllWindow" if self._all_window else "Window", label
        )
        if self._all_window:
            t = stream._transformation
            t.set_parallelism(1)
            t.set_max_parallelism(1)
            t.parallelism_fixed = True
        return stream

    def reduce(
        self,
        reduce_function: fn.ReduceFunction | Callable[[Any, Any], Any],
        window_function: Any = None,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        reducer = fn.wrap_reduce("WindowedStream.reduce()", reduce_function)
        wf = (
            None
            if window_function is None
            else fn.wrap_window_function("reduce(window_function)", window_function)
        )
        out = check_type_info("reduce(output_type)", output_type)
        if wf is None and out is None:
            out = self.get_input_type()
        return self._build(
            "reduce",
            {"function": reducer, "window_function": wf},
            out,
            fn.function_name(reducer, "ReduceFunction"),
        )

    def aggregate(
        self,
        aggregate_function: fn.AggregateFunction,
        window_function: Any = None,
        accumulator_type: TypeInformation | None = None,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        agg = fn.wrap_aggregate("WindowedStream.aggregate()", aggregate_function)
        wf = (
            None
            if window_function is None
            else fn.wrap_window_function("aggregate(window_function)", window_function)
        )
        opts: dict[str, Any] = {
            "function": agg,
            "window_function": wf,
            "accumulator_type": check_type_info("aggregate(accumulator_type)", accumulator_type),
        }
        out = check_type_info("aggregate(output_type)", output_type)
        if isinstance(agg, Aggregates):  # weir.columnar: may run vectorized
            input_type = self.get_input_type()
            agg.spec.check_input(input_type)
            if wf is None and agg.needs_window_context():
                opts["window_function"] = AggregatesWindowFunction(agg.spec)
            if out is None and wf is None:
                out = agg.spec.output_type(input_type, self._keyed.get_key_type())
            opts["columnar"] = {
                "spec": agg.spec,
                "input_type": input_type,
                "own_window_function": wf is not None,
            }
        return self._build("aggregate", opts, out, fn.function_name(agg, "AggregateFunction"))

    # -- built-in aggregations (Java's WindowedStream.sum/min/max/minBy/maxBy; count/mean are weir's) --
    def _field_aggregation(self, aggregation: str, position: int | str) -> DataStream:
        if isinstance(position, bool) or not isinstance(position, (int, str)):
            raise UsageError(f"{aggregation}() needs a field position (int) or name (str), got {position!r}")
        t = self.get_input_type()
        if (
            isinstance(position, int)
            and isinstance(t, (RowTypeInfo, TupleTypeInfo))
            and not 0 <= position < t.get_arity()
        ):
            raise UsageError(
                f"{aggregation}({position}): field position out of range for {t!r} with {t.get_arity()} fields"
            )
        if isinstance(position, str) and isinstance(t, RowTypeInfo):
            t.get_field_index(position)
        reducer = FieldAggregator(aggregation, position)
        builtin = {"aggregation": aggregation, "field": position, "input_type": t}  # may run vectorized
        return self._build(
            "reduce",
            {"function": reducer, "window_function": None, "builtin": builtin},
            t,
            f"{aggregation}({position})",
        )

    def sum(self, position_to_sum: int | str = 0) -> DataStream:
        return self._field_aggregation("sum", position_to_sum)

    def min(self, position_to_min: int | str = 0) -> DataStream:
        return self._field_aggregation("min", position_to_min)

    def max(self, position_to_max: int | str = 0) -> DataStream:
        return self._field_aggregation("max", position_to_max)

    def min_by(self, position_to_min_by: int | str = 0) -> DataStream:
        return self._field_aggregation("min_by", position_to_min_by)

    def max_by(self, position_to_max_by: int | str = 0) -> DataStream:
        return self._field_aggregation("max_by", position_to_max_by)

    def count(self) -> DataStream:
        """weir: (key, number of records) per window."""
        return self._builtin_aggregate("count", 0, Count())

    def mean(self, position: int | str = 0) -> DataStream:
        """weir: (key, mean of a numeric field) per window."""
        return self._builtin_aggregate("mean", position, Mean(position))

    def _builtin_aggregate(
        self, aggregation: str, position: int | str, agg: fn.AggregateFunction
    ) -> DataStream:
        """count/mean: an aggregate with a (key, value) window function, vectorized where eligible."""
        opts = {
            "function": agg,
            "window_function": WithKey(),
            "accumulator_type": None,
            "builtin": {"aggregation": aggregation, "field": position, "input_type": self.get_input_type()},
        }
        label = "count()" if aggregation == "count" else f"{aggregation}({position})"
        return self._build("aggregate", opts, None, label)

    def process(self, process_window_function: Any, output_type: TypeInformation | None = None) -> DataStream:
        pwf = fn.wrap_process_window("WindowedStream.process()", process_window_function)
        out = check_type_info("process(output_type)", output_type)
        return self._build("process", {"function": pwf}, out, fn.function_name(pwf, "ProcessWindowFunction"))

    def apply(self, window_function: Any, output_type: TypeInformation | None = None) -> DataStream:
        wf = fn.wrap_window_function("WindowedStream.apply()", window_function)
        out = check_type_info("apply(output_type)", output_type)
        return self._build("apply", {"function": wf}, out, fn.function_name(wf, "WindowFunction"))


class AllWindowedStream:
    """A non-keyed stream cut into windows (``DataStream.window_all``): Flink runs it as one
    window operator keyed by a constant, at parallelism 1; ``reduce``/``aggregate``/``apply``/
    ``process`` finish it, with all-window functions (no key)."""

    def __init__(self, data_stream: DataStream, window_assigner: WindowAssigner) -> None:
        if not isinstance(window_assigner, WindowAssigner):
            raise UsageError(
                f"window_all() needs a WindowAssigner such as TumblingEventTimeWindows.of(Time.seconds(10)), "
                f"got {window_assigner!r}"
            )
        self._windowed = WindowedStream(data_stream.key_by(_constant_key), window_assigner, all_window=True)

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._windowed.get_execution_environment()

    def get_input_type(self) -> TypeInformation | None:
        return self._windowed.get_input_type()

    def trigger(self, trigger: Trigger) -> AllWindowedStream:
        self._windowed.trigger(trigger)
        return self

    def evictor(self, evictor: Evictor) -> AllWindowedStream:
        self._windowed.evictor(evictor)
        return self

    def allowed_lateness(self, time_ms: int) -> AllWindowedStream:
        self._windowed.allowed_lateness(time_ms)
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> AllWindowedStream:
        self._windowed.side_output_late_data(output_tag)
        return self

    def reduce(
        self,
        reduce_function: fn.ReduceFunction | Callable[[Any, Any], Any],
        window_function: Any = None,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        wf = (
            None
            if window_function is None
            else fn.wrap_all_window_function("reduce(window_function)", window_function)
        )
        return self._windowed.reduce(reduce_function, wf, output_type)

    def aggregate(
        self,
        aggregate_function: fn.AggregateFunction,
        window_function: Any = None,
        accumulator_type: TypeInformation | None = None,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        wf = (
            None
            if window_function is None
            else fn.wrap_all_window_function("aggregate(window_function)", window_function)
        )
        return self._windowed.aggregate(aggregate_function, wf, accumulator_type, output_type)

    def apply(self, window_function: Any, output_type: TypeInformation | None = None) -> DataStream:
        """``window_function.apply(window, inputs)`` per window (an ``AllWindowFunction`` or a callable)."""
        return self._windowed.apply(
            fn.wrap_all_window_function("AllWindowedStream.apply()", window_function), output_type
        )

    def process(self, process_window_function: Any, output_type: TypeInformation | None = None) -> DataStream:
        """``process_window_function.process(context, elements)`` per window (a ``ProcessAllWindowFunction``)."""
        return self._windowed.process(
            fn.wrap_process_all_window("AllWindowedStream.process()", process_window_function), output_type
        )


class BroadcastStream:
    r"""A stream every subtask of the next operator receives whole, with the broadcast states
    (``MapStateDescriptor``\ s) its function keeps (``DataStream.broadcast(descriptor)``);
    ``other.connect(broadcast_stream)`` uses it."""

    def __init__(self, stream: DataStream, broadcast_state_descriptors: list[MapStateDescriptor]) -> None:
        names = set()
        for d in broadcast_state_descriptors:
            if not isinstance(d, MapStateDescriptor):
                raise UsageError(f"broadcast() takes MapStateDescriptors (the broadcast states), got {d!r}")
            if d.name in names:
                raise UsageError(f"broadcast() got two broadcast states named {d.name!r}")
            names.add(d.name)
        self._stream = stream
        self.broadcast_state_descriptors = list(broadcast_state_descriptors)

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._stream._env


class BroadcastConnectedStream:
    """A (keyed or not) stream connected with a BroadcastStream; ``process`` finishes it with a
    BroadcastProcessFunction, or on a keyed stream a KeyedBroadcastProcessFunction."""

    def __init__(self, non_broadcast_stream: DataStream, broadcast_stream: BroadcastStream) -> None:
        self.non_broadcast_stream = non_broadcast_stream
        self.broadcast_stream = broadcast_stream

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self.non_broadcast_stream._env

    def get_type1(self) -> TypeInformation | None:
        return self.non_broadcast_stream.get_type()

    def get_type2(self) -> TypeInformation | None:
        return self.broadcast_stream._stream.get_type()

    def process(
        self,
        func: fn.BroadcastProcessFunction | fn.KeyedBroadcastProcessFunction,
        output_type: TypeInformation | None = None,
    ) -> DataStream:
        output_type = check_type_info("process(output_type)", output_type)
        first = self.non_broadcast_stream
        keyed = isinstance(first, KeyedStream)
        if keyed and not isinstance(func, fn.KeyedBroadcastProcessFunction):
            raise UsageError(
                f"a keyed stream connected with a broadcast stream needs a KeyedBroadcastProcessFunction "
                f"(process_element, process_broadcast_element, on_timer), got {func!r}"
            )
        if not keyed and not isinstance(func, fn.BroadcastProcessFunction):
            raise UsageError(
                f"a non-keyed stream connected with a broadcast stream needs a BroadcastProcessFunction "
                f"(process_element, process_broadcast_element), got {func!r}"
                + (
                    "; a KeyedBroadcastProcessFunction needs key_by(...) before connect"
                    if isinstance(func, fn.KeyedBroadcastProcessFunction)
                    else ""
                )
            )
        env = first._env
        broadcast_input = self.broadcast_stream._stream.broadcast()
        spec = OperatorSpec(
            "keyed_broadcast_process" if keyed else "broadcast_process",
            func,
            {
                "broadcast_state_descriptors": self.broadcast_stream.broadcast_state_descriptors,
                "broadcast_input2": True,
            },
            keyed=keyed,
        )
        t = TwoInputTransformation(
            id=env._new_id(),
            name="Co-Process-Broadcast-Keyed" if keyed else "Co-Process-Broadcast",
            output_type=output_type,
            inputs=[first._transformation, broadcast_input._transformation],
            operator=spec,
            state_key_selector1=first._state_key() if keyed else None,
            state_key_selector2=None,
        )
        env._add_transformation(t)
        return DataStream(env, t)

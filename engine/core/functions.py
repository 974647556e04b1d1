"""Function base classes, as in ``pyflink.datastream.functions``.

Users may subclass these or pass plain callables; ``wrap_*`` turns a callable into the
matching class so the runtime sees one shape. ``process_element``, ``on_timer`` and
``process`` may return an iterable or be generators; ``None`` means no output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, Generic, TypeVar

from weir.core.state import OperatorStateStore
from weir.errors import UsageError

# The type parameters of PyFlink's generic function classes (``ProcessWindowFunction[IN, OUT,
# KEY, W]``): annotations only, nothing checks them.
IN = TypeVar("IN")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")
W = TypeVar("W")
W2 = TypeVar("W2")
IN1 = TypeVar("IN1")
IN2 = TypeVar("IN2")


class KeyedStateStore:
    """Where a function on a keyed stream gets its state (PyFlink's base of RuntimeContext)."""

    def get_state(self, state_descriptor: Any) -> Any:
        raise NotImplementedError

    def get_list_state(self, state_descriptor: Any) -> Any:
        raise NotImplementedError

    def get_map_state(self, state_descriptor: Any) -> Any:
        raise NotImplementedError

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        raise NotImplementedError

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        raise NotImplementedError


class RuntimeContext(KeyedStateStore):
    """What a function sees of the subtask running it (filled in by the runtime)."""

    def __init__(
        self,
        task_name: str = "",
        index_of_this_subtask: int = 0,
        number_of_parallel_subtasks: int = 1,
        max_number_of_parallel_subtasks: int = 1,
        attempt_number: int = 0,
        job_parameters: dict[str, str] | None = None,
        state_provider: Any = None,
        metrics_group: Any = None,
    ) -> None:
        self._task_name = task_name
        self._index = index_of_this_subtask
        self._parallelism = number_of_parallel_subtasks
        self._max_parallelism = max_number_of_parallel_subtasks
        self._attempt = attempt_number
        self._job_parameters = dict(job_parameters or {})
        self._state_provider = state_provider
        self._metrics_group = metrics_group

    def get_task_name(self) -> str:
        return self._task_name

    def get_index_of_this_subtask(self) -> int:
        return self._index

    def get_number_of_parallel_subtasks(self) -> int:
        return self._parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._max_parallelism

    def get_attempt_number(self) -> int:
        return self._attempt

    def get_task_name_with_subtasks(self) -> str:
        return f"{self._task_name} ({self._index + 1}/{self._parallelism})"

    def get_job_parameter(self, key: str, default_value: str) -> str:
        return self._job_parameters.get(key, default_value)

    def get_metrics_group(self) -> Any:
        return self._metrics_group

    def _state(self, kind: str, descriptor: Any) -> Any:
        if self._state_provider is None:
            raise UsageError(
                f"keyed state ({kind}) is only available in functions applied on a KeyedStream "
                f"(after key_by), got a request for '{getattr(descriptor, 'name', descriptor)}'"
            )
        return self._state_provider.get_state(kind, descriptor)

    def get_state(self, state_descriptor: Any) -> Any:
        return self._state("value", state_descriptor)

    def get_list_state(self, state_descriptor: Any) -> Any:
        return self._state("list", state_descriptor)

    def get_map_state(self, state_descriptor: Any) -> Any:
        return self._state("map", state_descriptor)

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        return self._state("reducing", state_descriptor)

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        return self._state("aggregating", state_descriptor)


class TimeDomain(StrEnum):
    """Which clock fired a timer (``ctx.time_domain()`` in ``on_timer``), as PyFlink's TimeDomain.
    A member equals its name as a string (``TimeDomain.EVENT_TIME == "EVENT_TIME"``)."""

    EVENT_TIME = "EVENT_TIME"
    PROCESSING_TIME = "PROCESSING_TIME"


class TimerService:
    """What ``ctx.timer_service()`` offers (``pyflink.datastream.TimerService``): the two
    clocks, and timers of the current key (keyed streams only)."""

    def current_processing_time(self) -> int:
        raise NotImplementedError

    def current_watermark(self) -> int:
        raise NotImplementedError

    def register_processing_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError

    def register_event_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError

    def delete_processing_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError

    def delete_event_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError


class Function:
    """Base of every user function: ``open`` before the first record, ``close`` after the last."""

    def open(self, runtime_context: RuntimeContext) -> None:
        pass

    def close(self) -> None:
        pass


class MapFunction(Function):
    def map(self, value: Any) -> Any:
        raise NotImplementedError


class FlatMapFunction(Function):
    def flat_map(self, value: Any) -> Iterable[Any] | None:
        raise NotImplementedError


class FilterFunction(Function):
    def filter(self, value: Any) -> bool:
        raise NotImplementedError


class KeySelector(Function):
    def get_key(self, value: Any) -> Any:
        raise NotImplementedError


class NullByteKeySelector(KeySelector):
    """Keys every record by one constant (PyFlink's key selector for non-keyed state)."""

    def get_key(self, value: Any) -> Any:
        return 0


class ReduceFunction(Function):
    def reduce(self, value1: Any, value2: Any) -> Any:
        raise NotImplementedError


class AggregateFunction(Function):
    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def add(self, value: Any, accumulator: Any) -> Any:
        raise NotImplementedError

    def get_result(self, accumulator: Any) -> Any:
        raise NotImplementedError

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        raise NotImplementedError


class ProcessFunction(Function):
    """Per-record processing with access to time and side outputs."""

    class Context:
        def timestamp(self) -> int | None:
            raise NotImplementedError

        def timer_service(self) -> Any:
            raise NotImplementedError

        def output(self, output_tag: Any, value: Any) -> None:
            raise NotImplementedError

    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Iterable[Any] | None:
        raise NotImplementedError


class KeyedProcessFunction(Function):
    """Per-record processing on a keyed stream, with keyed state and timers."""

    class Context:
        def timestamp(self) -> int | None:
            raise NotImplementedError

        def timer_service(self) -> Any:
            raise NotImplementedError

        def get_current_key(self) -> Any:
            raise NotImplementedError

        def output(self, output_tag: Any, value: Any) -> None:
            raise NotImplementedError

    class OnTimerContext(Context):
        def time_domain(self) -> Any:
            raise NotImplementedError

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterable[Any] | None:
        return None


class CoMapFunction(Function):
    """A map over two connected streams: ``map1`` for the first input, ``map2`` for the second."""

    def map1(self, value: Any) -> Any:
        raise NotImplementedError

    def map2(self, value: Any) -> Any:
        raise NotImplementedError


class CoFlatMapFunction(Function):
    """A flat map over two connected streams; each method returns an iterable (or None)."""

    def flat_map1(self, value: Any) -> Iterable[Any] | None:
        raise NotImplementedError

    def flat_map2(self, value: Any) -> Iterable[Any] | None:
        raise NotImplementedError


class CoProcessFunction(Function):
    """Per-record processing of two connected streams, with time and side outputs
    (timers need keyed inputs: use a KeyedCoProcessFunction)."""

    class Context(ProcessFunction.Context):
        pass

    def process_element1(self, value: Any, ctx: CoProcessFunction.Context) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_element2(self, value: Any, ctx: CoProcessFunction.Context) -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any] | None:
        """Timers fire here when the inputs are keyed (then the function runs keyed)."""
        return None


class KeyedCoProcessFunction(Function):
    """Per-record processing of two connected keyed streams, with keyed state shared by both
    inputs (the same key sees one state) and timers."""

    class Context(KeyedProcessFunction.Context):
        pass

    class OnTimerContext(KeyedProcessFunction.OnTimerContext):
        pass

    def process_element1(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_element2(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: KeyedCoProcessFunction.OnTimerContext) -> Iterable[Any] | None:
        return None


class Partitioner(Function):
    """``partition_custom``: ``partition(key, num_partitions)`` names the subtask (0-based)."""

    def partition(self, key: Any, num_partitions: int) -> int:
        raise NotImplementedError


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Iterable[Any] | None:
        raise NotImplementedError


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    class Context(Generic[W2]):
        def window(self) -> Any:
            raise NotImplementedError

        def current_processing_time(self) -> int:
            raise NotImplementedError

        def current_watermark(self) -> int:
            raise NotImplementedError

        def window_state(self) -> Any:
            raise NotImplementedError

        def global_state(self) -> Any:
            raise NotImplementedError

        def output(self, output_tag: Any, value: Any) -> None:
            raise NotImplementedError

    def process(
        self, key: Any, context: ProcessWindowFunction.Context, elements: Iterable[Any]
    ) -> Iterable[Any] | None:
        raise NotImplementedError

    def clear(self, context: ProcessWindowFunction.Context) -> None:
        pass


class BaseBroadcastProcessFunction(Function):
    """What both broadcast process functions share: their contexts."""

    class BaseContext:
        def timestamp(self) -> int | None:
            raise NotImplementedError

        def current_processing_time(self) -> int:
            raise NotImplementedError

        def current_watermark(self) -> int:
            raise NotImplementedError

        def output(self, output_tag: Any, value: Any) -> None:
            raise NotImplementedError

    class Context(BaseContext, OperatorStateStore):
        """The context of ``process_broadcast_element``: broadcast state read-write."""

        def get_broadcast_state(self, state_descriptor: Any) -> Any:
            raise NotImplementedError

    class ReadOnlyContext(BaseContext, OperatorStateStore):
        """The context of ``process_element``: broadcast state read only."""

        def get_broadcast_state(self, state_descriptor: Any) -> Any:
            raise NotImplementedError


class BroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[IN1, IN2, OUT]):
    """The function of a non-keyed stream connected with a broadcast stream: ``process_element``
    per element of the stream (broadcast state read only), ``process_broadcast_element`` per
    broadcast element (read-write)."""

    class Context(BaseBroadcastProcessFunction.Context):
        pass

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext):
        pass

    def process_element(
        self, value: Any, ctx: BroadcastProcessFunction.ReadOnlyContext
    ) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_broadcast_element(
        self, value: Any, ctx: BroadcastProcessFunction.Context
    ) -> Iterable[Any] | None:
        raise NotImplementedError


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[KEY, IN1, IN2, OUT]):
    """The function of a keyed stream connected with a broadcast stream: as
    BroadcastProcessFunction, plus keyed state and timers on the keyed side (``on_timer``) and
    ``ctx.apply_to_keyed_state`` on the broadcast side."""

    class Context(BaseBroadcastProcessFunction.Context):
        def apply_to_keyed_state(self, state_descriptor: Any, function: Callable[[Any, Any], None]) -> None:
            raise NotImplementedError

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext):
        def timer_service(self) -> Any:
            raise NotImplementedError

        def get_current_key(self) -> Any:
            raise NotImplementedError

    class OnTimerContext(ReadOnlyContext):
        def time_domain(self) -> Any:
            raise NotImplementedError

    def process_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext
    ) -> Iterable[Any] | None:
        raise NotImplementedError

    def process_broadcast_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.Context
    ) -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(
        self, timestamp: int, ctx: KeyedBroadcastProcessFunction.OnTimerContext
    ) -> Iterable[Any] | None:
        pass


class AllWindowFunction(Function, Generic[IN, OUT, W]):
    """A window function of a non-keyed window (``window_all``): no key."""

    def apply(self, window: Any, inputs: Iterable[Any]) -> Iterable[Any] | None:
        raise NotImplementedError


class ProcessAllWindowFunction(Function, Generic[IN, OUT, W]):
    """A process window function of a non-keyed window (``window_all``): ``process(context,
    elements)``, no key; the context is ``ProcessWindowFunction.Context``'s."""

    Context = ProcessWindowFunction.Context

    def process(
        self, context: ProcessWindowFunction.Context, elements: Iterable[Any]
    ) -> Iterable[Any] | None:
        raise NotImplementedError

    def clear(self, context: ProcessWindowFunction.Context) -> None:
        pass


class PassThroughWindowFunction(WindowFunction[IN, IN, KEY, W]):
    """Emits a window's elements as they are (what ``reduce``/``aggregate`` use when no window
    function is given, as in PyFlink)."""

    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Iterable[Any]:
        yield from inputs


class PassThroughAllWindowFunction(AllWindowFunction[IN, IN, W]):
    """``PassThroughWindowFunction`` for a non-keyed window."""

    def apply(self, window: Any, inputs: Iterable[Any]) -> Iterable[Any]:
        yield from inputs


class FunctionWrapper(Function):
    """A plain function or lambda standing where PyFlink expects a ``Function``."""

    def __init__(self, func: Callable[..., Any]) -> None:
        if not callable(func):
            raise UsageError(f"{type(self).__name__} needs a callable, got {func!r}")
        self._func = func


class ReduceFunctionWrapper(FunctionWrapper, ReduceFunction):
    """A function ``(a, b) -> c`` as a ``ReduceFunction``."""

    def reduce(self, value1: Any, value2: Any) -> Any:
        return self._func(value1, value2)


class _AllWindowAdapter(WindowFunction):
    """An AllWindowFunction (or a callable ``(window, inputs)``) run by the keyed window operator."""

    def __init__(self, function: Any) -> None:
        self.fn = function
        self._apply = function.apply if isinstance(function, AllWindowFunction) else function

    def open(self, runtime_context: RuntimeContext) -> None:
        if isinstance(self.fn, Function):
            self.fn.open(runtime_context)

    def close(self) -> None:
        if isinstance(self.fn, Function):
            self.fn.close()

    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Any:
        return self._apply(window, inputs)


class _ProcessAllWindowAdapter(ProcessWindowFunction):
    """A ProcessAllWindowFunction run by the keyed window operator (the key is dropped)."""

    def __init__(self, function: ProcessAllWindowFunction) -> None:
        self.fn = function

    def open(self, runtime_context: RuntimeContext) -> None:
        self.fn.open(runtime_context)

    def close(self) -> None:
        self.fn.close()

    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Any:
        return self.fn.process(context, elements)

    def clear(self, context: Any) -> None:
        self.fn.clear(context)


class SourceFunction(Function):
    """A legacy-style source for ``add_source``: ``run(ctx)`` runs in a worker thread and emits
    with ``ctx.collect(value)`` or ``ctx.collect_with_timestamp(value, timestamp_ms)``. A
    record goes on as soon as the task takes it (the buffer timeout then applies, as for any
    source); ``collect`` blocks while the task is behind. ``cancel`` must make ``run`` return."""

    def run(self, ctx: Any) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        pass


class SinkFunction(Function):
    """A legacy-style sink for ``add_sink``: ``invoke`` is called per record."""

    def invoke(self, value: Any, context: Any) -> None:
        raise NotImplementedError


# -- wrapping plain callables ------------------------------------------------------------------


def _require_callable(api: str, fn: object, expected: str) -> None:
    if not callable(fn):
        raise UsageError(f"{api} needs {expected} or a callable, got {fn!r}")


class _MapCallable(MapFunction):
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def map(self, value: Any) -> Any:
        return self.fn(value)


class _FlatMapCallable(FlatMapFunction):
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def flat_map(self, value: Any) -> Any:
        return self.fn(value)


class _FilterCallable(FilterFunction):
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def filter(self, value: Any) -> bool:
        return bool(self.fn(value))


class _KeySelectorCallable(KeySelector):
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def get_key(self, value: Any) -> Any:
        return self.fn(value)


class _ReduceCallable(ReduceFunction):
    def __init__(self, fn: Callable[[Any, Any], Any]) -> None:
        self.fn = fn

    def reduce(self, value1: Any, value2: Any) -> Any:
        return self.fn(value1, value2)


class _ProcessCallable(ProcessFunction):
    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def process_element(self, value: Any, ctx: Any) -> Any:
        return self.fn(value, ctx)


class _KeyedProcessCallable(KeyedProcessFunction):
    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def process_element(self, value: Any, ctx: Any) -> Any:
        return self.fn(value, ctx)


class _WindowCallable(WindowFunction):
    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Any:
        return self.fn(key, window, inputs)


class _ProcessWindowCallable(ProcessWindowFunction):
    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Any:
        return self.fn(key, context, elements)


def _wrap(api: str, fn: object, base: type, wrapper: type, expected: str) -> Any:
    if isinstance(fn, base):
        return fn
    _require_callable(api, fn, expected)
    return wrapper(fn)


def wrap_map(fn: object) -> MapFunction:
    return _wrap("map()", fn, MapFunction, _MapCallable, "a MapFunction")


def wrap_flat_map(fn: object) -> FlatMapFunction:
    return _wrap("flat_map()", fn, FlatMapFunction, _FlatMapCallable, "a FlatMapFunction")


def wrap_filter(fn: object) -> FilterFunction:
    return _wrap("filter()", fn, FilterFunction, _FilterCallable, "a FilterFunction")


def wrap_key_selector(fn: object) -> KeySelector:
    return _wrap("key_by()", fn, KeySelector, _KeySelectorCallable, "a KeySelector")


class _PartitionerCallable(Partitioner):
    def __init__(self, fn: Callable[[Any, int], int]) -> None:
        self.fn = fn

    def partition(self, key: Any, num_partitions: int) -> int:
        return self.fn(key, num_partitions)


def wrap_partitioner(fn: object) -> Partitioner:
    return _wrap("partition_custom()", fn, Partitioner, _PartitionerCallable, "a Partitioner")


def wrap_reduce(api: str, fn: object) -> ReduceFunction:
    return _wrap(api, fn, ReduceFunction, _ReduceCallable, "a ReduceFunction")


def wrap_process(fn: object) -> ProcessFunction:
    if isinstance(fn, KeyedProcessFunction):
        raise UsageError(
            "process() on a non-keyed DataStream needs a ProcessFunction; a KeyedProcessFunction "
            "needs a KeyedStream: call key_by(...) first"
        )
    return _wrap("process()", fn, ProcessFunction, _ProcessCallable, "a ProcessFunction")


def wrap_keyed_process(fn: object) -> KeyedProcessFunction:
    if isinstance(fn, ProcessFunction):
        # Flink accepts a ProcessFunction on a keyed stream (deprecated); we do too, as keyed.
        return _KeyedProcessCallable(fn.process_element)
    return _wrap(
        "KeyedStream.process()", fn, KeyedProcessFunction, _KeyedProcessCallable, "a KeyedProcessFunction"
    )


def _check_two_input(api: str, fn: object, base: type, methods: tuple[str, str]) -> Any:
    if not isinstance(fn, base):
        raise UsageError(
            f"{api} needs a {base.__name__} (with {methods[0]} and {methods[1]}, one per input), got {fn!r}"
        )
    return fn


def wrap_co_map(fn: object) -> CoMapFunction:
    checked: CoMapFunction = _check_two_input("ConnectedStreams.map()", fn, CoMapFunction, ("map1", "map2"))
    return checked


def wrap_co_flat_map(fn: object) -> CoFlatMapFunction:
    checked: CoFlatMapFunction = _check_two_input(
        "ConnectedStreams.flat_map()", fn, CoFlatMapFunction, ("flat_map1", "flat_map2")
    )
    return checked


def wrap_co_process(fn: object, keyed: bool) -> CoProcessFunction | KeyedCoProcessFunction:
    """A KeyedCoProcessFunction needs keyed inputs; on keyed inputs a CoProcessFunction runs
    keyed (its state is keyed), as Flink allows."""
    if isinstance(fn, KeyedCoProcessFunction):
        if not keyed:
            raise UsageError(
                "a KeyedCoProcessFunction needs keyed connected streams: call "
                "connected.key_by(key_selector1, key_selector2) first (or key_by both streams before connect)"
            )
        return fn
    if isinstance(fn, CoProcessFunction):
        return fn
    raise UsageError(
        "ConnectedStreams.process() needs a CoProcessFunction or (on keyed connected streams) a "
        f"KeyedCoProcessFunction, with process_element1 and process_element2, got {fn!r}"
    )


def wrap_window_function(api: str, fn: object) -> WindowFunction | ProcessWindowFunction:
    if isinstance(fn, (WindowFunction, ProcessWindowFunction)):
        return fn
    _require_callable(api, fn, "a WindowFunction or ProcessWindowFunction")
    return _WindowCallable(fn)  # type: ignore[arg-type]


def wrap_process_window(api: str, fn: object) -> ProcessWindowFunction:
    return _wrap(api, fn, ProcessWindowFunction, _ProcessWindowCallable, "a ProcessWindowFunction")


def wrap_all_window_function(api: str, fn: object) -> WindowFunction | ProcessWindowFunction:
    """An AllWindowFunction, ProcessAllWindowFunction or callable ``(window, inputs)``, as the
    keyed window operator calls window functions."""
    if isinstance(fn, ProcessAllWindowFunction):
        return _ProcessAllWindowAdapter(fn)
    if isinstance(fn, AllWindowFunction):
        return _AllWindowAdapter(fn)
    if isinstance(fn, (WindowFunction, ProcessWindowFunction)):
        raise UsageError(
            f"{api} is a non-keyed window: it needs an AllWindowFunction or ProcessAllWindowFunction "
            f"(no key argument), got the keyed {type(fn).__name__} {fn!r}"
        )
    _require_callable(
        api, fn, "an AllWindowFunction, a ProcessAllWindowFunction or a callable (window, inputs)"
    )
    return _AllWindowAdapter(fn)


def wrap_process_all_window(api: str, fn: object) -> ProcessWindowFunction:
    if not isinstance(fn, ProcessAllWindowFunction):
        raise UsageError(f"{api} needs a ProcessAllWindowFunction (process(context, elements)), got {fn!r}")
    return _ProcessAllWindowAdapter(fn)


def wrap_aggregate(api: str, fn: object) -> AggregateFunction:
    if not isinstance(fn, AggregateFunction):
        raise UsageError(
            f"{api} needs an AggregateFunction (create_accumulator, add, get_result, merge), got {fn!r}"
        )
    return fn


def function_name(fn: object, default: str) -> str:
    """A readable name for plans: the user's class or function; ``default`` for lambdas."""
    inner = getattr(fn, "fn", fn)
    name = getattr(inner, "__name__", None) or type(inner).__name__
    return default if name == "<lambda>" else str(name)

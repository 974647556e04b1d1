"""State descriptors, TTL configuration and state interfaces, as in ``pyflink.datastream.state``.

A descriptor names a piece of keyed state and says what it holds; a function
asks its ``RuntimeContext`` for the state object, and the state backend binds
that object to the current key (and, inside the runtime, to a namespace such as
a window). The interfaces below are what user code calls; the backends in
``weir.state`` implement them.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from weir.common.time import Duration, Time, to_millis
from weir.common.typeinfo import TypeInformation
from weir.errors import UsageError

__all__ = [
    "AggregatingState",
    "AggregatingStateDescriptor",
    "AppendingState",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "MergingState",
    "ReducingState",
    "ReducingStateDescriptor",
    "State",
    "StateDescriptor",
    "StateTtlConfig",
    "ValueState",
    "ValueStateDescriptor",
]


# --------------------------------------------------------------------------- TTL


class OperatorStateStore(ABC):
    """What gives a function its operator (non-keyed) state: the broadcast state of a broadcast
    process function's contexts (``ctx.get_broadcast_state(descriptor)``)."""

    @abstractmethod
    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any:
        """The broadcast state ``state_descriptor`` names (read-only where the context is)."""


class StateTtlConfig:
    """Time-to-live of keyed state entries (Flink's ``StateTtlConfig``).

    Time is processing time from the backend's injected clock. An entry's
    timestamp is set when it is created or written (``OnCreateAndWrite``), and
    also when read (``OnReadAndWrite``). With ``NeverReturnExpired`` an expired
    entry is invisible (and removed when read); with
    ``ReturnExpiredIfNotCleanedUp`` it is returned until cleanup removes it.
    ``cleanup_full_snapshot()`` drops expired entries from snapshots. TTL
    applies per value (value, reducing, aggregating state), per element (list
    state) and per entry (map state).
    """

    class UpdateType(enum.Enum):
        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(enum.Enum):
        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(enum.Enum):
        ProcessingTime = 0

    class CleanupStrategies:
        """When expired entries are removed (Flink's ``CleanupStrategies``): always when read;
        ``in_full_snapshot()`` also from full snapshots, which weir honours. The incremental
        and RocksDB compaction-filter strategies are kept as configured (their getters
        answer as Flink's do, defaults included while cleanup in background is on); weir's
        backends have no incremental cleanup and no RocksDB, so those two remove nothing."""

        class Strategies(enum.Enum):
            FULL_STATE_SCAN_SNAPSHOT = 0
            INCREMENTAL_CLEANUP = 1
            ROCKSDB_COMPACTION_FILTER = 2

        class CleanupStrategy:
            pass

        class EmptyCleanupStrategy(CleanupStrategy):
            pass

        class IncrementalCleanupStrategy(CleanupStrategy):
            def __init__(self, cleanup_size: int, run_cleanup_for_every_record: bool) -> None:
                self._cleanup_size = cleanup_size
                self._run_cleanup_for_every_record = run_cleanup_for_every_record

            def get_cleanup_size(self) -> int:
                return self._cleanup_size

            def run_cleanup_for_every_record(self) -> bool:
                return self._run_cleanup_for_every_record

        class RocksdbCompactFilterCleanupStrategy(CleanupStrategy):
            def __init__(
                self, query_time_after_num_entries: int, periodic_compaction_time: Any = None
            ) -> None:
                self._query_time_after_num_entries = query_time_after_num_entries
                self._periodic_compaction_time = periodic_compaction_time or Duration.of_days(30)

            def get_query_time_after_num_entries(self) -> int:
                return self._query_time_after_num_entries

            def get_periodic_compaction_time(self) -> Duration:
                return self._periodic_compaction_time

        def __init__(self, strategies: dict[Any, Any], is_cleanup_in_background: bool) -> None:
            self._strategies = dict(strategies)
            self._is_cleanup_in_background = is_cleanup_in_background

        def is_cleanup_in_background(self) -> bool:
            return self._is_cleanup_in_background

        def in_full_snapshot(self) -> bool:
            return StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT in self._strategies

        def get_incremental_cleanup_strategy(self) -> Any:
            cs = StateTtlConfig.CleanupStrategies
            default = cs.IncrementalCleanupStrategy(5, False) if self._is_cleanup_in_background else None
            return self._strategies.get(cs.Strategies.INCREMENTAL_CLEANUP, default)

        def get_rocksdb_compact_filter_cleanup_strategy(self) -> Any:
            cs = StateTtlConfig.CleanupStrategies
            default = cs.RocksdbCompactFilterCleanupStrategy(1000) if self._is_cleanup_in_background else None
            return self._strategies.get(cs.Strategies.ROCKSDB_COMPACTION_FILTER, default)

    def __init__(
        self,
        update_type: StateTtlConfig.UpdateType,
        state_visibility: StateTtlConfig.StateVisibility,
        ttl_time_characteristic: StateTtlConfig.TtlTimeCharacteristic,
        ttl: Duration,
        cleanup_full_snapshot: bool,
        cleanup_strategies: StateTtlConfig.CleanupStrategies | None = None,
    ) -> None:
        self._update_type = update_type
        self._state_visibility = state_visibility
        self._ttl_time_characteristic = ttl_time_characteristic
        self._ttl = ttl
        if cleanup_strategies is None:
            full = StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT
            empty = StateTtlConfig.CleanupStrategies.EmptyCleanupStrategy()
            cleanup_strategies = StateTtlConfig.CleanupStrategies(
                {full: empty} if cleanup_full_snapshot else {}, True
            )
        self._cleanup_strategies = cleanup_strategies
        self._cleanup_full_snapshot = cleanup_strategies.in_full_snapshot()
        self.ttl_ms = ttl.to_milliseconds()

    def get_cleanup_strategies(self) -> StateTtlConfig.CleanupStrategies:
        return self._cleanup_strategies

    @staticmethod
    def new_builder(ttl: Duration | Time | int) -> StateTtlConfig.Builder:
        return StateTtlConfig.Builder(ttl)

    def get_update_type(self) -> StateTtlConfig.UpdateType:
        return self._update_type

    def get_state_visibility(self) -> StateTtlConfig.StateVisibility:
        return self._state_visibility

    def get_ttl(self) -> Duration:
        return self._ttl

    def get_ttl_time_characteristic(self) -> StateTtlConfig.TtlTimeCharacteristic:
        return self._ttl_time_characteristic

    def is_enabled(self) -> bool:
        return self._update_type is not StateTtlConfig.UpdateType.Disabled

    @property
    def update_on_read(self) -> bool:
        return self._update_type is StateTtlConfig.UpdateType.OnReadAndWrite

    @property
    def return_expired(self) -> bool:
        return self._state_visibility is StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp

    @property
    def cleanup_in_full_snapshot(self) -> bool:
        return self._cleanup_full_snapshot

    def __repr__(self) -> str:
        return (
            f"StateTtlConfig(ttl={self._ttl!r}, update_type={self._update_type.name}, "
            f"visibility={self._state_visibility.name}, cleanup_full_snapshot={self._cleanup_full_snapshot})"
        )

    class Builder:
        def __init__(self, ttl: Duration | Time | int) -> None:
            self._update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._state_visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self._strategies: dict[Any, Any] = {}
            self._cleanup_in_background = True
            self.set_ttl(ttl)

        def set_ttl(self, ttl: Duration | Time | int) -> StateTtlConfig.Builder:
            millis = to_millis("StateTtlConfig ttl", ttl)
            if millis <= 0:
                raise UsageError(f"StateTtlConfig ttl must be positive, got {millis} ms")
            self._ttl = Duration(millis)
            return self

        def set_update_type(self, update_type: StateTtlConfig.UpdateType) -> StateTtlConfig.Builder:
            if not isinstance(update_type, StateTtlConfig.UpdateType):
                raise UsageError(f"update_type must be a StateTtlConfig.UpdateType, got {update_type!r}")
            self._update_type = update_type
            return self

        def update_ttl_on_create_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, visibility: StateTtlConfig.StateVisibility) -> StateTtlConfig.Builder:
            if not isinstance(visibility, StateTtlConfig.StateVisibility):
                raise UsageError(
                    f"state visibility must be a StateTtlConfig.StateVisibility, got {visibility!r}"
                )
            self._state_visibility = visibility
            return self

        def return_expired_if_not_cleaned_up(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def never_return_expired(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(
            self, characteristic: StateTtlConfig.TtlTimeCharacteristic
        ) -> StateTtlConfig.Builder:
            if characteristic is not StateTtlConfig.TtlTimeCharacteristic.ProcessingTime:
                raise UsageError(f"only ProcessingTime TTL is supported, got {characteristic!r}")
            return self

        def use_processing_time(self) -> StateTtlConfig.Builder:
            return self

        def cleanup_full_snapshot(self) -> StateTtlConfig.Builder:
            cs = StateTtlConfig.CleanupStrategies
            self._strategies[cs.Strategies.FULL_STATE_SCAN_SNAPSHOT] = cs.EmptyCleanupStrategy()
            return self

        def cleanup_incrementally(
            self, cleanup_size: int = 5, run_cleanup_for_every_record: bool = False
        ) -> StateTtlConfig.Builder:
            """Recorded (``get_cleanup_strategies``); weir cleans up on read and in full snapshots."""
            cs = StateTtlConfig.CleanupStrategies
            self._strategies[cs.Strategies.INCREMENTAL_CLEANUP] = cs.IncrementalCleanupStrategy(
                cleanup_size, run_cleanup_for_every_record
            )
            return self

        def cleanup_in_rocksdb_compact_filter(
            self, query_time_after_num_entries: int = 1000, periodic_compaction_time: Any = None
        ) -> StateTtlConfig.Builder:
            """Recorded (``get_cleanup_strategies``); weir has no RocksDB."""
            cs = StateTtlConfig.CleanupStrategies
            self._strategies[cs.Strategies.ROCKSDB_COMPACTION_FILTER] = (
                cs.RocksdbCompactFilterCleanupStrategy(query_time_after_num_entries, periodic_compaction_time)
            )
            return self

        def disable_cleanup_in_background(self) -> StateTtlConfig.Builder:
            self._cleanup_in_background = False
            return self

        def build(self) -> StateTtlConfig:
            strategies = StateTtlConfig.CleanupStrategies(self._strategies, self._cleanup_in_background)
            return StateTtlConfig(
                self._update_type,
                self._state_visibility,
                self._characteristic,
                self._ttl,
                strategies.in_full_snapshot(),
                strategies,
            )


# --------------------------------------------------------------------------- descriptors


def _check_name(kind: str, name: object) -> str:
    if not isinstance(name, str) or not name:
        raise UsageError(f"{kind} needs a non-empty state name (str), got {name!r}")
    return name


def _check_type(kind: str, what: str, value: object) -> TypeInformation | None:
    if value is None or isinstance(value, TypeInformation):
        return value
    raise UsageError(
        f"{kind} {what} must be a TypeInformation such as Types.LONG(), got {value!r}"
        + (" (did you forget the parentheses, e.g. Types.LONG()?)" if callable(value) else "")
    )


class StateDescriptor:
    """Names one piece of keyed state and what it holds. ``kind`` is value/list/map/reducing/aggregating."""

    kind: str = ""

    def __init__(self, name: str, type_info: TypeInformation | None) -> None:
        self.name = _check_name(type(self).__name__, name)
        self.type_info = type_info
        self.ttl_config: StateTtlConfig | None = None

    def get_name(self) -> str:
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        if not isinstance(ttl_config, StateTtlConfig):
            raise UsageError(
                f"state '{self.name}': enable_time_to_live needs a StateTtlConfig "
                f"(StateTtlConfig.new_builder(...).build()), got {ttl_config!r}"
            )
        self.ttl_config = ttl_config if ttl_config.is_enabled() else None

    def signature(self) -> tuple[Any, ...]:
        """What must match when the same state name is registered again."""
        return (self.kind, self.type_info, self.ttl_config is not None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.type_info!r})"


class ValueStateDescriptor(StateDescriptor):
    kind = "value"

    def __init__(self, name: str, value_type_info: TypeInformation | None = None) -> None:
        super().__init__(name, _check_type("ValueStateDescriptor", "value_type_info", value_type_info))


class ListStateDescriptor(StateDescriptor):
    kind = "list"

    def __init__(self, name: str, elem_type_info: TypeInformation | None = None) -> None:
        super().__init__(name, _check_type("ListStateDescriptor", "elem_type_info", elem_type_info))
        self.elem_type_info = self.type_info


class MapStateDescriptor(StateDescriptor):
    kind = "map"

    def __init__(
        self,
        name: str,
        key_type_info: TypeInformation | None = None,
        value_type_info: TypeInformation | None = None,
    ) -> None:
        self.key_type_info = _check_type("MapStateDescriptor", "key_type_info", key_type_info)
        self.value_type_info = _check_type("MapStateDescriptor", "value_type_info", value_type_info)
        super().__init__(name, self.value_type_info)

    def signature(self) -> tuple[Any, ...]:
        return (*super().signature(), self.key_type_info)


class ReducingStateDescriptor(StateDescriptor):
    """``reduce_function`` is a ``ReduceFunction`` or a plain callable ``(a, b) -> c``."""

    kind = "reducing"

    def __init__(self, name: str, reduce_function: Any, type_info: TypeInformation | None = None) -> None:
        super().__init__(name, _check_type("ReducingStateDescriptor", "type_info", type_info))
        reduce = getattr(reduce_function, "reduce", None)
        if callable(reduce):
            self.reduce: Callable[[Any, Any], Any] = reduce
        elif callable(reduce_function):
            self.reduce = reduce_function
        else:
            raise UsageError(
                f"ReducingStateDescriptor '{name}': reduce_function must be a ReduceFunction or a "
                f"callable (a, b) -> c, got {reduce_function!r}"
            )
        self.reduce_function = reduce_function

    def get_reduce_function(self) -> Any:
        return self.reduce_function


class AggregatingStateDescriptor(StateDescriptor):
    """``agg_function`` is an ``AggregateFunction`` (create_accumulator, add, get_result, merge)."""

    kind = "aggregating"

    def __init__(self, name: str, agg_function: Any, state_type_info: TypeInformation | None = None) -> None:
        super().__init__(name, _check_type("AggregatingStateDescriptor", "state_type_info", state_type_info))
        missing = [
            m
            for m in ("create_accumulator", "add", "get_result")
            if not callable(getattr(agg_function, m, None))
        ]
        if missing:
            raise UsageError(
                f"AggregatingStateDescriptor '{name}': agg_function must be an AggregateFunction, "
                f"got {agg_function!r} without {', '.join(missing)}"
            )
        self.agg_function = agg_function

    def get_agg_function(self) -> Any:
        return self.agg_function


# --------------------------------------------------------------------------- state interfaces


class State(ABC):
    """Keyed state bound to the backend's current key and to this object's current namespace."""

    @abstractmethod
    def clear(self) -> None:
        """Remove the value under the current key and namespace."""


class ValueState(State):
    @abstractmethod
    def value(self) -> Any:
        """The value, or None when there is none."""

    @abstractmethod
    def update(self, value: Any) -> None:
        """Set the value; ``update(None)`` clears it, as in Flink."""


class AppendingState(State):
    @abstractmethod
    def get(self) -> Any: ...

    @abstractmethod
    def add(self, value: Any) -> None: ...


class MergingState(AppendingState):
    pass


class ListState(MergingState):
    @abstractmethod
    def get(self) -> Iterable[Any]:
        """The elements (an empty iterable when there are none)."""

    @abstractmethod
    def add(self, value: Any) -> None: ...

    @abstractmethod
    def add_all(self, values: Iterable[Any]) -> None: ...

    @abstractmethod
    def update(self, values: Iterable[Any] | None) -> None:
        """Replace all elements."""

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())


class ReducingState(MergingState):
    @abstractmethod
    def get(self) -> Any:
        """The reduced value, or None when nothing was added."""


class AggregatingState(MergingState):
    @abstractmethod
    def get(self) -> Any:
        """``get_result`` of the accumulator, or None when nothing was added."""


class MapState(State):
    @abstractmethod
    def get(self, key: Any) -> Any:
        """The value under ``key``, or None."""

    @abstractmethod
    def put(self, key: Any, value: Any) -> None: ...

    @abstractmethod
    def put_all(self, dict_value: dict[Any, Any]) -> None: ...

    @abstractmethod
    def remove(self, key: Any) -> None: ...

    @abstractmethod
    def contains(self, key: Any) -> bool: ...

    @abstractmethod
    def items(self) -> Iterable[tuple[Any, Any]]: ...

    @abstractmethod
    def keys(self) -> Iterable[Any]: ...

    @abstractmethod
    def values(self) -> Iterable[Any]: ...

    @abstractmethod
    def is_empty(self) -> bool: ...

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())


class ReadOnlyBroadcastState(State):
    """A broadcast state as the non-broadcast side sees it: read only (PyFlink's
    ``ReadOnlyBroadcastState``). Every subtask holds the same map."""

    def __init__(self, name: str, entries: dict[Any, Any]) -> None:
        self._name = name
        self._entries = entries

    def get(self, key: Any) -> Any:
        return self._entries.get(key)

    def contains(self, key: Any) -> bool:
        return key in self._entries

    def items(self) -> Iterable[tuple[Any, Any]]:
        return list(self._entries.items())

    def keys(self) -> Iterable[Any]:
        return list(self._entries.keys())

    def values(self) -> Iterable[Any]:
        return list(self._entries.values())

    def is_empty(self) -> bool:
        return not self._entries

    def _read_only(self, what: str) -> UsageError:
        return UsageError(
            f"broadcast state '{self._name}' is read-only in process_element and on_timer: {what} is only "
            f"allowed in process_broadcast_element, so that every subtask keeps the same state"
        )

    def put(self, key: Any, value: Any) -> None:
        raise self._read_only("put()")

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        raise self._read_only("put_all()")

    def remove(self, key: Any) -> None:
        raise self._read_only("remove()")

    def clear(self) -> None:
        raise self._read_only("clear()")

    def __getitem__(self, key: Any) -> Any:
        if key not in self._entries:
            raise KeyError(key)
        return self._entries[key]

    def __contains__(self, key: Any) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._entries))


class BroadcastState(ReadOnlyBroadcastState):
    """A broadcast state as the broadcast side sees it: read-write (PyFlink's ``BroadcastState``).
    Every subtask must change it the same way (from the broadcast element alone), so that all
    copies stay equal, as in Flink."""

    def put(self, key: Any, value: Any) -> None:
        self._entries[key] = value

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        self._entries.update(dict_value)

    def remove(self, key: Any) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)

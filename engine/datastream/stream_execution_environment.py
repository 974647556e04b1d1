"""``StreamExecutionEnvironment``: where a job is assembled, configured and submitted.

API calls append Transformations here; ``execute`` compiles them into a StreamGraph and
hands it to the runtime (``weir.cluster``). Settings live in one Configuration with
Flink's keys, so the typed setters, ``configure(conf)`` and configuration files agree.

``weir plan`` runs a job file under ``capture_programs()``: every environment created
there records the StreamGraph at ``execute`` instead of running it, as Flink's
``flink info`` does.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from weir.common import config_options as opts
from weir.common.configuration import Configuration
from weir.common.execution_config import ExecutionConfig
from weir.common.typeinfo import RowTypeInfo, TypeInformation, check_type_info
from weir.common.types import Row
from weir.common.watermark_strategy import WatermarkStrategy
from weir.core.connectors import Source
from weir.datastream.checkpoint_config import CheckpointConfig
from weir.datastream.connectors.builtin import CollectionSource, FunctionSource
from weir.datastream.execution_mode import CheckpointingMode, RuntimeExecutionMode
from weir.datastream.time_characteristic import TimeCharacteristic
from weir.errors import UsageError
from weir.graph.transformations import (
    ChainingStrategy,
    SourceTransformation,
    Transformation,
    check_max_parallelism,
)

if TYPE_CHECKING:
    from weir.core.execution import ExecutionSettings
    from weir.datastream.data_stream import DataStream
    from weir.graph.stream_graph import StreamGraph


class ProgramCaptured(BaseException):
    """Raised by ``execute`` under ``capture_programs`` to stop the job file (not an error)."""

    def __init__(self, stream_graph: StreamGraph) -> None:
        super().__init__("program captured")
        self.stream_graph = stream_graph


@dataclass
class _Capture:
    environments: list[StreamExecutionEnvironment] = field(default_factory=list)
    configuration: Configuration | None = None


_capture: _Capture | None = None
_defaults: Configuration | None = None


@contextlib.contextmanager
def default_configuration(configuration: Configuration) -> Iterator[None]:
    """Within this block new environments start from ``configuration`` (``weir run``'s flags);
    settings the job makes itself still win."""
    global _defaults
    previous = _defaults
    _defaults = configuration
    try:
        yield
    finally:
        _defaults = previous


@contextlib.contextmanager
def capture_programs(configuration: Configuration | None = None) -> Iterator[_Capture]:
    """Within this block environments record their job at ``execute`` instead of running it."""
    global _capture
    previous = _capture
    _capture = _Capture(configuration=configuration)
    try:
        yield _capture
    finally:
        _capture = previous


_default_local_parallelism: int | None = None


class StreamExecutionEnvironment:
    def __init__(self, configuration: Configuration | None = None) -> None:
        self._configuration = Configuration(configuration)
        self._transformations: list[Transformation] = []
        self._next_id = 1
        self._checkpoint_config = CheckpointConfig(self._configuration)
        self._execution_config = ExecutionConfig(self._configuration)
        self._capturing = False
        self._state_backend: Any = None
        self._time_characteristic = TimeCharacteristic.EventTime
        self._caches: dict[int, Any] = {}  # transformation id -> CachedDataStream (DataStream.cache())
        self._materializing: set[int] = set()
        self.cluster: Any = None  # a running cluster to submit to (weir.cluster); None: embedded
        # what `weir run`/`weir plan` configured (the cluster's settings: fall_back_restart goes back to them)
        launcher = _capture.configuration if _capture is not None else _defaults
        self._launcher_configuration = Configuration(launcher)

    @staticmethod
    def get_execution_environment(configuration: Configuration | None = None) -> StreamExecutionEnvironment:
        if _capture is not None:
            conf = Configuration(_capture.configuration)
            if configuration is not None:
                conf = Configuration(configuration).add_all(conf)
            env = StreamExecutionEnvironment(conf)
            env._capturing = True
            _capture.environments.append(env)
            return env
        if _defaults is not None:
            conf = Configuration(_defaults)
            if configuration is not None:
                conf.add_all(configuration)
            return StreamExecutionEnvironment(conf)
        env = StreamExecutionEnvironment(configuration)
        if _default_local_parallelism is not None and (
            configuration is None or configuration.get_string(opts.PARALLELISM_DEFAULT.key) is None
        ):
            env.set_parallelism(_default_local_parallelism)
        return env

    @staticmethod
    def set_default_local_parallelism(parallelism: int) -> None:
        """The parallelism of environments made afterwards by ``get_execution_environment`` for
        the embedded cluster, unless their configuration sets ``parallelism.default`` (Flink's
        default for local environments)."""
        global _default_local_parallelism
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise UsageError(f"default local parallelism must be a positive integer, got {parallelism!r}")
        _default_local_parallelism = parallelism

    @staticmethod
    def get_default_local_parallelism() -> int:
        """The value set, else the machine's CPU count (Java's ``availableProcessors``)."""
        if _default_local_parallelism is not None:
            return _default_local_parallelism
        return os.cpu_count() or 1

    # -- configuration -------------------------------------------------------------------------
    def configure(self, configuration: Configuration) -> StreamExecutionEnvironment:
        if not isinstance(configuration, Configuration):
            raise UsageError(f"configure() needs a Configuration, got {configuration!r}")
        self._configuration.add_all(configuration)
        return self

    def get_configuration(self) -> Configuration:
        return self._configuration

    def get_config(self) -> ExecutionConfig:
        return self._execution_config

    def get_checkpoint_config(self) -> CheckpointConfig:
        return self._checkpoint_config

    def set_parallelism(self, parallelism: int) -> StreamExecutionEnvironment:
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise UsageError(
                f"parallelism of the environment must be a positive integer, got {parallelism!r}"
            )
        max_p = self.get_max_parallelism()
        if max_p != -1 and parallelism > max_p:
            raise UsageError(f"parallelism {parallelism} exceeds max_parallelism {max_p} of the environment")
        self._configuration.set_integer(opts.PARALLELISM_DEFAULT.key, parallelism)
        return self

    def get_parallelism(self) -> int:
        return int(self._configuration.get_option(opts.PARALLELISM_DEFAULT))

    def set_max_parallelism(self, max_parallelism: int) -> StreamExecutionEnvironment:
        check_max_parallelism("the environment", max_parallelism)
        self._configuration.set_integer(opts.MAX_PARALLELISM.key, max_parallelism)
        return self

    def get_max_parallelism(self) -> int:
        return int(self._configuration.get_option(opts.MAX_PARALLELISM))

    def set_buffer_timeout(self, timeout_millis: int) -> StreamExecutionEnvironment:
        if isinstance(timeout_millis, bool) or not isinstance(timeout_millis, int) or timeout_millis < -1:
            raise UsageError(
                f"buffer timeout must be -1 (flush only when full), 0 (flush every record) or positive ms, "
                f"got {timeout_millis!r}"
            )
        self._configuration.set_string(opts.BUFFER_TIMEOUT.key, f"{timeout_millis} ms")
        return self

    def get_buffer_timeout(self) -> int:
        if not self._configuration.get_option(opts.BUFFER_TIMEOUT_ENABLED):
            return -1
        return int(self._configuration.get_option(opts.BUFFER_TIMEOUT))

    def disable_operator_chaining(self) -> StreamExecutionEnvironment:
        self._configuration.set_boolean(opts.OPERATOR_CHAINING.key, False)
        return self

    def is_chaining_enabled(self) -> bool:
        return bool(self._configuration.get_option(opts.OPERATOR_CHAINING))

    def is_chaining_of_operators_with_different_max_parallelism_enabled(self) -> bool:
        return bool(self._configuration.get_option(opts.CHAIN_DIFFERENT_MAX_PARALLELISM))

    def set_runtime_mode(self, execution_mode: RuntimeExecutionMode) -> StreamExecutionEnvironment:
        if not isinstance(execution_mode, RuntimeExecutionMode):
            raise UsageError(
                f"runtime mode must be a RuntimeExecutionMode (STREAMING, BATCH, AUTOMATIC), got {execution_mode!r}"
            )
        self._configuration.set_string(opts.RUNTIME_MODE.key, execution_mode.name)
        return self

    def set_state_backend(self, state_backend: Any) -> StreamExecutionEnvironment:
        """``HashMapStateBackend()`` or ``LmdbStateBackend(path)`` (weir.core.state_backend);
        the same as setting ``state.backend.type``."""
        from weir.core.state_backend import StateBackend

        if not isinstance(state_backend, StateBackend):
            raise UsageError(
                f"set_state_backend needs HashMapStateBackend() or LmdbStateBackend(), got {state_backend!r}"
            )
        self._state_backend = state_backend
        self._configuration.set_string(opts.STATE_BACKEND.key, state_backend.type_name)
        return self

    def set_restart_strategy(self, restart_strategy_configuration: Any) -> StreamExecutionEnvironment:
        """``RestartStrategies.fixed_delay_restart(3, 10_000)`` and the others (PyFlink 1.x's
        setter; Flink 2.x configures ``restart-strategy.*``): writes those keys into the
        job's configuration, replacing the job's earlier ones. ``fall_back_restart()``
        removes them, so the strategy ``weir run`` or the cluster configures applies."""
        from weir.common.restart_strategy import RESTART_STRATEGY_KEY_PREFIX, RestartStrategyConfiguration

        if not isinstance(restart_strategy_configuration, RestartStrategyConfiguration):
            raise UsageError(
                "set_restart_strategy needs a RestartStrategyConfiguration such as "
                f"RestartStrategies.fixed_delay_restart(3, 10000), got {restart_strategy_configuration!r}"
            )
        for key in [k for k in self._configuration.key_set() if k.startswith(RESTART_STRATEGY_KEY_PREFIX)]:
            self._configuration.remove_config(key)
        entries = restart_strategy_configuration.to_configuration_entries()
        if not entries:  # fall back to what `weir run` configured
            launcher = self._launcher_configuration.to_dict()
            entries = {k: v for k, v in launcher.items() if k.startswith(RESTART_STRATEGY_KEY_PREFIX)}
        for key, value in entries.items():
            self._configuration.set_string(key, value)
        return self

    def get_restart_strategy(self) -> Any:
        """The ``RestartStrategyConfiguration`` the job's ``restart-strategy.*`` keys describe
        (the fallback when it sets none)."""
        from weir.common.restart_strategy import FallbackRestartStrategyConfiguration, restart_strategy_of

        return restart_strategy_of(self._configuration) or FallbackRestartStrategyConfiguration()

    def get_state_backend(self) -> Any:
        from weir.core.state_backend import configured_state_backend

        return configured_state_backend(self._state_backend, self._configuration)

    def set_stream_time_characteristic(
        self, characteristic: TimeCharacteristic
    ) -> StreamExecutionEnvironment:
        """PyFlink 1.x's switch (``weir.datastream.time_characteristic`` says what it changes)."""
        if not isinstance(characteristic, TimeCharacteristic):
            raise UsageError(
                f"set_stream_time_characteristic needs a TimeCharacteristic, got {characteristic!r}; "
                f"valid: {', '.join('TimeCharacteristic.' + c.name for c in TimeCharacteristic)}"
            )
        self._time_characteristic = characteristic
        interval = 0 if characteristic is TimeCharacteristic.ProcessingTime else 200
        self._execution_config.set_auto_watermark_interval(interval)
        return self

    def get_stream_time_characteristic(self) -> TimeCharacteristic:
        return self._time_characteristic

    def get_runtime_mode(self) -> RuntimeExecutionMode:
        return RuntimeExecutionMode[self._configuration.get_option(opts.RUNTIME_MODE)]

    def enable_checkpointing(
        self, interval: int, mode: CheckpointingMode | None = None
    ) -> StreamExecutionEnvironment:
        self._checkpoint_config.set_checkpoint_interval(interval)
        if mode is not None:
            self._checkpoint_config.set_checkpointing_mode(mode)
        return self

    def get_checkpoint_interval(self) -> int:
        return self._checkpoint_config.get_checkpoint_interval()

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self._checkpoint_config.get_checkpointing_mode()

    # -- sources -------------------------------------------------------------------------------
    def get_checkpointing_consistency_mode(self) -> CheckpointingMode:
        return self.get_checkpointing_mode()

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return self._checkpoint_config.is_unaligned_checkpoints_enabled()

    def is_force_unaligned_checkpoints(self) -> bool:
        return self._checkpoint_config.is_force_unaligned_checkpoints()

    def set_default_savepoint_directory(self, directory: str) -> StreamExecutionEnvironment:
        self._configuration.set_string(opts.SAVEPOINT_DIRECTORY.key, str(directory))
        return self

    def get_default_savepoint_directory(self) -> str | None:
        value = self._configuration.get_option(opts.SAVEPOINT_DIRECTORY)
        return None if value is None else str(value)

    def register_slot_sharing_group(self, slot_sharing_group: Any) -> StreamExecutionEnvironment:
        """Accepted for PyFlink jobs: weir's slot sharing groups carry a name only (no resource profile)."""
        from weir.datastream.slot_sharing_group import SlotSharingGroup

        if not isinstance(slot_sharing_group, SlotSharingGroup):
            raise UsageError(
                f"register_slot_sharing_group needs a SlotSharingGroup, got {slot_sharing_group!r}"
            )
        return self

    # -- Python dependencies ---------------------------------------------------------------------
    def add_python_file(self, file_path: str) -> None:
        """Make a Python file, package directory or archive (.zip, .whl, .egg) importable by
        the job's functions (Flink's ``python.files``). On the embedded cluster the functions
        run in this process, so its importable location joins ``sys.path`` now: a ``.py``
        file's directory, else the path itself."""
        path = os.path.abspath(os.fspath(file_path))
        if not os.path.exists(path):
            raise UsageError(
                f"add_python_file: {file_path!r} does not exist; expected a .py file, a directory or an archive"
            )
        entry = os.path.dirname(path) if os.path.isfile(path) and path.endswith(".py") else path
        if entry not in sys.path:
            sys.path.insert(0, entry)
        self._append_list_option("python.files", path, ",")

    def add_python_archive(self, archive_path: str, target_dir: str | None = None) -> None:
        """Recorded in ``python.archives`` for a cluster that ships it; the embedded cluster runs
        in this process, where the archive's files are already at hand."""
        entry = archive_path if target_dir is None else f"{archive_path}#{target_dir}"
        self._append_list_option("python.archives", entry, ",")

    def set_python_requirements(
        self, requirements_file_path: str, requirements_cache_dir: str | None = None
    ) -> None:
        """Recorded in ``python.requirements``; weir installs nothing (the job runs in this interpreter)."""
        value = (
            requirements_file_path
            if requirements_cache_dir is None
            else f"{requirements_file_path}#{requirements_cache_dir}"
        )
        self._configuration.set_string("python.requirements", value)

    def set_python_executable(self, python_exec: str) -> None:
        """Recorded in ``python.executable``; the embedded cluster runs functions in this interpreter."""
        self._configuration.set_string("python.executable", str(python_exec))

    def add_jars(self, *jars_path: str) -> None:
        """Recorded in ``pipeline.jars`` for ``--target flink``; weir runs no JVM code."""
        for jar in jars_path:
            self._append_list_option("pipeline.jars", str(jar))

    def add_classpaths(self, *classpaths: str) -> None:
        """Recorded in ``pipeline.classpaths`` for ``--target flink``; weir runs no JVM code."""
        for path in classpaths:
            self._append_list_option("pipeline.classpaths", str(path))

    def register_cached_file(self, file_path: str, name: str, executable: bool = False) -> None:
        """Recorded in ``pipeline.cached-files`` (Flink's distributed cache) for ``--target flink``;
        the embedded cluster's functions read ``file_path`` directly."""
        if not isinstance(name, str) or not name or "," in name or ":" in name:
            raise UsageError(
                f"a cached file's name must be a non-empty string without ',' or ':', got {name!r}"
            )
        entry = f"name:{name},path:{file_path},executable:{str(bool(executable)).lower()}"
        self._append_list_option("pipeline.cached-files", entry)

    def enable_changelog_state_backend(self, enabled: bool) -> StreamExecutionEnvironment:
        """Recorded in ``state.changelog.enabled``: weir's LMDB backend snapshots incrementally
        on its own, so the changelog changes nothing here (a Flink target reads the key)."""
        self._configuration.set_boolean("state.changelog.enabled", bool(enabled))
        return self

    def is_changelog_state_backend_enabled(self) -> bool:
        return self._configuration.get_boolean("state.changelog.enabled", False)

    def _append_list_option(self, key: str, value: str, separator: str = ";") -> None:
        """Add ``value`` to the list option ``key`` (Flink separates ``pipeline.*`` lists with
        ``;`` and ``python.files``/``python.archives`` with ``,``)."""
        current = self._configuration.get_string(key, "")
        items = [v for v in current.split(separator) if v] if current else []
        if value not in items:
            items.append(value)
        self._configuration.set_string(key, separator.join(items))

    def _new_id(self) -> int:
        nid = self._next_id
        self._next_id += 1
        return nid

    def _add_source(
        self,
        source: Source,
        name: str,
        type_info: TypeInformation | None,
        watermark_strategy: WatermarkStrategy | None,
    ) -> DataStream:
        from weir.datastream.data_stream import DataStream

        t = SourceTransformation(
            id=self._new_id(),
            name=name,
            output_type=type_info if type_info is not None else source.produced_type(),
            chaining_strategy=ChainingStrategy.HEAD,
            source=source,
            watermark_strategy=watermark_strategy,
            bounded=source.is_bounded(),
        )
        if not source.is_parallel:
            t.parallelism = 1
            t.max_parallelism = 1
            t.parallelism_fixed = True
        return DataStream(self, t)

    def from_collection(self, collection: list[Any], type_info: TypeInformation | None = None) -> DataStream:
        try:
            elements = list(collection)
        except TypeError:
            raise UsageError(f"from_collection needs an iterable of elements, got {collection!r}") from None
        type_info = check_type_info("from_collection(type_info)", type_info)
        if isinstance(type_info, RowTypeInfo):
            elements = [_as_row(e, type_info) for e in elements]
        return self._add_source(CollectionSource(elements, type_info), "Collection Source", type_info, None)

    def create_input(self, input_format: Any, type_info: TypeInformation | None = None) -> DataStream:
        """A bounded stream of what ``input_format`` (a ``weir.common.io.InputFormat`` such as
        ``AvroInputFormat``) reads, split among the source's subtasks; its records are of
        ``type_info``, else of the type the format produces."""
        from weir.common.io import InputFormat
        from weir.datastream.connectors.builtin import InputFormatSource

        if not isinstance(input_format, InputFormat):
            raise UsageError(
                f"create_input needs an InputFormat such as AvroInputFormat, got {input_format!r}"
            )
        type_info = check_type_info("create_input(type_info)", type_info)
        return self._add_source(InputFormatSource(input_format), "Custom Source", type_info, None)

    def from_source(
        self,
        source: Source,
        watermark_strategy: WatermarkStrategy,
        source_name: str,
        type_info: TypeInformation | None = None,
    ) -> DataStream:
        if not isinstance(source, Source):
            raise UsageError(
                f"from_source needs a Source such as NumberSequenceSource or FileSource, got {source!r}"
            )
        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise UsageError(
                f"from_source needs a WatermarkStrategy (e.g. WatermarkStrategy.no_watermarks()), got {watermark_strategy!r}"
            )
        if not isinstance(source_name, str) or not source_name:
            raise UsageError(f"from_source needs a source name as a non-empty string, got {source_name!r}")
        type_info = check_type_info("from_source(type_info)", type_info)
        return self._add_source(source, source_name, type_info, watermark_strategy)

    def add_source(
        self,
        source_func: Any,
        source_name: str = "Custom Source",
        type_info: TypeInformation | None = None,
        bounded: bool = True,
        parallel: bool = False,
    ) -> DataStream:
        """A SourceFunction (``run(ctx)`` emitting with ``ctx.collect``); non-parallel unless ``parallel``."""
        from weir.core.functions import SourceFunction

        if not isinstance(source_func, SourceFunction):
            raise UsageError(f"add_source needs a SourceFunction, got {source_func!r}")
        type_info = check_type_info("add_source(type_info)", type_info)
        return self._add_source(FunctionSource(source_func, bounded, parallel), source_name, type_info, None)

    # -- the job -------------------------------------------------------------------------------
    def _add_transformation(self, transformation: Transformation) -> None:
        self._transformations.append(transformation)

    def get_transformations(self) -> list[Transformation]:
        return list(self._transformations)

    def get_stream_graph(
        self, job_name: str | None = None, clear_transformations: bool = False
    ) -> StreamGraph:
        from weir.graph.stream_graph import generate_stream_graph

        with self._reading_caches():
            graph = generate_stream_graph(self, job_name)
        if clear_transformations:
            self._transformations.clear()
        return graph

    def _reachable(self) -> list[Transformation]:
        seen: dict[int, Transformation] = {}
        stack = list(self._transformations)
        while stack:
            t = stack.pop()
            if id(t) not in seen:
                seen[id(t)] = t
                stack.extend(t.inputs)
        return list(seen.values())

    def _materialize_caches(self) -> None:
        """Compute the records of every cached stream this job uses and nobody kept yet: each
        runs as a job of its own (its upstream, into a collect sink), before this job."""
        from weir.datastream.data_stream import DataStream

        for t in self._reachable():
            cached = self._caches.get(t.id)
            if cached is None or cached._records is not None or cached._transformation is not t:
                continue
            if t.id in self._materializing:  # this is the job that computes it
                continue
            if self.get_runtime_mode() is not RuntimeExecutionMode.BATCH:
                raise UsageError(
                    f"the cached stream '{t.name}' needs RuntimeExecutionMode.BATCH; the environment "
                    f"runs {self.get_runtime_mode().name}"
                )
            saved, self._transformations = self._transformations, []
            self._materializing.add(t.id)
            try:
                records = list(DataStream(self, t).execute_and_collect(f"cache of {t.name}"))
            finally:
                self._transformations = saved
                self._materializing.discard(t.id)
            cached._records = records

    @contextlib.contextmanager
    def _reading_caches(self) -> Iterator[None]:
        """While the graph is built, operators read kept records of cached streams from a
        collection source in place of the cached stream's upstream."""
        swaps: list[tuple[Transformation, int, Transformation]] = []
        sources: dict[int, Transformation] = {}
        for t in self._reachable():
            for i, upstream in enumerate(t.inputs):
                cached = self._caches.get(upstream.id)
                if cached is None or cached._records is None or cached._transformation is not upstream:
                    continue
                if upstream.id not in sources:
                    kept = CollectionSource(list(cached._records), upstream.output_type)
                    sources[upstream.id] = self._add_source(
                        kept, f"{upstream.name} (cached)", upstream.output_type, None
                    )._transformation
                swaps.append((t, i, upstream))
                t.inputs[i] = sources[upstream.id]
        # the cached streams and what only they need are not operators of this job any more
        # (an operator added without a sink still runs, as in Flink, unless a cache replaced it)
        replaced: set[int] = set()
        stack = [self._caches[i]._transformation for i in sources]
        while stack:
            t = stack.pop()
            if id(t) not in replaced:
                replaced.add(id(t))
                stack.extend(t.inputs)
        listed = self._transformations
        self._transformations = [t for t in listed if id(t) not in replaced]
        try:
            yield
        finally:
            self._transformations = listed
            for t, i, upstream in swaps:
                t.inputs[i] = upstream

    def get_execution_plan(self) -> str:
        """The StreamGraph as Flink's execution-plan JSON (``nodes`` with predecessors)."""
        import json

        from weir.graph.plan import stream_graph_to_json

        return json.dumps(stream_graph_to_json(self.get_stream_graph()), indent=2)

    def _job_name(self, job_name: str | None) -> str:
        if job_name is not None:
            return job_name
        configured = self._configuration.get_option(opts.PIPELINE_NAME)
        return str(configured) if configured else "weir Streaming Job"

    def _restore_from(self, savepoint_path: str | None, allow_non_restored_state: bool) -> None:
        if savepoint_path is not None:
            conf = self.get_configuration()
            conf.set_string("execution.savepoint.path", str(savepoint_path))
            conf.set_string(
                "execution.savepoint.ignore-unclaimed-state", str(allow_non_restored_state).lower()
            )

    def execute(
        self,
        job_name: str | None = None,
        savepoint_path: str | None = None,
        allow_non_restored_state: bool = False,
    ) -> Any:
        """Compile and run the job; returns a JobExecutionResult. Blocks until the job ends.
        ``savepoint_path``: start from that savepoint (``execution.savepoint.path``)."""
        self._restore_from(savepoint_path, allow_non_restored_state)
        if not self._capturing:
            self._materialize_caches()
        graph = self.get_stream_graph(self._job_name(job_name), clear_transformations=True)
        if self._capturing:
            raise ProgramCaptured(graph)
        _check_runnable(graph)
        return self._executor().execute(graph, self.execution_settings())

    def execute_async(
        self,
        job_name: str | None = None,
        savepoint_path: str | None = None,
        allow_non_restored_state: bool = False,
    ) -> Any:
        """Submit the job and return a JobClient without waiting for it to end."""
        self._restore_from(savepoint_path, allow_non_restored_state)
        if not self._capturing:
            self._materialize_caches()
        graph = self.get_stream_graph(self._job_name(job_name), clear_transformations=True)
        if self._capturing:
            raise ProgramCaptured(graph)
        _check_runnable(graph)
        return self._executor().execute_async(graph, self.execution_settings())

    def _execute_and_collect(self, sink: Source | Any, job_name: str | None, limit: int | None) -> Any:
        """``DataStream.execute_and_collect``: run the job, stream the records of ``sink`` back."""
        self._materialize_caches()
        graph = self.get_stream_graph(self._job_name(job_name), clear_transformations=True)
        node = next(
            n for n in graph.nodes.values() if n.is_sink and getattr(n.transformation, "sink", None) is sink
        )
        _check_runnable(graph)
        return self._executor().execute_and_collect(graph, self.execution_settings(), node.id, limit)

    def _executor(self) -> Any:
        """The executor ``execution.target`` names (``weir.core.execution``'s registry)."""
        from weir.core.execution import get_executor

        return get_executor(str(self._configuration.get_option(opts.EXECUTION_TARGET)))

    def execution_settings(self) -> ExecutionSettings:
        """What the runtime reads of this environment, frozen: the executor gets it with the StreamGraph."""
        from weir.core.execution import ExecutionSettings

        return ExecutionSettings(
            configuration=Configuration(self._configuration),
            state_backend=self._state_backend,
            checkpoint_interval_ms=self.get_checkpoint_interval(),
            checkpoint_storage_dir=self._checkpoint_config.get_checkpoint_storage_dir(),
            buffer_timeout_ms=self.get_buffer_timeout(),
            auto_watermark_interval_ms=self._execution_config.get_auto_watermark_interval(),
            job_parameters=self._execution_config.get_global_job_parameters(),
            cluster=self.cluster,
        )

    def close(self) -> None:
        self._transformations.clear()


def _check_runnable(graph: StreamGraph) -> None:
    """Refuse, before anything starts, a job with a connector weir can plan but not run (one
    whose ``unrunnable_reason()`` says why, e.g. a ``KafkaSink`` without its client library):
    a task failure would only be retried by the restart strategy."""
    for node in graph.nodes.values():
        connector = getattr(node.transformation, "sink", None) or getattr(node.transformation, "source", None)
        reason = getattr(connector, "unrunnable_reason", None)
        why = reason() if callable(reason) else None
        if why:
            raise UsageError(f"'{node.name}': {why}")


def _as_row(value: Any, row_type: RowTypeInfo) -> Any:
    """An element of a collection of ``Types.ROW``/``ROW_NAMED`` as PyFlink reads it: a tuple
    or list becomes a Row named by the type (``row.id``), nested rows too; other values stay
    (the serializer names any that do not fit)."""
    if not isinstance(value, tuple | list | Row) or len(value) != row_type.get_arity():
        return value
    fields = [
        _as_row(v, t) if isinstance(t, RowTypeInfo) else v for v, t in zip(value, row_type.get_field_types())
    ]
    row = Row(**dict(zip(row_type.get_field_names(), fields)))
    if isinstance(value, Row):
        row.set_row_kind(value.get_row_kind())
    return row

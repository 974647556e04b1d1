"""The names a PyFlink job imports, and the small calls behind them, as PyFlink has them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import weir.common
import weir.datastream
from weir.common import Configuration, Encoder, ExecutionConfig, JobStatus
from weir.datastream import (
    KeyedProcessFunction,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    TimeDomain,
    TimerService,
    WindowFunction,
)
from weir.errors import UsageError


def test_the_package_exports_import_and_are_listed() -> None:
    for package in (weir.datastream, weir.common):
        for name in package.__all__:
            assert getattr(package, name) is not None, name
    for name in (
        "TimeWindow",
        "GlobalWindow",
        "HashMapStateBackend",
        "TimerService",
        "Partitioner",
        "TimeDomain",
    ):
        assert name in weir.datastream.__all__
    for name in (
        "Encoder",
        "ExecutionConfig",
        "JobStatus",
        "JobClient",
        "JobExecutionResult",
        "CompletableFuture",
    ):
        assert name in weir.common.__all__
    assert Encoder.simple_string_encoder().encode(["a", 1]) == b"a\n1\n"


def test_window_function_classes_are_generic_as_in_pyflink() -> None:
    class Count(ProcessWindowFunction[tuple, tuple, str, Any]):
        def process(self, key: str, context: ProcessWindowFunction.Context[Any], elements: Any) -> Any:
            return [(key, len(list(elements)))]

    assert Count().process("k", None, [1, 2]) == [("k", 2)]  # type: ignore[arg-type]
    assert WindowFunction[int, int, str, Any] is not None


def test_time_domain_compares_with_its_name() -> None:
    assert TimeDomain.EVENT_TIME == "EVENT_TIME" and TimeDomain.PROCESSING_TIME != TimeDomain.EVENT_TIME


class RecordTimerService(KeyedProcessFunction):
    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:
        yield isinstance(ctx.timer_service(), TimerService)


def test_the_timer_service_a_function_sees_is_a_timer_service() -> None:
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    out = (
        env.from_collection([1])
        .key_by(lambda v: v)
        .process(RecordTimerService())
        .execute_and_collect(limit=5)
    )
    assert out == [True]


def test_job_status_has_pyflink_predicates() -> None:
    assert JobStatus.FINISHED.is_globally_terminal_state()
    assert JobStatus.SUSPENDED.is_terminal_state() and not JobStatus.SUSPENDED.is_globally_terminal_state()
    assert not JobStatus.RUNNING.is_terminal_state()


def test_execution_config_reads_back_what_was_set() -> None:
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    config = env.get_config()
    assert isinstance(config, ExecutionConfig)
    config.set_parallelism(3).enable_object_reuse()
    assert env.get_parallelism() == 3 and config.is_object_reuse_enabled()
    config.set_max_parallelism(64)
    assert env.get_max_parallelism() == 64
    with pytest.raises(UsageError, match="set_parallelism needs a positive integer, got 0"):
        config.set_parallelism(0)


def test_checkpoint_config_answers_pyflink_s_older_names() -> None:
    checkpoints = StreamExecutionEnvironment.get_execution_environment(
        Configuration()
    ).get_checkpoint_config()
    checkpoints.set_fail_on_checkpointing_errors(True)
    assert checkpoints.is_fail_on_checkpointing_errors()
    checkpoints.set_fail_on_checkpointing_errors(False)
    assert not checkpoints.is_fail_on_checkpointing_errors()


def test_add_python_file_makes_a_module_importable(tmp_path: Path) -> None:
    module = tmp_path / "weir_test_helper_module_28.py"
    module.write_text("VALUE = 28\n")
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    try:
        env.add_python_file(str(module))
        import weir_test_helper_module_28  # type: ignore[import-not-found]

        assert weir_test_helper_module_28.VALUE == 28
        assert env.get_configuration().get_string("python.files") == str(module)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("weir_test_helper_module_28", None)
    with pytest.raises(UsageError, match="does not exist"):
        env.add_python_file(str(tmp_path / "missing.py"))


def test_slot_sharing_groups_carry_their_resources() -> None:
    from weir.datastream import MemorySize, SlotSharingGroup

    group = (
        SlotSharingGroup.builder("g")
        .set_cpu_cores(1.5)
        .set_task_heap_memory_mb(100)
        .set_managed_memory(MemorySize.of_mebi_bytes(2))
        .set_external_resource("gpu", 1)
        .build()
    )
    assert (group.get_name(), group.get_cpu_cores()) == ("g", 1.5)
    heap = group.get_task_heap_memory()
    assert heap is not None and heap.get_mebi_bytes() == 100 and str(heap) == "100 mb"
    assert group.get_task_off_heap_memory() is None
    assert group.get_external_resources() == {"gpu": 1.0}
    with pytest.raises(UsageError, match="set_cpu_cores needs a positive number, got 0"):
        SlotSharingGroup.builder("g").set_cpu_cores(0)
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    mapped = env.from_collection([1]).map(lambda v: v).slot_sharing_group(group)
    assert mapped.get_transformation().slot_sharing_group == "g"


def test_embedded_rocksdb_runs_on_lmdb_and_keeps_its_settings(tmp_path: Path) -> None:
    from weir.datastream import EmbeddedRocksDBStateBackend
    from weir.datastream.state_backend import LmdbStateBackend

    backend = EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True)
    backend.set_db_storage_paths(str(tmp_path))
    backend.set_number_of_transfer_threads(2)
    assert isinstance(backend, LmdbStateBackend) and backend.is_incremental_checkpoints_enabled()
    assert (backend.get_db_storage_paths(), backend.get_number_of_transfer_threads()) == ([str(tmp_path)], 2)
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    env.set_state_backend(backend)
    assert env.get_configuration().get_string("state.backend.type") == "lmdb"
    out = env.from_collection([("a", 1), ("a", 2)]).key_by(lambda p: p[0]).sum(1).execute_and_collect(limit=5)
    assert out == [("a", 1), ("a", 3)]


def test_small_function_names() -> None:
    from weir.datastream.functions import KeyedStateStore, NullByteKeySelector, RuntimeContext
    from weir.datastream.state import AggregatingStateDescriptor, ReducingStateDescriptor

    assert issubclass(RuntimeContext, KeyedStateStore)
    assert NullByteKeySelector().get_key("anything") == 0

    def add(a: int, b: int) -> int:
        return a + b

    assert ReducingStateDescriptor("r", add).get_reduce_function() is add

    class Avg:
        def create_accumulator(self) -> int:
            return 0

        def add(self, v: int, acc: int) -> int:
            return acc + v

        def get_result(self, acc: int) -> int:
            return acc

    agg = Avg()
    assert AggregatingStateDescriptor("a", agg).get_agg_function() is agg

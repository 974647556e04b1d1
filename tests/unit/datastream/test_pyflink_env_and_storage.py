"""PyFlink's checkpoint storage classes, the environment's local-parallelism default, cached
files and changelog switch, and the function wrappers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import weir.datastream.stream_execution_environment as env_module
from weir.common import Types
from weir.datastream import (
    CheckpointStorage,
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
    StreamExecutionEnvironment,
)
from weir.datastream.functions import (
    FunctionWrapper,
    PassThroughAllWindowFunction,
    PassThroughWindowFunction,
    ReduceFunction,
    ReduceFunctionWrapper,
)
from weir.datastream.window import Min
from weir.errors import UsageError


@pytest.fixture
def no_local_default() -> Iterator[None]:
    saved = env_module._default_local_parallelism
    env_module._default_local_parallelism = None
    yield
    env_module._default_local_parallelism = saved


def test_file_system_storage_sets_the_checkpoint_directory(tmp_path: Path) -> None:
    storage = FileSystemCheckpointStorage(f"file://{tmp_path}/cp")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_checkpoint_config().set_checkpoint_storage(storage)
    assert env.get_checkpoint_config().get_checkpoint_storage() is storage
    assert env.get_checkpoint_config().get_checkpoint_storage_dir() == f"{tmp_path}/cp"
    assert storage.get_checkpoint_path() == f"file://{tmp_path}/cp"
    assert storage.get_min_file_size_threshold() == 20 * 1024 and storage.get_write_buffer_size() == 4096
    assert storage.get_savepoint_path() is None
    sized = FileSystemCheckpointStorage("file:///cp", file_state_size_threshold=100, write_buffer_size=8192)
    assert (sized.get_min_file_size_threshold(), sized.get_write_buffer_size()) == (100, 8192)


def test_file_system_storage_refuses_what_flink_refuses() -> None:
    with pytest.raises(UsageError, match="needs a checkpoint_path"):
        FileSystemCheckpointStorage(None)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"within 0\.\.1048576 bytes"):
        FileSystemCheckpointStorage("file:///cp", file_state_size_threshold=2 * 1024 * 1024)


def test_job_manager_storage_keeps_its_limits_and_an_optional_path(tmp_path: Path) -> None:
    plain = JobManagerCheckpointStorage()
    assert plain.get_checkpoint_path() is None and plain.get_max_state_size() == 5 * 1024 * 1024
    env = StreamExecutionEnvironment.get_execution_environment()
    before = env.get_checkpoint_config().get_checkpoint_storage_dir()
    env.get_checkpoint_config().set_checkpoint_storage(plain)
    assert env.get_checkpoint_config().get_checkpoint_storage_dir() == before
    env.get_checkpoint_config().set_checkpoint_storage(JobManagerCheckpointStorage(str(tmp_path), 1024))
    assert env.get_checkpoint_config().get_checkpoint_storage_dir() == str(tmp_path)
    assert isinstance(plain, CheckpointStorage)
    with pytest.raises(UsageError, match="max_state_size must be a positive int"):
        JobManagerCheckpointStorage(max_state_size=0)
    with pytest.raises(UsageError, match="needs a CheckpointStorage"):
        env.get_checkpoint_config().set_checkpoint_storage("file:///cp")  # type: ignore[arg-type]


def test_the_default_local_parallelism_applies_to_environments_made_afterwards(
    no_local_default: None,
) -> None:
    assert StreamExecutionEnvironment.get_default_local_parallelism() >= 1
    before = StreamExecutionEnvironment.get_execution_environment()
    StreamExecutionEnvironment.set_default_local_parallelism(3)
    assert StreamExecutionEnvironment.get_default_local_parallelism() == 3
    assert StreamExecutionEnvironment.get_execution_environment().get_parallelism() == 3
    assert before.get_parallelism() == 1
    with pytest.raises(UsageError, match="positive integer, got 0"):
        StreamExecutionEnvironment.set_default_local_parallelism(0)


def test_a_job_runs_at_the_default_local_parallelism(no_local_default: None) -> None:
    StreamExecutionEnvironment.set_default_local_parallelism(2)
    env = StreamExecutionEnvironment.get_execution_environment()
    out = env.from_collection([1, 2, 3, 4], Types.INT()).map(lambda x: x * 10).execute_and_collect()
    assert sorted(out) == [10, 20, 30, 40]
    assert env.get_parallelism() == 2


def test_cached_files_and_the_changelog_switch_are_recorded_under_flinks_keys() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.register_cached_file("/data/a.csv", "a")
    env.register_cached_file("/bin/tool", "tool", executable=True)
    assert env.get_configuration().get_string("pipeline.cached-files") == (
        "name:a,path:/data/a.csv,executable:false;name:tool,path:/bin/tool,executable:true"
    )
    assert not env.is_changelog_state_backend_enabled()
    env.enable_changelog_state_backend(True)
    assert env.is_changelog_state_backend_enabled()
    with pytest.raises(UsageError, match="without ',' or ':'"):
        env.register_cached_file("/x", "a:b")


def test_the_wrappers_and_pass_through_functions_do_what_pyflinks_do() -> None:
    add = ReduceFunctionWrapper(lambda a, b: a + b)
    assert isinstance(add, ReduceFunction) and isinstance(add, FunctionWrapper)
    assert add.reduce(2, 3) == 5
    assert list(PassThroughWindowFunction().apply("k", None, [1, 2])) == [1, 2]
    assert list(PassThroughAllWindowFunction().apply(None, iter([3]))) == [3]
    assert Min().reduce(4, 2) == 2 and Min().reduce("b", "a") == "a"
    with pytest.raises(UsageError, match="needs a callable"):
        ReduceFunctionWrapper(5)  # type: ignore[arg-type]


def test_a_reduce_function_wrapper_runs_in_a_job() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    out = (
        env.from_collection([("a", 1), ("a", 2), ("b", 5)])
        .key_by(lambda r: r[0])
        .reduce(ReduceFunctionWrapper(lambda x, y: (x[0], x[1] + y[1])))
        .execute_and_collect()
    )
    assert sorted(out) == [("a", 1), ("a", 3), ("b", 5)]

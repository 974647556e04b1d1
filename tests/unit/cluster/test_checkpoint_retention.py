"""Retention of a job's checkpoints when it ends (Flink's ExternalizedCheckpointRetention)."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.checkpoint.metadata import CheckpointMetadata
from weir.checkpoint.storage import CheckpointStorage
from weir.cluster.checkpoint_stats import HISTORY_FILE_NAME
from weir.cluster.checkpointing import discard_job_checkpoints, discards_checkpoints_on
from weir.cluster.client import job_settings_for
from weir.common import Configuration
from weir.datastream import ExternalizedCheckpointRetention, StreamExecutionEnvironment
from weir.errors import UsageError


@pytest.mark.parametrize(
    ("retention", "finished", "canceled", "failed"),
    [
        ("NO_EXTERNALIZED_CHECKPOINTS", True, True, True),
        ("DELETE_ON_CANCELLATION", True, True, False),
        ("RETAIN_ON_CANCELLATION", True, False, False),
    ],
)
def test_which_terminal_status_discards_follows_flinks_checkpoint_properties(
    retention: str, finished: bool, canceled: bool, failed: bool
) -> None:
    assert discards_checkpoints_on(retention, "FINISHED") is finished
    assert discards_checkpoints_on(retention, "CANCELED") is canceled
    assert discards_checkpoints_on(retention, "FAILED") is failed


async def test_the_retention_is_a_configuration_key_and_reaches_the_job() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    config = env.get_checkpoint_config()
    assert (
        config.get_externalized_checkpoint_retention()
        is ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS
    )
    assert job_settings_for(env).checkpoint_retention == "NO_EXTERNALIZED_CHECKPOINTS"
    config.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    key = "execution.checkpointing.externalized-checkpoint-retention"
    assert env.get_configuration().get_string(key, "") == "RETAIN_ON_CANCELLATION"
    assert job_settings_for(env).checkpoint_retention == "RETAIN_ON_CANCELLATION"

    conf = Configuration()
    conf.set_string(key, "DELETE_ON_CANCELLATION")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    assert (
        env.get_checkpoint_config().get_externalized_checkpoint_retention()
        is ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION
    )
    with pytest.raises(UsageError, match=r"expected one of NO_EXTERNALIZED_CHECKPOINTS.*got 'KEEP_FOREVER'"):
        conf.set_string(key, "KEEP_FOREVER")


def test_discarding_a_job_removes_its_checkpoints_and_keeps_the_history(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path, "job")
    for checkpoint_id in (3, 4):
        handle = storage.write_state_file(checkpoint_id, "op-0.state", b"state")
        storage.write_state_file(checkpoint_id, "run-1", b"shared", shared=True)
        metadata = CheckpointMetadata(job_id="job", checkpoint_id=checkpoint_id, timestamp_ms=0, operators=())
        storage.write_metadata(checkpoint_id, metadata)
        assert handle.path.startswith(f"chk-{checkpoint_id}/")
    storage.checkpoint_dir(5).mkdir()  # never completed
    (storage.job_dir / HISTORY_FILE_NAME).write_text("{}\n")
    discard_job_checkpoints(storage)
    assert sorted(p.name for p in storage.job_dir.iterdir()) == [HISTORY_FILE_NAME]
    discard_job_checkpoints(CheckpointStorage(tmp_path, "never-ran"))  # nothing there: nothing to do

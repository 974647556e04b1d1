"""Checkpoint and savepoint locations: plain paths or ``file://`` URIs, nothing else."""

from __future__ import annotations

import pytest

from weir.common import Configuration
from weir.common import config_options as opts
from weir.common.config_options import local_path
from weir.errors import UsageError


@pytest.mark.parametrize(
    ("given", "path"),
    [
        ("file:///data/checkpoints", "/data/checkpoints"),
        ("file:/data/checkpoints", "/data/checkpoints"),
        ("file://localhost/data/my%20checkpoints", "/data/my checkpoints"),
        ("/data/checkpoints", "/data/checkpoints"),
        ("relative/checkpoints", "relative/checkpoints"),
        ("runs:2", "runs:2"),
    ],
)
def test_paths_and_file_uris_name_a_local_path(given: str, path: str) -> None:
    assert local_path("execution.checkpointing.dir", given) == path


@pytest.mark.parametrize("given", ["s3://bucket/checkpoints", "hdfs:///flink/checkpoints"])
def test_other_schemes_are_refused_with_the_key(given: str) -> None:
    with pytest.raises(UsageError) as info:
        local_path("execution.checkpointing.dir", given)
    message = str(info.value)
    assert message.startswith("execution.checkpointing.dir: weir keeps checkpoints and savepoints")
    assert repr(given) in message and "file:///data/checkpoints" in message


@pytest.mark.parametrize("given", ["file://otherhost/data", "file:relative"])
def test_a_file_uri_must_name_an_absolute_local_path(given: str) -> None:
    with pytest.raises(UsageError, match="absolute local path"):
        local_path("execution.savepoint.path", given)


@pytest.mark.parametrize(
    "option", [opts.CHECKPOINTS_DIRECTORY, opts.SAVEPOINT_DIRECTORY, opts.SAVEPOINT_PATH]
)
def test_every_location_option_reads_file_uris(option: opts.ConfigOption) -> None:
    conf = Configuration()
    conf.set_string(option.key, "file:///data/somewhere")
    assert conf.get_option(option) == "/data/somewhere"
    with pytest.raises(UsageError, match=option.key):  # refused when it is set, before any job runs
        conf.set_string(option.key, "s3://bucket/somewhere")

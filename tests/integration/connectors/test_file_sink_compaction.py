"""A compacting FileSink in a job: exactly once under injected failures, in fewer files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from weir.common import Types, WatermarkStrategy
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.file_system import (
    BucketAssigner,
    Encoder,
    FileCompactor,
    FileCompactStrategy,
    FileSink,
    RollingPolicy,
)
from weir.testing import assert_exactly_once

EVENTS = 1_000


@pytest.mark.weir(parallelism=2)
def test_compacted_output_is_exactly_once_under_failures(
    weir_env_factory, weir_clock, tmp_path: Path
) -> None:
    runs = iter(range(2))

    def build(env: Any) -> Path:
        directory = tmp_path / f"run-{next(runs)}"
        sink = (
            FileSink.for_row_format(str(directory), Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
            .enable_compact(
                FileCompactStrategy.builder().enable_compaction_on_checkpoint(3).build(),
                FileCompactor.concat_file_compactor(),
            )
            .build()
        )
        env.from_source(
            DataGeneratorSource(lambda i: i, EVENTS, rate_limit=1_000.0, type_info=Types.LONG()),
            WatermarkStrategy.no_watermarks(),
            "numbers",
        ).map(lambda n: n * 2, output_type=Types.LONG()).sink_to(sink)
        return directory

    report = assert_exactly_once(
        build, env_factory=weir_env_factory, seed=5, failures=2, records_hint=400, checkpoint_interval_ms=100
    )
    assert sorted(int(v) for v in report.clean_output) == [2 * i for i in range(EVENTS)]
    for run in ("run-0", "run-1"):
        files = [p for p in (tmp_path / run).iterdir() if not p.name.startswith(".")]
        # rolling on every checkpoint alone leaves a file per checkpoint and subtask; compacting
        # every third checkpoint leaves fewer files than there were checkpoints
        assert 0 < len(files) < report.checkpoints_completed
        assert not [p for p in (tmp_path / run).iterdir() if ".inprogress." in p.name]

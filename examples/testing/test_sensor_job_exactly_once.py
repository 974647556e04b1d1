"""Checking a job end to end for exactly-once output under seeded failures.

.venv/bin/pytest examples/testing -q
"""

from __future__ import annotations

from typing import Any

import pytest
from sensor_job import READING, build

from weir.common import WatermarkStrategy
from weir.testing import TestStream, TimestampedValue, assert_exactly_once, collect


def a_minute_of_readings() -> TestStream:
    stream = TestStream(type_info=READING)
    for second in range(60):
        stream.add_elements(
            TimestampedValue(("s1", second), second * 1_000), TimestampedValue(("s2", 1), second * 1_000)
        )
        stream.advance_watermark_to(second * 1_000 + 999)
        stream.advance_processing_time(100)  # checkpoints happen in between
    return stream.end()


@pytest.mark.weir(parallelism=2)
def test_the_sensor_job_is_exactly_once(weir_env_factory, weir_clock) -> None:
    def job(env: Any) -> Any:
        sums, _ = build(env, a_minute_of_readings(), WatermarkStrategy.no_watermarks())
        return collect(sums, exactly_once=True)  # a two-phase-commit sink

    report = assert_exactly_once(
        job, env_factory=weir_env_factory, seed=42, failures=3, records_hint=20, checkpoint_interval_ms=500
    )
    print(report)

"""``weir.testing``: what users import into their own test suites.

- ``TestStream``, ``TimestampedValue``: a scripted, replayable source (elements with
  timestamps, watermark and processing-time advances, idleness) at any parallelism.
- ``collect(stream)`` / ``CollectingSink``: keep a job's output per subtask and merged.
- ``assert_output(result, expected, ordered=False)``: compare with a readable diff.
- ``OneInputStreamOperatorTestHarness``, ``KeyedOneInputStreamOperatorTestHarness``,
  ``TwoInputStreamOperatorTestHarness``, ``KeyedTwoInputStreamOperatorTestHarness``,
  ``harness_for(stream)``: drive one operator or function without a cluster.
- ``assert_exactly_once(build_job, read_output, ...)``: run a job with and without seeded
  failures and compare the outputs.
- ``MockKafkaCluster``: an in-process Kafka cluster on loopback for jobs with a KafkaSink or
  KafkaSource (``pip install weir[kafka]``).
- The pytest plugin (``weir.testing.plugin``, installed as an entry point): the
  ``weir_env`` and ``weir_clock`` fixtures and the ``weir`` marker.

Names are imported on first use, so loading the pytest plugin stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "TestStream": "weir.testing.teststream",
    "TimestampedValue": "weir.testing.teststream",
    "CollectingSink": "weir.testing.sinks",
    "collect": "weir.testing.sinks",
    "assert_output": "weir.testing.assertions",
    "diff_output": "weir.testing.assertions",
    "OutputDiff": "weir.testing.assertions",
    "OneInputStreamOperatorTestHarness": "weir.testing.harness",
    "KeyedOneInputStreamOperatorTestHarness": "weir.testing.harness",
    "TwoInputStreamOperatorTestHarness": "weir.testing.harness",
    "KeyedTwoInputStreamOperatorTestHarness": "weir.testing.harness",
    "ProcessFunctionTestHarnesses": "weir.testing.harness",
    "OperatorSubtaskState": "weir.testing.harness",
    "RegisteredTimer": "weir.testing.harness",
    "StreamRecord": "weir.testing.harness",
    "Watermark": "weir.testing.harness",
    "WatermarkStatus": "weir.testing.harness",
    "harness_for": "weir.testing.harness",
    "assert_exactly_once": "weir.testing.exactly_once",
    "ExactlyOnceReport": "weir.testing.exactly_once",
    "SharedCluster": "weir.testing.cluster",
    "TestEnvironment": "weir.testing.cluster",
    "WeirClock": "weir.testing.plugin",
    "MockKafkaCluster": "weir.testing.kafka",
    "KafkaMessage": "weir.testing.kafka",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'weir.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

"""``engine.testing``: what users import into their own test suites.

- ``TestStream``, ``TimestampedValue``: a scripted, replayable source (elements with
  timestamps, watermark and processing-time advances, idleness) at any parallelism.
- ``collect(stream)`` / ``CollectingSink``: keep a job's output per subtask and merged.
- ``assert_output(result, expected, ordered=False)``: compare with a readable diff.
- ``OneInputStreamOperatorTestHarness``, ``KeyedOneInputStreamOperatorTestHarness``,
  ``TwoInputStreamOperatorTestHarness``, ``KeyedTwoInputStreamOperatorTestHarness``,
  ``harness_for(stream)``: drive one operator or function without a cluster.
- ``assert_exactly_once(build_job, read_output, ...)``: run a job with and without seeded
  failures and compare the outputs.
- The pytest plugin (``engine.testing.plugin``, installed as an entry point): the
  ``weir_env`` and ``weir_clock`` fixtures and the ``weir`` marker.

Names are imported on first use, so loading the pytest plugin stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "TestStream": "engine.testing.teststream",
    "TimestampedValue": "engine.testing.teststream",
    "CollectingSink": "engine.testing.sinks",
    "collect": "engine.testing.sinks",
    "assert_output": "engine.testing.assertions",
    "diff_output": "engine.testing.assertions",
    "OutputDiff": "engine.testing.assertions",
    "OneInputStreamOperatorTestHarness": "engine.testing.harness",
    "KeyedOneInputStreamOperatorTestHarness": "engine.testing.harness",
    "TwoInputStreamOperatorTestHarness": "engine.testing.harness",
    "KeyedTwoInputStreamOperatorTestHarness": "engine.testing.harness",
    "ProcessFunctionTestHarnesses": "engine.testing.harness",
    "OperatorSubtaskState": "engine.testing.harness",
    "RegisteredTimer": "engine.testing.harness",
    "StreamRecord": "engine.testing.harness",
    "Watermark": "engine.testing.harness",
    "WatermarkStatus": "engine.testing.harness",
    "harness_for": "engine.testing.harness",
    "assert_exactly_once": "engine.testing.exactly_once",
    "ExactlyOnceReport": "engine.testing.exactly_once",
    "SharedCluster": "engine.testing.cluster",
    "TestEnvironment": "engine.testing.cluster",
    "WeirClock": "engine.testing.plugin",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

"""A sweep point run several times keeps, per mode, its fastest run and that run's checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from weir.harness import checkpoint_bench as cb

# seconds of each run, in the order they run: rounds of (none, checkpoints)
DURATIONS = [10.0, 12.0, 8.0, 14.0]


class _Clock:
    """``time`` for the module under test: each run's perf_counter span is the next duration."""

    def __init__(self) -> None:
        self.now = 0.0
        self.runs = iter(DURATIONS)

    def perf_counter(self) -> float:
        return self.now

    def process_time(self) -> float:
        return self.now / 2

    def advance(self) -> None:
        self.now += next(self.runs)


def _fake_job(clock: _Clock, made: list[str]) -> Any:
    def build(
        keys: int, records: int, parallelism: int, backend: str, interval_ms: Any, job: str, directory: str
    ) -> Any:
        mode = "none" if interval_ms is None else "checkpoints"
        made.append(mode)
        run = len(made)

        class Env:
            def execute(self, name: str) -> None:
                clock.advance()
                if mode == "checkpoints":  # checkpoint ids tell the runs apart
                    path = Path(directory) / "job" / cb.HISTORY_FILE_NAME
                    path.parent.mkdir(parents=True, exist_ok=True)
                    line = {"checkpoint_id": run, "kind": "checkpoint", "status": "COMPLETED", "sync_ms": 1.0,
                            "async_ms": 2.0, "duration_ms": float(run), "full_size_bytes": 10,
                            "checkpointed_size_bytes": 10}  # fmt: skip
                    path.write_text(json.dumps(line) + "\n")

        return Env()

    return build


def test_each_mode_keeps_its_fastest_run_and_its_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, made = _Clock(), []
    monkeypatch.setattr(cb, "time", clock)
    monkeypatch.setattr(cb, "build_state_job", _fake_job(clock, made))
    monkeypatch.setattr(cb, "_children_cpu", lambda: 0.0)
    point = cb.run_state_point(1000, "hashmap", 3, 2, 1000, "reduce", repeats=2)
    assert made == ["none", "checkpoints", "none", "checkpoints"]
    assert point["seconds_without"] == 8.0 and point["seconds_with"] == 12.0
    assert point["throughput_ratio"] == pytest.approx(8.0 / 12.0)
    assert point["cpu_seconds_without"] == 4.0 and point["cpu_seconds_with"] == 6.0
    assert point["duration_ms"] == {"median": 2.0, "max": 2.0}  # the first checkpoints run (run 2)
    assert point["repeats"] == 2


def test_one_repeat_runs_each_mode_once(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, made = _Clock(), []
    monkeypatch.setattr(cb, "time", clock)
    monkeypatch.setattr(cb, "build_state_job", _fake_job(clock, made))
    monkeypatch.setattr(cb, "_children_cpu", lambda: 0.0)
    point = cb.run_state_point(1000, "hashmap", 3, 2, 1000, "reduce")
    assert made == ["none", "checkpoints"]
    assert point["seconds_without"] == 10.0 and point["seconds_with"] == 12.0

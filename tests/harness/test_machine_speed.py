"""The machine-speed probe: timed around every measured run, shown per run in the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness import machine_speed, sweep
from harness import report as rep
from harness.latency import LatencyHistogram
from harness.runner import DataSet, RunConfig, RunResult
from workloads.testing import keyed_rows_dataset


def test_the_probe_times_its_loop() -> None:
    # forty times the work takes longer on any machine, however noisy
    assert 0 < machine_speed.probe_ms(iterations=5_000) < machine_speed.probe_ms(iterations=200_000)
    with pytest.raises(ValueError, match="positive iterations and repeats"):
        machine_speed.probe_ms(iterations=0)


def test_a_runs_speed_is_the_fastest_probe_over_its_slower_one() -> None:
    assert machine_speed.speed([2.0, 4.0], 2.0) == pytest.approx(0.5)
    assert machine_speed.speed([2.5, 2.0], 2.0) == pytest.approx(0.8)
    assert machine_speed.speed(None, 2.0) is None  # a report made before probes existed
    assert machine_speed.speed([2.0, 2.0], None) is None


def _result(config: RunConfig, rate: float | None) -> RunResult:
    latency = LatencyHistogram()
    latency.record_array([1000] * 100)
    return RunResult(
        config=config, mode="rate" if rate else "throughput", target_rate=rate, records_emitted=100,
        records_measured=100, records_out=100, throughput=rate or 1000.0, sustained=True if rate else None,
        seconds=1.0, latency=latency, lag=LatencyHistogram(), trend=[], max_source_behind_ms=0.0,
        checkpoints_completed=0,
    )  # fmt: skip


def test_every_measured_run_carries_its_probes_into_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = DataSet(keyed_rows_dataset(tmp_path / "keyed", [("a", 1, 1000)]))
    # before/after of: the max-throughput attempt, then the three repeats of the one rate
    timings = iter([2.0, 2.0, 2.0, 2.0, 4.0, 2.0, 2.0, 2.5])
    monkeypatch.setattr(sweep, "probe_ms", lambda: next(timings))
    monkeypatch.setattr(sweep, "prepare_datasets", lambda *a, **k: {"keyed": ds})

    def fake_run_sync(ds: Any, config: RunConfig, rate: float | None = None, **_: Any) -> RunResult:
        return _result(config, rate)

    monkeypatch.setattr(sweep, "run_sync", fake_run_sync)
    spec = sweep.validate_spec(
        {"datasets": {"keyed": {"generator": "keyed", "events": 200}}, "correctness": [],
         "sweeps": [{"query": "keyed-shuffle", "buffer_timeouts_ms": [1], "fractions": [0.5],
                     "throughput_repeats": 1, "latency_repeats": 3}]},
        "test",
    )  # fmt: skip
    out = sweep.run_spec(spec, Path("unused"))
    with pytest.raises(StopIteration):  # the warm-up run is not probed: every timing was used once
        next(timings)
    (configuration,) = out["configurations"]
    assert configuration["throughput_attempts_probe_ms"] == [[2.0, 2.0]]
    half = configuration["runs"][1]
    assert [r["probe_ms"] for r in half["repeats"]] == [[2.0, 2.0], [4.0, 2.0], [2.0, 2.5]]
    report = json.loads(json.dumps({**out, "machine": {}, "versions": {}}))  # what report.json holds
    assert rep.fastest_probe(report) == 2.0
    md = rep.markdown(report)
    assert "1,000 (1.00)" in md  # the max-throughput attempt, at the machine's best
    assert "| 1.00 / 0.50 / 0.80 |" in md  # each repeat's speed, in the order they ran
    assert "2 of 4 runs had the machine below 0.85 of its best" in md


def test_a_report_made_before_probes_existed_still_renders(tmp_path: Path) -> None:
    ds = DataSet(keyed_rows_dataset(tmp_path / "keyed", [("a", 1, 1000)]))
    config = RunConfig("keyed-shuffle", 2, 1)
    run = {**_result(config, 500.0).to_json(), "fraction": 0.5}
    del run["probe_ms"]
    report = {
        "suite": "old", "correctness": [], "datasets": {}, "machine": {}, "versions": {},
        "configurations": [{"key": config.key, "group": config.group, "config": config.to_json(),
                            "dataset": str(ds.directory), "record_level": True, "max_throughput": 1000.0,
                            "throughput_attempts": [1000.0],
                            "runs": [{**_result(config, None).to_json(), "fraction": None}, run]}],
    }  # fmt: skip
    assert rep.fastest_probe(report) is None
    md = rep.markdown(report)
    assert "| 1 | 1,000 | 1,000 | 0 |" in md  # max, its one attempt without a speed, checkpoints
    assert "machine-speed probe" not in md  # no claim about a machine nobody measured
    assert "| – |" in md  # the speed column says it is unknown

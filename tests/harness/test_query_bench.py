"""``weir bench query``: every way of writing the query is checked against the exact answer, and
a wrong answer fails the command instead of printing a figure."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from weir.cli import main
from weir.harness import query_bench as qb


def _brute_force(events: int, keys: int) -> qb.Checksum:
    groups: dict[tuple[int, int], list[int]] = {}
    for i in range(events):
        ts = i - (i * 7919) % 51
        group = groups.setdefault(((i * 2654435761) % keys, ts - ts % 1000), [0, 0])
        group[0] += 1
        group[1] += i % 100
    rows = sorted((k, s, c, t) for (k, s), (c, t) in groups.items())
    return qb.checksum_of(*(np.array([r[j] for r in rows], np.int64) for j in range(4)))


@pytest.mark.parametrize("keys", [7, 1000])
def test_the_exact_answer_is_the_brute_force_one(keys: int) -> None:
    assert qb.exact_answer(30_000, keys) == _brute_force(30_000, keys)


def test_the_checksum_sees_a_changed_row() -> None:
    key, start, count, total = (np.array([1, 2]), np.array([0, 1000]), np.array([3, 4]), np.array([10, 20]))
    base = qb.checksum_of(key, start, count, total)
    assert qb.checksum_of(key, start, count, np.array([10, 21])) != base
    assert qb.checksum_of(np.array([2, 1]), start, count, total) != base  # rows swapped between keys


@pytest.mark.parametrize("parallelism", [1, 2])
def test_every_way_gives_the_exact_answer(parallelism: int) -> None:
    report = qb.run_query_bench(100, parallelism, 20_000, "off", "heap", repeat=3)
    assert report["checksum_ok"]
    assert report["parameters"]["repeat"] == 3
    for way in ("columnar", "per_record", "numba", "python"):
        figure = report["figures"][way]
        assert figure["checksum"] == report["expected"]
        assert len(figure["runs_s"]) == 3
        assert figure["seconds"] == sorted(figure["runs_s"])[1]  # the median run
        assert report[f"{way}_eps"] == 20_000 / figure["seconds"]


def test_with_checkpoints_the_columnar_way_also_runs_without_them_in_the_same_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ratio of checkpoints' cost comes from runs of one command, round by round."""
    calls: list[tuple[str, str]] = []
    seconds = {
        ("columnar", "off"): 2.0,
        ("columnar", "aligned"): 2.5,
        ("per_record", "off"): 8.0,
        ("per_record", "aligned"): 9.0,
    }

    def fake(way: str, events: int, keys: int, parallelism: int, checkpointing: str, backend: str) -> Any:
        calls.append((way, checkpointing))
        done = 0 if checkpointing == "off" else 2
        return qb.exact_answer(events, keys), seconds[(way, checkpointing)], done

    monkeypatch.setattr(qb, "weir_query", fake)
    report = qb.run_query_bench(100, 1, 20_000, "aligned", "lmdb", repeat=2)
    timed = calls[2:]  # after one warm-up run of each weir way
    assert timed == [("columnar", "off"), ("columnar", "aligned"), ("per_record", "aligned")] * 2
    assert report["columnar_off_eps"] == 20_000 / 2.0
    assert report["columnar_checkpoint_ratio"] == pytest.approx(2.0 / 2.5)
    assert report["checkpoints_completed"] == {"columnar": 2, "per_record": 2}
    assert "with / without checkpoints = 0.80x" in qb.format_query_report(report)
    off = qb.run_query_bench(100, 1, 20_000, "off", "heap", repeat=1)
    assert "columnar_off" not in off["figures"] and "columnar_checkpoint_ratio" not in off


def test_a_wrong_answer_fails_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    right_query = qb.python_query

    def wrong(events: int, keys: int) -> Any:
        right, seconds = right_query(events, keys)
        return qb.Checksum(right.rows - 1, right.count, right.total, right.hash), seconds

    monkeypatch.setattr(qb, "python_query", wrong)
    result = CliRunner().invoke(
        main, ["bench", "query", "--keys", "50", "-p", "1", "--events", "10000", "--json"]
    )
    assert result.exit_code != 0
    line = json.loads(result.stdout.splitlines()[0])
    assert line["checksum_ok"] is False
    assert "wrong answer" in result.stderr

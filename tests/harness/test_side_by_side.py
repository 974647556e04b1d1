"""The report's side-by-side section, from a report's ``engines`` part: rows, headline, Markdown."""

from __future__ import annotations

import math
from typing import Any

from weir.harness import side_by_side


def _check(
    key: str, throughput: float | None, matches: bool = True, net: float | None = None
) -> dict[str, Any]:
    return {"key": key, "dataset": "keyed", "matches": matches, "throughput": throughput,
            "throughput_net": net, "error": None}  # fmt: skip


def _report() -> dict[str, Any]:
    weir = [("keyed-window p1", 400.0), ("keyed-shuffle p2", 900.0), ("q7 p2", 300.0),
            ("keyed-window-columnar p1", 2000.0)]  # fmt: skip
    return {
        "correctness": [
            {"key": k, "query": k.split()[0], "dataset": "keyed", "matches": True, "throughput": t} for k, t in weir
        ],
        "engines": {
            "weir": {"version": "0.1", "startup_s": 1.0},
            "flink": {
                "version": "2.3.0", "startup_s": 9.0, "one_record_job_s": 2.0, "source": "a collection",
                "correctness": [_check("keyed-window p1", 100.0, net=200.0), _check("keyed-shuffle p2", 900.0),
                                _check("q7 p2", 30.0, matches=False)],
                "weir_only": [{"query": "keyed-window-columnar", "reason": "columnar"}],
            },
            "spark": {
                "version": "4.3.0", "startup_s": 20.0, "one_record_job_s": 4.0, "source": "files",
                "measured": "the whole query", "correctness": [_check("keyed-window p1", 50.0)],
                "weir_only": [{"query": "keyed-window-columnar", "reason": "columnar"}],
                "not_run": [{"query": "q7", "reason": "a join of an aggregate"}],
            },
        },
    }  # fmt: skip


def test_the_headline_is_the_geometric_mean_over_the_checks_both_engines_passed() -> None:
    report = _report()
    flink = side_by_side.headline(report, "flink")
    assert flink is not None
    # q7 is left out: Flink's output did not match; 400/100 and 900/900
    assert flink["checks"] == 2 and math.isclose(flink["geomean"], math.sqrt(4.0 * 1.0))
    assert (flink["min"], flink["max"]) == (1.0, 4.0)
    assert flink["net_checks"] == 1 and math.isclose(flink["net_geomean"], 2.0)
    spark = side_by_side.headline(report, "spark")
    assert spark is not None and spark["checks"] == 1 and math.isclose(spark["geomean"], 8.0)
    assert "weir/Flink throughput 2.00x (geometric mean over 2 checks" in side_by_side.describe_headline(
        flink
    )
    report["engines"]["flink"]["correctness"] = []
    assert side_by_side.headline(report, "flink") is None


def test_the_section_has_a_column_group_per_engine_and_says_why_a_query_did_not_run() -> None:
    lines = side_by_side.markdown(_report())
    text = "\n".join(lines)
    assert lines[0] == "## weir, Apache Flink and Spark Structured Streaming side by side"
    assert (
        "| Spark Structured Streaming | 4.3.0 | 20.0 s (a one-record job in a warm process: 4.0 s) |" in text
    )
    assert (
        "| Flink rec/s | Flink vs Spark | weir/Flink | Spark SS rec/s | Spark SS vs Spark | weir/Spark SS |"
        in text
    )
    assert "| keyed-window p1 | keyed | 400 | match | 100 | match | 4.00 | 50 | match | 8.00 |" in text
    assert (
        "| q7 p2 | keyed | 300 | match | 30 | MISMATCH | 10.00 | not run: a join of an aggregate | – | – |"
        in text
    )
    assert "| keyed-window-columnar p1 | keyed | 2,000 | match | weir only: columnar | – | – |" in text
    assert "**weir/Spark SS throughput 8.00x" in text


def test_only_weir_gives_no_section_and_one_engine_names_itself() -> None:
    report = _report()
    del report["engines"]["spark"]
    assert side_by_side.markdown(report)[0] == "## weir and Apache Flink side by side"
    del report["engines"]["flink"]
    assert side_by_side.markdown(report) == []

"""The report's section that sets weir beside Apache Flink and Spark Structured Streaming.

A report's ``engines`` part holds weir's version and start-up and, per other engine that
ran (``flink``: weir.harness.flink_engine, ``spark``: weir.harness.spark_engine), its
version, start-up, what it measured and one check per correctness run it could run, with
the queries it could not run and why. This module turns that into rows (one per weir
correctness run, each engine's throughput and verdict beside weir's), a headline per engine
(the geometric mean of weir's throughput over the engine's, over the checks both engines
passed), and the Markdown section of ``report.md``.
"""

from __future__ import annotations

import math
from typing import Any

#: engine key -> the name the report gives it, in the order of the report's columns
ENGINES = {"flink": "Apache Flink", "spark": "Spark Structured Streaming"}
SHORT = {"flink": "Flink", "spark": "Spark SS"}


def _skipped(part: dict[str, Any]) -> dict[str, str]:
    """Query -> why the engine did not run it (weir-only API, or no form written for it)."""
    out = {w["query"]: f"weir only: {w['reason']}" for w in part.get("weir_only", [])}
    out.update({w["query"]: f"not run: {w['reason']}" for w in part.get("not_run", [])})
    return out


def rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per weir correctness run: weir's throughput and verdict, and per engine its own."""
    engines = report.get("engines") or {}
    parts = {name: engines[name] for name in ENGINES if engines.get(name)}
    by_key = {
        name: {(c["key"], c["dataset"]): c for c in part.get("correctness", [])}
        for name, part in parts.items()
    }
    skipped = {name: _skipped(part) for name, part in parts.items()}
    out = []
    for c in report.get("correctness", []):
        row: dict[str, Any] = {"key": c["key"], "dataset": c["dataset"], "query": c["query"],
                               "weir_throughput": c.get("throughput"), "weir_matches": c["matches"], "engines": {}}  # fmt: skip
        for name in parts:
            check = by_key[name].get((c["key"], c["dataset"]))
            rate = check.get("throughput") if check else None
            row["engines"][name] = {
                "throughput": rate,
                "throughput_net": check.get("throughput_net") if check else None,
                "matches": check.get("matches") if check else None,
                "error": check.get("error") if check else None,
                "skipped": skipped[name].get(c["query"]),
                "ratio": row["weir_throughput"] / rate if row["weir_throughput"] and rate else None,
            }
        out.append(row)
    return out


def headline(report: dict[str, Any], engine: str) -> dict[str, Any] | None:
    """weir's throughput over ``engine``'s: geometric mean, range and count over the checks both
    engines passed (and the same against the engine's time net of its per-job start); None when
    there is none."""
    ratios, net = [], []
    for row in rows(report):
        e = row["engines"].get(engine)
        if not e or not row["weir_matches"] or not e["matches"] or e["ratio"] is None:
            continue
        ratios.append(e["ratio"])
        if e["throughput_net"]:
            net.append(row["weir_throughput"] / e["throughput_net"])
    if not ratios:
        return None

    def geomean(xs: list[float]) -> float:
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    return {
        "engine": engine, "checks": len(ratios), "geomean": geomean(ratios), "min": min(ratios), "max": max(ratios),
        "net_checks": len(net), "net_geomean": geomean(net) if net else None,
    }  # fmt: skip


def describe_headline(h: dict[str, Any]) -> str:
    """One line: ``weir/Flink throughput 2.10x (geometric mean of 7 checks, 0.9x-4.2x); ...``."""
    text = (
        f"weir/{SHORT[h['engine']]} throughput {h['geomean']:.2f}x (geometric mean over {h['checks']} checks "
        f"both matched, {h['min']:.2f}x-{h['max']:.2f}x)"
    )
    if h["net_geomean"] is not None:
        text += f"; {h['net_geomean']:.2f}x against {SHORT[h['engine']]}'s time net of its per-job start"
    return text


def markdown(report: dict[str, Any]) -> list[str]:
    """The report's section with every engine that ran beside weir, or nothing when only weir ran."""
    engines = report.get("engines") or {}
    names = [name for name in ENGINES if engines.get(name)]
    if not names:
        return []
    weir = engines.get("weir", {})
    labels = [ENGINES[n] for n in names]
    title = " and ".join([", ".join(["weir", *labels[:-1]]), labels[-1]])

    def rate(x: float | None) -> str:
        return "–" if x is None else f"{x:,.0f}"

    def verdict(matches: bool | None) -> str:
        return "–" if matches is None else ("match" if matches else "MISMATCH")

    lines = [
        f"## {title} side by side",
        "",
        "| engine | version | start-up (fresh process, one-record job) |",
        "|---|---|---|",
        f"| weir | {weir.get('version', '?')} | {weir.get('startup_s', 0):.1f} s |",
    ]
    for n in names:
        part = engines[n]
        lines.append(
            f"| {ENGINES[n]} | {part['version']} | {part['startup_s']:.1f} s "
            f"(a one-record job in a warm process: {part.get('one_record_job_s') or 0:.1f} s) |"
        )
    lines += [""]
    for n in names:
        h = headline(report, n)
        if h is not None:
            lines.append(f"**{describe_headline(h)}.**")
            lines.append("")
    lines += [
        "Throughput: input records/s over the whole data set, as each engine's correctness run measured it."
    ]
    for n in names:
        part = engines[n]
        measured = part.get("measured", "input records over the seconds of the whole bounded job")
        lines.append(f"{ENGINES[n]}: source: {part['source']}; measured: {measured}.")
    if "flink" in names:
        lines.append(
            "Flink runs the same job logic as weir (weir.harness.portable_queries, the prefix swapped)."
        )
    if "spark" in names:
        lines.append(
            "Spark runs the same queries written in Spark's DataFrame API (weir.harness.spark_engine)."
        )
    header = "| configuration | data set | weir rec/s | weir vs Spark |"
    rule = "|---|---|---|---|"
    for n in names:
        header += f" {SHORT[n]} rec/s | {SHORT[n]} vs Spark | weir/{SHORT[n]} |"
        rule += "---|---|---|"
    lines += ["", header, rule]
    for r in rows(report):
        cells = (
            f"| {r['key']} | {r['dataset']} | {rate(r['weir_throughput'])} | {verdict(r['weir_matches'])} |"
        )
        for n in names:
            e = r["engines"][n]
            if e["skipped"]:
                cells += f" {e['skipped']} | – | – |"
            elif e["error"]:
                cells += f" FAILED: {e['error'][:120]} | – | – |"
            else:
                ratio = "–" if e["ratio"] is None else f"{e['ratio']:.2f}"
                cells += f" {rate(e['throughput'])} | {verdict(e['matches'])} | {ratio} |"
        lines.append(cells)
    lines += [
        "",
        "Latency: weir's is in the sweeps above; the other engines' sources here cannot be paced, so they have none.",
        "",
    ]
    return lines

"""Reports: ``report.json`` is the record; ``report.md`` and the plots are rebuilt from it.

``report.json`` holds every parameter (the full sweep spec), the data sets (generator,
parameters, seed, checksum), the machine (CPU model, cores, memory), the versions of
Python, weir, numba, trio, lmdb, pyspark, numpy, pyarrow and Java, the git revision,
the exact command, every run with its encoded HdrHistograms, and the correctness
verdicts. ``render`` writes ``report.md`` (the verdict first, then the tables a person
reads) and two PNGs with matplotlib's Agg backend:

- ``latency_vs_throughput.png``: p50 and p99 latency against achieved throughput, one
  line per buffer timeout, one panel per configuration group;
- ``throughput_vs_timeout.png``: max throughput against buffer timeout (the plot of Flink's network-stack write-up,
  for weir).

``compare`` matches two reports configuration by configuration (``RunConfig.key``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from weir.errors import UsageError
from weir.harness import steadiness

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
LATENCY_PLOT = "latency_vs_throughput.png"
THROUGHPUT_PLOT = "throughput_vs_timeout.png"
TARGET_P99_MS = 10.0
TARGET_RATIO = 0.85
#: The share of slow host windows from which the plot marks a run (docs/harness.md).
SLOW_RUN_SHARE = 0.10


# -- where and on what ---------------------------------------------------------------------------
def git_sha(cwd: Path | None = None) -> str:
    """``git rev-parse --short HEAD`` (read only), or 'unknown' outside a repository."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10, cwd=cwd
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name, dist in (
        ("weir", "weir"), ("numba", "numba"), ("trio", "trio"), ("lmdb", "lmdb"), ("pyspark", "pyspark"),
        ("numpy", "numpy"), ("pyarrow", "pyarrow"), ("hdrhistogram", "hdrhistogram"),
    ):  # fmt: skip
        try:
            out[name] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        out["java"] = (java.stderr or java.stdout).splitlines()[0].strip()
    except (OSError, subprocess.TimeoutExpired, IndexError):
        out["java"] = "not found"
    return out


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 0
    return {
        "cpu_model": cpu or "unknown",
        "cores": os.cpu_count() or 0,
        "memory_bytes": memory,
        "platform": platform.platform(),
    }


def results_dir(root: Path, suite: str, sha: str, today: _dt.date | None = None) -> Path:
    """``<root>/<date>-<suite>-<sha>``, with ``-2``, ``-3`` … if that exists already."""
    today = today or _dt.datetime.now(_dt.UTC).date()
    base = root / f"{today.isoformat()}-{suite}-{sha}"
    candidate, n = base, 2
    while candidate.exists():
        candidate = base.with_name(f"{base.name}-{n}")
        n += 1
    return candidate


# -- derived numbers ------------------------------------------------------------------------------
def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's two targets, per configuration group that has the runs to judge them."""
    out: list[dict[str, Any]] = []
    by_group: dict[str, dict[int, dict[str, Any]]] = {}
    for c in report["configurations"]:
        by_group.setdefault(c["group"], {})[c["config"]["buffer_timeout_ms"]] = c
    calm = host_calm_us(report)
    for group, by_timeout in sorted(by_group.items()):
        one = by_timeout.get(1)
        if one is not None and one.get("record_level", True):
            half = next((r for r in one["runs"] if r.get("fraction") == 0.5), None)
            if half is not None:
                p99_ms = half["latency_us"]["p99"] / 1000
                runs = len(half.get("repeats", [])) or 1
                of = f" (median of {runs} runs)" if runs > 1 else ""
                out.append({
                    "target": f"p99 latency at 50% of max throughput, buffer timeout 1 ms, < {TARGET_P99_MS:g} ms{of}",
                    "group": group, "value": p99_ms, "unit": "ms", "met": p99_ms < TARGET_P99_MS,
                    "runs": each_run_p99(half, calm),
                })  # fmt: skip
        hundred = by_timeout.get(100)
        if one is not None and hundred is not None and one["max_throughput"] and hundred["max_throughput"]:
            ratio = one["max_throughput"] / hundred["max_throughput"]
            out.append({
                "target": f"max throughput at 1 ms >= {TARGET_RATIO:.0%} of max throughput at 100 ms",
                "group": group, "value": ratio, "unit": "ratio", "met": ratio >= TARGET_RATIO,
            })  # fmt: skip
    return out


def _open_loop_runs(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every open-loop run of the report, repeats included."""
    return [t for c in report["configurations"] for r in c["runs"][1:] for t in r.get("repeats") or [r]]


def host_calm_us(report: dict[str, Any]) -> float | None:
    """The loop time of the calmest host probe of the report's runs: what a slow window is
    measured against (None when no run was probed)."""
    return steadiness.calm_loop_us([t.get("host") for t in _open_loop_runs(report)])


def host_slow_overall(report: dict[str, Any]) -> tuple[float, float] | None:
    """The share of all the open-loop runs' windows that were slow against the calmest run,
    and that run's loop time (us); None when no run was probed. One figure per report, so
    that two reports compared can be told apart by the hour they were taken in."""
    calm = host_calm_us(report)
    if calm is None:
        return None
    return steadiness.pooled_slow_share([t.get("host") for t in _open_loop_runs(report)], calm), calm


def describe_host(report: dict[str, Any]) -> str:
    """'23% of the open-loop runs' 20 ms windows slow (calmest run 8.1 us a loop)', or 'not probed'."""
    overall = host_slow_overall(report)
    if overall is None:
        return "not probed"
    share, calm = overall
    return f"{share:.0%} of the open-loop runs' 20 ms windows slow (calmest run {calm:.1f} us a loop)"


def _host_slow(run: dict[str, Any], calm_us: float | None) -> bool:
    """Whether the host ran the job's thread slow in ``SLOW_RUN_SHARE`` or more of the run's
    windows (False for a run that was not probed)."""
    share = steadiness.slow_share(run.get("host"), calm_us)
    return share is not None and share >= SLOW_RUN_SHARE


def attempts_calm_us(report: dict[str, Any]) -> float | None:
    """The loop time of the calmest host probe of the report's max-throughput attempts. A
    thread busy throughout runs the probe's loop about 1.5 times slower than an open-loop
    run's thread does (docs/harness.md), so attempts are held against attempts."""
    return steadiness.calm_loop_us(
        [h for c in report["configurations"] for h in c.get("throughput_attempts_host") or []]
    )


def each_attempt(config: dict[str, Any], calm_us: float | None = None) -> str:
    """The max-throughput attempts of a configuration, each with its host probe's share of
    windows slow against ``calm_us`` (``attempts_calm_us``): '632,300 (0% slow), 402,849
    (35% slow)'. The maximum is the best of them, so a reader sees whether it came from a
    calm stretch that the other runs did not have."""
    rates = config.get("throughput_attempts", [config["max_throughput"]])
    hosts = config.get("throughput_attempts_host") or [None] * len(rates)
    return ", ".join(_with_host(_measured(rate), host, calm_us) for rate, host in zip(rates, hosts))


def each_run_p99(run: dict[str, Any], calm_us: float | None = None) -> str:
    """The p99 of every repeat of an open-loop rate (of the run itself when it ran once),
    each with the share of its windows over ``SLOW_FACTOR`` times ``calm_us`` in its host
    probe: '55.80 (22% slow) / 6.40 (0% slow)'. Reports made before runs were probed give
    the p99 alone."""
    return " / ".join(
        _with_host(_ms(r["latency_us"]["p99"]), r.get("host"), calm_us) for r in run.get("repeats") or [run]
    )


def _with_host(text: str, host: dict[str, Any] | None, calm_us: float | None) -> str:
    """``text`` followed by its run's share of slow windows, when the run was probed."""
    return text if host is None else f"{text} ({steadiness.slow_label(host, calm_us)})"


def measurement_errors(report: dict[str, Any]) -> list[str]:
    """The runs of the report that measured nothing, each named with why: a benchmark that
    measured nothing fails rather than report a figure for it."""
    return [e for c in report["configurations"] for e in c.get("errors") or []]


def verdict(report: dict[str, Any]) -> tuple[bool, str]:
    checks = report.get("correctness", [])
    bad = [c for c in checks if not c["matches"]]
    if not checks:
        return True, "no correctness checks in this suite"
    if bad:
        names = ", ".join(f"{c['key']} on {c['dataset']}" for c in bad)
        return False, f"{len(bad)} of {len(checks)} outputs DO NOT match Spark's expected answers: {names}"
    return True, f"all {len(checks)} outputs match Spark's expected answers"


# -- writing ------------------------------------------------------------------------------------
def write(report: dict[str, Any], directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / REPORT_JSON).write_text(json.dumps(report, indent=1, sort_keys=False) + "\n")
    render(directory)
    return directory


def load(directory: Path | str) -> dict[str, Any]:
    path = Path(directory)
    if path.is_dir():
        path = path / REPORT_JSON
    if not path.is_file():
        raise UsageError(f"no {REPORT_JSON} in '{directory}'; give a directory that `weir bench` wrote")
    try:
        report: dict[str, Any] = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from None
    if "configurations" not in report or "correctness" not in report:
        raise UsageError(f"{path} is not a weir benchmark report (no configurations/correctness)")
    return report


def render(directory: Path | str) -> list[Path]:
    """(Re)write report.md and the plots of the report in ``directory``; returns the files."""
    directory = Path(directory)
    report = load(directory)
    files = [directory / REPORT_MD]
    files[0].write_text(markdown(report))
    files += plots(report, directory)
    return files


def target_value(t: dict[str, Any]) -> str:
    """A target's measured value as the report and the command line print it."""
    if t["unit"] != "ms":
        return f"{t['value']:.0%}"
    return f"{t['value']:.2f} ms" + (f" (runs: {t['runs']})" if t.get("runs") else "")


def _us(us: float | None) -> str:
    return "–" if us is None else f"{us:.1f} us"


def _measured(rate: float | None) -> str:
    """A rate of a run, or that the run measured nothing (``measurement_errors`` says why)."""
    return "not measured" if rate is None else _rate(rate)


def _ms(us: float | None) -> str:
    return "–" if us is None else f"{us / 1000:.2f}"


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def markdown(report: dict[str, Any]) -> str:
    ok, summary = verdict(report)
    lines = [f"# weir benchmark report: {report['suite']} suite", ""]
    lines += [f"**Correctness: {summary}.**" if ok else f"**Correctness: FAILED. {summary}.**", ""]
    errors = measurement_errors(report)
    if errors:
        lines += [
            f"**Measurement: FAILED. {len(errors)} run(s) measured nothing; they have no figures below:**",
            "",
        ]
        lines += [f"- {e}" for e in errors] + [""]
    lines += [
        f"Reproduce with `{report.get('command', 'weir bench suite ' + report['suite'])}` "
        f"at git revision `{report.get('git_sha', 'unknown')}` "
        f"(report made {report.get('created', '?')}; the full spec is in report.json).",
        "",
    ]
    if report.get("note"):
        lines += [f"Note: {report['note']}", ""]
    from weir.harness import side_by_side

    lines += side_by_side.markdown(report)
    goals = targets(report)
    calm = host_calm_us(report)
    if goals:
        lines += ["## Targets", "", "| target | configuration | measured | met |", "|---|---|---|---|"]
        for t in goals:
            lines.append(
                f"| {t['target']} | {t['group']} | {target_value(t)} | {'yes' if t['met'] else '**no**'} |"
            )
        lines.append("")
        if calm is not None:  # the runs were probed
            lines += [
                "Each run's p99 is followed by the share of its 20 ms windows in which the host ran the job's "
                "thread slow: a short loop is timed in that thread every 2 ms, and a window is slow when its "
                f"fastest loop took over {steadiness.SLOW_FACTOR}x the median window of the calmest run of the "
                f"report ({_us(calm)} a loop). The tail of an open-loop run follows those "
                "windows (docs/harness.md).",
                "",
            ]
    configs = report["configurations"]
    attempts_calm = attempts_calm_us(report)
    if configs:
        lines += [
            "## Max throughput per configuration", "",
            "Replayed as fast as the job takes records; records/s after the warm-up, until the last record "
            "reached the sink; the best of the attempts (load on the machine only ever slows a run). The "
            "configurations of a sweep took their attempts in turns, so the maxima compared in the targets "
            "come from the same stretch of time." + (
                "" if attempts_calm is None else
                " Each attempt is followed by the share of its windows in which the host ran the job's "
                "thread slow, against the calmest attempt of the report "
                f"({_us(attempts_calm)} a loop; a thread busy throughout runs the probe's loop slower than "
                "an open-loop run's, so attempts are held against attempts)."
            ) + " The last column is the highest open-loop rate of the sweep that was sustained.",
            "", "| configuration | buffer timeout (ms) | max throughput (records/s) | attempts | checkpoints | highest sustained rate |",
            "|---|---:|---:|---|---:|---:|",
        ]  # fmt: skip
        for c in configs:
            top = c["runs"][0]
            attempts = each_attempt(c, attempts_calm)
            lines.append(
                f"| {c['group']} | {c['config']['buffer_timeout_ms']} | {_measured(c['max_throughput'])} | {attempts} | "
                f"{top.get('checkpoints_completed', 0)} | {_rate(c.get('max_sustained_rate'))} |"
            )
        lines += [
            "", "## Latency at fractions of max throughput", "",
            "Open loop: every record has an intended emission time from the rate; latency is measured from "
            "it at the sink (end to end, including any time the source was held back), in ms. "
            "A run is *sustained* when it delivered at least 95% of the offered rate. For window "
            "queries the latency of a result counts from its newest input event, so it includes "
            "waiting for the watermark. Where a rate was run several times, its row is the run "
            "with the median p99 and the last column lists the p99 of every run." + (
                "" if calm is None else " Next to each p99 is the share of the run's 20 ms windows in which "
                "the host ran the job's thread slow (see Targets)."
            ), "",
            "| configuration | timeout (ms) | load | offered (rec/s) | achieved (rec/s) | sustained | p50 | p90 | p99 | p99.9 | max | event-time lag p99 | p99 of each run"
            + ("" if calm is None else " (host slow windows)") + " |",
            "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
        ]  # fmt: skip
        for c in configs:
            for r in c["runs"][1:]:
                lat = r["latency_us"]
                load_label = f"{r['fraction']:.0%}" if r.get("fraction") is not None else "fixed"
                lag = r.get("lag_us") or {}
                lines.append(
                    f"| {c['group']} | {c['config']['buffer_timeout_ms']} | {load_label} | {_rate(r['target_rate'])} | "
                    f"{_rate(r['throughput'])} | {'yes' if r['sustained'] else '**no**'} | {_ms(lat['p50'])} | "
                    f"{_ms(lat['p90'])} | {_ms(lat['p99'])} | {_ms(lat['p99.9'])} | {_ms(lat['max'])} | "
                    f"{_ms(lag.get('p99'))} | {each_run_p99(r, calm)} |"
                )
        overloaded = [(c, r) for c in configs for r in c["runs"][1:] if r["sustained"] is False]
        if overloaded:
            lines += ["", "### Runs that could not keep up", "",
                      "Mean latency per 250 ms of intended time: it grows while the job falls behind.", ""]  # fmt: skip
            for c, r in overloaded[:6]:
                trend = r.get("trend") or []
                picks = trend[:: max(1, len(trend) // 8)]
                series = ", ".join(f"{p['t_s']:.2f} s: {p['mean_ms']:.1f} ms" for p in picks)
                lines.append(
                    f"- {c['key']} at {_rate(r['target_rate'])} rec/s offered, {_rate(r['throughput'])} achieved: {series}"
                )
        lines += ["", f"![latency against throughput]({LATENCY_PLOT})", "",
                  f"![max throughput against buffer timeout]({THROUGHPUT_PLOT})", ""]  # fmt: skip
    checks = report["correctness"]
    if checks:
        lines += [
            "## Correctness", "",
            "Each job ran once in throughput mode; its output (as a multiset of rows) is compared with the "
            "answer Spark computed from the same Parquet files.", "",
            "| query | data set | parallelism | checkpoints | state | restarts | expected rows | output rows | missing | unexpected | verdict |",
            "|---|---|---:|---|---|---:|---:|---:|---:|---:|---|",
        ]  # fmt: skip
        for v in checks:
            cfg = v["config"]
            lines.append(
                f"| {v['query']} | {v['dataset']} | {cfg['parallelism']} | {cfg['checkpointing']} "
                f"({v.get('checkpoints_completed', 0)} done) | {cfg['backend']} | {v.get('restarts', 0)} | "
                f"{v['rows_expected']:,} | "
                f"{v['rows_got']:,} | {v['missing']:,} | {v['unexpected']:,} | "
                f"{'match' if v['matches'] else '**MISMATCH**'} |"
            )
        lines.append("")
    lines += ["## Data sets", "", "| name | generator | events | seed | parameters | checksum (SHA-256) |",
              "|---|---|---:|---:|---|---|"]  # fmt: skip
    for name, ds in report.get("datasets", {}).items():
        params = {k: v for k, v in ds["parameters"].items() if k not in ("events", "seed")}
        lines.append(
            f"| {name} | {ds['generator']} | {ds['parameters']['events']:,} | {ds['seed']} | "
            f"{json.dumps(params, sort_keys=True)} | `{ds['checksum'][:16]}…` |"
        )
    m = report.get("machine", {})
    v = report.get("versions", {})
    steady = report.get("steadiness") or {}
    lines += [
        "", "## Machine and versions", "",
        f"- CPU: {m.get('cpu_model', '?')}, {m.get('cores', '?')} cores, "
        f"{m.get('memory_bytes', 0) / 2**30:.1f} GiB memory; {m.get('platform', '')}",
        "- " + ", ".join(f"{k} {val}" for k, val in v.items()),
        f"- suite ran {report.get('seconds', 0):.0f} s; load average (1, 5, 15 min) at start "
        f"{(report.get('load_average') or {}).get('start')}, at end {(report.get('load_average') or {}).get('end')} "
        "(a load above the core count means other work shared the machine and the numbers are noisier)",
        f"- machine steadiness (a fixed loop timed back to back, before and after the runs): at start "
        f"{steadiness.describe(steady.get('start'))}; at end {steadiness.describe(steady.get('end'))}. The host "
        "can take time from the VM's CPU, which the load average does not show: a slower loop, or more slow "
        "windows, mean longer latency tails and lower maxima (docs/harness.md)",
        f"- the host inside the open-loop runs (a loop timed in the job's thread every 2 ms): {describe_host(report)}",
        "",
    ]  # fmt: skip
    return "\n".join(lines)


def plots(report: dict[str, Any], directory: Path) -> list[Path]:
    configs = report["configurations"]
    if not configs:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[str, list[dict[str, Any]]] = {}
    for c in configs:
        groups.setdefault(c["group"], []).append(c)
    written = []
    calm = host_calm_us(report)

    percentiles = (("p99", "p99"), ("p50", "p50"))
    fig, axes = plt.subplots(
        len(percentiles), len(groups), figsize=(6.5 * len(groups), 4 * len(percentiles)), squeeze=False
    )
    for column, (group, members) in enumerate(groups.items()):
        for row, (name, label) in enumerate(percentiles):
            ax = axes[row][column]
            for c in sorted(members, key=lambda c: c["config"]["buffer_timeout_ms"]):
                runs = sorted((r for r in c["runs"][1:]), key=lambda r: r["throughput"])
                if not runs:
                    continue
                x = [r["throughput"] for r in runs]
                y = [r["latency_us"][name] / 1000 for r in runs]
                (line,) = ax.plot(x, y, marker="o", label=f"{c['config']['buffer_timeout_ms']} ms")
                missed = [(xi, yi) for xi, yi, r in zip(x, y, runs) if r["sustained"] is False]
                if missed:
                    ax.scatter(*zip(*missed), s=90, facecolors="white", edgecolors=line.get_color(), zorder=3)
                slow = [(xi, yi) for xi, yi, r in zip(x, y, runs) if _host_slow(r, calm)]
                if slow:
                    ax.scatter(*zip(*slow), s=40, marker="x", color="black", zorder=4)
            ax.set_yscale("log")
            ax.set_xlabel("achieved throughput (records/s)")
            ax.set_ylabel(f"{label} end-to-end latency (ms)")
            ax.set_title(f"{group}: {label}", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            if ax.get_lines():  # a suite of maximum-throughput runs only has no latency points
                ax.legend(fontsize=7, title="buffer timeout", title_fontsize=7)
    marked = (
        ""
        if calm is None
        else (f"; x: the host ran the job's thread slow in {SLOW_RUN_SHARE:.0%} or more of the run's windows")
    )
    fig.suptitle(f"weir: latency against throughput per buffer timeout (hollow: rate not sustained{marked})")
    fig.tight_layout()
    path = directory / LATENCY_PLOT
    fig.savefig(path, dpi=80)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for group, members in groups.items():
        members = sorted(members, key=lambda c: c["config"]["buffer_timeout_ms"])
        labels = [str(c["config"]["buffer_timeout_ms"]) for c in members]
        maxima = [float("nan") if c["max_throughput"] is None else c["max_throughput"] for c in members]
        ax.plot(labels, maxima, marker="o", label=group)
    ax.set_xlabel("buffer timeout (ms)")
    ax.set_ylabel("max throughput (records/s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("weir: max throughput against buffer timeout (the plot of Flink's network-stack write-up)")
    fig.tight_layout()
    path = directory / THROUGHPUT_PLOT
    fig.savefig(path, dpi=90)
    plt.close(fig)
    written.append(path)
    return written


# -- comparing ----------------------------------------------------------------------------------
def compare(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Per configuration in both reports: B/A of max throughput and of p50/p99 at each load."""
    by_key_a = {c["key"]: c for c in a["configurations"]}
    rows = []
    for c in b["configurations"]:
        other = by_key_a.get(c["key"])
        if other is None:
            continue
        row: dict[str, Any] = {
            "key": c["key"],
            "max_throughput_a": other["max_throughput"],
            "max_throughput_b": c["max_throughput"],
            "throughput_ratio": c["max_throughput"] / other["max_throughput"]
            if other["max_throughput"] and c["max_throughput"] is not None
            else None,
            "loads": [],
        }
        runs_a = {r.get("fraction"): r for r in other["runs"][1:] if r.get("fraction") is not None}
        for r in c["runs"][1:]:
            ra = runs_a.get(r.get("fraction"))
            if ra is None:
                continue
            entry = {"fraction": r["fraction"]}
            for p in ("p50", "p99"):
                va, vb = ra["latency_us"][p], r["latency_us"][p]
                entry[f"{p}_ratio"] = vb / va if va else None
            row["loads"].append(entry)
        rows.append(row)
    return rows


def only_in(a: dict[str, Any], b: dict[str, Any]) -> tuple[list[str], list[str]]:
    ka = {c["key"] for c in a["configurations"]}
    kb = {c["key"] for c in b["configurations"]}
    return sorted(ka - kb), sorted(kb - ka)

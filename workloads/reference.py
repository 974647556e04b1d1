"""Plain-Python twins of the queries whose answers Spark computes, for small data sets.

Each function takes the rows of the input table(s) as lists of dicts (read with pyarrow)
and returns the answer as a sorted list of tuples, in the column order of Spark's
answer. Tests compare them with the Parquet Spark wrote: two independent computations
of the same answer.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from weir.workloads import dataset, keyed, nexmark


def read_rows(files: list[Path]) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for f in files:
        rows.extend(pq.read_table(f).to_pylist())
    return rows


def read_expected(directory: Path | str, query: str) -> list[tuple[Any, ...]]:
    """Spark's answer to ``query`` as sorted tuples."""
    manifest = dataset.load_manifest(directory)
    rows = read_rows(dataset.expected_files(directory, manifest, query))
    return sorted(tuple(r.values()) for r in rows)


def read_table(directory: Path | str, table: str) -> list[dict[str, Any]]:
    manifest = dataset.load_manifest(directory)
    return read_rows(dataset.table_files(directory, manifest, table))


def window_start(ts: int, size: int) -> int:
    return ts - ts % size  # Python's % is a floor modulo, like Flink's window start and Spark's pmod


def keyed_window(events: list[dict[str, Any]], window_ms: int) -> list[tuple[Any, ...]]:
    counts: Counter[tuple[str, int]] = Counter()
    sums: Counter[tuple[str, int]] = Counter()
    for e in events:
        k = (e["key"], window_start(e["event_time"], window_ms))
        counts[k] += 1
        sums[k] += e["value"]
    return sorted((key, start, counts[(key, start)], sums[(key, start)]) for key, start in counts)


def keyed_shuffle(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((e["key"], e["value"], e["event_time"]) for e in events)


def q0(bids: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((b["auction"], b["bidder"], b["price"], b["date_time"]) for b in bids)


def q1(bids: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (b["auction"], b["bidder"], b["price"] * nexmark.DOLLAR_TO_EURO, b["date_time"]) for b in bids
    )


def q2(bids: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((b["auction"], b["price"]) for b in bids if b["auction"] % nexmark.Q2_AUCTION_MODULUS == 0)


def q5(bids: list[dict[str, Any]], size_ms: int, slide_ms: int) -> list[tuple[Any, ...]]:
    counts: Counter[tuple[int, int]] = Counter()
    for b in bids:
        last = window_start(b["date_time"], slide_ms)
        for start in range(last - size_ms + slide_ms, last + 1, slide_ms):
            counts[(b["auction"], start + size_ms)] += 1
    best: dict[int, int] = defaultdict(int)
    for (_, end), n in counts.items():
        best[end] = max(best[end], n)
    return sorted((auction, end, n) for (auction, end), n in counts.items() if n == best[end])


def q7(bids: list[dict[str, Any]], window_ms: int) -> list[tuple[Any, ...]]:
    highest: dict[int, int] = {}
    for b in bids:
        end = window_start(b["date_time"], window_ms) + window_ms
        highest[end] = max(highest.get(end, b["price"]), b["price"])
    return sorted(
        (b["auction"], b["bidder"], b["price"], b["date_time"], end)
        for b in bids
        if b["price"] == highest[end := window_start(b["date_time"], window_ms) + window_ms]
    )


def q8(
    persons: list[dict[str, Any]], auctions: list[dict[str, Any]], window_ms: int
) -> list[tuple[Any, ...]]:
    sellers = {(a["seller"], window_start(a["date_time"], window_ms)) for a in auctions}
    return sorted(
        (p["id"], p["name"], start)
        for p in persons
        if (p["id"], start := window_start(p["date_time"], window_ms)) in sellers
    )


def answer(directory: Path | str, query: str) -> list[tuple[Any, ...]]:
    """The plain-Python answer to ``query`` on the data set in ``directory``."""
    manifest = dataset.load_manifest(directory)
    params = manifest["parameters"]
    if manifest["generator"] == "keyed":
        events = read_table(directory, "events")
        if query == "keyed-window":
            return keyed_window(events, params["window_ms"])
        if query == "keyed-shuffle":
            return keyed_shuffle(events)
        raise ValueError(f"keyed has no query {query!r}; it has {keyed.QUERIES}")
    bids = read_table(directory, "bids")
    if query == "q0":
        return q0(bids)
    if query == "q1":
        return q1(bids)
    if query == "q2":
        return q2(bids)
    if query == "q5":
        return q5(bids, params["q5_size_ms"], params["q5_slide_ms"])
    if query == "q7":
        return q7(bids, params["window_ms"])
    if query == "q8":
        return q8(read_table(directory, "persons"), read_table(directory, "auctions"), params["window_ms"])
    raise ValueError(f"nexmark has no query {query!r}; it has {nexmark.QUERIES}")

"""The queries the harness runs on weir, written with the public DataStream API.

Every query reads replayed tables whose records end with ``intended_ns`` and produces
records in the column order of Spark's expected answer, followed by ``intended_ns`` (the
newest intended time among the events a result depends on). The sink strips that last
field before comparing with ``expected/<query>``.

keyed (each also written with weir.columnar, as ``<name>-columnar``: same answer):
  ``keyed-window``  Flink's MyJob example: source → map → key_by → 10 s tumbling event-time
                    window → reduce (count and sum per key and window) → sink
  ``keyed-shuffle`` source → map → key_by → sink: every event crosses a keyed exchange
nexmark:
  ``q0`` pass-through, ``q1`` currency conversion, ``q2`` selection (auction % 123 == 0),
  ``q5`` hot items (sliding-window counts per auction, then the top per window),
  ``q7`` highest bid per tumbling window (a non-keyed window), ``q8`` new people who
  opened an auction in the window they registered in (a window join built from union,
  key_by and a window process function: weir has no join operator yet).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from weir import columnar as col
from weir.common import Types
from weir.core.window import TumblingEventTimeWindows
from weir.datastream import DataStream
from weir.errors import UsageError
from weir.harness import portable_queries
from weir.workloads.nexmark import DOLLAR_TO_EURO, Q2_AUCTION_MODULUS

L, S, D = Types.LONG, Types.STRING, Types.DOUBLE


@dataclass(frozen=True)
class TableInput:
    table: str
    columns: tuple[str, ...]
    event_time_column: str


@dataclass(frozen=True)
class Query:
    name: str
    workload: str
    inputs: tuple[TableInput, ...]
    build: Callable[[list[DataStream], dict[str, Any]], DataStream]
    record_level: bool  # one output per input record: latency is per event
    description: str
    #: written with weir.columnar: its timestamps are read as a column
    columnar: bool = False
    #: the query whose expected answer this one must give (None: its own)
    same_answer_as: str | None = None

    @property
    def answer(self) -> str:
        return self.same_answer_as or self.name


# -- keyed -----------------------------------------------------------------------------------------
#: constants the portable builders take as parameters (weir.harness.portable_queries imports
#: only the API weir shares with PyFlink)
PORTABLE_PARAMS: dict[str, Any] = {"dollar_to_euro": DOLLAR_TO_EURO, "q2_auction_modulus": Q2_AUCTION_MODULUS}


def _portable(name: str) -> Callable[[list[DataStream], dict[str, Any]], DataStream]:
    """The builder of ``name`` in weir.harness.portable_queries, with PORTABLE_PARAMS added."""
    build = portable_queries.BUILDERS[name]

    def with_constants(streams: list[DataStream], params: dict[str, Any]) -> DataStream:
        return build(streams, {**PORTABLE_PARAMS, **params})

    return with_constants


# -- keyed, written with weir.columnar ---------------------------------------------------------------
def _keyed_window_columnar(streams: list[DataStream], params: dict[str, Any]) -> DataStream:
    """``keyed-window`` with declarative aggregates: one vectorized window operator."""
    size = int(params["window_ms"])
    events = streams[0]  # (key, value, event_time, intended)
    return (
        events.key_by(col.field(0))
        .window(TumblingEventTimeWindows.of(size))
        .aggregate(col.Aggregates(col.key(), col.window_start(), col.count(), col.sum(1), col.max(3)))
        .name("window count+sum")
        .uid("window")
    )


def _keyed_shuffle_columnar(streams: list[DataStream], params: dict[str, Any]) -> DataStream:
    """``keyed-shuffle`` with batch maps: the records cross the exchange as columns."""
    events = streams[0]  # (key, value, event_time, intended)
    row = Types.TUPLE([S(), L(), L(), L()])
    return (
        events.map(col.batch_map(_same_columns), output_type=row)
        .key_by(col.field(0))
        .map(col.batch_map(_same_columns), output_type=row)
        .name("keyed map")
    )


def _same_columns(*columns: Any) -> tuple[Any, ...]:
    return columns


BIDS = "bids"
QUERIES: dict[str, Query] = {
    q.name: q
    for q in (
        Query("keyed-window", "keyed", (TableInput("events", ("key", "value", "event_time"), "event_time"),),
              _portable("keyed-window"), False, "count and sum per key, 10 s tumbling event-time window (Flink's MyJob example)"),
        Query("keyed-shuffle", "keyed", (TableInput("events", ("key", "value", "event_time"), "event_time"),),
              _portable("keyed-shuffle"), True, "every event through map -> key_by -> map"),
        Query("keyed-window-columnar", "keyed", (TableInput("events", ("key", "value", "event_time"), "event_time"),),
              _keyed_window_columnar, False, "keyed-window written with weir.columnar's Aggregates",
              columnar=True, same_answer_as="keyed-window"),
        Query("keyed-shuffle-columnar", "keyed", (TableInput("events", ("key", "value", "event_time"), "event_time"),),
              _keyed_shuffle_columnar, True, "keyed-shuffle written with weir.columnar's batch_map",
              columnar=True, same_answer_as="keyed-shuffle"),
        Query("q0", "nexmark", (TableInput(BIDS, ("auction", "bidder", "price", "date_time"), "date_time"),),
              _portable("q0"), True, "Nexmark q0: pass-through"),
        Query("q1", "nexmark", (TableInput(BIDS, ("auction", "bidder", "price", "date_time"), "date_time"),),
              _portable("q1"), True, "Nexmark q1: price in euro"),
        Query("q2", "nexmark", (TableInput(BIDS, ("auction", "price", "date_time"), "date_time"),),
              _portable("q2"), True, "Nexmark q2: bids on auctions with id % 123 == 0"),
        Query("q5", "nexmark", (TableInput(BIDS, ("auction", "date_time"), "date_time"),),
              _portable("q5"), False, "Nexmark q5: hottest auctions, 10 s windows sliding by 2 s"),
        Query("q7", "nexmark", (TableInput(BIDS, ("auction", "bidder", "price", "date_time"), "date_time"),),
              _portable("q7"), False, "Nexmark q7: highest bids per 10 s tumbling window"),
        Query("q8", "nexmark", (TableInput("persons", ("id", "name", "date_time"), "date_time"),
                                TableInput("auctions", ("seller", "date_time"), "date_time")),
              _portable("q8"), False, "Nexmark q8: new people who opened an auction in their first 10 s window"),
    )
}  # fmt: skip


def get_query(name: str) -> Query:
    if name not in QUERIES:
        raise UsageError(f"unknown query {name!r}; weir runs {sorted(QUERIES)}")
    return QUERIES[name]

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

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from weir import columnar as col
from weir.common import Types
from weir.core.functions import AggregateFunction, ProcessWindowFunction, WindowFunction
from weir.core.window import SlidingEventTimeWindows, TumblingEventTimeWindows
from weir.datastream import DataStream
from weir.errors import UsageError
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
def _keyed_window(streams: list[DataStream], params: dict[str, Any]) -> DataStream:
    size = int(params["window_ms"])
    events = streams[0]  # (key, value, event_time, intended)
    return (
        events.map(
            lambda e: (e[0], e[2] - e[2] % size, 1, e[1], e[3]),
            output_type=Types.TUPLE([S(), L(), L(), L(), L()]),
        )
        .key_by(lambda e: e[0], key_type=S())
        .window(TumblingEventTimeWindows.of(size))
        .reduce(lambda a, b: (a[0], a[1], a[2] + b[2], a[3] + b[3], a[4] if a[4] > b[4] else b[4]))
        .name("window count+sum")
        .uid("window")
    )


def _keyed_shuffle(streams: list[DataStream], params: dict[str, Any]) -> DataStream:
    events = streams[0]  # (key, value, event_time, intended)
    return (
        events.map(lambda e: e, output_type=Types.TUPLE([S(), L(), L(), L()]))
        .key_by(lambda e: e[0], key_type=S())
        .map(lambda e: e, output_type=Types.TUPLE([S(), L(), L(), L()]))
        .name("keyed map")
    )


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


# -- nexmark ---------------------------------------------------------------------------------------
BID4 = Types.TUPLE([L(), L(), L(), L(), L()])  # auction, bidder, price, date_time, intended


def _q0(streams: list[DataStream], params: dict[str, Any]) -> DataStream:
    return streams[0].map(lambda b: b, output_type=BID4).name("q0 pass-through")


def _q1(streams: list[DataStream], params: dict[str, Any]) -> DataStream:
    rate = DOLLAR_TO_EURO
    return (
        streams[0]
        .map(
            lambda b: (b[0], b[1], b[2] * rate, b[3], b[4]),
            output_type=Types.TUPLE([L(), L(), D(), L(), L()]),
        )
        .name("q1 to euro")
    )


def _q2(streams: list[DataStream], params: dict[str, Any]) -> DataStream:
    modulus = Q2_AUCTION_MODULUS
    return (
        streams[0]
        .filter(lambda b: b[0] % modulus == 0)
        .name("q2 filter")
        .map(lambda b: (b[0], b[1], b[2]), output_type=Types.TUPLE([L(), L(), L()]))
        .name("q2 project")
    )


class _CountWithEnd(WindowFunction):
    """(auction, 1, intended) reduced to (auction, count, intended) → (auction, window_end, count, intended)."""

    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Iterable[Any]:
        for auction, count, intended in inputs:
            yield (auction, window.end, count, intended)


class _TopAuctions(ProcessWindowFunction):
    """All (auction, window_end, count) of one window end with the highest count."""

    def process(
        self, key: Any, context: ProcessWindowFunction.Context, elements: Iterable[Any]
    ) -> Iterable[Any]:
        rows = list(elements)
        best = max(r[2] for r in rows)
        newest = max(r[3] for r in rows)
        for auction, end, count, _ in rows:
            if count == best:
                yield (auction, end, count, newest)


def _q5(streams: list[DataStream], params: dict[str, Any]) -> DataStream:
    size, slide = int(params["q5_size_ms"]), int(params["q5_slide_ms"])
    counts = (
        streams[0]  # (auction, date_time, intended)
        .map(lambda b: (b[0], 1, b[2]), output_type=Types.TUPLE([L(), L(), L()]))
        .key_by(lambda b: b[0], key_type=L())
        .window(SlidingEventTimeWindows.of(size, slide))
        .reduce(
            lambda a, b: (a[0], a[1] + b[1], a[2] if a[2] > b[2] else b[2]),
            window_function=_CountWithEnd(),
            output_type=Types.TUPLE([L(), L(), L(), L()]),
        )
        .name("q5 bids per auction")
    )
    return (
        counts.key_by(lambda c: c[1], key_type=L())
        .window(TumblingEventTimeWindows.of(slide))
        .process(_TopAuctions(), output_type=Types.TUPLE([L(), L(), L(), L()]))
        .name("q5 hottest")
    )


class _HighestBids(AggregateFunction):
    """Accumulator: [max price, bids at that price, newest intended time]."""

    def create_accumulator(self) -> list[Any]:
        return [-1, [], 0]

    def add(self, value: Any, acc: list[Any]) -> list[Any]:
        price = value[2]
        if price > acc[0]:
            acc = [price, [value[:4]], acc[2]]
        elif price == acc[0]:
            acc = [price, [*acc[1], value[:4]], acc[2]]
        if value[4] > acc[2]:
            acc = [acc[0], acc[1], value[4]]
        return acc

    def get_result(self, acc: list[Any]) -> list[Any]:
        return acc

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        if a[0] == b[0]:
            return [a[0], a[1] + b[1], max(a[2], b[2])]
        top = a if a[0] > b[0] else b
        return [top[0], top[1], max(a[2], b[2])]


class _EmitHighest(ProcessWindowFunction):
    def process(
        self, key: Any, context: ProcessWindowFunction.Context, elements: Iterable[Any]
    ) -> Iterable[Any]:
        end = context.window().end
        for _, bids, newest in elements:
            for auction, bidder, price, date_time in bids:
                yield (auction, bidder, price, date_time, end, newest)


def _q7(streams: list[DataStream], params: dict[str, Any]) -> DataStream:
    size = int(params["window_ms"])
    return (
        streams[0]  # (auction, bidder, price, date_time, intended)
        .window_all(TumblingEventTimeWindows.of(size))
        .aggregate(
            _HighestBids(),
            window_function=_EmitHighest(),
            output_type=Types.TUPLE([L(), L(), L(), L(), L(), L()]),
        )
        .name("q7 highest bid")
    )


TAGGED = Types.TUPLE([S(), L(), S(), L()])  # kind, person id, name, intended


class _NewUsersWithAuctions(ProcessWindowFunction):
    def process(
        self, key: Any, context: ProcessWindowFunction.Context, elements: Iterable[Any]
    ) -> Iterable[Any]:
        rows = list(elements)
        names = [r[2] for r in rows if r[0] == "P"]
        if names and any(r[0] == "A" for r in rows):
            newest = max(r[3] for r in rows)
            for name in names:
                yield (key, name, context.window().start, newest)


def _q8(streams: list[DataStream], params: dict[str, Any]) -> DataStream:
    size = int(params["window_ms"])
    persons, auctions = streams  # (id, name, date_time, intended), (seller, date_time, intended)
    tagged_persons = persons.map(lambda p: ("P", p[0], p[1], p[3]), output_type=TAGGED).name("q8 persons")
    tagged_auctions = auctions.map(lambda a: ("A", a[0], "", a[2]), output_type=TAGGED).name("q8 auctions")
    return (
        tagged_persons.union(tagged_auctions)
        .key_by(lambda r: r[1], key_type=L())
        .window(TumblingEventTimeWindows.of(size))
        .process(_NewUsersWithAuctions(), output_type=Types.TUPLE([L(), S(), L(), L()]))
        .name("q8 window join")
    )


BIDS = "bids"
QUERIES: dict[str, Query] = {
    q.name: q
    for q in (
        Query("keyed-window", "keyed", (TableInput("events", ("key", "value", "event_time"), "event_time"),),
              _keyed_window, False, "count and sum per key, 10 s tumbling event-time window (Flink's MyJob example)"),
        Query("keyed-shuffle", "keyed", (TableInput("events", ("key", "value", "event_time"), "event_time"),),
              _keyed_shuffle, True, "every event through map -> key_by -> map"),
        Query("keyed-window-columnar", "keyed", (TableInput("events", ("key", "value", "event_time"), "event_time"),),
              _keyed_window_columnar, False, "keyed-window written with weir.columnar's Aggregates",
              columnar=True, same_answer_as="keyed-window"),
        Query("keyed-shuffle-columnar", "keyed", (TableInput("events", ("key", "value", "event_time"), "event_time"),),
              _keyed_shuffle_columnar, True, "keyed-shuffle written with weir.columnar's batch_map",
              columnar=True, same_answer_as="keyed-shuffle"),
        Query("q0", "nexmark", (TableInput(BIDS, ("auction", "bidder", "price", "date_time"), "date_time"),),
              _q0, True, "Nexmark q0: pass-through"),
        Query("q1", "nexmark", (TableInput(BIDS, ("auction", "bidder", "price", "date_time"), "date_time"),),
              _q1, True, "Nexmark q1: price in euro"),
        Query("q2", "nexmark", (TableInput(BIDS, ("auction", "price", "date_time"), "date_time"),),
              _q2, True, "Nexmark q2: bids on auctions with id % 123 == 0"),
        Query("q5", "nexmark", (TableInput(BIDS, ("auction", "date_time"), "date_time"),),
              _q5, False, "Nexmark q5: hottest auctions, 10 s windows sliding by 2 s"),
        Query("q7", "nexmark", (TableInput(BIDS, ("auction", "bidder", "price", "date_time"), "date_time"),),
              _q7, False, "Nexmark q7: highest bids per 10 s tumbling window"),
        Query("q8", "nexmark", (TableInput("persons", ("id", "name", "date_time"), "date_time"),
                                TableInput("auctions", ("seller", "date_time"), "date_time")),
              _q8, False, "Nexmark q8: new people who opened an auction in their first 10 s window"),
    )
}  # fmt: skip


def get_query(name: str) -> Query:
    if name not in QUERIES:
        raise UsageError(f"unknown query {name!r}; weir runs {sorted(QUERIES)}")
    return QUERIES[name]

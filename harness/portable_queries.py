"""The harness's queries in PyFlink's API only: one source for weir and for Apache Flink.

This module imports nothing but the names weir shares with PyFlink (``weir.common``,
``weir.datastream.functions``, ``weir.datastream.window``), so the same text with the
prefix ``weir`` swapped to ``pyflink`` is a PyFlink module: ``weir bench suite --engine
flink`` runs exactly these builders on Apache Flink (weir.harness.flink_engine). Keep it
that way: anything weir-only (weir.columnar, weir.errors, weir.workloads) belongs in
weir.harness.queries. Constants a query needs come in ``params``.

Every builder takes the replayed input streams (records end with ``intended_ns``) and the
parameters, and returns a stream of records in the column order of Spark's expected
answer followed by ``intended_ns``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from weir.common import Types
from weir.common.time import Time
from weir.datastream.functions import (
    AggregateFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from weir.datastream.window import SlidingEventTimeWindows, TumblingEventTimeWindows

L, S, D = Types.LONG, Types.STRING, Types.DOUBLE


def _ms(value: Any) -> Any:
    return Time.milliseconds(int(value))


# -- keyed -----------------------------------------------------------------------------------------
def keyed_window(streams: list[Any], params: dict[str, Any]) -> Any:
    size = int(params["window_ms"])
    events = streams[0]  # (key, value, event_time, intended)
    return (
        events.map(
            lambda e: (e[0], e[2] - e[2] % size, 1, e[1], e[3]),
            output_type=Types.TUPLE([S(), L(), L(), L(), L()]),
        )
        .key_by(lambda e: e[0], key_type=S())
        .window(TumblingEventTimeWindows.of(_ms(size)))
        .reduce(lambda a, b: (a[0], a[1], a[2] + b[2], a[3] + b[3], a[4] if a[4] > b[4] else b[4]))
        .name("window count+sum")
        .uid("window")
    )


def keyed_shuffle(streams: list[Any], params: dict[str, Any]) -> Any:
    events = streams[0]  # (key, value, event_time, intended)
    return (
        events.map(lambda e: e, output_type=Types.TUPLE([S(), L(), L(), L()]))
        .key_by(lambda e: e[0], key_type=S())
        .map(lambda e: e, output_type=Types.TUPLE([S(), L(), L(), L()]))
        .name("keyed map")
    )


# -- nexmark ---------------------------------------------------------------------------------------
def q0(streams: list[Any], params: dict[str, Any]) -> Any:
    bid = Types.TUPLE([L(), L(), L(), L(), L()])  # auction, bidder, price, date_time, intended
    return streams[0].map(lambda b: b, output_type=bid).name("q0 pass-through")


def q1(streams: list[Any], params: dict[str, Any]) -> Any:
    rate = float(params["dollar_to_euro"])
    return (
        streams[0]
        .map(
            lambda b: (b[0], b[1], b[2] * rate, b[3], b[4]),
            output_type=Types.TUPLE([L(), L(), D(), L(), L()]),
        )
        .name("q1 to euro")
    )


def q2(streams: list[Any], params: dict[str, Any]) -> Any:
    modulus = int(params["q2_auction_modulus"])
    return (
        streams[0]
        .filter(lambda b: b[0] % modulus == 0)
        .name("q2 filter")
        .map(lambda b: (b[0], b[1], b[2]), output_type=Types.TUPLE([L(), L(), L()]))
        .name("q2 project")
    )


class CountWithEnd(WindowFunction):
    """(auction, count, intended) → (auction, window_end, count, intended)."""

    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Iterable[Any]:
        for auction, count, intended in inputs:
            yield (auction, window.end, count, intended)


class TopAuctions(ProcessWindowFunction):
    """All (auction, window_end, count) of one window end with the highest count."""

    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        rows = list(elements)
        best = max(r[2] for r in rows)
        newest = max(r[3] for r in rows)
        for auction, end, count, _ in rows:
            if count == best:
                yield (auction, end, count, newest)


def q5(streams: list[Any], params: dict[str, Any]) -> Any:
    size, slide = int(params["q5_size_ms"]), int(params["q5_slide_ms"])
    counts = (
        streams[0]  # (auction, date_time, intended)
        .map(lambda b: (b[0], 1, b[2]), output_type=Types.TUPLE([L(), L(), L()]))
        .key_by(lambda b: b[0], key_type=L())
        .window(SlidingEventTimeWindows.of(_ms(size), _ms(slide)))
        .reduce(
            lambda a, b: (a[0], a[1] + b[1], a[2] if a[2] > b[2] else b[2]),
            window_function=CountWithEnd(),
            output_type=Types.TUPLE([L(), L(), L(), L()]),
        )
        .name("q5 bids per auction")
    )
    return (
        counts.key_by(lambda c: c[1], key_type=L())
        .window(TumblingEventTimeWindows.of(_ms(slide)))
        .process(TopAuctions(), output_type=Types.TUPLE([L(), L(), L(), L()]))
        .name("q5 hottest")
    )


class HighestBids(AggregateFunction):
    """Accumulator: [max price, bids at that price, newest intended time]."""

    def create_accumulator(self) -> list[Any]:
        return [-1, [], 0]

    def add(self, value: Any, acc: list[Any]) -> list[Any]:
        price = value[2]
        if price > acc[0]:
            acc = [price, [tuple(value[:4])], acc[2]]
        elif price == acc[0]:
            acc = [price, [*acc[1], tuple(value[:4])], acc[2]]
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


class EmitHighest(ProcessAllWindowFunction):
    def process(self, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        end = context.window().end
        for _, bids, newest in elements:
            for auction, bidder, price, date_time in bids:
                yield (auction, bidder, price, date_time, end, newest)


def q7(streams: list[Any], params: dict[str, Any]) -> Any:
    size = int(params["window_ms"])
    return (
        streams[0]  # (auction, bidder, price, date_time, intended)
        .window_all(TumblingEventTimeWindows.of(_ms(size)))
        .aggregate(
            HighestBids(),
            window_function=EmitHighest(),
            output_type=Types.TUPLE([L(), L(), L(), L(), L(), L()]),
        )
        .name("q7 highest bid")
    )


class NewUsersWithAuctions(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        rows = list(elements)
        names = [r[2] for r in rows if r[0] == "P"]
        if names and any(r[0] == "A" for r in rows):
            newest = max(r[3] for r in rows)
            for name in names:
                yield (key, name, context.window().start, newest)


def q8(streams: list[Any], params: dict[str, Any]) -> Any:
    size = int(params["window_ms"])
    tagged = Types.TUPLE([S(), L(), S(), L()])  # kind, person id, name, intended
    persons, auctions = streams  # (id, name, date_time, intended), (seller, date_time, intended)
    tagged_persons = persons.map(lambda p: ("P", p[0], p[1], p[3]), output_type=tagged).name("q8 persons")
    tagged_auctions = auctions.map(lambda a: ("A", a[0], "", a[2]), output_type=tagged).name("q8 auctions")
    return (
        tagged_persons.union(tagged_auctions)
        .key_by(lambda r: r[1], key_type=L())
        .window(TumblingEventTimeWindows.of(_ms(size)))
        .process(NewUsersWithAuctions(), output_type=Types.TUPLE([L(), S(), L(), L()]))
        .name("q8 window join")
    )


BUILDERS = {
    "keyed-window": keyed_window,
    "keyed-shuffle": keyed_shuffle,
    "q0": q0,
    "q1": q1,
    "q2": q2,
    "q5": q5,
    "q7": q7,
    "q8": q8,
}
"""Query name -> builder: the queries both engines run."""

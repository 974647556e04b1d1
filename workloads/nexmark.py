"""The ``nexmark`` workload: persons, auctions and bids of the Nexmark benchmark.

Event ``id`` (0 … events-1) follows the Nexmark generator's model, written fresh here in
Spark SQL:

- out of every 50 events, 1 is a new person, 3 are new auctions and 46 are bids
  (2% / 6% / 92%); person and auction ids count up from 1000 in event order;
- an auction's seller is, with probability 3/4, a "hot" seller (the first person of the
  latest block of 100 people), else one of the ~1000 most recent people;
- a bid goes, with probability 1/2, to a hot auction (the first of the latest block of 100
  auctions), else to one of the ~100 auctions in flight; its bidder is, with probability
  3/4, a hot bidder (the second person of the latest block of 100), else a recent person;
- prices are ``round(10 ** (6 u) * 100)`` cents-like units for a uniform u;
- ``date_time`` (ms) is ``base_time_ms + id * 1000 // event_rate``: events are spaced
  evenly in event time, ``event_rate`` per second, plus an optional delay in
  [0, ``disorder_ms``].

Tables ``persons``, ``auctions`` and ``bids`` each keep the global ``event_id``, so a
replay can interleave them on one schedule. Queries with expected answers: q0
(pass-through), q1 (currency conversion), q2 (selection), q5 (hot items over sliding
windows), q7 (highest bid per tumbling window) and q8 (new people who opened an auction
in the same tumbling window).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from weir.errors import UsageError
from weir.workloads.columns import rand_int, rand_unit

QUERIES = ("q0", "q1", "q2", "q5", "q7", "q8")

PERSON_PROPORTION, AUCTION_PROPORTION, BID_PROPORTION = 1, 3, 46
TOTAL_PROPORTION = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
HOT_AUCTION_RATIO = 2
HOT_SELLER_RATIO = 4
HOT_BIDDER_RATIO = 4
HOT_BLOCK = 100  # hot ids are the first of the latest block of this many ids
NUM_ACTIVE_PEOPLE = 1000
NUM_IN_FLIGHT_AUCTIONS = 100
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
DOLLAR_TO_EURO = 0.908
Q2_AUCTION_MODULUS = 123
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")
US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne")  # fmt: skip

_S = {  # salts: one random stream per purpose
    "name_first": 21, "name_last": 22, "city": 23, "state": 24, "card": 25,
    "seller_hot": 31, "seller": 32, "category": 33, "initial": 34, "reserve": 35, "expires": 36,
    "auction_hot": 41, "auction": 42, "bidder_hot": 43, "bidder": 44, "price": 45, "channel_hot": 46,
    "channel": 47, "disorder": 48,
}  # fmt: skip


@dataclass(frozen=True)
class NexmarkParams:
    events: int
    seed: int = 0
    event_rate: int = 10_000
    base_time_ms: int = 0
    disorder_ms: int = 0
    window_ms: int = 10_000  # q7, q8 tumbling windows
    q5_size_ms: int = 10_000
    q5_slide_ms: int = 2_000
    partitions: int = 0

    def __post_init__(self) -> None:
        for name in ("events", "event_rate", "window_ms", "q5_size_ms", "q5_slide_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise UsageError(f"nexmark {name} must be a positive integer, got {value!r}")
        for name in ("base_time_ms", "disorder_ms", "partitions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"nexmark {name} must be a non-negative integer, got {value!r}")
        if self.q5_size_ms % self.q5_slide_ms:
            raise UsageError(
                f"nexmark q5 window size {self.q5_size_ms} ms must be a multiple of its slide {self.q5_slide_ms} ms"
            )
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise UsageError(f"seed must be an integer, got {self.seed!r}")

    @property
    def num_partitions(self) -> int:
        return self.partitions or max(1, -(-self.events // 2_000_000))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _pick(values: tuple[str, ...], index: Any) -> Any:
    from pyspark.sql import functions as F

    return F.element_at(F.array(*[F.lit(v) for v in values]), (index + 1).cast("int"))


def _base(spark: Any, p: NexmarkParams) -> Any:
    """Every event with its kind and the id bookkeeping all three kinds need."""
    from pyspark.sql import functions as F

    df = spark.range(0, p.events, numPartitions=p.num_partitions)
    epoch = F.expr(f"id div {TOTAL_PROPORTION}")
    offset = F.pmod(F.col("id"), F.lit(TOTAL_PROPORTION))
    kind = (
        F.when(offset < PERSON_PROPORTION, F.lit("person"))
        .when(offset < PERSON_PROPORTION + AUCTION_PROPORTION, F.lit("auction"))
        .otherwise(F.lit("bid"))
    )
    # the base-0 id of the latest person / auction created at or before this event
    last_person = epoch
    last_auction = (
        F.when(offset < PERSON_PROPORTION, (epoch - 1) * AUCTION_PROPORTION + AUCTION_PROPORTION - 1)
        .when(offset >= PERSON_PROPORTION + AUCTION_PROPORTION, epoch * AUCTION_PROPORTION + AUCTION_PROPORTION - 1)
        .otherwise(epoch * AUCTION_PROPORTION + offset - PERSON_PROPORTION)
    )  # fmt: skip
    jitter = rand_int(p.seed, _S["disorder"], p.disorder_ms + 1) if p.disorder_ms else F.lit(0).cast("long")
    date_time = F.lit(p.base_time_ms).cast("long") + F.expr(f"id * 1000 div {p.event_rate}") + jitter
    return df.select(
        F.col("id").alias("event_id"),
        kind.alias("kind"),
        last_person.alias("last_person"),
        last_auction.alias("last_auction"),
        date_time.alias("date_time"),
    )


def _recent_person(p: NexmarkParams, salt: str) -> Any:
    from pyspark.sql import functions as F

    num_people = F.col("last_person") + 1
    active = F.least(num_people, F.lit(NUM_ACTIVE_PEOPLE).cast("long"))
    return num_people - active + rand_int(p.seed, _S[salt], active + PERSON_ID_LEAD, "event_id")


def _recent_auction(p: NexmarkParams, salt: str) -> Any:
    from pyspark.sql import functions as F

    max_auction = F.col("last_auction")
    min_auction = F.greatest(max_auction - NUM_IN_FLIGHT_AUCTIONS, F.lit(0).cast("long"))
    span = max_auction - min_auction + 1 + AUCTION_ID_LEAD
    return min_auction + rand_int(p.seed, _S[salt], span, "event_id")


def _price(p: NexmarkParams, salt: str) -> Any:
    from pyspark.sql import functions as F

    return F.round(F.pow(F.lit(10.0), rand_unit(p.seed, _S[salt], "event_id") * 6.0) * 100.0).cast("long")


def generate(spark: Any, p: NexmarkParams) -> dict[str, Any]:
    """The ``persons``, ``auctions`` and ``bids`` tables as Spark DataFrames."""
    from pyspark.sql import functions as F

    base = _base(spark, p)
    seed = p.seed

    def r(salt: str, bound: Any) -> Any:
        return rand_int(seed, _S[salt], bound, "event_id")

    persons = base.where(F.col("kind") == "person").select(
        F.col("event_id"),
        (F.col("last_person") + FIRST_PERSON_ID).alias("id"),
        F.concat_ws(
            " ", _pick(FIRST_NAMES, r("name_first", len(FIRST_NAMES))), _pick(LAST_NAMES, r("name_last", len(LAST_NAMES)))
        ).alias("name"),
        F.concat(F.lit("person"), F.col("last_person").cast("string"), F.lit("@nexmark.test")).alias("email_address"),
        F.lpad(r("card", 10_000_000_000_000_000).cast("string"), 16, "0").alias("credit_card"),
        _pick(US_CITIES, r("city", len(US_CITIES))).alias("city"),
        _pick(US_STATES, r("state", len(US_STATES))).alias("state"),
        F.col("date_time"),
    )  # fmt: skip
    hot_seller = (F.col("last_person") / HOT_BLOCK).cast("long") * HOT_BLOCK
    initial_bid = _price(p, "initial")
    auctions = base.where(F.col("kind") == "auction").select(
        F.col("event_id"),
        (F.col("last_auction") + FIRST_AUCTION_ID).alias("id"),
        F.concat(F.lit("item-"), F.col("last_auction").cast("string")).alias("item_name"),
        initial_bid.alias("initial_bid"),
        (initial_bid + _price(p, "reserve")).alias("reserve"),
        F.col("date_time"),
        (F.col("date_time") + (r("expires", 20) + 10) * 1000).alias("expires"),
        (F.when(r("seller_hot", HOT_SELLER_RATIO) > 0, hot_seller).otherwise(_recent_person(p, "seller"))
         + FIRST_PERSON_ID).alias("seller"),
        (r("category", NUM_CATEGORIES) + FIRST_CATEGORY_ID).alias("category"),
    )  # fmt: skip
    hot_auction = (F.col("last_auction") / HOT_BLOCK).cast("long") * HOT_BLOCK
    hot_bidder = (F.col("last_person") / HOT_BLOCK).cast("long") * HOT_BLOCK + 1
    channel = F.when(r("channel_hot", 2) > 0, _pick(HOT_CHANNELS, r("channel", len(HOT_CHANNELS)))).otherwise(
        F.concat(F.lit("channel-"), r("channel", 10_000).cast("string"))
    )
    bids = base.where(F.col("kind") == "bid").select(
        F.col("event_id"),
        (F.when(r("auction_hot", HOT_AUCTION_RATIO) > 0, F.greatest(hot_auction, F.lit(0).cast("long")))
         .otherwise(_recent_auction(p, "auction")) + FIRST_AUCTION_ID).alias("auction"),
        (F.when(r("bidder_hot", HOT_BIDDER_RATIO) > 0, hot_bidder).otherwise(_recent_person(p, "bidder"))
         + FIRST_PERSON_ID).alias("bidder"),
        _price(p, "price").alias("price"),
        channel.alias("channel"),
        F.col("date_time"),
    )  # fmt: skip
    return {"persons": persons, "auctions": auctions, "bids": bids}


def expected(spark: Any, tables: dict[str, Any], p: NexmarkParams) -> dict[str, Any]:
    """Spark's answers to q0, q1, q2, q5, q7 and q8, from the written tables."""
    from pyspark.sql import functions as F

    bids, persons, auctions = tables["bids"], tables["persons"], tables["auctions"]
    q0 = bids.select("auction", "bidder", "price", "date_time")
    q1 = bids.select(
        "auction", "bidder", (F.col("price") * F.lit(DOLLAR_TO_EURO)).alias("price"), "date_time"
    )
    q2 = bids.where(F.pmod(F.col("auction"), F.lit(Q2_AUCTION_MODULUS)) == 0).select("auction", "price")

    # q5: bids per auction in sliding windows; per window the auction(s) with the most bids
    size, slide = p.q5_size_ms, p.q5_slide_ms
    last_start = F.col("date_time") - F.pmod(F.col("date_time"), F.lit(slide).cast("long"))
    starts = F.sequence(last_start - (size - slide), last_start, F.lit(slide).cast("long"))
    counts = (
        bids.select("auction", F.explode(starts).alias("window_start"))
        .groupBy("auction", "window_start")
        .agg(F.count(F.lit(1)).alias("num"))
        .withColumn("window_end", F.col("window_start") + size)
    )
    top = counts.groupBy("window_end").agg(F.max("num").alias("max_num"))
    q5 = (
        counts.join(top, "window_end")
        .where(F.col("num") == F.col("max_num"))
        .select("auction", "window_end", "num")
    )

    # q7: the highest bid(s) of each tumbling window
    w = F.lit(p.window_ms).cast("long")
    windowed = bids.withColumn("window_end", F.col("date_time") - F.pmod(F.col("date_time"), w) + w)
    highest = windowed.groupBy("window_end").agg(F.max("price").alias("max_price"))
    q7 = (
        windowed.join(highest, "window_end")
        .where(F.col("price") == F.col("max_price"))
        .select("auction", "bidder", "price", "date_time", "window_end")
    )

    # q8: people who opened an auction in the tumbling window in which they registered
    p_win = persons.select(
        F.col("id").alias("person_id"), "name",
        (F.col("date_time") - F.pmod(F.col("date_time"), w)).alias("window_start"),
    )  # fmt: skip
    a_win = auctions.select(
        F.col("seller").alias("person_id"),
        (F.col("date_time") - F.pmod(F.col("date_time"), w)).alias("window_start"),
    ).distinct()
    q8 = p_win.join(a_win, ["person_id", "window_start"]).select("person_id", "name", "window_start")
    return {"q0": q0, "q1": q1, "q2": q2, "q5": q5, "q7": q7, "q8": q8}

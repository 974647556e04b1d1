"""The ``keyed`` workload: a stream of (key, value, event_time, payload).

Row ``id`` (0 … events-1) is event number ``id`` of the stream:

- ``key``: ``key-NNN`` for a key index drawn uniformly from ``keys`` keys, or from a Zipf
  distribution with exponent ``zipf_s`` (rank 0 hottest), sampled exactly with an alias table;
- ``value``: an integer in [0, 100);
- ``event_time`` (ms): ``start_ms + id * 1000 // event_rate`` plus a delay in
  [0, ``disorder_ms``], so the stream is out of order by at most ``disorder_ms`` and a
  bounded-out-of-orderness watermark of ``disorder_ms`` never makes an event late;
- ``payload``: ``payload_bytes`` hexadecimal characters (empty when 0).

Queries with expected answers: ``keyed-window`` (count and sum of value per key and
tumbling event-time window of ``window_ms``, the shape of Flink's MyJob example) and
``keyed-shuffle`` (every event's key, value and event time, routed by key).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from weir.errors import UsageError
from weir.workloads.columns import alias_table, rand_int, rand_long, rand_unit, zipf_weights

DISTRIBUTIONS = ("uniform", "zipf")
QUERIES = ("keyed-window", "keyed-shuffle")
_SALT_KEY, _SALT_ALIAS, _SALT_VALUE, _SALT_DISORDER, _SALT_PAYLOAD = 11, 12, 13, 14, 15


@dataclass(frozen=True)
class KeyedParams:
    events: int
    seed: int = 0
    keys: int = 1000
    distribution: str = "uniform"
    zipf_s: float = 1.1
    event_rate: int = 10_000
    disorder_ms: int = 2_000
    payload_bytes: int = 0
    start_ms: int = 0
    window_ms: int = 10_000
    partitions: int = 0  # 0: one Parquet file per million events

    def __post_init__(self) -> None:
        _positive("events", self.events)
        _positive("keys", self.keys)
        _positive("event_rate", self.event_rate)
        _positive("window_ms", self.window_ms)
        _non_negative("disorder_ms", self.disorder_ms)
        _non_negative("payload_bytes", self.payload_bytes)
        _non_negative("partitions", self.partitions)
        _non_negative("start_ms", self.start_ms)
        if self.distribution not in DISTRIBUTIONS:
            raise UsageError(f"keyed distribution must be one of {DISTRIBUTIONS}, got {self.distribution!r}")
        if not isinstance(self.zipf_s, (int, float)) or self.zipf_s <= 0:
            raise UsageError(f"keyed zipf_s must be a positive exponent, got {self.zipf_s!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise UsageError(f"seed must be an integer, got {self.seed!r}")

    @property
    def num_partitions(self) -> int:
        return self.partitions or max(1, -(-self.events // 1_000_000))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UsageError(f"keyed {name} must be a positive integer, got {value!r}")


def _non_negative(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"keyed {name} must be a non-negative integer, got {value!r}")


def key_width(keys: int) -> int:
    return len(str(keys - 1))


def key_name(index: int, keys: int) -> str:
    return f"key-{index:0{key_width(keys)}d}"


def generate(spark: Any, p: KeyedParams) -> dict[str, Any]:
    """The ``events`` table as a Spark DataFrame (one partition per output file)."""
    from pyspark.sql import functions as F

    df = spark.range(0, p.events, numPartitions=p.num_partitions)
    if p.distribution == "uniform":
        df = df.withColumn("key_index", rand_int(p.seed, _SALT_KEY, p.keys))
    else:
        prob, alias = alias_table(zipf_weights(p.keys, float(p.zipf_s)))
        table = spark.createDataFrame(
            [(j, prob[j], alias[j]) for j in range(p.keys)], "alias_column long, prob double, alias long"
        )
        df = (
            df.withColumn("alias_column", rand_int(p.seed, _SALT_KEY, p.keys))
            .join(F.broadcast(table), "alias_column")
            .withColumn(
                "key_index",
                F.when(rand_unit(p.seed, _SALT_ALIAS) < F.col("prob"), F.col("alias_column")).otherwise(
                    F.col("alias")
                ),
            )
        )
    nominal = F.lit(p.start_ms).cast("long") + F.expr(f"id * 1000 div {p.event_rate}")
    jitter = rand_int(p.seed, _SALT_DISORDER, p.disorder_ms + 1) if p.disorder_ms else F.lit(0).cast("long")
    if p.payload_bytes:
        block = F.lpad(F.hex(rand_long(p.seed, _SALT_PAYLOAD)), 16, "0")
        payload = F.substring(F.repeat(block, -(-p.payload_bytes // 16)), 1, p.payload_bytes)
    else:
        payload = F.lit("")
    return (
        df.select(
            F.col("id"),
            F.concat(F.lit("key-"), F.lpad(F.col("key_index").cast("string"), key_width(p.keys), "0")).alias(
                "key"
            ),
            rand_int(p.seed, _SALT_VALUE, 100).alias("value"),
            (nominal + jitter).alias("event_time"),
            payload.alias("payload"),
        )
        .sortWithinPartitions("id")  # the join may reorder rows; files keep event order
        .drop("id")
    )


def expected(spark: Any, events: Any, p: KeyedParams) -> dict[str, Any]:
    """Spark's answers to the keyed queries, from the written ``events`` table."""
    from pyspark.sql import functions as F

    window_start = F.col("event_time") - F.pmod(F.col("event_time"), F.lit(p.window_ms).cast("long"))
    window = (
        events.withColumn("window_start", window_start)
        .groupBy("key", "window_start")
        .agg(F.count(F.lit(1)).alias("count"), F.sum("value").alias("sum"))
    )
    return {
        "keyed-window": window.select("key", "window_start", "count", "sum"),
        "keyed-shuffle": events.select("key", "value", "event_time"),
    }

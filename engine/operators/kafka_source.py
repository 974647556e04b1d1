"""The runtime side of ``weir.datastream.connectors.kafka.KafkaSource``: each subtask reads
its topic partitions through one librdkafka consumer.

Theory of operation
-------------------
Splits are topic partitions, as in Flink: a split is the JSON value
``{"topic", "partition", "offset", "stop"}`` where ``offset`` is the next offset to read and
``stop`` the first offset not to read (None: read on for ever). A split whose offset reached
its stop is finished and stays in the list (so it is not read again).

A reader starts with no splits but an *owner claim* ``{"owner": i, "of": p}``: "the
partitions that subtask ``i`` of ``p`` owns". On its first read it lists the subscribed
partitions (topics, a pattern, or a set), keeps those a claim owns -- the owner of a
partition is Flink's ``KafkaSourceEnumerator.getSplitOwner``: the topic's Java
``hashCode() * 31`` picks the subtask of partition 0, the others follow round robin -- and
resolves the claim into splits with the starting and stopping offsets initializers. Until
then its snapshot is the claim itself, so a checkpoint taken before the first read restores
into a reader that resolves the same claim (at any parallelism).

Reading: the consumer is assigned the unfinished splits at their offsets (no group
subscription; the group id only names where offsets are committed). Messages already fetched
are taken without blocking; when there are none the reader waits in a worker thread, at most
``POLL_S`` at a time, so a cancelled task waits no longer than that. A message at or past its
split's stop finishes the split (so does an end-of-partition event at or past it, which
covers transaction markers that hold the last offsets). A bounded reader (stopping offsets
set) ends when every split is finished; an unbounded one with no splits idles.

Checkpoints: the source operator snapshots the splits as of the last emitted batch and
hands them to ``on_snapshot``; when that checkpoint completes, their offsets are committed to
the consumer group (asynchronously; a failed commit is logged, never fatal), as Flink's
KafkaSourceReader does, unless there is no group id or ``commit.offsets.on.checkpoint`` is
false. Recovery restores the splits and reads on from their offsets: the records after the
checkpoint are read again, exactly once into the restored state.

What it does not do: discover partitions added while the job runs
(``partition.discovery.interval.ms`` is accepted and ignored), or read keys and headers
(``set_value_only_deserializer`` is the only deserializer).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np
import trio

from weir.codec.batch import NO_TIMESTAMP, Batch
from weir.errors import UsageError
from weir.loop.threads import long_running_limiter
from weir.operators.kafka_client import client_config, confluent_kafka, make_client
from weir.operators.sources import DEFAULT_BATCH_SIZE, SourceReader

log = logging.getLogger(__name__)

POLL_S = 0.1  # one blocking wait for messages at most
METADATA_TIMEOUT_S = 30.0  # listing topics and looking offsets up (Flink: default.api.timeout.ms 60 s)
# the KafkaSource's own options (Flink's KafkaSourceOptions), not the consumer's
SOURCE_OPTIONS = frozenset(
    {
        "client.id.prefix",
        "partition.discovery.interval.ms",
        "commit.offsets.on.checkpoint",
        "register.consumer.metrics",
        "poll.timeout.ms",
        "scan.topic-integrity-check.enabled",
    }
)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# Flink's KafkaPartitionSplit sentinels, allowed in KafkaOffsetsInitializer.offsets()
LATEST_OFFSET, EARLIEST_OFFSET, COMMITTED_OFFSET = -1, -2, -3


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16 code units), as an unsigned 32-bit int."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def split_owner(topic: str, partition: int, parallelism: int) -> int:
    """The subtask that reads ``topic``-``partition`` (Flink's ``getSplitOwner``)."""
    start = ((java_string_hash(topic) * 31) & 0x7FFFFFFF) % parallelism
    return (start + partition) % parallelism


def is_finished(split: dict[str, Any]) -> bool:
    return split["stop"] is not None and split["offset"] >= split["stop"]


class KafkaSourceReader(SourceReader):
    """One subtask's partitions of a KafkaSource (see the module docstring)."""

    def __init__(
        self, source: Any, subtask: int, parallelism: int, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> None:
        self.source = source
        self.subtask, self.parallelism = subtask, parallelism
        self.batch_size = batch_size
        self.splits: list[dict[str, Any]] = []
        self.claims: list[tuple[int, int]] = [(subtask, parallelism)]  # (owner, of) not resolved yet
        self.consumer: Any = None
        self.deserializer = source.deserializer
        properties: dict[str, str] = source.get_properties()
        self.servers = properties.get("bootstrap.servers")
        self.group_id = properties.get("group.id")
        self.commit_on_checkpoint = (
            self.group_id is not None
            and properties.get("commit.offsets.on.checkpoint", "true").strip().lower() != "false"
        )
        self.to_commit: dict[int, list[tuple[str, int, int]]] = {}  # checkpoint id -> offsets
        self.commit_failures = 0
        self._by_partition: dict[tuple[str, int], dict[str, Any]] = {}

    # -- splits and checkpoints ----------------------------------------------------------
    def snapshot_splits(self) -> list[Any] | None:
        claims = [{"owner": owner, "of": of} for owner, of in self.claims]
        return [dict(s) for s in self.splits] + claims

    def restore_splits(self, splits: list[Any]) -> None:
        if self.consumer is not None:
            raise UsageError(f"KafkaSource subtask {self.subtask}: splits restored after reading started")
        self.splits = [dict(s) for s in splits if "topic" in s]
        self.claims = [(int(s["owner"]), int(s["of"])) for s in splits if "owner" in s]

    def position(self) -> Any:
        return {"splits": self.snapshot_splits()}

    def restore(self, position: Any) -> None:
        self.restore_splits(position["splits"])

    def on_snapshot(self, checkpoint_id: int, splits: list[Any] | None) -> None:
        """Checkpoint ``checkpoint_id`` recorded ``splits``: their offsets are committed when it completes."""
        if self.commit_on_checkpoint and splits:
            self.to_commit[checkpoint_id] = [
                (s["topic"], s["partition"], s["offset"]) for s in splits if "topic" in s and s["offset"] >= 0
            ]

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        offsets = self.to_commit.get(checkpoint_id)
        for cid in [c for c in self.to_commit if c <= checkpoint_id]:
            del self.to_commit[cid]
        if not offsets or self.consumer is None:
            return
        ck = confluent_kafka("KafkaSource")
        try:
            self.consumer.commit(
                offsets=[ck.TopicPartition(t, p, o) for t, p, o in offsets], asynchronous=True
            )
        except Exception as e:  # as Flink: a failed commit is reported, the job goes on
            self._on_commit(e, None)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.to_commit.pop(checkpoint_id, None)

    def _on_commit(self, error: Any, partitions: Any) -> None:
        if error is not None:
            self.commit_failures += 1
            log.warning(
                "KafkaSource subtask %d: committing offsets to group '%s' failed: %s",
                self.subtask, self.group_id, error,
            )  # fmt: skip

    # -- starting ------------------------------------------------------------------------
    def _who(self) -> str:
        return f"KafkaSource (subtask {self.subtask + 1}/{self.parallelism})"

    def _consumer_config(self) -> dict[str, Any]:
        properties = self.source.get_properties()
        prefix = properties.get("client.id.prefix") or self.group_id or "KafkaSource"
        config = client_config(properties, skip=SOURCE_OPTIONS)
        config.setdefault("group.id", prefix)  # librdkafka wants one; nothing is committed without the user's
        config.setdefault("client.id", f"{prefix}-{self.subtask}")
        config.setdefault("enable.auto.commit", "false")
        config.setdefault("isolation.level", "read_uncommitted")  # the Java client's default
        config["auto.offset.reset"] = {"EARLIEST": "earliest", "LATEST": "latest", "NONE": "error"}[
            self.source.starting_offsets.reset_strategy_name()
        ]
        config["enable.partition.eof"] = True
        config["on_commit"] = self._on_commit
        return config

    def _start(self) -> None:
        """Make the consumer, resolve the claims into splits, assign them (blocking: in a thread)."""
        ck = confluent_kafka(self._who())
        consumer = make_client(ck.Consumer, self._consumer_config(), self._who())
        try:
            if self.claims:
                partitions = [
                    tp
                    for tp in self._subscribed_partitions(consumer)
                    if any(split_owner(tp[0], tp[1], of) == owner for owner, of in self.claims)
                ]
                starts = self._resolve(consumer, self.source.starting_offsets, partitions)
                stopping = self.source.stopping_offsets
                stops = (
                    None if stopping is None else self._resolve(consumer, stopping, partitions, stopping=True)
                )
                for tp in partitions:
                    stop = None if stops is None else stops[tp]
                    self.splits.append(
                        {"topic": tp[0], "partition": tp[1], "offset": starts[tp], "stop": stop}
                    )
                self.claims = []
            self._by_partition = {(s["topic"], s["partition"]): s for s in self.splits}
            consumer.assign(
                [
                    ck.TopicPartition(s["topic"], s["partition"], s["offset"])
                    for s in self.splits
                    if not is_finished(s)
                ]
            )
        except BaseException:
            consumer.close()
            raise
        self.consumer = consumer

    def _subscribed_partitions(self, consumer: Any) -> list[tuple[str, int]]:
        try:
            metadata = consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        except Exception as e:
            raise RuntimeError(f"{self._who()}: cannot list the topics of {self.servers}: {e}") from e
        topics = {name: t for name, t in metadata.topics.items() if t.error is None}
        kind, subscribed = self.source.subscription
        if kind == "topics":
            missing = [t for t in subscribed if t not in topics]
            if missing:
                raise UsageError(
                    f"{self._who()}: topic(s) {', '.join(map(repr, missing))} do not exist on {self.servers}; "
                    "use set_topic_pattern to subscribe to topics that may be created later"
                )
            return [(t, p) for t in subscribed for p in sorted(topics[t].partitions)]
        if kind == "pattern":
            pattern = re.compile(subscribed)
            return [
                (t, p)
                for t in sorted(topics)
                if t not in INTERNAL_TOPICS and pattern.fullmatch(t)
                for p in sorted(topics[t].partitions)
            ]
        missing = [f"{t}-{p}" for t, p in subscribed if t not in topics or p not in topics[t].partitions]
        if missing:
            raise UsageError(
                f"{self._who()}: partition(s) {', '.join(missing)} do not exist on {self.servers}"
            )
        return sorted(subscribed)

    def _resolve(
        self, consumer: Any, initializer: Any, partitions: list[tuple[str, int]], stopping: bool = False
    ) -> dict[tuple[str, int], int]:
        """The offsets ``initializer`` gives ``partitions`` (as Flink's OffsetsInitializers).
        A given offset outside the partition's range is reset only as a starting offset (where
        Flink's consumer resets it); a stopping offset past the end stands, and the split is
        read until the partition grows to it."""
        ck = confluent_kafka(self._who())
        if not partitions:
            return {}

        def watermarks(tp: tuple[str, int]) -> tuple[int, int]:
            low, high = consumer.get_watermark_offsets(ck.TopicPartition(*tp), timeout=METADATA_TIMEOUT_S)
            return int(low), int(high)

        def committed(tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
            if self.group_id is None or not tps:
                return {}
            found = consumer.committed([ck.TopicPartition(*tp) for tp in tps], timeout=METADATA_TIMEOUT_S)
            return {(f.topic, f.partition): f.offset for f in found if f.offset >= 0}

        def reset(tp: tuple[str, int], why: str) -> int:
            strategy = initializer.reset_strategy_name()
            if strategy == "NONE":
                raise UsageError(
                    f"{self._who()}: {why} for partition {tp[0]}-{tp[1]}, and the offset reset strategy is NONE; "
                    "give the initializer KafkaOffsetResetStrategy.EARLIEST or LATEST"
                )
            low, high = watermarks(tp)
            return low if strategy == "EARLIEST" else high

        kind = initializer.kind
        if kind == "earliest":
            return {tp: watermarks(tp)[0] for tp in partitions}
        if kind == "latest":
            return {tp: watermarks(tp)[1] for tp in partitions}
        if kind == "timestamp":
            found = consumer.offsets_for_times(
                [ck.TopicPartition(t, p, initializer.timestamp_ms) for t, p in partitions],
                timeout=METADATA_TIMEOUT_S,
            )
            by_tp = {(f.topic, f.partition): f.offset for f in found}
            # no record at or after the timestamp: the end of the partition, as Flink
            return {tp: by_tp[tp] if by_tp.get(tp, -1) >= 0 else watermarks(tp)[1] for tp in partitions}
        if kind == "committed":
            found = committed(partitions)
            return {
                tp: found[tp]
                if tp in found
                else reset(tp, f"group '{self.group_id}' has no committed offset")
                for tp in partitions
            }
        # "offsets": the given ones; the others from the group's committed offsets, else the reset strategy
        given = initializer.partition_offsets
        offsets: dict[tuple[str, int], int] = {}
        lookup = [tp for tp in partitions if given.get(tp, COMMITTED_OFFSET) == COMMITTED_OFFSET]
        found = committed(lookup)
        for tp in partitions:
            offset = given.get(tp, COMMITTED_OFFSET)
            if offset == COMMITTED_OFFSET:
                offsets[tp] = (
                    found[tp] if tp in found else reset(tp, "no offset was given and none is committed")
                )
            elif offset == EARLIEST_OFFSET:
                offsets[tp] = watermarks(tp)[0]
            elif offset == LATEST_OFFSET:
                offsets[tp] = watermarks(tp)[1]
            elif stopping:
                offsets[tp] = offset
            else:
                low, high = watermarks(tp)
                offsets[tp] = (
                    offset
                    if low <= offset <= high
                    else reset(tp, f"offset {offset} is outside [{low}, {high}]")
                )
        return offsets

    # -- reading -------------------------------------------------------------------------
    def _finish(self, split: dict[str, Any]) -> None:
        split["offset"] = max(split["offset"], split["stop"])
        ck = confluent_kafka(self._who())
        self.consumer.incremental_unassign([ck.TopicPartition(split["topic"], split["partition"])])

    def _wait_for_messages(self, n: int) -> list[Any]:
        """Up to ``n`` messages, waiting at most POLL_S for the first (in a worker thread)."""
        first = self.consumer.poll(POLL_S)
        if first is None:
            return []
        return [first, *self.consumer.consume(n - 1, 0)] if n > 1 else [first]

    async def next_batch(self) -> Batch | None:
        """The next messages of this subtask's partitions; None when every split reached its
        stop. Cancellation: waits for the current poll (at most POLL_S); nothing is lost."""
        if self.consumer is None:
            await trio.to_thread.run_sync(self._start)
        n = max(1, self.batch_size or DEFAULT_BATCH_SIZE)
        while True:
            if all(is_finished(s) for s in self.splits):
                if self.source.stopping_offsets is not None:
                    return None
                await trio.sleep_forever()  # an unbounded reader without partitions
            messages = self.consumer.consume(n, 0)  # already fetched: no wait
            if not messages:
                messages = await trio.to_thread.run_sync(
                    self._wait_for_messages, n, limiter=long_running_limiter()
                )
            batch = self._records(messages)
            if batch is not None:
                return batch

    def _records(self, messages: list[Any]) -> Batch | None:
        ck = confluent_kafka(self._who())
        values: list[Any] = []
        stamps: list[int] = []
        deserialize = self.deserializer.deserialize
        for m in messages:
            error = m.error()
            split = self._by_partition.get((m.topic(), m.partition()))
            if error is not None:
                if error.code() == ck.KafkaError._PARTITION_EOF:
                    # transaction markers may hold a partition's last offsets: its end counts too
                    stop = None if split is None or is_finished(split) else split["stop"]
                    if split is not None and stop is not None and m.offset() >= stop:
                        self._finish(split)
                    continue
                if error.fatal() or error.code() == ck.KafkaError._AUTO_OFFSET_RESET:
                    raise RuntimeError(f"{self._who()}: reading from {self.servers} failed: {error.str()}")
                log.warning("%s: %s", self._who(), error.str())  # librdkafka retries on its own
                continue
            if split is None or is_finished(split):
                continue
            offset = m.offset()
            if split["stop"] is not None and offset >= split["stop"]:
                self._finish(split)
                continue
            split["offset"] = offset + 1
            value = deserialize(m.value())
            if value is None:  # Flink skips what the deserializer turns into null
                continue
            values.append(value)
            kind, timestamp = m.timestamp()
            stamps.append(NO_TIMESTAMP if kind == ck.TIMESTAMP_NOT_AVAILABLE else timestamp)
            if split["stop"] is not None and split["offset"] >= split["stop"]:
                self._finish(split)
        if not values:
            return None
        return Batch(values, np.array(stamps, dtype=np.int64))

    def close(self) -> None:
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            consumer.close()


def kafka_source_reader(source: Any, subtask: int, parallelism: int) -> KafkaSourceReader:
    return KafkaSourceReader(source, subtask, parallelism)

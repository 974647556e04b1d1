"""``MockKafkaCluster``: a Kafka cluster inside the test process, for jobs with a KafkaSink or
KafkaSource (needs ``pip install weir[kafka]``).

    with MockKafkaCluster() as kafka:
        kafka.produce("words", ["a", "b"])
        source = KafkaSource.builder().set_bootstrap_servers(kafka.bootstrap_servers)...
        ...
        assert [m.value for m in kafka.read("counts")] == [b"..."]

It is librdkafka's mock cluster (the ``test.mock.num.brokers`` setting): brokers that speak
Kafka's protocol on loopback TCP ports, kept by a client of this object and gone when it
closes. Topics are created on first use, with 4 partitions each (librdkafka's mock default).

What the mock does not do, so tests cannot check it: transactions' isolation (records of
aborted or open transactions are visible to ``read_committed`` consumers) and offset
lookups by timestamp (they answer "no such record"). It refuses topic creation through the
admin API.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import Any, NamedTuple

from weir.core.extras import import_extra

__all__ = ["KafkaMessage", "MockKafkaCluster"]

READ_TIMEOUT_S = 10.0
log = logging.getLogger("weir.kafka")  # librdkafka's log, as the connectors route it


class KafkaMessage(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None


class MockKafkaCluster:
    """An in-process Kafka cluster of ``brokers`` brokers on loopback (see the module docstring)."""

    def __init__(self, brokers: int = 1) -> None:
        self.ck = import_extra(
            "confluent_kafka", package="confluent-kafka", extra="kafka", needed_by="MockKafkaCluster"
        )
        # the mock cluster lives as long as the client that asked for it; it logs its address at level 5
        self._handle: Any = self.ck.Producer(
            {"test.mock.num.brokers": brokers, "log_level": 4, "logger": log}
        )
        metadata = self._handle.list_topics(timeout=READ_TIMEOUT_S)
        self.bootstrap_servers = ",".join(f"{b.host}:{b.port}" for b in metadata.brokers.values())
        self._producer: Any = self.ck.Producer({"bootstrap.servers": self.bootstrap_servers, "logger": log})

    def __enter__(self) -> MockKafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._producer.flush(READ_TIMEOUT_S)
        self._producer = None
        self._handle = None

    def partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic`` (created now if it does not exist)."""
        metadata = self._producer.list_topics(topic, timeout=READ_TIMEOUT_S)
        return sorted(metadata.topics[topic].partitions)

    def produce(
        self,
        topic: str,
        values: Iterable[bytes | str],
        keys: Iterable[bytes | str | None] | None = None,
        partition: int | None = None,
        timestamps: Iterable[int] | None = None,
    ) -> None:
        """Write ``values`` to ``topic`` and wait until every one is acknowledged."""
        values = list(values)
        keys_ = list(keys) if keys is not None else [None] * len(values)
        stamps = list(timestamps) if timestamps is not None else [None] * len(values)
        errors: list[Any] = []
        for value, key, stamp in zip(values, keys_, stamps, strict=True):
            extra: dict[str, Any] = {}
            if partition is not None:
                extra["partition"] = partition
            if stamp is not None:
                extra["timestamp"] = stamp
            self._producer.produce(
                topic, value, key, on_delivery=lambda e, m: errors.append(e) if e else None, **extra
            )
        self._producer.flush(READ_TIMEOUT_S)
        if errors:
            raise RuntimeError(f"MockKafkaCluster: producing to '{topic}' failed: {errors[0]}")

    def read(self, topic: str, isolation_level: str = "read_uncommitted") -> list[KafkaMessage]:
        """Every message of ``topic`` now, partition by partition, in offset order."""
        partitions = self.partitions(topic)
        consumer = self.ck.Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": f"weir-mock-reader-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "isolation.level": isolation_level,
                "logger": log,
            }
        )
        try:
            ends = {
                p: consumer.get_watermark_offsets(self.ck.TopicPartition(topic, p), READ_TIMEOUT_S)
                for p in partitions
            }
            wanted = {p: high for p, (low, high) in ends.items() if high > low}
            consumer.assign([self.ck.TopicPartition(topic, p, ends[p][0]) for p in wanted])
            read: list[KafkaMessage] = []
            position = {p: ends[p][0] for p in wanted}
            while any(position[p] < wanted[p] for p in wanted):
                m = consumer.poll(READ_TIMEOUT_S)
                if m is None:
                    raise RuntimeError(f"MockKafkaCluster: reading '{topic}' stalled at {position}")
                if m.error():
                    continue
                position[m.partition()] = m.offset() + 1
                kind, stamp = m.timestamp()
                read.append(
                    KafkaMessage(
                        m.topic(), m.partition(), m.offset(), m.key(), m.value(),
                        None if kind == self.ck.TIMESTAMP_NOT_AVAILABLE else stamp,
                    )
                )  # fmt: skip
        finally:
            consumer.close()
        return sorted(read, key=lambda m: (m.partition, m.offset))

    def committed(self, group_id: str, topic: str) -> dict[int, int]:
        """The offsets ``group_id`` committed for the partitions of ``topic`` (those it has)."""
        consumer = self.ck.Consumer(
            {"bootstrap.servers": self.bootstrap_servers, "group.id": group_id, "logger": log}
        )
        try:
            found = consumer.committed(
                [self.ck.TopicPartition(topic, p) for p in self.partitions(topic)], timeout=READ_TIMEOUT_S
            )
        finally:
            consumer.close()
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}

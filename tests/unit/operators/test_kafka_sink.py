"""The Kafka sink operator against librdkafka's mock cluster (a real Kafka protocol endpoint on
loopback): what it writes, when it flushes, and how a failed delivery fails it."""

from __future__ import annotations

import socket
import sys
import uuid
from collections.abc import Iterator

import pytest

from weir.common import Row, SimpleStringSchema
from weir.datastream.connectors import DeliveryGuarantee
from weir.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink
from weir.errors import UsageError
from weir.operators.kafka_sink import KafkaSinkOperator, kafka_sink_operator
from weir.testing import MockKafkaCluster

from .operator_harness import Harness


@pytest.fixture(scope="module")
def kafka() -> Iterator[MockKafkaCluster]:
    with MockKafkaCluster() as cluster:
        yield cluster


def topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def sink(
    servers: str,
    guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE,
    key: bool = True,
    **properties: str,
) -> KafkaSink:
    schema = KafkaRecordSerializationSchema.builder().set_value_serialization_schema(SimpleStringSchema())
    if "topic" in properties:
        schema.set_topic(properties.pop("topic"))
    else:
        schema.set_topic_selector(lambda v: v)  # records come as Row(topic, value)
    if key:
        schema.set_key_serialization_schema(SimpleStringSchema())
    builder = (
        KafkaSink.builder()
        .set_bootstrap_servers(servers)
        .set_record_serializer(schema.build())
        .set_delivery_guarantee(guarantee)
    )
    for k, v in properties.items():
        builder.set_property(k.replace("_", "."), v)
    return builder.build()


def operator(s: KafkaSink) -> Harness:
    return Harness(KafkaSinkOperator("kafka", s))


async def test_records_arrive_with_their_topic_key_value_and_timestamp(kafka: MockKafkaCluster) -> None:
    t = topic()
    h = operator(sink(kafka.bootstrap_servers, topic=t))
    h.elements(("a", 1_000), ("b", 2_000))
    await h.operator.drain()
    h.operator.finish()
    got = kafka.read(t)
    assert sorted((m.key, m.value, m.timestamp) for m in got) == [(b"a", b"a", 1_000), (b"b", b"b", 2_000)]
    assert {m.topic for m in got} == {t}
    # keyed records go to the partition the Java client's murmur2 partitioner picks
    ck = kafka.ck
    partitions = len(kafka.partitions(t))
    assert all(m.partition == ck.murmur2(m.key, partitions) for m in got)


async def test_a_topic_selector_sends_each_record_to_its_topic(kafka: MockKafkaCluster) -> None:
    t1, t2 = topic(), topic()
    h = operator(sink(kafka.bootstrap_servers, key=False))
    h.elements((Row(t1, t1), 0), (Row(t2, t2), 0), (Row(t1, t1), 0))
    await h.operator.drain()
    h.operator.finish()
    assert [m.value for m in kafka.read(t1)] == [t1.encode()] * 2
    assert [(m.key, m.value) for m in kafka.read(t2)] == [(None, t2.encode())]


async def test_at_least_once_leaves_nothing_outstanding_at_a_checkpoint(kafka: MockKafkaCluster) -> None:
    t = topic()
    h = operator(sink(kafka.bootstrap_servers, topic=t, linger_ms="60000"))  # never sent on its own
    h.elements(*((f"r{i}", 0) for i in range(50)))
    await h.operator.drain()
    assert h.operator.outstanding == 50
    h.operator.prepare_snapshot_pre_barrier(1)
    assert h.operator.outstanding == 0 and h.operator.acknowledged == 50 and h.operator.flushes == 1
    assert len(kafka.read(t)) == 50


async def test_none_does_not_wait_at_a_checkpoint_but_flushes_at_the_end(kafka: MockKafkaCluster) -> None:
    t = topic()
    h = operator(sink(kafka.bootstrap_servers, DeliveryGuarantee.NONE, topic=t, linger_ms="60000"))
    h.elements(("x", 0))
    await h.operator.drain()
    h.operator.prepare_snapshot_pre_barrier(1)
    assert h.operator.flushes == 0 and h.operator.outstanding == 1
    h.operator.finish()
    assert h.operator.outstanding == 0 and [m.value for m in kafka.read(t)] == [b"x"]


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_failed_delivery_fails_the_sink_naming_the_topic() -> None:
    h = operator(
        sink(f"127.0.0.1:{closed_port()}", topic="lost", message_timeout_ms="200", reconnect_backoff_ms="10")
    )
    h.elements(("x", 0), ("y", 0))
    await h.operator.drain()
    with pytest.raises(
        RuntimeError, match=r"2 record\(s\) could not be delivered .* to topic 'lost': .*timed out"
    ):
        h.operator.finish()
    h.operator.close()


def test_a_property_librdkafka_does_not_know_is_named() -> None:
    with pytest.raises(UsageError, match=r"refused its configuration.*buffer\.memory"):
        operator(sink("127.0.0.1:1", topic="t", buffer_memory="1024"))


def test_exactly_once_is_refused_with_the_reason() -> None:
    s = (
        KafkaSink.builder()
        .set_bootstrap_servers("127.0.0.1:1")
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic("t")
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix("p")
        .build()
    )
    with pytest.raises(
        UsageError, match=r"EXACTLY_ONCE is not supported by weir: .*use DeliveryGuarantee\.AT_LEAST_ONCE"
    ):
        kafka_sink_operator(s, "kafka")


def test_without_confluent_kafka_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # import confluent_kafka raises ImportError
    s = sink("127.0.0.1:1", topic="t")
    assert s.unrunnable_reason() == (
        "KafkaSink needs the Python package 'confluent-kafka', which is not installed: pip install weir[kafka]"
    )
    with pytest.raises(UsageError, match=r"KafkaSink 'kafka' needs .* pip install weir\[kafka\]"):
        operator(s)

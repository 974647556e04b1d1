"""The Kafka sink's API: builders check their settings like Flink's, the record serializer
makes the messages the sink sends, and a job weir cannot run is refused before it starts."""

from __future__ import annotations

import json
import sys

import pytest

from weir.common import Row, SimpleStringSchema, Types
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors import DeliveryGuarantee
from weir.datastream.connectors.kafka import (
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaTopicSelector,
    ProducerRecord,
)
from weir.datastream.state_backend import EmbeddedRocksDBStateBackend, PredefinedOptions
from weir.errors import UsageError


def serializer(**topic: object) -> KafkaRecordSerializationSchema:
    builder = KafkaRecordSerializationSchema.builder().set_value_serialization_schema(SimpleStringSchema())
    if "topic" in topic:
        builder.set_topic(topic["topic"])  # type: ignore[arg-type]
    if "selector" in topic:
        builder.set_topic_selector(topic["selector"])  # type: ignore[arg-type]
    return builder.build()


def test_a_record_becomes_topic_key_and_value() -> None:
    schema = (
        KafkaRecordSerializationSchema.builder()
        .set_topic("words")
        .set_key_serialization_schema(SimpleStringSchema())
        .set_value_serialization_schema(SimpleStringSchema("UTF-16"))
        .build()
    )
    assert schema.serialize("hé") == ProducerRecord("words", "hé".encode(), "hé".encode("UTF-16"))
    assert serializer(topic="t").serialize("x") == ProducerRecord("t", None, b"x")


class ByLength(KafkaTopicSelector):
    def apply(self, data: str) -> str:
        return "long" if len(data) > 3 else "short"


def test_a_topic_selector_chooses_the_topic_of_each_record() -> None:
    assert serializer(selector=ByLength()).serialize("abcd").topic == "long"
    assert serializer(selector=lambda v: f"t-{v[0]}").serialize("abc").topic == "t-a"
    with pytest.raises(UsageError, match="topic selector gave"):
        serializer(selector=lambda v: "").serialize("abc")


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda b: b.set_topic("t").build(), "no value serialization schema"),
        (lambda b: b.set_value_serialization_schema(SimpleStringSchema()).build(), "no topic is set"),
        (lambda b: b.set_topic("t").set_topic_selector(lambda v: "u"), "topic is already set"),
        (lambda b: b.set_topic_selector(lambda v: "u").set_topic("t"), "selector is already set"),
        (lambda b: b.set_value_serialization_schema(json.dumps), "SerializationSchema"),
    ],
)
def test_the_serialization_builder_checks_like_flinks(build: object, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        build(KafkaRecordSerializationSchema.builder())  # type: ignore[operator]


def test_the_sink_builder_keeps_kafkas_keys_and_flinks_rules() -> None:
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers("localhost:9092")
        .set_record_serializer(serializer(topic="t"))
        .set_property("acks", "all")
        .build()
    )
    assert sink.get_properties() == {"bootstrap.servers": "localhost:9092", "acks": "all"}
    assert sink.delivery_guarantee is DeliveryGuarantee.NONE
    assert sink.get_transformer() is None
    with pytest.raises(UsageError, match="bootstrap servers"):
        KafkaSink.builder().set_record_serializer(serializer(topic="t")).build()
    with pytest.raises(UsageError, match="record serializer"):
        KafkaSink.builder().set_bootstrap_servers("127.0.0.1:1").build()
    exactly_once = (
        KafkaSink.builder()
        .set_bootstrap_servers("127.0.0.1:1")
        .set_record_serializer(serializer(topic="t"))
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
    )
    with pytest.raises(UsageError, match="transactional id prefix"):
        exactly_once.build()
    assert exactly_once.set_transactional_id_prefix("job-1").build().transactional_id_prefix == "job-1"


def kafka_job() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers("127.0.0.1:1")
        .set_record_serializer(serializer(selector=ByLength()))
        .build()
    )
    env.from_collection(["a", "abcd"], type_info=Types.STRING()).sink_to(sink)
    return env


def test_a_topic_selector_pairs_each_record_with_its_topic_before_the_sink() -> None:
    env = kafka_job()
    plan = json.loads(env.get_execution_plan())
    assert [n["type"] for n in plan["nodes"]] == ["Source: Collection Source", "Map", "Sink: Kafka Sink"]
    transformer = (
        KafkaSink.builder()
        .set_bootstrap_servers("127.0.0.1:1")
        .set_record_serializer(serializer(selector=ByLength()))
        .build()
        .get_transformer()
    )
    stream = StreamExecutionEnvironment.get_execution_environment().from_collection(
        ["abcd"], type_info=Types.STRING()
    )
    paired = transformer.apply(stream)  # type: ignore[union-attr]
    assert paired.get_type() == Types.ROW([Types.STRING(), Types.STRING()])
    with paired.execute_and_collect() as rows:
        assert list(rows) == [Row("long", "abcd")]


def test_a_job_with_an_exactly_once_kafka_sink_is_refused_before_it_starts() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers("127.0.0.1:1")
        .set_record_serializer(serializer(topic="t"))
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix("job")
        .build()
    )
    env.from_collection(["a"], type_info=Types.STRING()).sink_to(sink)
    assert "Kafka Sink" in env.get_execution_plan()  # it plans
    with pytest.raises(
        UsageError, match=r"'Sink: Kafka Sink': KafkaSink with DeliveryGuarantee\.EXACTLY_ONCE"
    ):
        env.execute("kafka")


def test_without_confluent_kafka_a_kafka_job_is_refused_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    with pytest.raises(
        UsageError, match=r"KafkaSink needs the Python package 'confluent-kafka'.*pip install weir\[kafka\]"
    ):
        kafka_job().execute("kafka")


def test_predefined_options_are_kept_by_the_rocksdb_backend() -> None:
    backend = EmbeddedRocksDBStateBackend()
    backend.set_predefined_options(PredefinedOptions.FLASH_SSD_OPTIMIZED)
    assert backend.get_predefined_options() is PredefinedOptions.FLASH_SSD_OPTIMIZED
    assert [o.name for o in PredefinedOptions] == [
        "DEFAULT",
        "SPINNING_DISK_OPTIMIZED",
        "SPINNING_DISK_OPTIMIZED_HIGH_MEM",
        "FLASH_SSD_OPTIMIZED",
    ]

"""The Kafka source's API: the builder checks its settings as Flink's does, the offsets
initializers and topic partitions are plain values, and a job with a KafkaSource plans."""

from __future__ import annotations

import json

import pytest

from weir.common import SimpleStringSchema, Types, WatermarkStrategy
from weir.common.serialization import ByteArraySchema
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.kafka import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaSource,
    KafkaSourceBuilder,
    KafkaTopicPartition,
)
from weir.datastream.formats.json import JsonRowDeserializationSchema
from weir.errors import UsageError


def builder() -> KafkaSourceBuilder:
    return (
        KafkaSource.builder()
        .set_bootstrap_servers("127.0.0.1:9092")
        .set_topics("a", "b")
        .set_value_only_deserializer(SimpleStringSchema())
    )


def test_defaults_are_flinks() -> None:
    source = builder().build()
    assert source.subscription == ("topics", ["a", "b"])
    assert source.starting_offsets.kind == "earliest" and source.stopping_offsets is None
    assert not source.is_bounded()
    assert source.produced_type() == Types.STRING()
    assert source.get_properties()["client.id.prefix"].startswith("KafkaSource-")
    grouped = builder().set_group_id("g").build()
    assert grouped.get_properties()["client.id.prefix"] == "g"
    assert builder().set_client_id_prefix("me").build().get_properties()["client.id.prefix"] == "me"


def test_bounded_and_unbounded_stopping_offsets() -> None:
    bounded = builder().set_bounded(KafkaOffsetsInitializer.latest()).build()
    assert bounded.is_bounded() and bounded.stopping_offsets is not None
    stopping = builder().set_unbounded(KafkaOffsetsInitializer.latest()).build()
    assert not stopping.is_bounded() and stopping.stopping_offsets is not None


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: KafkaSource.builder().set_topics("t").set_value_only_deserializer(SimpleStringSchema()).build(), "bootstrap servers"),
        (lambda: KafkaSource.builder().set_bootstrap_servers("b:1").set_value_only_deserializer(SimpleStringSchema()).build(), "nothing to read"),
        (lambda: KafkaSource.builder().set_bootstrap_servers("b:1").set_topics("t").build(), "no deserializer"),
        (lambda: builder().set_topic_pattern("x.*"), "cannot subscribe to pattern because topics are already set"),
        (lambda: KafkaSource.builder().set_topic_pattern("(unclosed"), "not a valid pattern"),
        (lambda: KafkaSource.builder().set_partitions({("t", 0)}), "set of KafkaTopicPartition"),
        (lambda: builder().set_starting_offsets(KafkaOffsetsInitializer.committed_offsets()).build(), "need a group id"),
        (
            lambda: builder().set_starting_offsets(KafkaOffsetsInitializer.offsets({KafkaTopicPartition("a", 0): -3})).build(),
            "need a group id",
        ),
        (lambda: builder().set_property("commit.offsets.on.checkpoint", "true").build(), "needs a group id"),
        (lambda: builder().set_value_only_deserializer(json.loads), "DeserializationSchema"),
        (lambda: builder().set_bounded("latest"), "KafkaOffsetsInitializer"),
        (lambda: KafkaOffsetsInitializer.offsets({"a": 1}), "keys must be KafkaTopicPartition"),
        (lambda: KafkaOffsetsInitializer.timestamp(-5), "timestamp in ms >= 0"),
        (lambda: KafkaOffsetsInitializer.committed_offsets("EARLIEST"), "KafkaOffsetResetStrategy"),
    ],
)  # fmt: skip
def test_the_builder_checks_like_flinks(build: object, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        build()  # type: ignore[operator]


def test_topic_partitions_and_initializers_are_values() -> None:
    assert KafkaTopicPartition("t", 1) == KafkaTopicPartition("t", 1) != KafkaTopicPartition("t", 2)
    assert len({KafkaTopicPartition("t", 1), KafkaTopicPartition("t", 1)}) == 1
    with pytest.raises(UsageError, match="topics are already set"):
        builder().set_partitions({KafkaTopicPartition("t", 1)})
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers("b:1")
        .set_partitions({KafkaTopicPartition("t", 1), KafkaTopicPartition("t", 0)})
        .set_value_only_deserializer(ByteArraySchema())
        .build()
    )
    assert source.subscription == ("partitions", [("t", 0), ("t", 1)])
    init = KafkaOffsetsInitializer.offsets({KafkaTopicPartition("t", 0): 5}, KafkaOffsetResetStrategy.LATEST)
    assert init.partition_offsets == {("t", 0): 5} and init.reset_strategy_name() == "LATEST"
    assert repr(KafkaOffsetsInitializer.timestamp(7)) == "KafkaOffsetsInitializer.timestamp(7)"
    assert [s.name for s in KafkaOffsetResetStrategy] == ["LATEST", "EARLIEST", "NONE"]


def test_a_deserializer_with_a_produced_type_types_the_stream() -> None:
    row = Types.ROW_NAMED(["id"], [Types.INT()])
    schema = JsonRowDeserializationSchema.builder().type_info(row).build()
    assert builder().set_value_only_deserializer(schema).build().produced_type() == row


def test_a_job_with_a_kafka_source_plans() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    source = builder().set_bounded(KafkaOffsetsInitializer.latest()).build()
    env.from_source(source, WatermarkStrategy.no_watermarks(), "orders").print()
    plan = json.loads(env.get_execution_plan())
    assert plan["nodes"][0]["type"] == "Source: orders"

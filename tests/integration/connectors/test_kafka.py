"""Jobs with a KafkaSink and a KafkaSource against librdkafka's mock cluster (Kafka's protocol on
loopback): what they write and read, and how a failed delivery fails the job."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import pytest

from weir.common import RestartStrategies, SimpleStringSchema, Types, WatermarkStrategy
from weir.datastream import CheckpointingMode, StreamExecutionEnvironment
from weir.datastream.connectors import DeliveryGuarantee
from weir.datastream.connectors.builtin import DiscardingSink
from weir.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
    KafkaTopicPartition,
)
from weir.errors import JobExecutionError
from weir.testing import MockKafkaCluster, TestStream, assert_exactly_once, collect

PARTITIONS = 4  # of every topic librdkafka's mock cluster creates


@pytest.fixture(scope="module")
def kafka() -> Iterator[MockKafkaCluster]:
    with MockKafkaCluster() as cluster:
        yield cluster


def new_topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def kafka_sink(servers: str, topic: str, **properties: str) -> KafkaSink:
    builder = (
        KafkaSink.builder()
        .set_bootstrap_servers(servers)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(topic)
            .set_key_serialization_schema(SimpleStringSchema())
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE)
    )
    for key, value in properties.items():
        builder.set_property(key, value)
    return builder.build()


def kafka_source(
    servers: str, topic: str, stop: KafkaOffsetsInitializer | None = None, **properties: str
) -> KafkaSource:
    builder = (
        KafkaSource.builder()
        .set_bootstrap_servers(servers)
        .set_topics(topic)
        .set_group_id("weir-test")
        .set_value_only_deserializer(SimpleStringSchema())
        .set_bounded(stop or KafkaOffsetsInitializer.latest())
    )
    return builder.set_properties(properties).build()


def produce_round_robin(kafka: MockKafkaCluster, topic: str, words: list[str]) -> None:
    """``words[i]`` to partition ``i % PARTITIONS``, each partition's in order."""
    for p in range(PARTITIONS):
        part = words[p::PARTITIONS]
        kafka.produce(topic, part, keys=part, partition=p)


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_job_writes_every_record_to_kafka(kafka: MockKafkaCluster, parallelism: int) -> None:
    topic = new_topic()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.enable_checkpointing(50, CheckpointingMode.AT_LEAST_ONCE)
    words = [f"w{i}" for i in range(500)]
    env.from_collection(words, type_info=Types.STRING()).sink_to(kafka_sink(kafka.bootstrap_servers, topic))
    env.execute("to kafka")
    got = kafka.read(topic)
    assert sorted(m.value.decode() for m in got if m.value) == sorted(words)
    assert all(m.key == m.value for m in got)


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_a_job_reads_a_topic_to_its_end_and_writes_another(kafka: MockKafkaCluster, parallelism: int) -> None:
    source_topic, sink_topic = new_topic(), new_topic()
    words = [f"w{i}" for i in range(300)]
    kafka.produce(source_topic, words, keys=words)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    (
        env.from_source(
            kafka_source(kafka.bootstrap_servers, source_topic), WatermarkStrategy.no_watermarks(), "in"
        )
        .map(str.upper, output_type=Types.STRING())
        .sink_to(kafka_sink(kafka.bootstrap_servers, sink_topic))
    )
    env.execute("kafka to kafka")
    assert sorted(m.value.decode() for m in kafka.read(sink_topic) if m.value) == sorted(
        w.upper() for w in words
    )


def test_a_failed_delivery_fails_the_job_with_the_kafka_error() -> None:
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_restart_strategy(RestartStrategies.no_restart())
    sink = kafka_sink(f"127.0.0.1:{port}", "lost", **{"message.timeout.ms": "200"})
    env.from_collection(["a", "b"], type_info=Types.STRING()).sink_to(sink)
    with pytest.raises(JobExecutionError, match=r"could not be delivered to Kafka .* to topic 'lost'"):
        env.execute("unreachable kafka")


@pytest.mark.weir(parallelism=2)
def test_recovery_replays_from_the_checkpointed_offsets_exactly_once(
    kafka: MockKafkaCluster, weir_env_factory: object, weir_clock: object
) -> None:
    """A failure after checkpoints: the restored source reads on from the offsets in the
    checkpoint, so the exactly-once output equals that of a run without failures.

    Under mock time, time passes only while every task waits, and a source whose records are
    all in the topic hardly waits (librdkafka fetches ahead): its subtasks could finish
    before the first checkpoint is due, and no periodic checkpoint is triggered once a task
    finished. So the records come in two halves: the first is in the topic when the job
    starts, the second is written by the job itself once 200 ms of processing time passed
    (a TestStream step) -- time that passes while the sources wait for the broker, with a
    checkpoint due every 20 ms. The stopping offsets lie at the end of the second half, so
    no source subtask finishes before. The failure fires in the Map on a record of the
    second half, so after checkpoints completed; a restore that ignored their offsets would
    read the first half again, whose output they committed."""
    words = [f"w{i}" for i in range(2_000)]
    first, second = words[:1_000], words[1_000:]
    per_map_subtask_in_first = len(first) // 2  # two of the four partitions each

    def build(env: StreamExecutionEnvironment) -> object:
        topic = new_topic()
        produce_round_robin(kafka, topic, first)
        released: list[str] = []

        def release_the_second_half(signal: str) -> str:
            if not released:  # once per run, whatever restarts
                released.append(signal)
                produce_round_robin(kafka, topic, second)
            return signal

        ends = {KafkaTopicPartition(topic, p): len(words) // PARTITIONS for p in range(PARTITIONS)}
        source = kafka_source(kafka.bootstrap_servers, topic, stop=KafkaOffsetsInitializer.offsets(ends))
        upper = env.from_source(source, WatermarkStrategy.no_watermarks(), "in").map(
            str.upper, output_type=Types.STRING()
        )
        signal = TestStream(type_info=Types.STRING()).advance_processing_time(200).add_elements("go").end()
        (
            env.from_source(signal, WatermarkStrategy.no_watermarks(), "signal")
            .set_parallelism(1)
            .map(release_the_second_half, output_type=Types.STRING())
            .set_parallelism(1)
            .sink_to(DiscardingSink())
        )
        return collect(upper.name("upper"), exactly_once=True)

    report = assert_exactly_once(
        build,
        env_factory=weir_env_factory,
        spec=f"raise:operator=upper,after={per_map_subtask_in_first + 1}..900",
        failures=1,
        checkpoint_interval_ms=20,
    )
    print(report)
    assert sorted(report.clean_output) == sorted(w.upper() for w in words)
    assert report.checkpoints_completed >= 1 and report.restarts == 1

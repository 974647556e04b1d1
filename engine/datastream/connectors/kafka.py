"""Kafka, as in ``pyflink.datastream.connectors.kafka``: ``KafkaSink`` with its builder,
``KafkaRecordSerializationSchema`` with its builder and ``KafkaTopicSelector``; ``KafkaSource``
with its builder, ``KafkaOffsetsInitializer``, ``KafkaOffsetResetStrategy`` and
``KafkaTopicPartition``.

weir talks to Kafka through librdkafka (``confluent-kafka``, the ``kafka`` extra:
``pip install weir[kafka]``); without it a job with a Kafka connector still builds and plans,
and ``execute`` refuses it naming the extra. The builders check their settings as Flink's
do and keep the client's configuration under Kafka's own keys (``get_properties``).

The sink (``weir.operators.kafka_sink``) writes each record's topic, key and value bytes,
as ``KafkaRecordSerializationSchema.serialize`` gives them, with ``DeliveryGuarantee.NONE``
or ``AT_LEAST_ONCE`` (flushed before every checkpoint barrier and at the end of input);
``EXACTLY_ONCE`` is refused before the job starts (docs/decisions.md says why). The source
(``weir.operators.kafka_source``) reads topic partitions as splits, checkpoints their
offsets and commits them to the consumer group when a checkpoint completes.
"""

from __future__ import annotations

import enum
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, NamedTuple

from weir.common.serialization import DeserializationSchema, SerializationSchema, SimpleStringSchema
from weir.common.typeinfo import TypeInformation, Types
from weir.common.types import Row
from weir.core.connectors import Sink, Source
from weir.core.extras import missing_extra
from weir.datastream.connectors.base import DeliveryGuarantee, StreamTransformer, SupportsPreprocessing
from weir.errors import UsageError

__all__ = [
    "KafkaOffsetResetStrategy",
    "KafkaOffsetsInitializer",
    "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder",
    "KafkaSink",
    "KafkaSinkBuilder",
    "KafkaSource",
    "KafkaSourceBuilder",
    "KafkaTopicPartition",
    "KafkaTopicSelector",
    "ProducerRecord",
]

#: Flink caps the transactional id prefix at this many UTF-8 bytes
MAXIMUM_PREFIX_BYTES = 6400


class ProducerRecord(NamedTuple):
    """What the sink would send for one record: ``key`` is None without a key schema."""

    topic: str
    key: bytes | None
    value: bytes


class KafkaTopicSelector(ABC):
    """Chooses the topic of each record (``apply(record) -> topic``)."""

    @abstractmethod
    def apply(self, data: Any) -> str:
        pass


class _CallableTopicSelector(KafkaTopicSelector):
    def __init__(self, fn: Callable[[Any], str]) -> None:
        self.fn = fn

    def apply(self, data: Any) -> str:
        return self.fn(data)


class KafkaRecordSerializationSchema(SerializationSchema):
    """How a record becomes a Kafka message: its topic (fixed or chosen per record), key and
    value. Build one with ``KafkaRecordSerializationSchema.builder()``."""

    def __init__(
        self,
        topic: str | None,
        topic_selector: KafkaTopicSelector | None,
        key_serialization_schema: SerializationSchema | None,
        value_serialization_schema: SerializationSchema,
    ) -> None:
        self.topic = topic
        self.topic_selector = topic_selector
        self.key_serialization_schema = key_serialization_schema
        self.value_serialization_schema = value_serialization_schema

    @staticmethod
    def builder() -> KafkaRecordSerializationSchemaBuilder:
        return KafkaRecordSerializationSchemaBuilder()

    def topic_of(self, element: Any) -> str:
        if self.topic is not None:
            return self.topic
        assert self.topic_selector is not None
        topic = self.topic_selector.apply(element)
        if not isinstance(topic, str) or not topic:
            raise UsageError(
                f"the Kafka topic selector gave {topic!r} for {element!r}; it must return a topic name"
            )
        return topic

    def serialize(self, element: Any) -> ProducerRecord:  # type: ignore[override]
        """The message the sink would send for ``element``."""
        key = (
            None
            if self.key_serialization_schema is None
            else self.key_serialization_schema.serialize(element)
        )
        return ProducerRecord(self.topic_of(element), key, self.value_serialization_schema.serialize(element))


class KafkaRecordSerializationSchemaBuilder:
    """Sets the topic (``set_topic`` or ``set_topic_selector``, one of them), the value schema
    (required) and the key schema (optional), as Flink's builder."""

    def __init__(self) -> None:
        self._topic: str | None = None
        self._selector: KafkaTopicSelector | None = None
        self._key: SerializationSchema | None = None
        self._value: SerializationSchema | None = None

    def set_topic(self, topic: str) -> KafkaRecordSerializationSchemaBuilder:
        if self._selector is not None:
            raise UsageError(
                "KafkaRecordSerializationSchema: a topic selector is already set; set a topic or a selector"
            )
        if not isinstance(topic, str) or not topic:
            raise UsageError(f"KafkaRecordSerializationSchema.set_topic needs a topic name, got {topic!r}")
        self._topic = topic
        return self

    def set_topic_selector(
        self, topic_selector: KafkaTopicSelector | Callable[[Any], str]
    ) -> KafkaRecordSerializationSchemaBuilder:
        if self._topic is not None:
            raise UsageError(
                "KafkaRecordSerializationSchema: a topic is already set; set a topic or a selector"
            )
        if isinstance(topic_selector, KafkaTopicSelector):
            self._selector = topic_selector
        elif callable(topic_selector):
            self._selector = _CallableTopicSelector(topic_selector)
        else:
            raise UsageError(
                f"set_topic_selector needs a KafkaTopicSelector or a callable record -> topic, got {topic_selector!r}"
            )
        return self

    def set_key_serialization_schema(
        self, key_serialization_schema: SerializationSchema
    ) -> KafkaRecordSerializationSchemaBuilder:
        self._key = _schema("set_key_serialization_schema", key_serialization_schema)
        return self

    def set_value_serialization_schema(
        self, value_serialization_schema: SerializationSchema
    ) -> KafkaRecordSerializationSchemaBuilder:
        self._value = _schema("set_value_serialization_schema", value_serialization_schema)
        return self

    def build(self) -> KafkaRecordSerializationSchema:
        if self._value is None:
            raise UsageError("KafkaRecordSerializationSchema: no value serialization schema is set")
        if self._topic is None and self._selector is None:
            raise UsageError(
                "KafkaRecordSerializationSchema: no topic is set (set_topic or set_topic_selector)"
            )
        return KafkaRecordSerializationSchema(self._topic, self._selector, self._key, self._value)


def _schema(what: str, schema: Any) -> SerializationSchema:
    if not isinstance(schema, SerializationSchema):
        raise UsageError(f"{what} needs a SerializationSchema such as SimpleStringSchema(), got {schema!r}")
    return schema


class _SelectTopic(StreamTransformer):
    """Pairs each record with its topic, ``Row(topic, record)``, before the sink (PyFlink's
    preprocessing for a topic selector)."""

    def __init__(self, selector: KafkaTopicSelector) -> None:
        self.selector = selector

    def apply(self, ds: Any) -> Any:
        selector = self.selector
        return ds.map(
            lambda v: Row(selector.apply(v), v), output_type=Types.ROW([Types.STRING(), ds.get_type()])
        )


class KafkaSink(Sink, SupportsPreprocessing):
    """Writes records to Kafka topics (see the module docstring); build one with
    ``KafkaSink.builder()``."""

    operator_factory = "weir.operators.kafka_sink:kafka_sink_operator"

    def __init__(
        self,
        properties: dict[str, str],
        delivery_guarantee: DeliveryGuarantee,
        transactional_id_prefix: str | None,
        record_serializer: KafkaRecordSerializationSchema,
    ) -> None:
        self.properties = properties
        self.delivery_guarantee = delivery_guarantee
        self.transactional_id_prefix = transactional_id_prefix
        self.record_serializer = record_serializer

    @staticmethod
    def builder() -> KafkaSinkBuilder:
        return KafkaSinkBuilder()

    def get_transformer(self) -> StreamTransformer | None:
        """With a topic selector, a step that pairs each record with its topic, as in PyFlink."""
        selector = self.record_serializer.topic_selector
        return None if selector is None else _SelectTopic(selector)

    def get_properties(self) -> dict[str, str]:
        """The Kafka producer's configuration, under Kafka's keys."""
        return dict(self.properties)

    def default_name(self) -> str:
        return "Kafka Sink"

    def describe(self) -> dict[str, Any]:
        return {
            "class": "KafkaSink",
            "bootstrap.servers": self.properties.get("bootstrap.servers"),
            "topic": self.record_serializer.topic,
            "delivery_guarantee": self.delivery_guarantee.name,
        }

    def unrunnable_reason(self) -> str | None:
        """Why weir refuses to run a job with this sink (``env.execute`` asks before it
        starts), or None: EXACTLY_ONCE, or no Kafka client installed."""
        if self.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE:
            return (
                "KafkaSink with DeliveryGuarantee.EXACTLY_ONCE is not supported by weir: its Kafka client "
                "(librdkafka) cannot take over a pre-committed transaction after a restart, as Flink's Java "
                "client does, so a failure between a checkpoint and its commit would lose that checkpoint's "
                "records; use DeliveryGuarantee.AT_LEAST_ONCE, or run this job on Apache Flink"
            )
        return missing_extra(
            "confluent_kafka", package="confluent-kafka", extra="kafka", needed_by="KafkaSink"
        )


class KafkaSinkBuilder:
    """Bootstrap servers and a record serializer are required; ``EXACTLY_ONCE`` also needs a
    transactional id prefix; the delivery guarantee is ``NONE`` unless set (as in Flink)."""

    def __init__(self) -> None:
        self._properties: dict[str, str] = {}
        self._guarantee = DeliveryGuarantee.NONE
        self._prefix: str | None = None
        self._serializer: KafkaRecordSerializationSchema | None = None

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSinkBuilder:
        return self.set_property("bootstrap.servers", bootstrap_servers)

    def set_delivery_guarantee(self, delivery_guarantee: DeliveryGuarantee) -> KafkaSinkBuilder:
        if not isinstance(delivery_guarantee, DeliveryGuarantee):
            raise UsageError(f"set_delivery_guarantee needs a DeliveryGuarantee, got {delivery_guarantee!r}")
        self._guarantee = delivery_guarantee
        return self

    def set_transactional_id_prefix(self, transactional_id_prefix: str) -> KafkaSinkBuilder:
        if not isinstance(transactional_id_prefix, str) or not transactional_id_prefix:
            raise UsageError(
                f"the transactional id prefix must be a non-empty string, got {transactional_id_prefix!r}"
            )
        if len(transactional_id_prefix.encode("utf-8")) > MAXIMUM_PREFIX_BYTES:
            raise UsageError(f"the transactional id prefix is longer than {MAXIMUM_PREFIX_BYTES} UTF-8 bytes")
        self._prefix = transactional_id_prefix
        return self

    def set_record_serializer(self, record_serializer: KafkaRecordSerializationSchema) -> KafkaSinkBuilder:
        if not isinstance(record_serializer, KafkaRecordSerializationSchema):
            raise UsageError(
                "set_record_serializer needs a KafkaRecordSerializationSchema "
                f"(KafkaRecordSerializationSchema.builder()...build()), got {record_serializer!r}"
            )
        self._serializer = record_serializer
        return self

    def set_property(self, key: str, value: str) -> KafkaSinkBuilder:
        if not isinstance(key, str) or not key:
            raise UsageError(f"a Kafka property needs a non-empty key, got {key!r}")
        self._properties[key] = str(value)
        return self

    def build(self) -> KafkaSink:
        if not self._properties.get("bootstrap.servers"):
            raise UsageError("KafkaSink: the bootstrap servers are not set (set_bootstrap_servers)")
        if self._serializer is None:
            raise UsageError("KafkaSink: no record serializer is set (set_record_serializer)")
        if self._guarantee is DeliveryGuarantee.EXACTLY_ONCE and self._prefix is None:
            raise UsageError(
                "KafkaSink: EXACTLY_ONCE needs a transactional id prefix (set_transactional_id_prefix)"
            )
        return KafkaSink(dict(self._properties), self._guarantee, self._prefix, self._serializer)


# -- the source ---------------------------------------------------------------------------------


class KafkaTopicPartition:
    """A partition of a topic (Kafka's ``TopicPartition``): ``KafkaTopicPartition('t', 0)``."""

    def __init__(self, topic: str, partition: int) -> None:
        if not isinstance(topic, str) or not topic:
            raise UsageError(f"KafkaTopicPartition needs a topic name, got {topic!r}")
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise UsageError(f"KafkaTopicPartition needs a partition number >= 0, got {partition!r}")
        self._topic = topic
        self._partition = partition

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def partition(self) -> int:
        return self._partition

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, KafkaTopicPartition)
            and self._topic == other._topic
            and self._partition == other._partition
        )

    def __hash__(self) -> int:
        return hash((self._topic, self._partition))

    def __repr__(self) -> str:
        return f"KafkaTopicPartition({self._topic!r}, {self._partition})"


class KafkaOffsetResetStrategy(enum.Enum):
    """Where to start in a partition that has no committed offset, or whose offset is out of
    range: its end, its beginning, or fail (Kafka's ``OffsetResetStrategy``)."""

    LATEST = 0
    EARLIEST = 1
    NONE = 2


class KafkaOffsetsInitializer:
    """Where the source starts (``set_starting_offsets``) or stops (``set_bounded``,
    ``set_unbounded``) in each partition. Make one with the static methods; the offsets are
    looked up when a subtask starts reading (``weir.operators.kafka_source``)."""

    def __init__(
        self,
        kind: str,
        reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST,
        timestamp: int | None = None,
        offsets: dict[tuple[str, int], int] | None = None,
    ) -> None:
        self.kind = kind
        self.reset_strategy = reset_strategy
        self.timestamp_ms = timestamp
        self.partition_offsets = dict(offsets or {})

    def reset_strategy_name(self) -> str:
        return self.reset_strategy.name

    @staticmethod
    def committed_offsets(
        offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE,
    ) -> KafkaOffsetsInitializer:
        """The consumer group's committed offsets; without one, ``offset_reset_strategy``
        (NONE: the job fails naming the partition)."""
        return KafkaOffsetsInitializer("committed", _reset(offset_reset_strategy))

    @staticmethod
    def timestamp(timestamp: int) -> KafkaOffsetsInitializer:
        """The first record whose timestamp is at or after ``timestamp`` (ms); the end of a
        partition that has none."""
        if isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
            raise UsageError(
                f"KafkaOffsetsInitializer.timestamp needs a timestamp in ms >= 0, got {timestamp!r}"
            )
        return KafkaOffsetsInitializer("timestamp", KafkaOffsetResetStrategy.LATEST, timestamp=timestamp)

    @staticmethod
    def earliest() -> KafkaOffsetsInitializer:
        """The earliest offset of each partition (the source's default start)."""
        return KafkaOffsetsInitializer("earliest", KafkaOffsetResetStrategy.EARLIEST)

    @staticmethod
    def latest() -> KafkaOffsetsInitializer:
        """The end of each partition, as it is when the subtask starts."""
        return KafkaOffsetsInitializer("latest", KafkaOffsetResetStrategy.LATEST)

    @staticmethod
    def offsets(
        offsets: dict[KafkaTopicPartition, int],
        offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST,
    ) -> KafkaOffsetsInitializer:
        """The given offset of each partition; a partition not given starts at the group's
        committed offset, and one without follows ``offset_reset_strategy``, as Flink's. A
        starting offset out of range follows the strategy too; a stopping offset past the end
        of its partition is read up to once the partition grows to it."""
        if not isinstance(offsets, dict):
            raise UsageError(
                f"KafkaOffsetsInitializer.offsets needs a dict of KafkaTopicPartition -> offset, got {offsets!r}"
            )
        plain: dict[tuple[str, int], int] = {}
        for tp, offset in offsets.items():
            if not isinstance(tp, KafkaTopicPartition):
                raise UsageError(
                    f"KafkaOffsetsInitializer.offsets: keys must be KafkaTopicPartition, got {tp!r}"
                )
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < -3:
                raise UsageError(
                    f"KafkaOffsetsInitializer.offsets: the offset of {tp!r} must be an int >= 0, got {offset!r}"
                )
            plain[(tp.topic, tp.partition)] = offset
        return KafkaOffsetsInitializer("offsets", _reset(offset_reset_strategy), offsets=plain)

    def describe(self) -> str:
        if self.kind == "timestamp":
            return f"timestamp({self.timestamp_ms})"
        if self.kind == "offsets":
            return f"offsets({len(self.partition_offsets)} partitions, {self.reset_strategy.name})"
        if self.kind == "committed":
            return f"committed_offsets({self.reset_strategy.name})"
        return f"{self.kind}()"

    def __repr__(self) -> str:
        return f"KafkaOffsetsInitializer.{self.describe()}"


def _reset(strategy: Any) -> KafkaOffsetResetStrategy:
    if not isinstance(strategy, KafkaOffsetResetStrategy):
        raise UsageError(f"an offset reset strategy must be a KafkaOffsetResetStrategy, got {strategy!r}")
    return strategy


class KafkaSource(Source):
    """Reads Kafka topic partitions (see ``weir.operators.kafka_source``); build one with
    ``KafkaSource.builder()`` and add it with ``env.from_source``."""

    reader_factory = "weir.operators.kafka_source:kafka_source_reader"

    def __init__(
        self,
        properties: dict[str, str],
        subscription: tuple[str, Any],
        starting_offsets: KafkaOffsetsInitializer,
        stopping_offsets: KafkaOffsetsInitializer | None,
        bounded: bool,
        deserializer: DeserializationSchema,
    ) -> None:
        self.properties = properties
        self.subscription = (
            subscription  # ("topics", [names]) | ("pattern", regex) | ("partitions", [(t, p)])
        )
        self.starting_offsets = starting_offsets
        self.stopping_offsets = stopping_offsets
        self.bounded = bounded
        self.deserializer = deserializer

    @staticmethod
    def builder() -> KafkaSourceBuilder:
        return KafkaSourceBuilder()

    def is_bounded(self) -> bool:
        return self.bounded

    def get_properties(self) -> dict[str, str]:
        """The consumer's configuration and the source's options, under Kafka's and Flink's keys."""
        return dict(self.properties)

    def default_name(self) -> str:
        return "KafkaSource"

    def produced_type(self) -> TypeInformation | None:
        """What the value deserializer makes: ``SimpleStringSchema`` strings, or its ``get_produced_type()``."""
        if isinstance(self.deserializer, SimpleStringSchema):
            return Types.STRING()
        produced = getattr(self.deserializer, "get_produced_type", None)
        return produced() if callable(produced) else None

    def unrunnable_reason(self) -> str | None:
        return missing_extra(
            "confluent_kafka", package="confluent-kafka", extra="kafka", needed_by="KafkaSource"
        )

    def describe(self) -> dict[str, Any]:
        kind, what = self.subscription
        return {
            "class": "KafkaSource",
            "bootstrap.servers": self.properties.get("bootstrap.servers"),
            kind: what
            if kind == "pattern"
            else [w if isinstance(w, str) else f"{w[0]}-{w[1]}" for w in what],
            "starting_offsets": self.starting_offsets.describe(),
            "stopping_offsets": None if self.stopping_offsets is None else self.stopping_offsets.describe(),
            "bounded": self.bounded,
        }


class KafkaSourceBuilder:
    """Bootstrap servers, what to read (``set_topics``, ``set_topic_pattern`` or
    ``set_partitions``, one of them) and a value deserializer are required; the source starts
    at the earliest offsets and runs unbounded unless told otherwise, as Flink's."""

    def __init__(self) -> None:
        self._properties: dict[str, str] = {}
        self._subscription: tuple[str, Any] | None = None
        self._starting = KafkaOffsetsInitializer.earliest()
        self._stopping: KafkaOffsetsInitializer | None = None
        self._bounded = False
        self._deserializer: DeserializationSchema | None = None

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSourceBuilder:
        return self.set_property("bootstrap.servers", bootstrap_servers)

    def set_group_id(self, group_id: str) -> KafkaSourceBuilder:
        return self.set_property("group.id", group_id)

    def _subscribe(self, kind: str, what: Any) -> KafkaSourceBuilder:
        if self._subscription is not None and self._subscription[0] != kind:
            raise UsageError(
                f"KafkaSource: cannot subscribe to {kind} because {self._subscription[0]} are already set; "
                "use one of set_topics, set_topic_pattern and set_partitions"
            )
        self._subscription = (kind, what)
        return self

    def set_topics(self, *topics: str) -> KafkaSourceBuilder:
        names = list(topics[0]) if len(topics) == 1 and isinstance(topics[0], list | tuple) else list(topics)
        if not names or any(not isinstance(t, str) or not t for t in names):
            raise UsageError(f"KafkaSource.set_topics needs topic names, got {topics!r}")
        return self._subscribe("topics", names)

    def set_topic_pattern(self, topic_pattern: str) -> KafkaSourceBuilder:
        """Every topic whose whole name matches the regular expression (Java's ``matches``)."""
        if not isinstance(topic_pattern, str) or not topic_pattern:
            raise UsageError(
                f"KafkaSource.set_topic_pattern needs a regular expression, got {topic_pattern!r}"
            )
        try:
            re.compile(topic_pattern)
        except re.error as e:
            raise UsageError(
                f"KafkaSource.set_topic_pattern: {topic_pattern!r} is not a valid pattern: {e}"
            ) from None
        return self._subscribe("pattern", topic_pattern)

    def set_partitions(self, partitions: set[KafkaTopicPartition]) -> KafkaSourceBuilder:
        items = list(partitions) if isinstance(partitions, set | frozenset | list | tuple) else None
        if not items or any(not isinstance(p, KafkaTopicPartition) for p in items):
            raise UsageError(
                f"KafkaSource.set_partitions needs a set of KafkaTopicPartition, got {partitions!r}"
            )
        return self._subscribe("partitions", sorted({(p.topic, p.partition) for p in items}))

    def set_starting_offsets(
        self, starting_offsets_initializer: KafkaOffsetsInitializer
    ) -> KafkaSourceBuilder:
        self._starting = _initializer("set_starting_offsets", starting_offsets_initializer)
        return self

    def set_unbounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer) -> KafkaSourceBuilder:
        """Stop at these offsets, and still count as an unbounded source."""
        self._stopping = _initializer("set_unbounded", stopping_offsets_initializer)
        self._bounded = False
        return self

    def set_bounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer) -> KafkaSourceBuilder:
        """Stop at these offsets: a bounded source (e.g. ``KafkaOffsetsInitializer.latest()``,
        the end of each partition when the subtask starts)."""
        self._stopping = _initializer("set_bounded", stopping_offsets_initializer)
        self._bounded = True
        return self

    def set_value_only_deserializer(
        self, deserialization_schema: DeserializationSchema
    ) -> KafkaSourceBuilder:
        if not isinstance(deserialization_schema, DeserializationSchema):
            raise UsageError(
                "set_value_only_deserializer needs a DeserializationSchema such as SimpleStringSchema(), "
                f"got {deserialization_schema!r}"
            )
        self._deserializer = deserialization_schema
        return self

    def set_client_id_prefix(self, prefix: str) -> KafkaSourceBuilder:
        return self.set_property("client.id.prefix", prefix)

    def set_property(self, key: str, value: str) -> KafkaSourceBuilder:
        if not isinstance(key, str) or not key:
            raise UsageError(f"a Kafka property needs a non-empty key, got {key!r}")
        self._properties[key] = str(value)
        return self

    def set_properties(self, props: dict[str, str]) -> KafkaSourceBuilder:
        if not isinstance(props, dict):
            raise UsageError(f"set_properties needs a dict of Kafka properties, got {props!r}")
        for key, value in props.items():
            self.set_property(key, value)
        return self

    def build(self) -> KafkaSource:
        properties = dict(self._properties)
        if not properties.get("bootstrap.servers"):
            raise UsageError("KafkaSource: the bootstrap servers are not set (set_bootstrap_servers)")
        if self._subscription is None:
            raise UsageError(
                "KafkaSource: nothing to read; set one of set_topics, set_topic_pattern and set_partitions"
            )
        if self._deserializer is None:
            raise UsageError("KafkaSource: no deserializer is set (set_value_only_deserializer)")
        group = properties.get("group.id")
        for what, init in (("starting", self._starting), ("stopping", self._stopping)):
            uses_committed = init is not None and (
                init.kind == "committed" or any(o == -3 for o in init.partition_offsets.values())
            )
            if uses_committed and not group:
                raise UsageError(
                    f"KafkaSource: the {what} offsets are the committed offsets, which need a group id (set_group_id)"
                )
        commits = properties.get("commit.offsets.on.checkpoint", "").strip().lower() == "true"
        if commits and not group:
            raise UsageError(
                "KafkaSource: commit.offsets.on.checkpoint is set, which needs a group id (set_group_id)"
            )
        # as Flink's builder: the client id prefix defaults to the group id, else a random one
        properties.setdefault("client.id.prefix", group or f"KafkaSource-{random.getrandbits(63)}")
        return KafkaSource(
            properties, self._subscription, self._starting, self._stopping, self._bounded, self._deserializer
        )


def _initializer(what: str, initializer: Any) -> KafkaOffsetsInitializer:
    if not isinstance(initializer, KafkaOffsetsInitializer):
        raise UsageError(
            f"{what} needs a KafkaOffsetsInitializer (e.g. KafkaOffsetsInitializer.latest()), got {initializer!r}"
        )
    return initializer

"""Kafka, as in ``pyflink.datastream.connectors.kafka``: ``KafkaSink`` with its builder,
``KafkaRecordSerializationSchema`` with its builder and ``KafkaTopicSelector``.

weir talks to Kafka through librdkafka (``confluent-kafka``, the ``kafka`` extra:
``pip install weir[kafka]``); without it a job with a Kafka connector still builds and plans,
and ``execute`` refuses it naming the extra. The builders check their settings as Flink's
do and keep the client's configuration under Kafka's own keys (``get_properties``).

The sink (``weir.operators.kafka_sink``) writes each record's topic, key and value bytes,
as ``KafkaRecordSerializationSchema.serialize`` gives them, with ``DeliveryGuarantee.NONE``
or ``AT_LEAST_ONCE`` (flushed before every checkpoint barrier and at the end of input);
``EXACTLY_ONCE`` is refused before the job starts (docs/decisions.md says why).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, NamedTuple

from weir.common.serialization import SerializationSchema
from weir.common.typeinfo import Types
from weir.common.types import Row
from weir.core.connectors import Sink
from weir.core.extras import missing_extra
from weir.datastream.connectors.base import DeliveryGuarantee, StreamTransformer, SupportsPreprocessing
from weir.errors import UsageError

__all__ = [
    "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder",
    "KafkaSink",
    "KafkaSinkBuilder",
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

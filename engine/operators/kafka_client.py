"""What the Kafka sink and source share: the client library and the client's configuration.

weir talks to Kafka through ``confluent-kafka`` (librdkafka), the ``kafka`` extra. A job's
properties are written for Flink, that is for Kafka's Java client; librdkafka reads most of
them under the same names (``bootstrap.servers``, ``acks``, ``linger.ms``,
``transaction.timeout.ms``, ``isolation.level``, ...). The (de)serializer classes that Flink
sets itself are dropped; a name librdkafka does not know is refused when the client is
made, naming the property.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

from weir.core.extras import import_extra
from weir.errors import UsageError

log = logging.getLogger("weir.kafka")

#: set by Flink itself, meaningless to librdkafka
JAVA_ONLY_KEYS = frozenset({"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"})


def confluent_kafka(needed_by: str) -> ModuleType:
    """The ``confluent_kafka`` module, or one error naming ``pip install weir[kafka]``."""
    return import_extra("confluent_kafka", package="confluent-kafka", extra="kafka", needed_by=needed_by)


def client_config(properties: dict[str, str], skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The librdkafka configuration for a job's properties, without ``skip`` and the Java-only
    keys; librdkafka's log goes to the ``weir.kafka`` logger (served when the client polls)."""
    config: dict[str, Any] = {
        k: v for k, v in properties.items() if k not in JAVA_ONLY_KEYS and k not in skip
    }
    config["logger"] = log
    return config


def make_client(kind: Any, config: dict[str, Any], who: str) -> Any:
    """``kind(config)`` (a Producer or Consumer); a property librdkafka refuses is a UsageError."""
    try:
        return kind(config)
    except Exception as e:  # KafkaException / ValueError / TypeError for a bad configuration
        raise UsageError(
            f"{who}: the Kafka client refused its configuration: {e}. weir's Kafka client is "
            "librdkafka (confluent-kafka): properties set with set_property must be ones it knows "
            "(see librdkafka's CONFIGURATION.md; most of the Java client's names are the same)"
        ) from None

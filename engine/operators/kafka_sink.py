"""The runtime side of ``weir.datastream.connectors.kafka.KafkaSink``: one librdkafka producer
per sink subtask.

Theory of operation: ``process_batch`` turns each record into a message (topic, key and
value bytes from the record serializer; the record's timestamp, when it has one) and queues
it in ``pending``. ``drain``, which the task awaits after every batch, hands the pending
messages to the producer; when the producer's local queue is full it waits in a worker
thread for deliveries to make room (back pressure), never on the task's loop. The producer
sends in the background and reports each delivery (``_on_delivery``, served by ``poll``).

Guarantees, as Flink's KafkaWriter:

- ``NONE``: nothing waits for acknowledgements, except at the end of input, when every
  message is flushed before the task finishes.
- ``AT_LEAST_ONCE``: at every checkpoint, before the barrier goes on
  (``prepare_snapshot_pre_barrier``), and at the end of input, the sink flushes: it blocks
  until every message sent so far is acknowledged or has failed. A completed checkpoint thus
  has every record before its barrier in Kafka; records after it are sent again on recovery.
- ``EXACTLY_ONCE`` is refused before the job starts (the sink's ``unrunnable_reason``).

A delivery that fails (after librdkafka's own retries, within ``delivery.timeout.ms``)
fails the job under every guarantee, with the first error, its topic and how many failed.

What it does not do: keep state in checkpoints (nothing is outstanding at a snapshot), choose
partitions itself (librdkafka's ``murmur2_random`` partitioner, the Java client's default, is
set unless the job sets ``partitioner``), or write headers.
"""

from __future__ import annotations

import contextlib
from typing import Any

import trio

from weir.codec.batch import Batch
from weir.errors import UsageError
from weir.operators.kafka_client import client_config, confluent_kafka, make_client
from weir.operators.sinks import SinkOperator

FLUSH_WAIT_S = 1.0  # one producer.flush() call at most; flushing repeats until nothing is outstanding
ROOM_WAIT_S = 0.1  # one wait for room in a full producer queue


class KafkaSinkOperator(SinkOperator):
    def __init__(self, name: str, sink: Any) -> None:
        super().__init__(name)
        self.properties: dict[str, str] = sink.get_properties()
        self.guarantee_name: str = sink.delivery_guarantee.name
        serializer = sink.record_serializer
        self.topic: str | None = serializer.topic
        self.key_schema = serializer.key_serialization_schema
        self.value_schema = serializer.value_serialization_schema
        self.producer: Any = None
        # (topic, key, value, timestamp ms or None) not yet handed to the producer
        self.pending: list[tuple[str, bytes | None, bytes, int | None]] = []
        self.sent = 0  # handed to the producer
        self.acknowledged = 0
        self.failed = 0
        self.first_error: str | None = None
        self.flushes = 0
        self._closed = False

    @property
    def outstanding(self) -> int:
        """Messages handed to the producer whose delivery has not been reported yet."""
        return self.sent - self.acknowledged - self.failed

    def open(self) -> None:
        ck = confluent_kafka(f"KafkaSink '{self.name}'")
        config = client_config(self.properties)
        config.setdefault("partitioner", "murmur2_random")
        config.setdefault("client.id", f"{self.name}-{self.context.subtask_index}")
        self.producer = make_client(ck.Producer, config, f"KafkaSink '{self.name}'")

    def _message(self, record: Any, timestamp: int | None) -> tuple[str, bytes | None, bytes, int | None]:
        if self.topic is None:  # a topic selector: records come paired with their topic, Row(topic, record)
            topic, record = record[0], record[1]
        else:
            topic = self.topic
        key = None if self.key_schema is None else self.key_schema.serialize(record)
        if timestamp is not None and timestamp <= 0:  # librdkafka reads 0 as "now"; Flink drops negative ones
            timestamp = None
        return topic, key, self.value_schema.serialize(record), timestamp

    def process_batch(self, batch: Batch) -> None:
        self._raise_if_failed()
        self.metrics.records_in += len(batch)
        message = self._message
        self.pending.extend(message(r, t) for r, t in zip(batch.as_list(), batch.timestamp_list()))

    def _on_delivery(self, error: Any, message: Any) -> None:
        if error is None:
            self.acknowledged += 1
            return
        self.failed += 1
        if self.first_error is None and not self._closed:
            self.first_error = f"to topic '{message.topic()}': {error.str()}"

    def _raise_if_failed(self) -> None:
        if self.first_error is not None:
            raise RuntimeError(
                f"KafkaSink '{self.name}': {self.failed} record(s) could not be delivered to Kafka "
                f"({self.properties.get('bootstrap.servers')}); the first failed {self.first_error}"
            )

    def _produce(self, topic: str, key: bytes | None, value: bytes, timestamp: int | None) -> None:
        """Hand one message to the producer (BufferError when its queue is full)."""
        try:
            if timestamp is None:
                self.producer.produce(topic, value, key, on_delivery=self._on_delivery)
            else:
                self.producer.produce(topic, value, key, on_delivery=self._on_delivery, timestamp=timestamp)
        except BufferError:
            raise
        except Exception as e:  # KafkaException: a message the client refuses (too large, bad topic)
            raise RuntimeError(
                f"KafkaSink '{self.name}': Kafka refused a record for topic '{topic}': {e}"
            ) from e
        self.sent += 1

    async def drain(self) -> None:
        """Hand the pending messages to the producer. Cancellation: messages not yet handed
        over stay pending (they are sent again after recovery from the last checkpoint)."""
        while self.pending:
            try:
                self._produce(*self.pending[0])
            except BufferError:  # the producer's queue is full: wait for deliveries to make room
                await trio.to_thread.run_sync(self.producer.poll, ROOM_WAIT_S)
                self._raise_if_failed()
                continue
            self.pending.pop(0)
        if self.producer is not None:
            self.producer.poll(0)  # serve delivery reports without waiting
        self._raise_if_failed()

    def flush(self) -> None:
        """Send everything and block until every message is acknowledged or has failed."""
        for message in self.pending:
            while True:
                try:
                    self._produce(*message)
                    break
                except BufferError:
                    self.producer.poll(ROOM_WAIT_S)
        self.pending.clear()
        while self.outstanding > 0:
            self.producer.flush(FLUSH_WAIT_S)
        self.flushes += 1
        self._raise_if_failed()

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        if self.guarantee_name != "NONE":
            self.flush()
        else:
            self._raise_if_failed()

    def finish(self) -> None:
        self.flush()

    def close(self) -> None:
        """Drops what is not delivered (recovery sends it again); runs after failures too."""
        self._closed = True
        producer, self.producer = self.producer, None
        if producer is not None:
            with contextlib.suppress(Exception):
                producer.purge()
                producer.flush(0)


def kafka_sink_operator(sink: Any, name: str) -> KafkaSinkOperator:
    reason = sink.unrunnable_reason()
    if reason:
        raise UsageError(f"sink '{name}': {reason}")
    return KafkaSinkOperator(name, sink)

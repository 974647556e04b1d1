"""The Kafka source reader against librdkafka's mock cluster: which partitions a subtask reads,
where it starts and stops, and how its checkpointed offsets restore and are committed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from weir.common import SimpleStringSchema
from weir.datastream.connectors.kafka import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaSource,
    KafkaTopicPartition,
)
from weir.errors import UsageError
from weir.operators.base import OperatorContext
from weir.operators.factory import SourceOperator
from weir.operators.kafka_source import KafkaSourceReader, java_string_hash, split_owner
from weir.state.operator_state import OperatorStateBackend
from weir.testing import MockKafkaCluster

from .operator_harness import CollectingOutput


@pytest.fixture(scope="module")
def kafka() -> Iterator[MockKafkaCluster]:
    with MockKafkaCluster() as cluster:
        yield cluster


def topic_with(kafka: MockKafkaCluster, per_partition: int) -> str:
    """A new topic whose 4 partitions hold ``per_partition`` records each: 'p<partition>-<i>',
    with timestamp 1000 + i."""
    t = f"t-{uuid.uuid4().hex[:8]}"
    for p in kafka.partitions(t):
        kafka.produce(
            t,
            [f"p{p}-{i}" for i in range(per_partition)],
            partition=p,
            timestamps=range(1000, 1000 + per_partition),
        )
    return t


def source(kafka: MockKafkaCluster, t: str, **options: Any) -> KafkaSource:
    builder = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka.bootstrap_servers)
        .set_topics(t)
        .set_value_only_deserializer(SimpleStringSchema())
        .set_bounded(options.pop("stop", KafkaOffsetsInitializer.latest()))
    )
    if "start" in options:
        builder.set_starting_offsets(options.pop("start"))
    if "group" in options:
        builder.set_group_id(options.pop("group"))
    return builder.build()


async def read_all(reader: KafkaSourceReader, limit: int | None = None) -> list[str]:
    """Batches until the end (or until at least ``limit`` records)."""
    got: list[str] = []
    while limit is None or len(got) < limit:
        batch = await reader.next_batch()
        if batch is None:
            break
        got.extend(batch.as_list())
    return got


def test_split_owners_are_flinks() -> None:
    assert java_string_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert java_string_hash("é𝄞") == (0xE9 * 31**2 + 0xD834 * 31 + 0xDD1E) & 0xFFFFFFFF  # UTF-16 units
    start = ((java_string_hash("orders") * 31) & 0x7FFFFFFF) % 3
    assert [split_owner("orders", p, 3) for p in range(4)] == [(start + p) % 3 for p in range(4)]


@pytest.mark.parametrize("parallelism", [1, 3])
async def test_subtasks_read_their_partitions_to_the_stopping_offsets(
    kafka: MockKafkaCluster, parallelism: int
) -> None:
    t = topic_with(kafka, 5)
    src = source(kafka, t)
    got: list[str] = []
    for subtask in range(parallelism):
        reader = KafkaSourceReader(src, subtask, parallelism)
        mine = await read_all(reader)
        assert {int(v.split("-")[0][1:]) for v in mine} == {
            p for p in range(4) if split_owner(t, p, parallelism) == subtask
        }
        got += mine
        reader.close()
    assert sorted(got) == sorted(f"p{p}-{i}" for p in range(4) for i in range(5))
    reader = KafkaSourceReader(src, 0, 1)
    first = await read_all(reader, limit=1)  # the stopping offsets are looked up now
    kafka.produce(t, ["later"], partition=0)  # after the stop: not read
    assert sorted(first + await read_all(reader)) == sorted(got)
    reader.close()


async def test_records_keep_their_kafka_timestamps(kafka: MockKafkaCluster) -> None:
    t = topic_with(kafka, 3)
    reader = KafkaSourceReader(source(kafka, t), 0, 1)
    batch = await reader.next_batch()
    assert batch is not None
    assert sorted(zip(batch.as_list(), batch.timestamp_list()))[:3] == [
        ("p0-0", 1000),
        ("p0-1", 1001),
        ("p0-2", 1002),
    ]
    reader.close()


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (KafkaOffsetsInitializer.latest(), []),
        (
            KafkaOffsetsInitializer.offsets(
                {KafkaTopicPartition("T", 0): 2, KafkaTopicPartition("T", 1): 99}
            ),
            # partition 0 from offset 2; 1 is out of range and 2, 3 are not given: the reset strategy (earliest)
            ["p0-2", *(f"p{p}-{i}" for p in (1, 2, 3) for i in range(3))],
        ),
        (KafkaOffsetsInitializer.timestamp(10_000), []),  # no record that late: the end of each partition
    ],
)
async def test_starting_offsets(
    kafka: MockKafkaCluster, start: KafkaOffsetsInitializer, expected: list[str]
) -> None:
    t = topic_with(kafka, 3)
    start.partition_offsets = {(t, p): o for (_, p), o in start.partition_offsets.items()}
    reader = KafkaSourceReader(source(kafka, t, start=start), 0, 1)
    assert sorted(await read_all(reader)) == sorted(expected)
    reader.close()


async def test_a_stopping_offset_past_the_end_is_read_up_to_once_it_is_written(
    kafka: MockKafkaCluster,
) -> None:
    t = topic_with(kafka, 3)
    stop = KafkaOffsetsInitializer.offsets({KafkaTopicPartition(t, 0): 5, KafkaTopicPartition(t, 1): 2})
    reader = KafkaSourceReader(source(kafka, t, stop=stop), 0, 1)
    # partitions 2 and 3 are not given and nothing is committed: they stop at the earliest offset
    assert sorted(await read_all(reader, limit=5)) == ["p0-0", "p0-1", "p0-2", "p1-0", "p1-1"]
    assert reader.snapshot_splits()[0]["stop"] == 5  # not reset to the strategy's offset
    kafka.produce(t, ["p0-3", "p0-4", "p0-5"], partition=0)
    assert await read_all(reader) == ["p0-3", "p0-4"]
    reader.close()


async def test_committed_offsets_start_where_the_group_left_off(kafka: MockKafkaCluster) -> None:
    t = topic_with(kafka, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    none = KafkaOffsetsInitializer.committed_offsets()
    reader = KafkaSourceReader(source(kafka, t, start=none, group=group), 0, 1)
    with pytest.raises(
        UsageError, match=f"group '{group}' has no committed offset for partition {t}-0, .* NONE"
    ):
        await reader.next_batch()
    reader = KafkaSourceReader(source(kafka, t, group=group), 0, 1)
    assert len(await read_all(reader, limit=1)) >= 1
    reader.on_snapshot(1, reader.snapshot_splits())
    offsets = {s["partition"]: s["offset"] for s in reader.snapshot_splits() or []}
    reader.notify_checkpoint_complete(1)
    reader.close()  # waits for the asynchronous commit
    assert kafka.committed(group, t) == offsets
    earliest = KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST)
    reader = KafkaSourceReader(source(kafka, t, start=earliest, group=group), 0, 1)
    rest = await read_all(reader)
    assert sorted(rest) == sorted(f"p{p}-{i}" for p in range(4) for i in range(offsets[p], 4))
    reader.close()


def source_operator(src: KafkaSource, state: OperatorStateBackend, restored: bool) -> SourceOperator:
    op = SourceOperator("kafka", KafkaSourceReader(src, 0, 1), None, 0)
    context = OperatorContext(
        task_name="test", operator_name="kafka", operator_id="0" * 32, subtask_index=0, parallelism=1,
        max_parallelism=128, attempt_number=0, batch_mode=False, processing_time_ms=lambda: 0,
        operator_state_backend=state, is_restored=restored,
    )  # fmt: skip
    op.setup(context, CollectingOutput())
    op.initialize_state()
    op.open()
    return op


async def emit_next(op: SourceOperator) -> bool:
    batch = await op.poll()
    if batch is None:
        return False
    op.emit_batch(batch)
    return True


async def test_a_restore_reads_on_from_the_checkpointed_offsets_and_commits_them(
    kafka: MockKafkaCluster,
) -> None:
    t = topic_with(kafka, 50)
    group = f"g-{uuid.uuid4().hex[:8]}"
    src = source(kafka, t, group=group)
    state = OperatorStateBackend("0" * 32)
    first = source_operator(src, state, restored=False)
    first.reader.batch_size = 30
    assert await emit_next(first)
    first.snapshot_state(1)  # the checkpoint: what was emitted so far
    snapshot = state.snapshot()
    checkpointed = {
        s["partition"]: s["offset"]
        for s in map(json.loads, state.get_list_state(first._splits_descriptor()).get())
    }
    before = list(first.chain_output.records)  # type: ignore[attr-defined]
    while await emit_next(first):  # read on past the checkpoint, then fail
        pass
    first.notify_checkpoint_complete(1)
    first.close()
    assert kafka.committed(group, t) == checkpointed

    restored_state = OperatorStateBackend("0" * 32)
    restored_state.restore([snapshot])
    second = source_operator(src, restored_state, restored=True)
    while await emit_next(second):
        pass
    second.close()
    after = second.chain_output.records  # type: ignore[attr-defined]
    assert sorted(v for v, _ in before + after) == sorted(f"p{p}-{i}" for p in range(4) for i in range(50))


async def test_a_checkpoint_before_the_first_read_restores_the_claim_at_another_parallelism(
    kafka: MockKafkaCluster,
) -> None:
    t = topic_with(kafka, 2)
    src = source(kafka, t)
    claims = [KafkaSourceReader(src, i, 2).snapshot_splits() for i in range(2)]
    assert claims == [[{"owner": 0, "of": 2}], [{"owner": 1, "of": 2}]]
    reader = KafkaSourceReader(src, 0, 1)  # rescaled to one subtask: it takes both claims
    reader.restore_splits([c for cs in claims for c in cs or []])
    assert sorted(await read_all(reader)) == sorted(f"p{p}-{i}" for p in range(4) for i in range(2))
    reader.close()


async def test_a_topic_that_does_not_exist_is_named(kafka: MockKafkaCluster) -> None:
    reader = KafkaSourceReader(source(kafka, "no-such-topic"), 0, 1)
    with pytest.raises(UsageError, match="topic\\(s\\) 'no-such-topic' do not exist"):
        await reader.next_batch()


async def test_a_topic_pattern_reads_every_matching_topic(kafka: MockKafkaCluster) -> None:
    stem = f"pat-{uuid.uuid4().hex[:6]}"
    for name in ("a", "b", "ab"):
        kafka.produce(f"{stem}-{name}", [name], partition=0)
    src = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka.bootstrap_servers)
        .set_topic_pattern(f"{stem}-[ab]")
        .set_value_only_deserializer(SimpleStringSchema())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    reader = KafkaSourceReader(src, 0, 1)
    assert sorted(await read_all(reader)) == ["a", "b"]  # the whole name must match
    reader.close()

"""Backlog announcements under random interleavings: a sender's backlog never goes unheard.

The real objects (partition → server → connection → client → remote channels → gate)
are driven one synchronous step at a time, in any order, with consumers that read and
hold or read and recycle. Then every side runs until nothing moves (the consumers stop
reading). At that point, for every channel whose sender still holds a backlog:

- the sender has no credit for it (else it would have sent), and
- the receiver has no free buffer for it and could not have borrowed one: the gate's pool
  has nothing left to lend.

Before backlog announcements, a channel whose last buffer said "backlog 0" kept only its
exclusive buffers while the pool sat idle and the sender's backlog grew. Also checked on
every step: no buffer without credit, nothing lost or reordered.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.network.buffer_pool import NetworkBufferPool, WouldBlock
from weir.network.gate import InputGate, RemoteInputChannel
from weir.network.partition import ResultPartition, SubpartitionView
from weir.network.transport import Connection, PartitionRequestClient, PartitionRequestServer

SEG = 32
EXCLUSIVE = 2


class LocalProvider:
    def __init__(self, partition: ResultPartition) -> None:
        self.partition = partition

    def request_subpartition_view(
        self,
        partition_id: str,
        subpartition_index: int,
        on_view: Callable[[SubpartitionView], None],
        on_error: Callable[[Exception], None],
    ) -> Callable[[], None]:
        on_view(self.partition.create_subpartition_view(subpartition_index))
        return lambda: None


ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("emit"), st.integers(0, 1), st.integers(1, 2 * SEG)),
        st.tuples(st.just("flush"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("serve"), st.just(0), st.just(0)),
        st.tuples(st.just("deliver"), st.just(0), st.just(0)),
        st.tuples(st.just("inbound"), st.just(0), st.just(0)),
        st.tuples(st.just("read"), st.just(0), st.just(0)),
        st.tuples(st.just("recycle"), st.integers(0, 50), st.just(0)),
    ),
    max_size=200,
)


@settings(max_examples=300, deadline=None)
@given(
    floating=st.integers(0, 6),
    holds=st.tuples(st.booleans(), st.booleans()),
    actions=ACTIONS,
)
def test_a_backlog_without_credit_is_always_heard(
    floating: int, holds: tuple[bool, bool], actions: list[tuple[str, int, int]]
) -> None:
    network = NetworkBufferPool(64 * SEG, SEG)
    partition = ResultPartition("p", 2, network.create_buffer_pool(3, 2 * EXCLUSIVE + 8))
    connection = Connection("consumer", "producer")
    server = PartitionRequestServer(connection, LocalProvider(partition))
    client = PartitionRequestClient(connection)
    receiver_network = NetworkBufferPool(64 * SEG, SEG)
    gate_pool = receiver_network.create_buffer_pool(2 * EXCLUSIVE, 2 * EXCLUSIVE + floating)
    channels = [RemoteInputChannel(i, "p", i, client, EXCLUSIVE) for i in range(2)]
    gate = InputGate(0, channels, gate_pool)
    gate.request_partitions()

    written = [bytearray(), bytearray()]
    received = [bytearray(), bytearray()]
    held = []
    counter = 0

    def serve_inbound() -> bool:
        messages = connection.take_server_messages()
        for message in messages:
            server.on_message(message)
        return bool(messages)

    def run(kind: str, sub: int, n: int) -> None:
        nonlocal counter
        if kind == "emit":
            data = bytes((counter + i) % 251 for i in range(n))
            counter += n
            try:
                partition.emit_nowait(sub, data)
                written[sub] += data
            except WouldBlock:
                pass
        elif kind == "flush":
            partition.flush(sub)
        elif kind == "serve":
            serve_inbound()
            message = server.poll_response()
            if message is not None:
                connection.send_to_client(message)
        elif kind == "deliver":
            if connection._to_client:
                client.on_message(connection._to_client.popleft())
        elif kind == "inbound":
            serve_inbound()
        elif kind == "read":
            item = gate.poll_next()
            if item is not None:
                assert item.data is not None
                received[item.channel_index] += item.data
                if holds[item.channel_index]:
                    held.append(item)
                else:
                    item.recycle()
        elif kind == "recycle" and held:
            held.pop(sub % len(held)).recycle()

    def check() -> None:
        for channel in channels:
            assert channel._error is None, channel._error  # no buffer arrived without credit
            c = channel.credit
            assert c.announced + c.unannounced == c.free_buffers
        for i in range(2):
            assert written[i].startswith(received[i])

    for action in actions:
        run(*action)
        check()

    # run every side until nothing moves; the consumers no longer read
    for _ in range(1000):
        moved = serve_inbound()
        while (message := server.poll_response()) is not None:
            connection.send_to_client(message)
            moved = True
        for message in connection.take_client_messages():
            client.on_message(message)
            moved = True
        check()
        if not moved:
            break
    else:
        raise AssertionError("the connection never went quiet")

    readers = {reader.receiver_id: reader for reader in server._readers.values()}
    for i, channel in enumerate(channels):
        backlog = partition.statistics().subpartitions[i].backlog
        if backlog == 0:
            continue
        reader = readers[channel._receiver_id]  # type: ignore[index]
        assert reader.ledger.available == 0, "data and credit, but nothing sent"
        assert channel.credit.free_buffers == 0
        assert channel.credit.sender_backlog > 0, f"channel {i}: the sender's backlog {backlog} went unheard"
        assert not gate_pool.is_available(), (
            f"channel {i}: sender backlog {backlog}, receiver backlog {channel.credit.sender_backlog}, "
            f"and the gate's pool still has buffers to lend ({gate_pool.used}/{gate_pool.limit})"
        )

    # and everything still arrives, in order, once the consumers read again
    for item in held:
        item.recycle()
    held.clear()
    holds = (False, False)
    partition.flush_all()
    partition.finish_nowait()
    for _ in range(10_000):
        if gate.is_finished:
            break
        run("inbound", 0, 0)
        run("serve", 0, 0)
        while connection._to_client:
            run("deliver", 0, 0)
        last = gate.poll_next()
        if last is not None:
            if last.data is not None:
                received[last.channel_index] += last.data
            last.recycle()
        check()
    assert gate.is_finished
    assert received == written
    gate.close()
    assert partition.buffer_pool.used == 0
    assert receiver_network.available_segments == receiver_network.total_segments

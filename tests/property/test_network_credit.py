"""Credit-based flow control under random interleavings.

Two models: the pure cores alone (``CreditLedger`` + ``InputChannelCredit`` with a wire of
messages in flight), and the real objects end to end (partition → server → connection →
client → remote channel → gate) driven synchronously one step at a time. Both check that
credit never goes negative, that no buffer arrives without credit, and that nothing is
lost or leaked.
"""

from __future__ import annotations

from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.network.buffer_pool import NetworkBufferPool, WouldBlock
from weir.network.credit import CreditLedger, InputChannelCredit, ReturnFloating
from weir.network.gate import InputGate, RemoteInputChannel
from weir.network.partition import ResultPartition, SubpartitionView
from weir.network.transport import Connection, PartitionRequestClient, PartitionRequestServer

# --- the pure cores ---------------------------------------------------------------------

STEPS = st.lists(st.sampled_from(["produce", "send", "deliver", "credit", "consume", "hold"]), max_size=120)


@settings(max_examples=300, deadline=None)
@given(exclusive=st.integers(1, 3), floating=st.integers(0, 4), steps=STEPS)
def test_credit_never_negative_and_no_buffer_without_credit(
    exclusive: int, floating: int, steps: list[str]
) -> None:
    ledger = CreditLedger(0)
    receiver: InputChannelCredit[int] = InputChannelCredit(0, exclusive)
    pool = list(range(100, 100 + floating))  # floating segments of the gate
    for segment in range(exclusive):
        receiver.on_exclusive_segment(segment)
    ledger.on_credit(receiver.take_initial_credit())
    backlog = 0  # buffers queued at the sender
    buffers_in_flight: deque[int] = deque()  # each carries the backlog after it
    credit_in_flight: deque[int] = deque()
    task: list[tuple[int, bool]] = []  # buffers the task holds
    produced = delivered = 0

    def lend_floating() -> None:
        while receiver.floating_wanted() > 0 and pool:
            receiver.on_floating_segment(pool.pop())
        action = receiver.announce()
        if action is not None:
            credit_in_flight.append(action.credit)

    def step(kind: str) -> None:
        nonlocal backlog, produced, delivered
        if kind == "produce":
            backlog += 1
            produced += 1
        elif kind == "send" and backlog and ledger.try_spend():
            backlog -= 1
            buffers_in_flight.append(backlog)
        elif kind == "deliver" and buffers_in_flight:
            segment, is_exclusive = receiver.on_buffer(buffers_in_flight.popleft())  # raises without credit
            task.append((segment, is_exclusive))
            delivered += 1
            lend_floating()
        elif kind == "credit" and credit_in_flight:
            ledger.on_credit(credit_in_flight.popleft())
        elif kind in ("consume", "hold") and task:
            segment, is_exclusive = task.pop(0 if kind == "consume" else -1)
            action = receiver.on_recycle(segment, is_exclusive)
            if isinstance(action, ReturnFloating):
                pool.append(action.segment)
            lend_floating()

    def check() -> None:
        assert ledger.available >= 0
        assert receiver.announced >= 0 and receiver.unannounced >= 0
        assert receiver.announced + receiver.unannounced == receiver.free_buffers
        # end to end: what the sender may still send matches what the receiver has room for
        assert ledger.available + len(buffers_in_flight) + sum(credit_in_flight) == receiver.announced
        stats = receiver.statistics()
        assert stats.exclusive_held == exclusive
        assert stats.floating_held + len(pool) == floating
        assert stats.exclusive_held + stats.floating_held == receiver.free_buffers + len(task)

    for kind in steps:
        step(kind)
        check()

    # liveness: a task that keeps reading drains everything
    for _ in range(10 * (produced + 10)):
        if not (backlog or buffers_in_flight or credit_in_flight or task):
            break
        for kind in ("credit", "send", "deliver", "consume"):
            step(kind)
            check()
    assert delivered == produced and not task
    assert len(pool) + receiver.statistics().floating_held == floating


# --- the real objects, one synchronous step at a time -------------------------------------

SEG = 32


class LocalProvider:
    def __init__(self, partition: ResultPartition) -> None:
        self.partition = partition

    def request_subpartition_view(self, partition_id, subpartition_index, on_view, on_error):  # type: ignore[no-untyped-def]
        view: SubpartitionView = self.partition.create_subpartition_view(subpartition_index)
        on_view(view)
        return lambda: None


ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("emit"), st.integers(0, 1), st.integers(1, 3 * SEG)),
        st.tuples(st.just("flush"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("serve"), st.just(0), st.just(0)),
        st.tuples(st.just("deliver"), st.just(0), st.just(0)),
        st.tuples(st.just("inbound"), st.just(0), st.just(0)),
        st.tuples(st.just("read"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("recycle"), st.integers(0, 50), st.just(0)),
    ),
    max_size=150,
)


@settings(max_examples=200, deadline=None)
@given(floating=st.integers(0, 3), stalled=st.booleans(), actions=ACTIONS)
def test_end_to_end_no_loss_no_leak_no_overdraft(
    floating: int, stalled: bool, actions: list[tuple[str, int, int]]
) -> None:
    network = NetworkBufferPool(64 * SEG, SEG)
    partition = ResultPartition("p", 2, network.create_buffer_pool(3, 2 * 2 + 8))
    connection = Connection("consumer", "producer")
    server = PartitionRequestServer(connection, LocalProvider(partition))
    client = PartitionRequestClient(connection)
    receiver_network = NetworkBufferPool(64 * SEG, SEG)
    gate_pool = receiver_network.create_buffer_pool(4, 4 + floating)
    gate = InputGate(0, [RemoteInputChannel(i, "p", i, client, 2) for i in range(2)], gate_pool)
    gate.request_partitions()

    written = [bytearray(), bytearray()]
    received = [bytearray(), bytearray()]
    held = []
    counter = 0
    stalling = [stalled]

    def serve_inbound() -> None:
        for message in connection.take_server_messages():
            server.on_message(message)

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
                if item.data is not None:
                    received[item.channel_index] += item.data
                if stalling[0] and item.channel_index == 1:
                    held.append(item)  # channel 1's task does not recycle yet
                else:
                    item.recycle()
        elif kind == "recycle" and held:
            held.pop(sub % len(held)).recycle()

    def check() -> None:
        for reader in server._readers.values():
            assert reader.ledger.available >= 0
        for channel in gate.channels:
            assert isinstance(channel, RemoteInputChannel)
            assert channel._error is None, channel._error  # no buffer arrived without credit
            c = channel.credit
            assert c.announced + c.unannounced == c.free_buffers
        for i in range(2):
            assert written[i].startswith(received[i])  # in order, nothing invented

    for action in actions:
        run(*action)
        check()

    # drain: finish, then let every side run until quiet
    stalling[0] = False
    for item in held:
        item.recycle()
    held.clear()
    partition.flush_all()
    partition.finish_nowait()
    for _ in range(10_000):
        if gate.is_finished:
            break
        run("inbound", 0, 0)
        run("serve", 0, 0)
        while connection._to_client:
            run("deliver", 0, 0)
        run("read", 0, 0)
        check()
    assert gate.is_finished
    assert received == written
    assert partition.buffer_pool.used == 0
    gate.close()
    assert receiver_network.available_segments == receiver_network.total_segments
    assert network.available_segments == network.total_segments

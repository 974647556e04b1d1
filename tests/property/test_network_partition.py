"""A subpartition under random emits, flushes, events and reads: order kept, nothing early, nothing leaked."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.network.buffer import BufferOrEvent
from weir.network.buffer_pool import NetworkBufferPool, WouldBlock
from weir.network.events import EndOfPartition, Watermark
from weir.network.partition import ResultPartition

SEG = 16

ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("emit"), st.integers(1, 3 * SEG + 5)),
        st.tuples(st.just("flush"), st.just(0)),
        st.tuples(st.just("event"), st.just(0)),
        st.tuples(st.just("read"), st.integers(0, 3)),
        st.tuples(st.just("recycle"), st.integers(0, 20)),
    ),
    max_size=100,
)


@settings(max_examples=300, deadline=None)
@given(actions=ACTIONS)
def test_readers_see_exactly_the_consumable_prefix_in_order(actions: list[tuple[str, int]]) -> None:
    network = NetworkBufferPool(32 * SEG, SEG)
    partition = ResultPartition("p", 1, network.create_buffer_pool(2, 6))
    view = partition.create_subpartition_view(0)

    written: list[bytes | object] = []  # the stream: data chunks and events, in write order
    data_written = 0
    consumable = 0  # bytes a reader may see: up to the last flush, full buffer or event
    buffer_start = 0  # stream offset where the buffer being written starts (None-like when no buffer)
    has_buffer = False
    read: list[bytes | object] = []
    data_read = 0
    held: list[BufferOrEvent] = []
    counter = 0

    def emit(n: int) -> None:
        nonlocal counter, data_written, consumable, buffer_start, has_buffer
        data = bytes((counter + i) % 256 for i in range(n))
        counter += n
        try:
            partition.emit_nowait(0, data)
        except WouldBlock:
            return
        written.append(data)
        start = data_written
        data_written += n
        if not has_buffer:
            buffer_start, has_buffer = start, True
        # buffers finish each time they fill up
        while data_written - buffer_start >= SEG:
            buffer_start += SEG
            consumable = max(consumable, buffer_start)
        has_buffer = data_written > buffer_start
        if not has_buffer:
            buffer_start = data_written

    def event() -> None:
        nonlocal consumable, has_buffer, buffer_start
        mark = Watermark(len(written))
        partition.emit_event_nowait(0, mark)
        written.append(mark)
        consumable = data_written
        has_buffer = False
        buffer_start = data_written

    def read_some(k: int) -> None:
        nonlocal data_read
        for _ in range(k):
            item = view.poll_next()
            if item is None:
                assert not view.is_available()
                assert data_read == consumable  # everything consumable was delivered
                return
            if item.data is not None:
                read.append(bytes(item.data))
                data_read += item.size
            else:
                read.append(item.event)
            held.append(item)

    for kind, arg in actions:
        if kind == "emit":
            emit(arg)
        elif kind == "flush":
            partition.flush(0)
            consumable = data_written
        elif kind == "event":
            event()
        elif kind == "read":
            read_some(arg)
        elif kind == "recycle" and held:
            held.pop(arg % len(held)).recycle()
        # nothing early: the reader never sees bytes that were not made consumable
        assert data_read <= consumable
        assert partition.buffer_pool.used <= partition.buffer_pool.limit

    partition.finish_nowait()
    consumable = data_written
    read_some(10_000)
    for item in held:
        item.recycle()

    # in order, events between the same bytes as written, nothing lost
    def normalise(stream: list[bytes | object]) -> list[bytes | object]:
        out: list[bytes | object] = []
        for x in stream:
            if isinstance(x, bytes):
                if out and isinstance(out[-1], bytes):
                    out[-1] = out[-1] + x
                else:
                    out.append(x)
            else:
                out.append(x)
        return out

    assert normalise(read) == normalise([*written, EndOfPartition()])
    assert partition.buffer_pool.used == 0
    assert network.available_segments == network.total_segments

"""Buffer pools under random request/recycle/create/destroy: segments conserved, limits fair, no lost wakeups."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.errors import UsageError
from weir.network.buffer import Buffer
from weir.network.buffer_pool import LocalBufferPool, NetworkBufferPool, WouldBlock

SEG = 64

ops = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.integers(0, 6), st.integers(0, 10)),
        st.tuples(st.just("destroy"), st.integers(0, 20), st.just(0)),
        st.tuples(st.just("request"), st.integers(0, 20), st.just(0)),
        st.tuples(st.just("recycle"), st.integers(0, 200), st.just(0)),
    ),
    max_size=80,
)


def check_limits(network: NetworkBufferPool, pools: list[LocalBufferPool]) -> None:
    live = [p for p in pools if not p.is_destroyed]
    if not live:
        return
    required = sum(p.num_required for p in live)
    capacity = sum(p.max_buffers - p.num_required for p in live)
    to_distribute = min(network.total_segments - required, capacity)
    for p in live:
        assert p.num_required <= p.limit <= p.max_buffers
        if capacity:
            exact = p.num_required + (p.max_buffers - p.num_required) * to_distribute / capacity
            assert abs(p.limit - exact) < 1, (p.limit, exact)
    assert sum(p.limit for p in live) == required + max(to_distribute, 0)
    assert sum(p.limit for p in live) <= max(network.total_segments, required)


@settings(max_examples=300, deadline=None)
@given(total=st.integers(1, 24), operations=ops)
def test_segments_are_conserved_and_limits_fair(total: int, operations: list[tuple[str, int, int]]) -> None:
    network = NetworkBufferPool(total * SEG, SEG)
    pools: list[LocalBufferPool] = []
    held: list[tuple[LocalBufferPool, Buffer]] = []
    waiting: dict[LocalBufferPool, list[bool]] = {}

    for op, a, b in operations:
        if op == "create":
            required, maximum = a, a + b
            try:
                pools.append(network.create_buffer_pool(required, maximum))
            except UsageError as error:
                assert required + network.statistics().required_segments > total
                assert "too small" in str(error)
        elif op == "destroy" and pools:
            pools[a % len(pools)].destroy()
        elif op == "request" and pools:
            pool = pools[a % len(pools)]
            if pool.is_destroyed:
                continue
            used_before = pool.used
            try:
                held.append((pool, pool.request_buffer_nowait()))
                assert used_before < pool.limit
            except WouldBlock:
                assert used_before >= pool.limit or network.available_segments == 0
                if pool not in waiting:
                    flag: list[bool] = []
                    waiting[pool] = flag
                    pool.notify_when_available(lambda flag=flag: flag.append(True))
        elif op == "recycle" and held:
            _, buffer = held.pop(a % len(held))
            buffer.recycle()

        # conservation: free + held by pools (destroyed ones included) = total
        assert network.available_segments + sum(p.used for p in pools) == total
        assert sum(p.used for p in pools) == len(held)
        check_limits(network, pools)
        # no lost wakeups: a pool that can serve again has told its waiter
        for pool, flag in list(waiting.items()):
            if flag:
                del waiting[pool]
            elif not pool.is_destroyed:
                assert not pool.is_available(), "a waiting pool became available without a callback"
            else:
                assert flag == [True]

    for _, buffer in held:
        buffer.recycle()
    assert network.available_segments == total
    assert all(p.used == 0 for p in pools)

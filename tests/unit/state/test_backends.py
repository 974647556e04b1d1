"""One suite for every keyed state backend (as Flink's StateBackendTestBase): heap and LMDB."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import weir.state.state_file  # noqa: F401  (registers the snapshot types)
from weir.common.time import Duration, Time
from weir.common.typeinfo import Types
from weir.datastream.functions import AggregateFunction, ReduceFunction
from weir.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from weir.datastream.window import TimeWindow
from weir.errors import ProtocolViolation, UsageError
from weir.keys import KeyGroupRange, assign_to_key_group
from weir.state import (
    HeapKeyedStateBackend,
    KeyedStateBackend,
    LmdbKeyedStateBackend,
    RuntimeStateProvider,
    create_keyed_backend,
)
from weir.state.serde import decode_value, encode_value

MAX_P = 128
KINDS = ["hashmap", "lmdb"]
FULL_RANGE = KeyGroupRange(0, MAX_P - 1)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


Factory = Callable[..., KeyedStateBackend]


def _factory(kind: str, tmp_path: Path, clock: Clock, made: list[KeyedStateBackend]) -> Factory:
    counter = iter(range(1_000_000))

    def make(
        key_group_range: KeyGroupRange = FULL_RANGE,
        max_parallelism: int = MAX_P,
        kind_: str | None = None,
        **kwargs: Any,
    ) -> KeyedStateBackend:
        backend = create_keyed_backend(
            kind_ or kind,
            "op",
            max_parallelism,
            key_group_range,
            clock,
            path=tmp_path / f"lmdb-{next(counter)}",
            **kwargs,
        )
        made.append(backend)
        return backend

    return make


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(kind: str, tmp_path: Path, clock: Clock) -> Iterator[Factory]:
    made: list[KeyedStateBackend] = []
    yield _factory(kind, tmp_path, clock, made)
    for b in made:
        b.dispose()


@pytest.fixture
def backend(make: Factory) -> KeyedStateBackend:
    return make()


def keys_in(key_group_range: KeyGroupRange, n: int, start: int = 0) -> list[int]:
    out = []
    k = start
    while len(out) < n:
        if assign_to_key_group(k, MAX_P) in key_group_range:
            out.append(k)
        k += 1
    return out


class Sum(ReduceFunction):
    def reduce(self, a: Any, b: Any) -> Any:
        return a + b


class Avg(AggregateFunction):
    def create_accumulator(self) -> Any:
        return (0, 0)

    def add(self, value: Any, acc: Any) -> Any:
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc: Any) -> Any:
        return acc[0] / acc[1]

    def merge(self, a: Any, b: Any) -> Any:
        return (a[0] + b[0], a[1] + b[1])


def visible(backend: KeyedStateBackend) -> dict[Any, Any]:
    """Everything a reader sees, state by state (through snapshot + heap restore)."""
    return {kg: entries for kg, entries in backend.snapshot().key_groups}


# --------------------------------------------------------------------------- each state kind


def test_value_state(backend: KeyedStateBackend) -> None:
    state = backend.get_state(ValueStateDescriptor("v", Types.LONG()))
    backend.set_current_key("a")
    assert state.value() is None
    state.update(1)
    backend.set_current_key("b")
    assert state.value() is None
    state.update({"x": [1, 2]})
    backend.set_current_key("a")
    assert state.value() == 1
    state.update(None)
    assert state.value() is None
    backend.set_current_key("b")
    assert state.value() == {"x": [1, 2]}
    state.clear()
    assert state.value() is None
    assert backend.number_of_keys() == 0


def test_list_state(backend: KeyedStateBackend) -> None:
    state = backend.get_state(ListStateDescriptor("l", Types.LONG()))
    backend.set_current_key(1)
    assert list(state.get()) == []
    state.add(1)
    state.add(2)
    state.add_all([3, 4])
    assert list(state.get()) == [1, 2, 3, 4]
    assert list(state) == [1, 2, 3, 4]
    backend.set_current_key(2)
    state.add_all([])
    assert list(state.get()) == []
    state.update([9, 8])
    assert list(state.get()) == [9, 8]
    backend.set_current_key(1)
    state.update([5])
    state.add(6)
    assert list(state.get()) == [5, 6]
    with pytest.raises(UsageError, match="None cannot be added"):
        state.add(None)
    state.update([])
    assert list(state.get()) == []
    assert backend.number_of_keys() == 2


def test_map_state(backend: KeyedStateBackend) -> None:
    state = backend.get_state(MapStateDescriptor("m", Types.STRING(), Types.LONG()))
    backend.set_current_key(7)
    assert state.is_empty()
    assert state.get("a") is None
    state.put("a", 1)
    state.put_all({"b": 2, "c": 3})
    state["d"] = 4
    assert state.contains("a") and "d" in state and not state.contains("z")
    assert state.get("b") == 2 and state["c"] == 3
    state.remove("b")
    del state["c"]
    state.remove("missing")
    assert sorted(state.keys()) == ["a", "d"]
    assert sorted(state.values()) == [1, 4]
    assert sorted(state.items()) == [("a", 1), ("d", 4)]
    assert sorted(state) == ["a", "d"]
    assert not state.is_empty()
    backend.set_current_key(8)
    assert state.is_empty() and state.items() == []
    state.put(("tuple", 1), None)
    assert state.contains(("tuple", 1)) and state.get(("tuple", 1)) is None
    backend.set_current_key(7)
    state.clear()
    assert state.is_empty()
    backend.set_current_key(8)
    state.clear()
    assert backend.number_of_keys() == 0


def test_reducing_state(backend: KeyedStateBackend) -> None:
    with_fn = backend.get_state(ReducingStateDescriptor("r1", Sum(), Types.LONG()))
    with_callable = backend.get_state(ReducingStateDescriptor("r2", max, Types.LONG()))
    backend.set_current_key("k")
    assert with_fn.get() is None
    for v in (3, 1, 5):
        with_fn.add(v)
        with_callable.add(v)
    assert with_fn.get() == 9
    assert with_callable.get() == 5
    with_fn.clear()
    assert with_fn.get() is None and with_callable.get() == 5


def test_aggregating_state(backend: KeyedStateBackend) -> None:
    state = backend.get_state(
        AggregatingStateDescriptor("avg", Avg(), Types.TUPLE([Types.LONG(), Types.LONG()]))
    )
    backend.set_current_key("k")
    assert state.get() is None
    state.add(2)
    state.add(4)
    assert state.get() == 3.0
    backend.set_current_key("j")
    state.add(10)
    assert state.get() == 10.0
    state.clear()
    assert state.get() is None


# --------------------------------------------------------------------------- registration and errors


def test_state_objects_are_cached_per_name(backend: KeyedStateBackend) -> None:
    d = ValueStateDescriptor("v", Types.LONG())
    assert backend.get_state(d) is backend.get_state(ValueStateDescriptor("v", Types.LONG()))
    with pytest.raises(UsageError, match=r"'v'.*already registered"):
        backend.get_state(ListStateDescriptor("v", Types.LONG()))
    with pytest.raises(UsageError, match="already registered"):
        backend.get_state(ValueStateDescriptor("v", Types.STRING()))
    with pytest.raises(UsageError, match="state descriptor"):
        backend.get_state("v")  # type: ignore[arg-type]


def test_access_without_current_key(backend: KeyedStateBackend) -> None:
    state = backend.get_state(ValueStateDescriptor("v"))
    with pytest.raises(UsageError, match="no current key"):
        state.value()
    lst = backend.get_state(ListStateDescriptor("l"))
    with pytest.raises(UsageError, match="no current key"):
        lst.add(1)


def test_key_outside_range_is_a_protocol_violation(make: Factory) -> None:
    rng = KeyGroupRange(0, 63)
    backend = make(rng)
    outside = next(k for k in range(1000) if assign_to_key_group(k, MAX_P) not in rng)
    kg = assign_to_key_group(outside, MAX_P)
    with pytest.raises(
        ProtocolViolation, match=rf"key {outside} belongs to key group {kg}.*KeyGroupRange\(0, 63\)"
    ):
        backend.set_current_key(outside)


def test_bad_descriptors() -> None:
    with pytest.raises(UsageError, match="non-empty state name"):
        ValueStateDescriptor("", Types.LONG())
    with pytest.raises(UsageError, match="reduce_function must be"):
        ReducingStateDescriptor("r", 42, Types.LONG())
    with pytest.raises(UsageError, match="AggregateFunction"):
        AggregatingStateDescriptor("a", lambda a, b: a, Types.LONG())
    with pytest.raises(UsageError, match="forget the parentheses"):
        ValueStateDescriptor("v", Types.LONG)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="StateTtlConfig"):
        ValueStateDescriptor("v").enable_time_to_live(10)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="positive"):
        StateTtlConfig.new_builder(Duration.of_millis(0))


def test_runtime_state_provider_checks_the_getter(backend: KeyedStateBackend) -> None:
    provider = RuntimeStateProvider(backend)
    backend.set_current_key(1)
    provider.get_state("value", ValueStateDescriptor("v")).update(3)
    with pytest.raises(UsageError, match="use get_list_state"):
        provider.get_state("value", ListStateDescriptor("l"))


# --------------------------------------------------------------------------- namespaces


def test_namespaces_are_separate(backend: KeyedStateBackend) -> None:
    state = backend.get_state(ListStateDescriptor("window-contents"))
    w1, w2 = TimeWindow(0, 10), TimeWindow(10, 20)
    backend.set_current_key("k")
    state.set_current_namespace(w1)
    state.add("a")
    state.set_current_namespace(w2)
    state.add("b")
    state.set_current_namespace(TimeWindow(0, 10))
    assert list(state.get()) == ["a"]
    backend.set_current_key("j")
    state.add("c")
    assert sorted(backend.keys("window-contents", w1)) == ["j", "k"]
    assert list(backend.keys("window-contents", w2)) == ["k"]
    assert list(backend.keys("window-contents")) == []
    assert list(backend.keys("unknown")) == []


@pytest.mark.parametrize("which", ["list", "reducing", "aggregating"])
def test_merge_namespaces(backend: KeyedStateBackend, which: str) -> None:
    descriptor: Any = {
        "list": ListStateDescriptor("s", Types.LONG()),
        "reducing": ReducingStateDescriptor("s", Sum(), Types.LONG()),
        "aggregating": AggregatingStateDescriptor("s", Avg(), Types.PICKLED_BYTE_ARRAY()),
    }[which]
    state = backend.get_state(descriptor)
    a, b, c, target = TimeWindow(0, 5), TimeWindow(3, 8), TimeWindow(20, 25), TimeWindow(0, 8)
    backend.set_current_key("k")
    for ns, values in ((a, [1, 2]), (b, [3]), (c, [100]), (target, [4])):
        state.set_current_namespace(ns)
        for v in values:
            state.add(v)
    backend.merge_namespaces(descriptor, target, [a, b])
    state.set_current_namespace(target)
    expected = {"list": [4, 1, 2, 3], "reducing": 10, "aggregating": 2.5}[which]
    got = state.get()
    assert (sorted(got) if which == "list" else got) == (sorted(expected) if which == "list" else expected)
    for ns in (a, b):
        state.set_current_namespace(ns)
        assert state.get() in (None, [])
    state.set_current_namespace(c)
    assert state.get() in ([100], 100, 100.0)
    # merging into an empty target moves the content
    backend.merge_namespaces(descriptor, TimeWindow(20, 30), [c])
    state.set_current_namespace(TimeWindow(20, 30))
    assert state.get() in ([100], 100, 100.0)


def test_merge_namespaces_rejects_value_state(backend: KeyedStateBackend) -> None:
    d = ValueStateDescriptor("v")
    with pytest.raises(UsageError, match="merge_namespaces"):
        backend.merge_namespaces(d, 1, [2])


# --------------------------------------------------------------------------- key groups and iteration


def test_keys_and_apply_to_all_keys(backend: KeyedStateBackend) -> None:
    d = ValueStateDescriptor("v", Types.LONG())
    state = backend.get_state(d)
    for k in range(50):
        backend.set_current_key(k)
        state.update(k * 10)
    backend.set_current_key(3)
    assert sorted(backend.keys("v")) == list(range(50))
    seen: dict[Any, Any] = {}

    def visit(key: Any, s: Any) -> None:
        seen[key] = s.value()
        if key % 2:
            s.clear()

    backend.apply_to_all_keys(None, d, visit)
    assert seen == {k: k * 10 for k in range(50)}
    assert backend.current_key == 3
    assert sorted(backend.keys("v")) == list(range(0, 50, 2))


def test_current_key_group(backend: KeyedStateBackend) -> None:
    backend.set_current_key("user-7")
    assert backend.current_key == "user-7"
    assert backend.current_key_group == assign_to_key_group("user-7", MAX_P)


# --------------------------------------------------------------------------- snapshots


def _fill(backend: KeyedStateBackend, keys: list[Any]) -> None:
    v = backend.get_state(ValueStateDescriptor("v"))
    lst = backend.get_state(ListStateDescriptor("l"))
    m = backend.get_state(MapStateDescriptor("m"))
    r = backend.get_state(ReducingStateDescriptor("r", Sum()))
    a = backend.get_state(AggregatingStateDescriptor("a", Avg()))
    for k in keys:
        backend.set_current_key(k)
        v.update(("value", k))
        lst.add_all([k, k + 1])
        lst.set_current_namespace(TimeWindow(0, 10))
        lst.add(-k)
        lst.set_current_namespace(None)
        m.put_all({"x": k, "y": str(k)})
        r.add(k)
        r.add(1)
        a.add(k)


def _read_all(backend: KeyedStateBackend, keys: list[Any]) -> list[Any]:
    v = backend.get_state(ValueStateDescriptor("v"))
    lst = backend.get_state(ListStateDescriptor("l"))
    m = backend.get_state(MapStateDescriptor("m"))
    r = backend.get_state(ReducingStateDescriptor("r", Sum()))
    a = backend.get_state(AggregatingStateDescriptor("a", Avg()))
    out = []
    for k in keys:
        backend.set_current_key(k)
        lst.set_current_namespace(TimeWindow(0, 10))
        windowed = list(lst.get())
        lst.set_current_namespace(None)
        out.append((k, v.value(), list(lst.get()), windowed, sorted(m.items(), key=repr), r.get(), a.get()))
    return out


def test_snapshot_restores_into_two_backends_that_split_the_range(make: Factory) -> None:
    source = make()
    keys = list(range(200))
    _fill(source, keys)
    snap = source.snapshot()
    expected = {row[0]: row for row in _read_all(source, keys)}
    left, right = KeyGroupRange(0, 63), KeyGroupRange(64, 127)
    b_left, b_right = make(left), make(right)
    b_left.restore([snap])
    b_right.restore([snap])
    left_keys = [k for k in keys if assign_to_key_group(k, MAX_P) in left]
    right_keys = [k for k in keys if assign_to_key_group(k, MAX_P) in right]
    assert left_keys and right_keys
    assert _read_all(b_left, left_keys) == [expected[k] for k in left_keys]
    assert _read_all(b_right, right_keys) == [expected[k] for k in right_keys]
    assert b_left.number_of_keys() + b_right.number_of_keys() == source.number_of_keys()
    assert sorted(b_left.keys("v")) == left_keys
    # and the two halves snapshot back into the whole
    merged = make()
    merged.restore([b_left.snapshot(), b_right.snapshot()])
    assert merged.snapshot() == snap


def test_snapshot_of_a_key_group_range(backend: KeyedStateBackend) -> None:
    _fill(backend, list(range(100)))
    part = backend.snapshot(KeyGroupRange(10, 20))
    assert part.key_group_range == KeyGroupRange(10, 20)
    assert all(10 <= kg <= 20 for kg, _ in part.key_groups)
    full = backend.snapshot()
    assert part.key_groups == tuple((kg, e) for kg, e in full.key_groups if 10 <= kg <= 20)
    assert part.entries(part.key_groups[0][0]) == part.key_groups[0][1]
    assert part.entries(127) == ()


def test_snapshot_is_deterministic_and_picklable(backend: KeyedStateBackend) -> None:
    _fill(backend, list(range(30)))
    s1 = backend.snapshot()
    s2 = backend.snapshot()
    assert s1 == s2
    assert decode_value(encode_value(s1), trusted=False) == s1  # plain data in a state file
    assert s1.size_bytes() > 0 and s1.number_of_entries() == backend.number_of_keys()
    # writes after the snapshot do not change it
    backend.set_current_key(1)
    backend.get_state(ValueStateDescriptor("v")).update("changed")
    assert s1 == s2 and backend.snapshot() != s1


@pytest.mark.parametrize("other", KINDS)
def test_cross_backend_restore(make: Factory, other: str) -> None:
    keys: list[Any] = [*range(60), "s", ("t", 1)]
    source = make()
    _fill(source, [k for k in keys if isinstance(k, int)])
    vs = source.get_state(ValueStateDescriptor("v"))
    for k in ("s", ("t", 1)):
        source.set_current_key(k)
        vs.update(k)
    snap = source.snapshot()
    there = make(kind_=other)
    there.restore([snap])
    assert there.snapshot() == snap
    back = make()
    back.restore([there.snapshot()])
    assert back.snapshot() == snap
    ints = [k for k in keys if isinstance(k, int)]
    assert _read_all(back, ints) == _read_all(source, ints)


def test_restore_rejects_other_max_parallelism(make: Factory) -> None:
    snap = make(KeyGroupRange(0, 255), max_parallelism=256).snapshot()
    with pytest.raises(UsageError, match="max_parallelism 256"):
        make().restore([snap])


def test_restored_state_must_be_registered_with_the_same_kind(make: Factory) -> None:
    source = make()
    _fill(source, [1])
    target = make()
    target.restore([source.snapshot()])
    with pytest.raises(UsageError, match="restored as list state"):
        target.get_state(ValueStateDescriptor("l"))


# --------------------------------------------------------------------------- TTL


def _ttl(ms: int, **opts: Any) -> StateTtlConfig:
    builder = StateTtlConfig.new_builder(Time.milliseconds(ms))
    if opts.get("on_read"):
        builder = builder.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
    if opts.get("return_expired"):
        builder = builder.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
    if opts.get("cleanup"):
        builder = builder.cleanup_full_snapshot()
    return builder.build()


def test_ttl_value_expires(backend: KeyedStateBackend, clock: Clock) -> None:
    d = ValueStateDescriptor("v", Types.LONG())
    d.enable_time_to_live(_ttl(100))
    state = backend.get_state(d)
    backend.set_current_key(1)
    state.update(5)
    clock.now += 99
    assert state.value() == 5
    clock.now += 1
    assert state.value() is None
    assert backend.number_of_keys() == 0  # removed when read


def test_ttl_update_on_read_extends_life(backend: KeyedStateBackend, clock: Clock) -> None:
    d = ValueStateDescriptor("v")
    d.enable_time_to_live(_ttl(100, on_read=True))
    state = backend.get_state(d)
    backend.set_current_key(1)
    state.update(5)
    for _ in range(5):
        clock.now += 60
        assert state.value() == 5
    clock.now += 100
    assert state.value() is None


def test_ttl_return_expired_if_not_cleaned_up(backend: KeyedStateBackend, clock: Clock) -> None:
    d = ValueStateDescriptor("v")
    d.enable_time_to_live(_ttl(10, return_expired=True))
    state = backend.get_state(d)
    backend.set_current_key(1)
    state.update("old")
    clock.now += 50
    assert state.value() == "old"  # returned once, then cleaned up
    assert state.value() is None


def test_ttl_list_and_map_expire_per_element(backend: KeyedStateBackend, clock: Clock) -> None:
    ld = ListStateDescriptor("l")
    ld.enable_time_to_live(_ttl(100))
    md = MapStateDescriptor("m")
    md.enable_time_to_live(_ttl(100))
    lst, m = backend.get_state(ld), backend.get_state(md)
    backend.set_current_key("k")
    lst.add("early")
    m.put("early", 1)
    clock.now += 60
    lst.add("late")
    m.put("late", 2)
    assert list(lst.get()) == ["early", "late"]
    clock.now += 60
    assert list(lst.get()) == ["late"]
    assert m.items() == [("late", 2)] and not m.contains("early") and m.get("early") is None
    clock.now += 100
    assert list(lst.get()) == [] and m.is_empty()
    assert backend.number_of_keys() == 0


def test_ttl_cleanup_in_full_snapshot(make: Factory, clock: Clock) -> None:
    backend = make()
    d = ValueStateDescriptor("v")
    d.enable_time_to_live(_ttl(100, cleanup=True))
    ld = ListStateDescriptor("l")
    ld.enable_time_to_live(_ttl(100, cleanup=True))
    state, lst = backend.get_state(d), backend.get_state(ld)
    for k in range(10):
        backend.set_current_key(k)
        state.update(k)
        lst.add_all([k, k])
    clock.now += 50
    for k in range(5):
        backend.set_current_key(k)
        state.update(k)
        lst.add(k)
    clock.now += 60  # keys 5..9 expired, keys 0..4 alive (and their first list elements expired)
    snap = backend.snapshot()
    restored = make()
    restored.restore([snap])
    assert sorted(restored.keys("v")) == list(range(5))
    assert restored.number_of_keys() == 5 + 5
    rl = restored.get_state(ld)
    restored.set_current_key(3)
    assert list(rl.get()) == [3]
    # the restored state keeps the original timestamps
    clock.now += 50
    rv = restored.get_state(d)
    assert rv.value() is None


def test_ttl_builder_api() -> None:
    cfg = (
        StateTtlConfig.new_builder(Duration.of_seconds(1))
        .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
        .set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
        .cleanup_full_snapshot()
        .cleanup_incrementally(10, False)
        .build()
    )
    assert cfg.get_ttl() == Duration.of_seconds(1)
    assert cfg.get_update_type() is StateTtlConfig.UpdateType.OnReadAndWrite
    assert cfg.get_state_visibility() is StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
    assert cfg.cleanup_in_full_snapshot and cfg.is_enabled()


# --------------------------------------------------------------------------- clear leaves nothing


def test_clear_leaves_nothing_behind(backend: KeyedStateBackend) -> None:
    keys = list(range(40))
    _fill(backend, keys)
    assert backend.number_of_keys() > 0
    names = ["v", "l", "m", "r", "a"]
    states = {n: backend._states[n] for n in names}
    for k in keys:
        backend.set_current_key(k)
        for n, s in states.items():
            s.clear()
            if n == "l":
                s.set_current_namespace(TimeWindow(0, 10))
                s.clear()
                s.set_current_namespace(None)
    assert backend.number_of_keys() == 0
    assert backend.snapshot().key_groups == ()
    if isinstance(backend, LmdbKeyedStateBackend):
        backend.commit()
        with backend._env.begin() as txn:
            for db in backend._dbs.values():
                assert txn.stat(db)["entries"] == 0
    else:
        assert isinstance(backend, HeapKeyedStateBackend)
        assert all(not m for table in backend._tables.values() for m in table)


def test_statistics(backend: KeyedStateBackend) -> None:
    _fill(backend, [1, 2])
    stats = backend.statistics()
    assert stats.number_of_states == 5
    assert stats.number_of_entries == backend.number_of_keys()
    assert stats.backend in KINDS


# --------------------------------------------------------------------------- LMDB specifics


def test_lmdb_batches_writes_and_reads_its_own_writes(tmp_path: Path) -> None:
    b = LmdbKeyedStateBackend(
        "op", MAX_P, KeyGroupRange(0, MAX_P - 1), path=tmp_path / "db", commit_every_ops=10
    )
    try:
        s = b.get_state(ValueStateDescriptor("v"))
        for k in range(25):
            b.set_current_key(k)
            s.update(k)
            assert s.value() == k  # seen before any commit
        assert b.statistics().extra["pending_writes"] == 5
        commits = b.statistics().extra["commits"]
        b.snapshot()
        assert b.statistics().extra["pending_writes"] == 0
        assert b.statistics().extra["commits"] == commits + 1
    finally:
        b.dispose()
    assert not (tmp_path / "db").exists()


def test_lmdb_map_grows_on_demand(tmp_path: Path) -> None:
    b = LmdbKeyedStateBackend(
        "op",
        MAX_P,
        KeyGroupRange(0, MAX_P - 1),
        path=tmp_path / "db",
        map_size_bytes=1 << 16,
        commit_every_ops=500,
    )
    try:
        s = b.get_state(ValueStateDescriptor("v"))
        for k in range(3000):
            b.set_current_key(k)
            s.update("x" * 200)
        assert b.number_of_keys() == 3000
        assert b.statistics().extra["map_resizes"] > 0
        b.set_current_key(1234)
        assert s.value() == "x" * 200
    finally:
        b.dispose()


def test_lmdb_close_keeps_files_and_wipes_on_reopen(tmp_path: Path) -> None:
    b = LmdbKeyedStateBackend("op", MAX_P, KeyGroupRange(0, MAX_P - 1), path=tmp_path / "db")
    b.get_state(ValueStateDescriptor("v"))
    b.set_current_key(1)
    b._states["v"].update_internal(1)  # type: ignore[attr-defined]
    b.close()
    assert (tmp_path / "db" / "data.mdb").exists()
    with pytest.raises(UsageError, match="closed"):
        b.get_state(ValueStateDescriptor("v"))
    again = LmdbKeyedStateBackend("op", MAX_P, KeyGroupRange(0, MAX_P - 1), path=tmp_path / "db")
    assert again.number_of_keys() == 0
    again.dispose()


def test_create_keyed_backend_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a state backend"):
        create_keyed_backend("memory", "op", MAX_P, KeyGroupRange(0, 1))
    with pytest.raises(UsageError, match="needs a path"):
        create_keyed_backend("lmdb", "op", MAX_P, KeyGroupRange(0, 1))
    with pytest.raises(UsageError, match="exceeds max_parallelism"):
        create_keyed_backend("hashmap", "op", 4, KeyGroupRange(0, 7))


def test_keys_of_different_types_stay_apart(backend: KeyedStateBackend) -> None:
    """The key-group cache must not confuse 1, True and 1.0 (equal in Python, different keys)."""
    state = backend.get_state(ValueStateDescriptor("v"))
    for key in (1, True, 1.0, "1", 1, True):
        backend.set_current_key(key)
        assert backend.current_key_group == assign_to_key_group(key, MAX_P)
        state.update(repr(key) if state.value() is None else state.value() + "+")
    values = {}
    for key in (1, True, 1.0, "1"):
        backend.set_current_key(key)
        values[repr(key)] = state.value()
    assert values == {"1": "1+", "True": "True+", "1.0": "1.0", "'1'": "'1'"}


def test_an_outside_key_is_rejected_every_time(make: Factory) -> None:
    backend = make(KeyGroupRange(0, 63))
    outside = next(k for k in range(1000) if assign_to_key_group(k, MAX_P) >= 64)
    for _ in range(2):
        with pytest.raises(ProtocolViolation):
            backend.set_current_key(outside)


def test_overlapping_async_snapshots_each_hold_their_barrier(backend: KeyedStateBackend) -> None:
    """Two checkpoints in flight at once (the second taken before the first is written):
    each holds the state of its own barrier, whatever is written after it."""
    count = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
    items = backend.get_state(ListStateDescriptor("items", Types.LONG()))
    keys = list(range(300))

    def write(round_: int) -> None:
        for k in keys:
            backend.set_current_key(k)
            count.update(k * 10 + round_)
            items.add(round_)

    write(1)
    first_expected = backend.snapshot()
    first = backend.snapshot_async()
    write(2)
    second_expected = backend.snapshot()
    second = backend.snapshot_async()
    write(3)
    assert second.result() == second_expected
    assert first.result() == first_expected
    assert first_expected != second_expected

"""Properties of the internal timer service: firing order against a model, and redistribution."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import weir.state.state_file  # noqa: F401  (registers the snapshot types)
from weir.keys.reference import KeyGroupRange
from weir.state.serde import decode_value, encode_value
from weir.time.timers import InternalTimerService

MAX_KEY_GROUPS = 16

timer_specs = st.tuples(
    st.integers(0, 9),  # key
    st.integers(0, 2),  # namespace
    st.integers(0, 50),  # timestamp
    st.booleans(),  # event time?
)


def key_group_of(key: int) -> int:
    return (key * 7) % MAX_KEY_GROUPS


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from(["add", "add", "delete", "advance"]), timer_specs), max_size=100))
def test_timers_fire_as_a_sorted_model_says(operations: list) -> None:
    service = InternalTimerService()
    model: dict[tuple[bool, int, int, int], int] = {}  # (event, key, ns, ts) -> registration order
    order = 0
    watermark = 0
    now = 0
    for op, (key, ns, ts, event) in operations:
        kg = key_group_of(key)
        if op == "add":
            register = service.register_event_time_timer if event else service.register_processing_time_timer
            added = register(key, kg, ns, ts)
            assert added == ((event, key, ns, ts) not in model)
            if added:
                order += 1
                model[(event, key, ns, ts)] = order
        elif op == "delete":
            delete = service.delete_event_time_timer if event else service.delete_processing_time_timer
            assert delete(key, kg, ns, ts) == ((event, key, ns, ts) in model)
            model.pop((event, key, ns, ts), None)
        else:
            if event:
                watermark += ts // 5
                fired = service.advance_watermark(watermark)
                until = watermark
            else:
                now += ts // 5
                fired = service.advance_processing_time(now)
                until = now
            expected = sorted(
                ((t, o, k, n) for (e, k, n, t), o in model.items() if e == event and t <= until),
            )
            assert [(t.timestamp, t.key, t.namespace) for t in fired] == [
                (t, k, n) for t, _, k, n in expected
            ]
            for t, _, k, n in expected:
                del model[(event, k, n, t)]
        assert service.number_of_timers() == len(model)
        processing = [t for (e, _, _, t) in model if not e]
        assert service.next_processing_time() == (min(processing) if processing else None)


@settings(max_examples=200)
@given(st.lists(timer_specs, max_size=80), st.integers(0, MAX_KEY_GROUPS))
def test_snapshot_split_over_two_ranges_keeps_every_timer_exactly_once(specs: list, split: int) -> None:
    service = InternalTimerService(KeyGroupRange(0, MAX_KEY_GROUPS - 1))
    for key, ns, ts, event in specs:
        register = service.register_event_time_timer if event else service.register_processing_time_timer
        register(key, key_group_of(key), ns, ts)
    snapshot = decode_value(encode_value(service.snapshot()))
    ranges = [
        KeyGroupRange(0, split - 1) if split > 0 else KeyGroupRange.EMPTY,
        KeyGroupRange(split, MAX_KEY_GROUPS - 1) if split < MAX_KEY_GROUPS else KeyGroupRange.EMPTY,
    ]
    parts = [InternalTimerService.from_snapshots([snapshot], r) for r in ranges]
    assert sum(p.number_of_timers() for p in parts) == service.number_of_timers()

    def contents(s: InternalTimerService) -> list[tuple[str, int, int, int, int]]:
        snap = s.snapshot()
        return [("e", t.key, t.namespace, t.timestamp, t.key_group) for t in snap.event_time] + [
            ("p", t.key, t.namespace, t.timestamp, t.key_group) for t in snap.processing_time
        ]

    combined = contents(parts[0]) + contents(parts[1])
    assert len(combined) == len(set(combined))
    assert sorted(combined) == sorted(contents(service))
    for part, r in zip(parts, ranges):
        assert all(entry[4] in r for entry in contents(part))
    # Firing order within each part follows the original order restricted to it.
    original = [(t.timestamp, t.key, t.namespace) for t in service.snapshot().event_time]
    for part, r in zip(parts, ranges):
        fired = [(t.timestamp, t.key, t.namespace) for t in part.advance_watermark(1 << 62)]
        assert fired == [x for x in original if key_group_of(x[1]) in r]

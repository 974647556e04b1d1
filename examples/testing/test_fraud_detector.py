"""Testing a KeyedProcessFunction with an operator test harness: no cluster, time moves by hand.

.venv/bin/pytest examples/testing -q
"""

from __future__ import annotations

from fraud_detector import FLAG, ONE_MINUTE_MS, FraudDetector

from weir.testing import KeyedOneInputStreamOperatorTestHarness, RegisteredTimer


def harness(parallelism: int = 1, subtask_index: int = 0) -> KeyedOneInputStreamOperatorTestHarness:
    return KeyedOneInputStreamOperatorTestHarness(
        FraudDetector(), key_selector=lambda t: t[0], parallelism=parallelism, subtask_index=subtask_index
    )


def test_small_then_large_within_a_minute_raises_an_alert() -> None:
    with harness() as h:
        h.process_element(("alice", 0.50))
        assert h.get_keyed_state(FLAG, "alice") is True
        assert h.processing_time_timers() == [RegisteredTimer(ONE_MINUTE_MS, "alice")]
        h.process_element(("alice", 900.00))
        assert h.extract_output_values() == [("alice", "small then large")]
        assert h.num_processing_time_timers() == 0  # the alert cleaned the timer up


def test_the_flag_expires_after_a_minute() -> None:
    with harness() as h:
        h.process_element(("bob", 0.10))
        h.set_processing_time(ONE_MINUTE_MS)  # the timer fires and clears the flag
        h.process_element(("bob", 900.00))
        assert h.extract_output_values() == []
        assert h.get_keyed_state(FLAG, "bob") is None


def test_state_and_timers_survive_a_restore_at_another_parallelism() -> None:
    before = harness()
    before.open()
    before.process_element(("carol", 0.20))
    snapshot = before.snapshot()

    after = [harness(parallelism=2, subtask_index=i).restore(snapshot) for i in range(2)]
    for h in after:
        h.open()
    (owner,) = [h for h in after if h.owns_key("carol")]
    assert owner.processing_time_timers() == [RegisteredTimer(ONE_MINUTE_MS, "carol")]
    owner.process_element(("carol", 700.00))
    assert owner.extract_output_values() == [("carol", "small then large")]

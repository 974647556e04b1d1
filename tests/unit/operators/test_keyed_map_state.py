"""A map after key_by: its state follows the record's key however it obtains state, and a map
that keeps no state does not set the current key at all."""

from __future__ import annotations

from typing import Any

import pytest

from weir.common import Types
from weir.datastream import MapFunction
from weir.datastream.state import ValueStateDescriptor
from weir.testing import KeyedOneInputStreamOperatorTestHarness

COUNT = ValueStateDescriptor("count", Types.LONG())
RECORDS = [("a", 1), ("b", 1), ("a", 1), ("c", 1), ("b", 1), ("a", 1)]
EXPECTED = [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2), ("a", 3)]


class CountInOpen(MapFunction):
    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(COUNT)

    def map(self, value: tuple[str, int]) -> Any:
        self.count.update((self.count.value() or 0) + 1)
        return (value[0], self.count.value())


class CountOnFirstUse(MapFunction):
    """Obtains its state inside map(), on the first record (and again on every call)."""

    def open(self, runtime_context: Any) -> None:
        self.runtime_context = runtime_context

    def map(self, value: tuple[str, int]) -> Any:
        count = self.runtime_context.get_state(COUNT)
        count.update((count.value() or 0) + 1)
        return (value[0], count.value())


class CountFromTheThirdRecord(MapFunction):
    """Stateless for two records, then counts: the state must see the right key from then on."""

    def open(self, runtime_context: Any) -> None:
        self.runtime_context = runtime_context
        self.seen = 0

    def map(self, value: tuple[str, int]) -> Any:
        self.seen += 1
        if self.seen < 3:
            return (value[0], 0)
        count = self.runtime_context.get_state(COUNT)
        count.update((count.value() or 0) + 1)
        return (value[0], count.value())


def run(function: MapFunction) -> tuple[list[Any], KeyedOneInputStreamOperatorTestHarness]:
    h = KeyedOneInputStreamOperatorTestHarness(function, key_selector=lambda v: v[0])
    h.open()
    h.process_elements(RECORDS[:3])
    h.process_elements(RECORDS[3:])
    return h.extract_output_values(), h


def test_state_obtained_in_open_follows_the_key() -> None:
    out, _ = run(CountInOpen())
    assert out == EXPECTED


def test_state_obtained_during_the_first_call_follows_the_key() -> None:
    out, h = run(CountOnFirstUse())
    assert out == EXPECTED
    assert h.get_keyed_state(COUNT, "a") == 3


def test_state_obtained_mid_batch_follows_the_key() -> None:
    out, h = run(CountFromTheThirdRecord())
    assert out == [("a", 0), ("b", 0), ("a", 1), ("c", 1), ("b", 1), ("a", 2)]
    assert {k: h.get_keyed_state(COUNT, k) for k in "abc"} == {"a": 2, "b": 1, "c": 1}


def test_a_stateless_map_after_key_by_never_sets_the_current_key() -> None:
    out, h = run(MapFunction.__new__(type("Identity", (MapFunction,), {"map": lambda self, v: v})))
    assert out == RECORDS
    assert h.context.keyed_backend.current_key is None


def test_state_obtained_mid_batch_follows_the_key_for_the_rest_of_that_batch() -> None:
    h = KeyedOneInputStreamOperatorTestHarness(CountFromTheThirdRecord(), key_selector=lambda v: v[0])
    h.open()
    h.process_elements(RECORDS)  # one batch: the switch to keyed state comes at its third record
    assert h.extract_output_values() == [("a", 0), ("b", 0), ("a", 1), ("c", 1), ("b", 1), ("a", 2)]
    assert {k: h.get_keyed_state(COUNT, k) for k in "abc"} == {"a": 2, "b": 1, "c": 1}


def test_a_failing_map_leaves_the_next_batch_unharmed() -> None:
    class FailOnce(MapFunction):
        def __init__(self) -> None:
            self.failed = False

        def map(self, value: tuple[str, int]) -> Any:
            if not self.failed and value[0] == "c":
                self.failed = True
                raise ValueError("boom")
            return value

    h = KeyedOneInputStreamOperatorTestHarness(FailOnce(), key_selector=lambda v: v[0])
    h.open()
    with pytest.raises(Exception, match="boom"):
        h.process_elements(RECORDS)
    h.process_elements(RECORDS)
    assert h.extract_output_values()[-6:] == RECORDS

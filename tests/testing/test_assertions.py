"""assert_output: multiset and ordered comparison with a readable diff."""

from __future__ import annotations

import pytest

from weir.errors import UsageError
from weir.testing import CollectingSink, assert_output, diff_output


def test_equal_outputs_pass_in_any_order() -> None:
    assert_output([3, 1, 2, 2], [2, 1, 2, 3])
    assert_output([{"a": [1, 2]}, [1, {2}]], [[1, {2}], {"a": [1, 2]}])  # unhashable records too
    assert not diff_output([("a", 1)], [("a", 1)])


def test_the_diff_names_missing_unexpected_and_duplicated_records() -> None:
    with pytest.raises(AssertionError) as failure:
        assert_output([("a", 1), ("b", 2), ("b", 2), ("c", 9)], [("a", 1), ("b", 2), ("d", 4), ("d", 4)])
    message = str(failure.value)
    assert message.splitlines() == [
        "output differs from expected (unordered): 4 expected, 4 actual",
        "  missing (1):",
        "    ('d', 4)  2× in expected, 0× in actual",
        "  unexpected (1):",
        "    ('c', 9)",
        "  duplicated (1):",
        "    ('b', 2)  1× in expected, 2× in actual",
    ]


def test_ordered_comparison_points_at_the_first_difference() -> None:
    assert_output([1, 2, 3], [1, 2, 3], ordered=True)
    with pytest.raises(AssertionError) as failure:
        assert_output([1, 3, 2, 4], [1, 2, 3, 4], ordered=True)
    message = str(failure.value)
    assert "order: first difference at position 1" in message
    assert "expected[0:4] = [1, 2, 3, 4]" in message
    assert "missing" not in message  # same records, other order


def test_long_sections_are_cut() -> None:
    with pytest.raises(AssertionError, match=r"\.\.\. and 30 more"):
        assert_output(list(range(50)), [])


def test_a_collecting_sink_is_read_directly_and_bad_input_is_refused() -> None:
    sink = CollectingSink()
    assert_output(sink, [])
    with pytest.raises(UsageError, match="CollectingSink or an iterable"):
        assert_output(42, [])

"""KeyGroupSelector: key -> key group -> subtask, the same with its string-key cache as without."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.codec.batch import Batch
from weir.core.functions import wrap_key_selector
from weir.keys import assign_key_to_parallel_operator
from weir.task.channel_selectors import KeyGroupSelector

keys = st.one_of(st.text(max_size=6), st.integers(-5, 5), st.booleans(), st.sampled_from([1.0, 0.0, -1.5]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(keys, max_size=20), max_size=6), st.integers(1, 7))
def test_every_batch_goes_where_the_formula_says_cache_or_not(
    batches: list[list[object]], channels: int
) -> None:
    selector = KeyGroupSelector(wrap_key_selector(lambda v: v), 128)
    for batch in batches:  # later batches hit the cache filled by earlier ones
        got = selector.select(Batch(list(batch)), channels).tolist()
        assert got == [assign_key_to_parallel_operator(k, 128, channels) for k in batch]


def test_a_str_key_and_an_equal_looking_key_of_another_type_are_told_apart() -> None:
    selector = KeyGroupSelector(wrap_key_selector(lambda v: v), 128)
    for batch in (["1", "True"], [1, True, 1.0], ["1", 1, True]):
        got = selector.select(Batch(batch), 4).tolist()
        assert got == [assign_key_to_parallel_operator(k, 128, 4) for k in batch]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.text(max_size=3), max_size=12), max_size=8))
def test_a_full_cache_starts_again_and_routes_the_same(batches: list[list[str]]) -> None:
    selector = KeyGroupSelector(wrap_key_selector(lambda v: v), 128)
    selector.CACHE_ENTRIES = 4
    widest = 4  # a batch with more distinct keys than the bound fills the cache with them all
    for batch in batches:
        got = selector.select(Batch(list(batch)), 3).tolist()
        assert got == [assign_key_to_parallel_operator(k, 128, 3) for k in batch]
        widest = max(widest, len(set(batch)))
        assert len(selector._cache[3]) <= widest


def test_a_new_key_hashes_only_the_keys_not_seen_before(monkeypatch: object) -> None:
    from weir.task import channel_selectors

    hashed: list[list[object]] = []
    real = channel_selectors.java_hash_array

    def spy(keys: list[object]) -> object:
        hashed.append(list(keys))
        return real(keys)

    monkeypatch.setattr(channel_selectors, "java_hash_array", spy)  # type: ignore[attr-defined]
    selector = KeyGroupSelector(wrap_key_selector(lambda v: v), 128)
    selector.select(Batch(["a", "b", "a"]), 2)
    selector.select(Batch(["b", "c", "a", "c"]), 2)
    assert hashed == [["a", "b"], ["c"]]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=True), st.booleans()), max_size=30
    ),
    st.integers(1, 7),
    st.integers(0, 2),
)
def test_a_field_key_read_as_a_column_goes_where_the_record_key_goes(
    records: list[tuple[int, float, bool]], channels: int, index: int
) -> None:
    """weir.columnar's field(i) on a columnar batch hashes the column in one call: the same
    subtask as the key of each record (ints, floats with NaN, booleans)."""
    import numpy as np

    from weir import columnar as col
    from weir.codec.batch import TupleColumns

    columns = TupleColumns(
        [
            np.array([r[0] for r in records], np.int64),
            np.array([r[1] for r in records]),
            np.array([r[2] for r in records]),
        ]
        if records
        else [np.empty(0, np.int64), np.empty(0), np.empty(0, np.bool_)]
    )
    want = [assign_key_to_parallel_operator(r[index], 128, channels) for r in records]
    assert KeyGroupSelector(col.field(index), 128).select(Batch(columns), channels).tolist() == want
    # a PyFlink key selector returning the field is probed and read as the column too
    lambda_selector = KeyGroupSelector(wrap_key_selector(lambda r: r[index]), 128)
    assert lambda_selector.select(Batch(columns), channels).tolist() == want


def test_a_selector_that_is_not_what_the_probe_saw_is_called_per_record() -> None:
    """The probe sees ``r[0]``; on real records the selector does something else, which the
    check on the batch's first and last records catches."""
    import numpy as np

    from weir.codec.batch import TupleColumns

    def tricky(r: object) -> object:
        return r[0] if not isinstance(r, tuple) else r[1]  # type: ignore[index]

    columns = TupleColumns([np.arange(40, dtype=np.int64), np.arange(40, dtype=np.int64) * 7])
    got = KeyGroupSelector(wrap_key_selector(tricky), 128).select(Batch(columns), 4).tolist()
    assert got == [assign_key_to_parallel_operator(7 * i, 128, 4) for i in range(40)]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=4), min_size=1, max_size=30), st.integers(1, 5))
def test_a_column_of_string_keys_is_routed_without_building_records(words: list[str], channels: int) -> None:
    import numpy as np

    from weir import columnar as col
    from weir.codec.batch import TupleColumns

    columns = TupleColumns([list(words), np.arange(len(words))])
    want = [assign_key_to_parallel_operator(w, 128, channels) for w in words]
    for selector in (col.field(0), wrap_key_selector(lambda r: r[0])):
        assert KeyGroupSelector(selector, 128).select(Batch(columns), channels).tolist() == want
    assert columns._records is None  # the tuples were never built

"""Entries of one width as sorted rows of bytes (``weir.state.state_file.uniform_rows``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.state.state_file import uniform_rows


def reference_rows(
    key_groups: np.ndarray,
    keys: np.ndarray,
    namespaces: np.ndarray,
    namespace_of: np.ndarray | None,
    rank: np.ndarray,
    values: np.ndarray,
    head: bytes,
    key_group_prefix: bool,
) -> list[bytes]:
    """Each entry's bytes, built one by one, in the order of (key group, key bytes, namespace bytes)."""
    entries = []
    for i in range(len(key_groups)):
        namespace = namespaces[0 if namespace_of is None else namespace_of[i]].tobytes()
        group = int(key_groups[i]).to_bytes(2, "big") if key_group_prefix else b""
        entry = head + group + keys[i].tobytes() + namespace + values[i].tobytes()
        entries.append(((int(key_groups[i]), keys[i].tobytes(), namespace), entry))
    return [entry for _, entry in sorted(entries)]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 300),
    widths=st.tuples(st.integers(1, 12), st.integers(1, 6), st.integers(0, 10)),
    namespaces=st.integers(1, 4),
    head=st.binary(min_size=0, max_size=7),
    key_group_prefix=st.booleans(),
    int_keys=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_rows_hold_each_entrys_bytes_in_key_group_key_and_namespace_order(
    n: int,
    widths: tuple[int, int, int],
    namespaces: int,
    head: bytes,
    key_group_prefix: bool,
    int_keys: bool,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    k, ns, v = widths
    if int_keys:  # an encoded int64: a tag byte and 8 big-endian bytes (``_sortable``'s fast path)
        k = 9
        keys = np.empty((n, 9), np.uint8)
        keys[:, 0] = 3
        keys[:, 1:] = rng.integers(-50, 50, n).astype(">i8").view(np.uint8).reshape(n, 8) ^ 0x80
    else:
        keys = rng.integers(0, 4, (n, k), dtype=np.uint8)  # few values: many equal keys
    table = np.unique(rng.integers(0, 256, (namespaces, ns), dtype=np.uint8), axis=0)
    rank = np.argsort(np.argsort(np.ascontiguousarray(table).view(f"S{ns}").ravel(), kind="stable"))
    namespace_of = None if len(table) == 1 else rng.integers(0, len(table), n)
    # entries are distinct (key group, key, namespace): drop repeats
    key_groups = rng.integers(0, 6, n).astype(np.int64)
    seen, keep = set(), []
    for i in range(n):
        ident = (int(key_groups[i]), keys[i].tobytes(), 0 if namespace_of is None else int(namespace_of[i]))
        if ident not in seen:
            seen.add(ident)
            keep.append(i)
    keep_at = np.array(keep, np.int64)
    key_groups, keys = key_groups[keep_at], keys[keep_at]
    namespace_of = None if namespace_of is None else namespace_of[keep_at]
    values = rng.integers(0, 256, (len(keep), v), dtype=np.uint8)

    groups, bounds, rows = uniform_rows(
        key_groups, keys, table, namespace_of, rank, values, head, key_group_prefix
    )

    expected = reference_rows(key_groups, keys, table, namespace_of, rank, values, head, key_group_prefix)
    assert [row.tobytes() for row in rows] == expected
    assert groups == sorted(set(key_groups.tolist()))
    assert bounds[0] == 0 and bounds[-1] == len(expected)
    for group, start, end in zip(groups, bounds, bounds[1:]):
        assert (np.sort(key_groups)[start:end] == group).all()

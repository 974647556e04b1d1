"""Native pane sections (``weir.state.panes``): a vectorized window's pane log written into a
checkpoint as it holds it, read back as the canonical entries and timers."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

from tests.property.test_aggregates_properties import store
from tests.unit.operators.test_columnar_aggregates import count_and_sum_window
from tests.unit.operators.test_vector_window import Run
from weir.checkpoint.metadata import FileHandle
from weir.checkpoint.storage import CheckpointStorage
from weir.codec.batch import Batch, TupleColumns
from weir.core.window import TimeWindow
from weir.errors import UsageError
from weir.state import serde
from weir.state.panes import (
    NATIVE_COUNT,
    NATIVE_FIRED,
    NATIVE_KEY,
    NATIVE_SEQ,
    NATIVE_SLOTS,
    NATIVE_START,
    KeyedWithPanes,
    NativePanes,
    canonical_payload,
)
from weir.state.serde import UntrustedStateError, decode_value, encode_parts, encode_value
from weir.state.state_file import decode_state_file, encode_state_file, state_file_parts


def table_of(rng: np.random.Generator, n: int, floats: tuple[bool, ...], wide: bool) -> np.ndarray:
    """A pane table of ``n`` rows: window starts on a 1 s grid, keys (any int64 if ``wide``),
    counts, fired flags, int slots and float slots (their bits)."""
    t = np.empty((n, NATIVE_SLOTS + len(floats)), np.int64)
    t[:, NATIVE_START] = rng.integers(-5, 40, n) * 1_000
    t[:, NATIVE_KEY] = rng.integers(-(1 << 63), (1 << 63) - 1, n) if wide else rng.integers(0, 300, n)
    t[:, NATIVE_SEQ] = np.arange(n)
    t[:, NATIVE_COUNT] = rng.integers(1, 9, n)
    t[:, NATIVE_FIRED] = rng.integers(0, 2, n)
    for j, is_float in enumerate(floats):
        column = rng.normal(size=n).view(np.int64) if is_float else rng.integers(-(1 << 40), 1 << 40, n)
        t[:, NATIVE_SLOTS + j] = column
    return t


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("floats", [(), (False,), (True, False, True)])
@pytest.mark.parametrize("n", [0, 1, 5_000])
def test_a_native_section_reads_back_as_written_and_its_pieces_are_its_bytes(
    n: int, floats: tuple[bool, ...], wide: bool
) -> None:
    table = table_of(np.random.default_rng(n + len(floats)), n, floats, wide)
    panes = NativePanes.of_table("window-contents", 1_000, 700, True, 128, floats, None, table)
    data = encode_value(panes)
    assert b"".join(encode_parts(panes)) == data
    back = decode_value(data, trusted=False)
    assert (back.state_name, back.size, back.lateness, back.event_time, back.max_parallelism) == (
        "window-contents", 1_000, 700, True, 128,
    )  # fmt: skip
    assert back.floats == floats and back.slot_keys is None
    got = back.table()
    assert (
        got.shape == table.shape and (np.delete(got, NATIVE_SEQ, 1) == np.delete(table, NATIVE_SEQ, 1)).all()
    )


def test_a_native_section_narrows_each_column_to_what_its_values_need() -> None:
    """Window starts in steps of the window, small keys, counts and sums: far fewer bytes than
    the table's eight per cell."""
    table = table_of(np.random.default_rng(1), 100_000, (False,), wide=False)
    table[:, NATIVE_SLOTS] = table[:, NATIVE_SLOTS] % 1_000
    data = encode_value(NativePanes.of_table("w", 1_000, 0, True, 128, (False,), None, table))
    assert len(data) < table.nbytes / 6
    assert (decode_value(data).table()[:, NATIVE_SLOTS] == table[:, NATIVE_SLOTS]).all()


def test_a_big_column_is_a_view_in_the_pieces_not_a_copy() -> None:
    table = table_of(np.random.default_rng(2), 200_000, (), wide=True)
    parts = encode_parts(NativePanes.of_table("w", 1_000, 0, True, 128, (), None, table))
    assert any(isinstance(p, memoryview) and p.nbytes == 200_000 * 8 for p in parts)  # the keys


def test_key_slots_travel_with_the_section_and_an_opaque_one_is_refused_untrusted() -> None:
    table = table_of(np.random.default_rng(3), 50, (), wide=False)
    table[:, NATIVE_KEY] %= 3
    keys = ("a", ("b", 2), 3.5)
    back = decode_value(
        encode_value(NativePanes.of_table("w", 1_000, 0, True, 128, (), keys, table)), trusted=False
    )
    assert back.slot_keys == keys
    opaque = (range(3),)  # pickled: only code rebuilds it
    table[:, NATIVE_KEY] = 0
    data = encode_value(NativePanes.of_table("w", 1_000, 0, True, 128, (), opaque, table))
    with pytest.raises(UntrustedStateError):
        decode_value(data, trusted=False)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda f: (*f[:7], f[7] + 1, f[8]), "rows"),
        (lambda f: (*f[:8], f[8][:-1]), "columns"),
        (lambda f: (*f[:8], (*f[8][:2], (0, 1, np.zeros(4, np.float64)), *f[8][3:])), "column 3"),
        (lambda f: (*f[:8], ((0, 0, f[8][0][2]), *f[8][1:])), "column 0"),
        (lambda f: (*f[:5], (1, 0), *f[6:]), "float flags"),
        (lambda f: (f[0], "1000", *f[2:]), "window size"),
    ],
)
def test_a_damaged_native_section_fails_with_what_is_wrong(change: Any, problem: str) -> None:
    table = table_of(np.random.default_rng(4), 4, (False,), wide=False)
    panes = NativePanes.of_table("w", 1_000, 0, True, 128, (False,), None, table)
    damaged = change(tuple(getattr(panes, f) for f in serde._by_type[NativePanes].fields))
    data = b"\x08" + serde._encode_str("weir.NativePanes") + encode_value(tuple(damaged))
    with pytest.raises(UsageError, match="native panes") as caught:
        decode_value(data, trusted=False)
    assert problem.split()[0] in str(caught.value)


def test_a_key_slot_past_the_keys_is_refused() -> None:
    table = table_of(np.random.default_rng(5), 4, (), wide=False)
    table[:, NATIVE_KEY] = [0, 1, 2, 3]
    with pytest.raises(UsageError, match="key slot past the 3 keys"):
        NativePanes.of_table("w", 1_000, 0, True, 128, (), ("a", "b", "c"), table)


def expected_canonical(table: np.ndarray, size: int, lateness: int) -> tuple[dict[Any, Any], list[Any]]:
    """Per (key, window) the accumulator ``[count, sum]``, and the timers (timestamp, key, window)
    of the general mode's rules, built one pane at a time."""
    entries, timers = {}, []
    for start, key, _, count, fired, total in table.tolist():
        window = TimeWindow(start, start + size)
        entries[(key, window)] = [count, total]
        if not fired:
            timers.append((window.max_timestamp(), key, window))
        if lateness:
            timers.append((window.max_timestamp() + lateness, key, window))
    return entries, sorted(timers, key=repr)


@pytest.mark.parametrize(
    ("keys", "values"),
    [
        ((0, 5_000), (-9, 9)),  # columns of one and two bytes
        ((-(1 << 40), 1 << 40), (-(1 << 20), 1 << 20)),  # of four and eight
        ((-(1 << 63), (1 << 63) - 1), (-(1 << 50), 1 << 50)),  # keys over the whole int64 range
    ],
)
def test_a_window_operators_native_checkpoint_reads_back_as_its_panes_entries_and_timers(
    keys: tuple[int, int], values: tuple[int, int]
) -> None:
    """The section an operator's barrier makes, written as a state file and read back
    untrusted, is the canonical keyed state and timers of every live pane, also after the job
    went on writing the pane log (the section is a copy)."""
    with store("hash"):  # the pane log, whatever the keys
        native_checkpoint_reads_back(keys, values)


def native_checkpoint_reads_back(keys: tuple[int, int], values: tuple[int, int]) -> None:
    run = Run(count_and_sum_window(lateness=5_000))
    rng = np.random.default_rng(6)
    n = 30_000
    times = np.arange(n, dtype=np.int64) * 3
    pool = rng.integers(*keys, 5_000, dtype=np.int64)  # a key comes again, in several windows
    run.op.process_batch(Batch(TupleColumns([rng.choice(pool, n), rng.integers(*values, n)]), times))
    run.watermark(40_000)  # some windows fired
    run.op.defer_pane_snapshots = True
    run.op.prepare_snapshot_pre_barrier(1)
    panes, run.op.pane_snapshot = run.op.pane_snapshot, None
    assert panes.native is not None
    live = run.op.panes.export()
    keyed = panes.native_keyed(run.backend.snapshot_async())
    run.op.process_batch(Batch(TupleColumns([rng.choice(pool, n), rng.integers(*values, n)]), times))
    section = keyed.for_file()
    assert isinstance(section, KeyedWithPanes) and section.panes.rows == len(live)
    widths = {values.dtype.itemsize for _, _, values in section.panes.columns}
    assert widths >= ({1, 2} if keys[1] < 1 << 16 else {8})
    payload = decode_state_file(encode_state_file({"keyed": section, "timers": None}), "test", trusted=False)
    canonical_payload(payload)
    got = {}
    for _, group in payload["keyed"].key_groups:
        for _, key, namespace, _, value in group:
            got[(serde.decode_key(key), serde.decode_key(namespace))] = serde.decode_value(value)
    table = np.stack(
        [live.starts, live.keys, np.zeros(len(live), np.int64), live.counts, live.fired, live.accs[0][:, 0]],
        axis=1,
    )
    entries, timers = expected_canonical(table, 1_000, 5_000)
    assert got == entries
    fired = int(live.fired.sum())
    assert 0 < fired < len(live)  # both kinds of pane are in it
    stored = sorted(((t.timestamp, t.key, t.namespace) for t in payload["timers"].event_time), key=repr)
    assert stored == timers


def test_state_file_pieces_are_the_files_bytes_and_their_handle(tmp_path: Any) -> None:
    table = table_of(np.random.default_rng(7), 100_000, (True,), wide=True)
    payload = {
        "keyed": KeyedWithPanes(None, NativePanes.of_table("w", 1_000, 0, True, 128, (True,), None, table))
    }
    parts = state_file_parts(payload)
    data = encode_state_file(payload)
    assert b"".join(parts) == data
    storage = CheckpointStorage(tmp_path, "job")
    handle = storage.write_state_file(1, "op-0.state", parts)
    assert handle == FileHandle.of(handle.path, data)
    assert storage.read_state_file(handle) == data
    with pytest.raises(UsageError, match="pieces must be bytes or memoryviews"):
        storage.write_state_file(1, "op-1.state", [data, "text"])  # type: ignore[list-item]


def test_the_copy_space_hands_a_mapping_to_a_copy_only_once_the_copy_before_is_gone() -> None:
    from weir.state import unforked

    space = unforked.CopySpace(6)
    a = space.take(1_000)
    b = space.take(1_000)  # ``a`` holds a copy
    assert a.ctypes.data != b.ctypes.data and len(a) >= 1_000 and a.shape[1] == 6
    space.give_back(a)
    assert space.take(900).ctypes.data == a.ctypes.data
    space.give_back(b)
    bigger = space.take(len(b) + 1)  # more than either reserves: a mapping of its own
    assert bigger.ctypes.data not in (a.ctypes.data, b.ctypes.data) and len(bigger) > len(b)
    assert [busy for _, _, busy in space.regions()] == [True, True]  # the smaller free one went
    del a, b, bigger
    gc.collect()


def test_a_copy_into_a_mapping_an_earlier_copy_used_faults_in_only_what_is_new() -> None:
    import resource

    from weir.state import unforked

    space = unforked.CopySpace(8)

    def faults_of_writing(rows: int) -> tuple[int, np.ndarray]:
        array = space.take(rows)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        array[:rows] = 7
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, array

    first, array = faults_of_writing(400_000)  # 25.6 MB
    space.give_back(array)
    again, array = faults_of_writing(400_000)
    assert first > 0 and again * 4 < first, (first, again)


def test_a_barrier_packs_with_the_last_barriers_widths_while_they_fit_and_afresh_when_not() -> None:
    """Each barrier's section holds exactly the live panes: when the new panes fit the last
    packing's bases and widths, and when a key below the last base or a sum too wide for its
    width comes (then the barrier reads the bounds again)."""
    with store("hash"):
        run = Run(count_and_sum_window(lateness=5_000))
        rng = np.random.default_rng(8)
        run.op.defer_pane_snapshots = True
        widths = []
        t = 0
        for low_key, high_value in [(1_000, 9), (1_000, 9), (-5, 9), (-5, 1 << 40)]:
            n = 5_000
            times = t + np.arange(n, dtype=np.int64)
            t += n
            keys = rng.integers(low_key, low_key + 300, n)
            run.op.process_batch(Batch(TupleColumns([keys, rng.integers(0, high_value, n)]), times))
            run.op.prepare_snapshot_pre_barrier(1)
            panes, run.op.pane_snapshot = run.op.pane_snapshot, None
            section = panes.native()
            live = run.op.panes.export()
            table = section.table()
            got = sorted(map(tuple, np.delete(table, NATIVE_SEQ, 1).tolist()))
            want = sorted(zip(live.starts.tolist(), live.keys.tolist(), live.counts.tolist(),
                              live.fired.astype(int).tolist(), live.accs[0][:, 0].tolist()))  # fmt: skip
            assert got == want
            widths.append([values.dtype.itemsize for _, _, values in section.columns])
        assert widths[0] == widths[1] and widths[3][-1] == 8 > widths[2][-1]

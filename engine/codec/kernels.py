"""Numba kernels that lay out a batch's columns in frames, one call per column per batch.

Each kernel is the compiled twin of a function of the same name in
``weir.codec.reference`` and must produce exactly what the reference produces;
``tests/property/test_codec_roundtrip.py`` holds them to that.

Routing a batch to ``num_channels`` channels is a stable counting sort:
``group_by_channel`` returns the permutation that lists the records of channel 0,
then of channel 1, ..., each in their original relative order, plus the offsets
where each channel's run starts. Every ``gather_*`` kernel then walks that
permutation once and copies the bytes of each record straight to its place in
its channel's frame (``dst_positions[c]`` is where channel ``c``'s part of the
column starts in the shared output buffer), so a column is copied exactly once
however many channels there are.

Strings travel as one UTF-8 blob per column. ``separator_bounds`` and
``utf8_bounds`` find where each string starts and ends in such a blob, for the
two wire layouts (NUL-separated, or concatenated with code point lengths).

Integer columns can travel *packed* (frame of reference): ``int_range`` finds the
smallest and largest value in one pass, ``pack_deltas`` writes every value minus the
smallest into a narrower unsigned array and ``unpack_deltas`` adds it back.

Bad arguments (a channel outside ``0..num_channels - 1``, lengths that overrun the
blob) raise ``UsageError`` from inside the kernels.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

from weir.errors import UsageError

__all__ = [
    "gather_fixed",
    "gather_strings",
    "group_by_channel",
    "int_range",
    "pack_deltas",
    "separator_bounds",
    "sum_by_channel",
    "unpack_deltas",
    "utf8_bounds",
]

Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
ByteArray = npt.NDArray[np.uint8]


@njit(cache=True)
def group_by_channel(channels: Int32Array, num_channels: int) -> tuple[Int64Array, Int64Array]:
    """Stable counting sort of record indices by channel.

    Returns ``(permutation, offsets)``: ``permutation[offsets[c]:offsets[c + 1]]``
    are the indices of the records routed to channel ``c``, in increasing order;
    ``offsets`` has ``num_channels + 1`` entries, starting at 0 and ending at ``n``.
    """
    if num_channels < 1:
        raise UsageError("num_channels " + str(num_channels) + " is invalid: it must be at least 1")
    n = channels.shape[0]
    offsets = np.zeros(num_channels + 1, np.int64)
    for i in range(n):
        c = np.int64(channels[i])
        if c < 0 or c >= num_channels:
            raise UsageError(
                "record "
                + str(i)
                + " is routed to channel "
                + str(c)
                + ", outside 0.."
                + str(num_channels - 1)
                + " ("
                + str(num_channels)
                + " channels)"
            )
        offsets[c + 1] += 1
    for k in range(num_channels):
        offsets[k + 1] += offsets[k]
    cursor = offsets[:-1].copy()
    permutation = np.empty(n, np.int64)
    for i in range(n):
        target = channels[i]
        permutation[cursor[target]] = i
        cursor[target] += 1
    return permutation, offsets


@njit(cache=True)
def sum_by_channel(values: Int64Array, channels: Int32Array, num_channels: int) -> Int64Array:
    """``out[c]`` = the sum of ``values[i]`` over the records ``i`` routed to channel ``c``."""
    out = np.zeros(num_channels, np.int64)
    for i in range(channels.shape[0]):
        c = np.int64(channels[i])
        if c < 0 or c >= num_channels:
            raise UsageError(
                "record "
                + str(i)
                + " is routed to channel "
                + str(c)
                + ", outside 0.."
                + str(num_channels - 1)
                + " ("
                + str(num_channels)
                + " channels)"
            )
        out[c] += values[i]
    return out


@njit(cache=True)
def _copy_records(
    dst: ByteArray, p: int, src: ByteArray, width: int, permutation: Int64Array, start: int, stop: int
) -> int:
    # Constant widths let LLVM turn the inner loop into one load and one store.
    if width == 8:
        for k in range(start, stop):
            s = permutation[k] * 8
            for j in range(8):
                dst[p + j] = src[s + j]
            p += 8
    elif width == 4:
        for k in range(start, stop):
            s = permutation[k] * 4
            for j in range(4):
                dst[p + j] = src[s + j]
            p += 4
    elif width == 2:
        for k in range(start, stop):
            s = permutation[k] * 2
            dst[p] = src[s]
            dst[p + 1] = src[s + 1]
            p += 2
    elif width == 1:
        for k in range(start, stop):
            dst[p] = src[permutation[k]]
            p += 1
    else:
        for k in range(start, stop):
            s = permutation[k] * width
            for j in range(width):
                dst[p + j] = src[s + j]
            p += width
    return p


@njit(cache=True)
def gather_fixed(
    dst: ByteArray,
    dst_positions: Int64Array,
    src: ByteArray,
    width: int,
    permutation: Int64Array,
    offsets: Int64Array,
) -> None:
    """Copy a fixed-width column into every channel's frame, in permutation order.

    ``src`` holds the column's records as ``width`` bytes each; record ``permutation[k]``
    for ``k`` in channel ``c``'s run lands at ``dst_positions[c] + (k - offsets[c]) * width``.
    """
    num_channels = offsets.shape[0] - 1
    if width < 1:
        raise UsageError("width " + str(width) + " is invalid: a fixed-width column has at least 1 byte")
    if src.shape[0] != permutation.shape[0] * width:
        raise UsageError(
            "column has "
            + str(src.shape[0])
            + " bytes, expected "
            + str(permutation.shape[0])
            + " records of "
            + str(width)
            + " bytes"
        )
    for c in range(num_channels):
        start = offsets[c]
        stop = offsets[c + 1]
        p = dst_positions[c]
        if p < 0 or p + (stop - start) * width > dst.shape[0]:
            raise UsageError("channel " + str(c) + "'s column does not fit the output buffer")
        _copy_records(dst, p, src, width, permutation, start, stop)


@njit(cache=True)
def gather_strings(
    dst: ByteArray,
    dst_positions: Int64Array,
    blob: ByteArray,
    starts: Int64Array,
    ends: Int64Array,
    permutation: Int64Array,
    offsets: Int64Array,
    separator: int,
) -> None:
    """Copy each record's bytes ``blob[starts[i]:ends[i]]`` into its channel's frame, in permutation order.

    If ``separator`` is a byte value (0..255) it is written between consecutive
    records of a channel; -1 means no separator.
    """
    num_channels = offsets.shape[0] - 1
    for c in range(num_channels):
        p = dst_positions[c]
        first = offsets[c]
        for k in range(first, offsets[c + 1]):
            i = permutation[k]
            if separator >= 0 and k > first:
                dst[p] = separator
                p += 1
            s = starts[i]
            e = ends[i]
            if s < 0 or e < s or e > blob.shape[0] or p + (e - s) > dst.shape[0]:
                raise UsageError(
                    "record "
                    + str(i)
                    + " spans bytes "
                    + str(s)
                    + ".."
                    + str(e)
                    + ", outside the blob of "
                    + str(blob.shape[0])
                    + " bytes or the output buffer"
                )
            for j in range(e - s):
                dst[p + j] = blob[s + j]
            p += e - s


@njit(cache=True)
def separator_bounds(blob: ByteArray, n: int, separator: int) -> tuple[Int64Array, Int64Array]:
    """Where each of ``n`` strings starts and ends in a blob of strings joined by ``separator``.

    Returns ``(starts, ends)``; both are empty if the blob does not hold exactly
    ``n - 1`` separators (some string contains the separator byte itself), so the
    caller must use another layout.
    """
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    starts[0] = 0
    k = 0
    for p in range(blob.shape[0]):
        if blob[p] == separator:
            k += 1
            if k >= n:
                return np.empty(0, np.int64), np.empty(0, np.int64)
            ends[k - 1] = p
            starts[k] = p + 1
    if k != n - 1:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    ends[n - 1] = blob.shape[0]
    return starts, ends


@njit(cache=True)
def utf8_bounds(blob: ByteArray, code_point_lengths: Int64Array) -> tuple[Int64Array, Int64Array]:
    """Byte ``(starts, ends)`` of strings concatenated in a UTF-8 blob, from their lengths in code points.

    A code point starts at every byte that is not a continuation byte (``10xxxxxx``).
    """
    n = code_point_lengths.shape[0]
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    size = blob.shape[0]
    p = 0
    for i in range(n):
        remaining = code_point_lengths[i]
        if remaining < 0:
            raise UsageError("string " + str(i) + " has a negative length " + str(remaining))
        starts[i] = p
        while remaining > 0:
            if p >= size:
                raise UsageError(
                    "string " + str(i) + " runs past the end of the " + str(size) + "-byte UTF-8 blob"
                )
            p += 1
            while p < size and (blob[p] & 0xC0) == 0x80:
                p += 1
            remaining -= 1
        ends[i] = p
    if p != size:
        raise UsageError(
            "the strings' lengths cover " + str(p) + " bytes of a UTF-8 blob of " + str(size) + " bytes"
        )
    return starts, ends


@njit(cache=True)
def int_range(values: Int64Array) -> tuple[int, int]:
    """``(smallest, largest)`` of a non-empty int64 array, in one pass."""
    lo = values[0]
    hi = values[0]
    for i in range(1, values.shape[0]):
        v = values[i]
        lo = min(lo, v)  # branch-free: the compiler vectorizes the loop
        hi = max(hi, v)
    return lo, hi


@njit(cache=True)
def pack_deltas(values: Int64Array, base: int, out: npt.NDArray[np.unsignedinteger]) -> None:
    """``out[i] = values[i] - base``; the caller chose ``out``'s width to hold every difference."""
    for i in range(values.shape[0]):
        out[i] = values[i] - base


@njit(cache=True)
def unpack_deltas(deltas: npt.NDArray[np.unsignedinteger], base: int, out: Int64Array) -> None:
    """``out[i] = base + deltas[i]`` (wrapping like int64 arithmetic: a corrupt frame cannot overflow)."""
    for i in range(deltas.shape[0]):
        out[i] = base + np.int64(deltas[i])

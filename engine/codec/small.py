"""The small-batch path of the typed columnar codec: ``struct`` instead of numpy.

An open-loop source at a moderate rate emits batches of tens to a few hundred records,
and each one pays the fixed cost of the columnar path: a numpy array per column, a numba
call to group records by channel, a fancy index per column and channel, a numpy view
per column on the way back. For 150 records of (STRING, LONG, LONG, LONG) to two
channels that fixed cost was most of the codec's time. ``struct`` packs and unpacks a
whole column of a few hundred Python ints in one C call, with no array in between.

``SmallCodec`` writes exactly the bytes the columnar path writes for the same batch (a
property test holds the two paths to each other) and reads the same frames back to the
same batch. It takes only what it can do without a doubt and answers None otherwise, and
the caller runs the full path, which also raises the errors:

* schemas: TUPLE types whose fields are all BOOLEAN, BYTE, SHORT, INT, LONG, FLOAT,
  DOUBLE or STRING (no CHAR, bytes, pickled fields, ROW types, nulls or row kinds);
* encoding: a list of tuples, fewer records than ``columns.PACK_MIN_VALUES`` (so no
  column is packed), every value of the column's plain Python type, in range, and no
  string containing U+0000 (those use the lengths layout);
* decoding: at most ``SMALL_BATCH_RECORDS`` records, no packed or row-kind flags, every
  column flag 0, every length consistent, valid UTF-8.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from operator import itemgetter
from typing import Any, TypeGuard

import numpy as np

from weir.codec import columns as _columns
from weir.codec.batch import Batch
from weir.codec.columns import ColumnCodec, FixedColumn, StringColumn
from weir.codec.frame import CODEC_COLUMNAR, FLAG_TIMESTAMPS, FrameHeader, pack_header
from weir.common.typeinfo import TupleTypeInfo, TypeInformation

#: The most records a frame may hold for the small path to decode it (encoding is bounded
#: by ``PACK_MIN_VALUES``: a column that long may be packed, which only the full path does).
SMALL_BATCH_RECORDS = 2_048

#: struct codes of the fixed-width columns, by numpy dtype character.
_STRUCT_CODES = {"?": "?", "b": "b", "h": "h", "i": "i", "l": "q", "q": "q", "f": "f", "d": "d"}
#: The plain Python types the columnar path accepts without a closer look, by column kind.
_PLAIN_TYPES: dict[str, frozenset[type]] = {
    "int": frozenset({int}),
    "float": frozenset({float, int}),
    "bool": frozenset({bool}),
}
_U32 = struct.Struct("<I")
_TS_CODE = "q"


class _Field:
    """One field of the schema: a struct code (fixed width) or None (STRING)."""

    __slots__ = ("code", "plain", "width")

    def __init__(self, code: str | None, plain: frozenset[type], width: int) -> None:
        self.code = code
        self.plain = plain
        self.width = width


def _field(column: ColumnCodec) -> _Field | None:
    if isinstance(column, StringColumn):
        return _Field(None, frozenset({str}), 0)
    if isinstance(column, FixedColumn) and column.kind in _PLAIN_TYPES:
        code = _STRUCT_CODES.get(column.native_dtype.char)
        if code is None:
            return None
        return _Field(code, _PLAIN_TYPES[column.kind], column.width)
    return None


class SmallCodec:
    """Encodes and decodes small batches of one TUPLE schema (see the module docstring)."""

    def __init__(self, fields: list[_Field]) -> None:
        self._fields = fields
        self._arity = len(fields)

    @staticmethod
    def for_schema(type_info: TypeInformation, columns: list[ColumnCodec]) -> SmallCodec | None:
        """The small path of a schema, or None when it has a field the path does not take."""
        if not isinstance(type_info, TupleTypeInfo):
            return None
        fields = [_field(c) for c in columns]
        if not fields or any(f is None for f in fields):
            return None
        return SmallCodec([f for f in fields if f is not None])

    # -- encoding ----------------------------------------------------------------------------------

    def _records(self, values: Any) -> TypeGuard[list[tuple[Any, ...]]]:
        """Whether the small path may take the batch's records: a list of plain tuples,
        fewer than ``PACK_MIN_VALUES``."""
        if type(values) is not list or not values or len(values) >= _columns.PACK_MIN_VALUES:
            return False
        return set(map(type, values)) == {tuple}

    def _transpose(self, records: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]] | None:
        """The checked columns of plain tuples, or None when the full path must look at
        them (a record of another arity, a value not of its column's plain type)."""
        try:
            cols = list(zip(*records, strict=True))  # strict: every record has one arity
        except ValueError:
            return None
        if len(cols) != self._arity:
            return None
        for field, col in zip(self._fields, cols):
            if not set(map(type, col)) <= field.plain:
                return None
        return cols

    def _payload(self, ts: Sequence[int] | None, cols: Sequence[Sequence[Any]]) -> bytes | None:
        n = len(cols[0])
        parts: list[bytes] = []
        if ts is not None:
            parts.append(struct.pack(f"<{n}{_TS_CODE}", *ts))
        try:
            for field, col in zip(self._fields, cols):
                parts.append(b"\x00")  # column flags: raw, no nulls
                if field.code is None:
                    blob = "\x00".join(col).encode("utf-8", "surrogatepass")
                    if blob.count(0) != n - 1:  # a string holds U+0000: the lengths layout
                        return None
                    parts.append(_U32.pack(len(blob)))
                    parts.append(blob)
                else:
                    parts.append(struct.pack(f"<{n}{field.code}", *col))
        except (struct.error, OverflowError):  # out of range for the column's width
            return None
        return b"".join(parts)

    def _frame(self, records: Sequence[tuple[Any, ...]], ts: Sequence[int] | None) -> bytes | None:
        """The frame of plain-tuple ``records`` with their timestamps, or None."""
        cols = self._transpose(records)
        payload = None if cols is None else self._payload(ts, cols)
        if payload is None:
            return None
        flags = 0 if ts is None else FLAG_TIMESTAMPS
        return pack_header(CODEC_COLUMNAR, flags, len(records), len(payload)) + payload

    def encode(self, batch: Batch) -> bytes | None:
        """The frame of ``batch``, or None (the full path encodes it)."""
        values = batch.values
        if not self._records(values):
            return None
        return self._frame(values, None if batch.timestamps is None else batch.timestamps.tolist())

    def encode_partitioned(
        self, batch: Batch, channels: np.ndarray, num_channels: int
    ) -> list[bytes | None] | None:
        """Every channel's frame (None where it has no records), records in batch order
        within a channel; or None (the full path encodes the batch)."""
        values = batch.values
        if not self._records(values) or len(channels) != len(values):
            return None
        try:
            counts = np.bincount(channels, minlength=num_channels)
        except ValueError:  # a negative channel
            return None
        if len(counts) != num_channels:  # a channel past the last
            return None
        timestamps = batch.timestamps
        frames: list[bytes | None] = [None] * num_channels
        first = int(channels[0])
        if counts[first] == len(values):  # one channel takes the whole batch
            frames[first] = self._frame(values, None if timestamps is None else timestamps.tolist())
            return None if frames[first] is None else frames
        # the records in channel order (a stable sort keeps batch order within a channel),
        # then each channel's columns: reordering the records once and transposing each
        # channel's slice costs less than reordering every column (two records or more go
        # to two channels or more here, so the getter returns a tuple). For 370 records of
        # (STRING, LONG, LONG, LONG) to two channels, checks and split: 146 -> 108 us
        order = np.argsort(channels, kind="stable")
        ordered = itemgetter(*order.tolist())(values)
        ordered_ts = None if timestamps is None else timestamps[order].tolist()
        start = 0
        for c, k in enumerate(counts.tolist()):
            if not k:
                continue
            end = start + k
            frame = self._frame(ordered[start:end], None if ordered_ts is None else ordered_ts[start:end])
            if frame is None:
                return None
            frames[c] = frame
            start = end
        return frames

    # -- decoding ----------------------------------------------------------------------------------

    def decode(self, header: FrameHeader, view: memoryview) -> Batch | None:
        """The batch of a frame's payload, or None (the full path decodes it, or names what
        is wrong with it)."""
        n = header.record_count
        if header.flags & ~FLAG_TIMESTAMPS or not 0 < n <= SMALL_BATCH_RECORDS:
            return None
        size = len(view)
        pos = 0
        ts = None
        if header.flags:
            pos = 8 * n
            if pos > size:
                return None
            ts = np.frombuffer(view, np.int64, n, 0).copy()
        cols: list[Any] = []
        try:
            for field in self._fields:
                if pos >= size or view[pos]:
                    return None  # packed, lengths, nulls, or cut short
                pos += 1
                if field.code is None:
                    (blob_size,) = _U32.unpack_from(view, pos)
                    pos += 4
                    end = pos + blob_size
                    if end > size:
                        return None
                    strings = str(view[pos:end], "utf-8", "surrogatepass").split("\x00")
                    if len(strings) != n:
                        return None
                    cols.append(strings)
                    pos = end
                else:
                    end = pos + field.width * n
                    if end > size:
                        return None
                    cols.append(struct.unpack_from(f"<{n}{field.code}", view, pos))
                    pos = end
        except (struct.error, UnicodeDecodeError):
            return None
        if pos != size:
            return None
        return Batch(list(zip(*cols)), ts)

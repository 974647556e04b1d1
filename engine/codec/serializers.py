"""Batch serializers: a batch to frames and back, chosen by the stream's type information.

``serializer_for(type_info)`` picks one of two codecs (the codec byte of the
frame header, see ``weir.codec.frame``):

* **typed columnar** (fast path) for BOOLEAN, BYTE, SHORT, INT, LONG, FLOAT, DOUBLE,
  CHAR, STRING, BYTE_ARRAY (``Types.PRIMITIVE_ARRAY(Types.BYTE())``) and TUPLE /
  ROW / ROW_NAMED of at least one field. Each field is one column (layouts in
  ``weir.codec.columns``); a field of another type (LIST, MAP, arrays, a nested
  ROW or TUPLE) is a pickled column inside the columnar frame.
* **pickle** (fallback) for untyped streams (``type_info=None``),
  ``Types.PICKLED_BYTE_ARRAY()``, and top-level types without a columnar layout
  (LIST, MAP, BASIC_ARRAY, OBJECT_ARRAY, PRIMITIVE_ARRAY of non-bytes, ROW of no
  fields), like Flink's Kryo fallback.

Typed columnar payload, in order (integers little endian)::

    [timestamps   n × int64]   if header flag FLAG_TIMESTAMPS; packed like a LONG column
                               (width, base, differences) if also FLAG_TIMESTAMPS_PACKED
    [row kinds    n × uint8]   if header flag FLAG_ROW_KINDS (RowKind values; ROW types only)
    per field, in declared order:
        column flags  uint8    COLUMN_NULLS | COLUMN_STRING_LENGTHS | COLUMN_PACKED
        [null mask    n × uint8]  if COLUMN_NULLS (ROW fields only; 1 = None)
        column body

Pickle payload: ``[timestamps]`` (as above) then ``pickle.dumps(values, protocol=5)``,
where ``values`` is the batch's list, or its numpy array if the batch holds one (so an
untyped batch keeps its representation).

What a decoded batch holds: a stream of one numeric basic type (BOOLEAN, BYTE,
SHORT, INT, LONG, FLOAT, DOUBLE) decodes to a numpy array; CHAR, STRING and
BYTE_ARRAY to lists of ``str``/``bytes``; TUPLE types to lists of Python tuples;
ROW types to lists of ``Row`` named with the declared field names (f0, f1, ... for
``Types.ROW``, as PyFlink's row coder names them), row kinds preserved. FLOAT values are rounded to
32 bits, as in Flink.

What encoders accept: a list (or any sequence) of Python values, or a numpy array.
Integers of any Python or numpy integer type (not bool) within the declared
range; floats or integers for FLOAT/DOUBLE; bools for BOOLEAN; one-character
``str`` for CHAR; ``str`` for STRING; ``bytes``/``bytearray`` for BYTE_ARRAY; for
TUPLE and ROW types a ``tuple``, ``list`` or ``Row`` of the declared arity (a named
``Row`` in a ROW_NAMED stream must carry the declared names). Only ROW fields may
be None. Anything else raises ``UsageError`` naming the record, e.g.
``record 3 does not match Types.LONG(): got 'abc' (str)``.

Partitioning: ``encode_partitioned`` groups the records by channel with a stable
counting sort (``kernels.group_by_channel``), sizes every channel's frame, and writes
all frames into one buffer with one kernel call per column, each record's bytes
copied once, straight to its place.

Pure: no I/O, no clock. Decoding pauses the cyclic garbage collector while it builds
tuples or Rows (see ``_gc_paused``).
"""

from __future__ import annotations

import functools
import gc
import pickle
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from operator import attrgetter, is_
from typing import Any

import numpy as np
import numpy.typing as npt

from weir.codec import kernels
from weir.codec.batch import Batch, TupleColumns
from weir.codec.columns import (
    COLUMN_NULLS,
    COLUMN_PACKED,
    COLUMN_STRING_LENGTHS,
    ByteArray,
    ColumnCodec,
    ColumnPlan,
    FixedColumn,
    Int64Array,
    Mismatch,
    PickledColumn,
    Prepared,
    StringColumn,
    TextColumn,
    column_for,
    copy_out,
    describe_value,
    fixed_plan,
    pickle_values,
    prepare_int64,
    read_fixed,
    read_packed,
    type_expr,
    unpickle,
)
from weir.codec.frame import (
    CODEC_COLUMNAR,
    CODEC_NAMES,
    CODEC_PICKLE,
    FLAG_ROW_KINDS,
    FLAG_TIMESTAMPS,
    FLAG_TIMESTAMPS_PACKED,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    MAX_PAYLOAD_BYTES,
    FrameHeader,
    header_at,
    pack_header,
)
from weir.codec.small import SMALL_BATCH_RECORDS, SmallCodec
from weir.codec.strings import Strings
from weir.common.typeinfo import PickledBytesTypeInfo, RowTypeInfo, TupleTypeInfo, TypeInformation
from weir.common.types import Row, RowKind
from weir.errors import ProtocolViolation, UsageError

__all__ = [
    "BatchSerializer",
    "ColumnarSerializer",
    "FrameHeader",
    "PickleSerializer",
    "serializer_for",
]

_I64 = np.dtype("<i8")
_CHANNEL_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
_U8 = np.dtype("u1")

#: bytes-like: a part of a payload (numpy arrays export their buffer).
Buffer = Any


def _nbytes(part: Buffer) -> int:
    return part.nbytes if isinstance(part, np.ndarray | memoryview) else len(part)


def _timestamps(batch: Batch) -> tuple[int, Prepared | None]:
    """The frame flags of the batch's timestamp column, and the column ready for the wire."""
    ts = batch.timestamps
    if ts is None:
        return 0, None
    column = prepare_int64(np.ascontiguousarray(ts, dtype=_I64))
    return (FLAG_TIMESTAMPS | FLAG_TIMESTAMPS_PACKED if column.flags else FLAG_TIMESTAMPS), column


def _read_timestamps(view: memoryview, header: FrameHeader) -> tuple[np.ndarray | None, int]:
    """The timestamp column at the start of a payload (None if the frame has none), and the
    position after it."""
    if not header.has_timestamps:
        return None, 0
    if header.timestamps_packed:
        return read_packed(view, 0, header.record_count, "the timestamp column")
    raw, pos = read_fixed(view, 0, header.record_count, _I64, "the timestamp column")
    return copy_out(raw, np.dtype(np.int64)), pos


def _as_payload(payload: memoryview | bytes | bytearray, header: FrameHeader) -> memoryview:
    view = memoryview(payload)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    if len(view) != header.payload_length:
        raise ProtocolViolation(
            f"frame payload has {len(view)} bytes, its header announces {header.payload_length}"
        )
    return view


class _Sections:
    """The parts of a partitioned payload, in wire order, each laid out for every channel."""

    def __init__(self, counts: Int64Array) -> None:
        self.counts = counts
        self.plans: list[ColumnPlan] = []

    def add(self, plan: ColumnPlan) -> None:
        self.plans.append(plan)

    def add_byte(self, value: int) -> None:
        def write(out: ByteArray, positions: Int64Array, nonempty: np.ndarray) -> None:
            out[positions[nonempty]] = value

        self.plans.append(ColumnPlan(np.ones(len(self.counts), np.int64), write))

    def frames(self, codec: int, flags: int) -> list[bytes | None]:
        """Every channel's frame (None where a channel has no records), built in one buffer."""
        counts = self.counts
        nonempty = counts > 0
        payload = np.zeros(len(counts), np.int64)
        for plan in self.plans:
            payload += plan.sizes
        payload[~nonempty] = 0
        if payload.max(initial=0) > MAX_PAYLOAD_BYTES:
            c = int(np.argmax(payload))
            pack_header(codec, flags, int(counts[c]), int(payload[c]))  # raises UsageError
        frame_sizes = np.where(nonempty, HEADER_SIZE + payload, 0)
        starts = np.zeros(len(counts) + 1, np.int64)
        np.cumsum(frame_sizes, out=starts[1:])
        out = np.empty(int(starts[-1]), np.uint8)
        channels_with_records = np.flatnonzero(nonempty).tolist()
        for c in channels_with_records:
            HEADER.pack_into(
                out.data, int(starts[c]), MAGIC, codec, flags, 0, int(counts[c]), int(payload[c])
            )
        positions = np.where(nonempty, starts[:-1] + HEADER_SIZE, 0)
        for plan in self.plans:
            plan.write(out, positions, nonempty)
            positions = positions + np.where(nonempty, plan.sizes, 0)
        frames: list[bytes | None] = [None] * len(counts)
        for c in channels_with_records:
            frames[c] = out[starts[c] : starts[c + 1]].tobytes()
        return frames


class BatchSerializer(ABC):
    """Encodes batches of one stream type into frames and decodes them back. Stateless."""

    #: The codec byte of the frames this serializer writes and reads.
    codec: int
    type_info: TypeInformation | None
    #: A lower bound of payload bytes per record, and the slack allowed below it.
    _min_record_bytes = 1
    _slack_bytes = 0
    _has_row_kinds = False

    @abstractmethod
    def encode(self, batch: Batch) -> bytes:
        """One frame (header and payload) holding every record of ``batch``."""

    @abstractmethod
    def encode_partitioned(
        self, batch: Batch, channels: npt.NDArray[np.int32], num_channels: int
    ) -> list[bytes | None]:
        """One frame per channel with the records ``channels`` routes to it, in their original order.

        ``channels[i]`` is the channel of record ``i``; a channel without records gets None.
        """

    @abstractmethod
    def decode(self, frame_header: FrameHeader, payload: memoryview) -> Batch:
        """The batch of one frame. The result never aliases ``payload`` (network buffers are reused)."""

    @abstractmethod
    def describe(self) -> str:
        """What this serializer writes, for plans and logs."""

    def check_types(self, batch: Batch) -> None:
        """Raise ``UsageError`` naming the first record whose Python type does not fit the
        stream's type. Per batch and cheaper than ``encode`` (no ranges, nothing built): the
        check of records that go from one operator to the next inside a chain, never encoded.
        An untyped stream takes anything."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"

    def check_header(self, header: FrameHeader, stream_offset: int = 0) -> None:
        """Raise ``ProtocolViolation`` if ``header`` cannot start a frame of this stream.

        Called by the reader as soon as a header is complete, before it buffers the payload.
        """
        if header.codec != self.codec:
            raise ProtocolViolation(
                f"{header_at(stream_offset)}: codec {header.codec} ({CODEC_NAMES.get(header.codec, 'unknown')}), but this channel carries "
                f"{self.describe()} in codec {self.codec} ({CODEC_NAMES[self.codec]})"
            )
        if header.has_row_kinds and not self._has_row_kinds:
            raise ProtocolViolation(
                f"{header_at(stream_offset)}: row-kind flag set on a stream of {type_expr(self.type_info)}"
            )
        per_record = self._min_record_bytes + (
            (1 if header.timestamps_packed else 8) if header.has_timestamps else 0
        )
        per_record += 1 if header.has_row_kinds else 0
        if header.record_count * per_record > header.payload_length + self._slack_bytes:
            raise ProtocolViolation(
                f"{header_at(stream_offset)}: {header.record_count} records need at least {per_record} byte{'s' if per_record > 1 else ''} each, "
                f"but the payload length is {header.payload_length}"
            )

    def _group(
        self, batch: Batch, channels: npt.NDArray[np.int32], num_channels: int
    ) -> tuple[np.ndarray, Int64Array, Int64Array, Int64Array]:
        if (
            isinstance(num_channels, bool)
            or not isinstance(num_channels, int | np.integer)
            or num_channels < 1
        ):
            raise UsageError(f"num_channels must be a positive int, got {num_channels!r}")
        channels = np.asarray(channels)
        if channels.ndim != 1 or channels.dtype.kind not in "iu":
            raise UsageError(
                f"channels must be a one-dimensional integer array (one channel per record), "
                f"got dtype {channels.dtype} and shape {channels.shape}"
            )
        if len(channels) != len(batch):
            raise UsageError(f"channels has {len(channels)} entries for a batch of {len(batch)} records")
        if channels.dtype not in (np.int32, np.int64):
            channels = channels.astype(np.int64)
        permutation, offsets = kernels.group_by_channel(channels, int(num_channels))
        return channels, permutation, offsets, offsets[1:] - offsets[:-1]

    def _check_codec(self, header: FrameHeader) -> None:
        if header.codec != self.codec:
            raise ProtocolViolation(
                f"frame codec {header.codec} ({CODEC_NAMES.get(header.codec, 'unknown')}) cannot be decoded by "
                f"the {CODEC_NAMES[self.codec]} serializer of {type_expr(self.type_info)}"
            )


# -- pickle ----------------------------------------------------------------------------------------


class PickleSerializer(BatchSerializer):
    """The fallback: ``pickle.dumps(values, protocol=5)`` plus the timestamp column."""

    codec = CODEC_PICKLE

    def __init__(self, type_info: TypeInformation | None = None) -> None:
        self.type_info = type_info

    def describe(self) -> str:
        if self.type_info is None:
            return "pickle (untyped stream)"
        if isinstance(self.type_info, PickledBytesTypeInfo):
            return "pickle (Types.PICKLED_BYTE_ARRAY())"
        return f"pickle (no columnar layout for {type_expr(self.type_info)})"

    @staticmethod
    def _values(batch: Batch) -> list[Any] | np.ndarray:
        values = batch.values
        if isinstance(values, np.ndarray):
            return np.ascontiguousarray(values)
        return values if isinstance(values, list) else list(values)

    def _pickle(self, values: list[Any] | np.ndarray) -> bytes:
        try:
            if isinstance(values, np.ndarray):
                return _dumps(values)
            return pickle_values(values)
        except Mismatch as m:
            raise UsageError(
                f"record {m.index} cannot be sent on a stream of {self._stream()}: {m.detail}"
            ) from None
        except Exception as e:
            raise UsageError(f"a numpy batch of {self._stream()} cannot be pickled: {e}") from None

    def _stream(self) -> str:
        return "pickled values" if self.type_info is None else type_expr(self.type_info)

    def encode(self, batch: Batch) -> bytes:
        values = self._values(batch)
        flags, ts = _timestamps(batch)
        data = self._pickle(values)
        parts: list[Buffer] = [] if ts is None else ts.parts()
        parts.append(data)
        header = pack_header(self.codec, flags, len(values), sum(map(_nbytes, parts)))
        return b"".join([header, *parts])

    def encode_partitioned(
        self, batch: Batch, channels: npt.NDArray[np.int32], num_channels: int
    ) -> list[bytes | None]:
        channels, permutation, offsets, counts = self._group(batch, channels, num_channels)
        values = self._values(batch)
        flags, ts = _timestamps(batch)
        sections = _Sections(counts)
        if ts is not None:
            sections.add(ts.plan(channels, permutation, offsets, counts))
        bounds = list(zip(offsets[:-1].tolist(), offsets[1:].tolist()))
        if isinstance(values, np.ndarray):
            pieces = [self._pickle(values[permutation[a:b]]) if b > a else b"" for a, b in bounds]
        else:
            take = values.__getitem__
            order = permutation.tolist()
            pieces = [self._pickle(list(map(take, order[a:b]))) if b > a else b"" for a, b in bounds]

        def write(out: ByteArray, positions: Int64Array, nonempty: np.ndarray) -> None:
            for c in np.flatnonzero(nonempty).tolist():
                p = int(positions[c])
                out[p : p + len(pieces[c])] = np.frombuffer(pieces[c], dtype=np.uint8)

        sections.add(ColumnPlan(np.array([len(p) for p in pieces], dtype=np.int64), write))
        return sections.frames(self.codec, flags)

    def decode(self, frame_header: FrameHeader, payload: memoryview) -> Batch:
        self._check_codec(frame_header)
        view = _as_payload(payload, frame_header)
        n = frame_header.record_count
        ts, pos = _read_timestamps(view, frame_header)
        values = unpickle(view[pos:], "a pickled batch")
        if not isinstance(values, list | np.ndarray) or len(values) != n:
            raise ProtocolViolation(
                f"a pickled batch holds {describe_value(values)}, expected a list or array of {n} records"
            )
        return Batch(values, ts)


def _dumps(array: np.ndarray) -> bytes:
    return pickle.dumps(array, protocol=5)


# -- typed columnar --------------------------------------------------------------------------------

_ROW_VALUES: Any = Row.__dict__["_values"]
_ROW_FIELDS: Any = Row.__dict__["_fields"]
_ROW_KIND: Any = Row.__dict__["_row_kind"]
_get_values = attrgetter("_values")
_get_fields = attrgetter("_fields")
_get_kind = attrgetter("_row_kind")
_ROW_KINDS = list(RowKind)


def _make_rows(
    columns: list[list[Any]], field_names: list[str] | None, kinds: np.ndarray | None
) -> list[Row]:
    """Rows without going through ``Row.__init__``: the slots are set directly, in C-level loops.

    Rows of one batch share one field-name list; ``Row`` never changes that list in place.
    """
    n = len(columns[0])
    rows: list[Row] = list(map(object.__new__, repeat(Row, n)))
    _consume(map(_ROW_VALUES.__set__, rows, map(list, zip(*columns))))
    _consume(map(_ROW_FIELDS.__set__, rows, repeat(field_names, n)))
    _consume(map(_ROW_KIND.__set__, rows, repeat(RowKind.INSERT, n)))
    if kinds is not None:
        set_kind = _ROW_KIND.__set__
        for i in np.flatnonzero(kinds).tolist():
            set_kind(rows[i], _ROW_KINDS[kinds[i]])
    return rows


def _consume(iterator: Iterator[Any]) -> None:
    deque(iterator, maxlen=0)


#: ``encode_partitioned`` encodes each channel's records separately up to this many records per
#: channel on average (measured crossover with the one-pass path: about 1,000 at 2 channels).
SPLIT_ENCODE_RECORDS_PER_CHANNEL = 512


class _Split:
    """A batch taken apart into columns, before the columns are checked."""

    def __init__(self, columns: list[Sequence[Any] | np.ndarray], kinds: np.ndarray | None = None) -> None:
        self.columns = columns
        self.kinds = kinds


class ColumnarSerializer(BatchSerializer):
    """The typed fast path: one column per field (see the module docstring for the layout)."""

    codec = CODEC_COLUMNAR

    def __init__(self, type_info: TypeInformation, columns: list[ColumnCodec]) -> None:
        self.type_info = type_info
        self.columns = columns
        self._expr = type_expr(type_info)
        self._is_tuple = isinstance(type_info, TupleTypeInfo)
        self._is_row = isinstance(type_info, RowTypeInfo)
        self._is_struct = self._is_tuple or self._is_row
        self._has_row_kinds = self._is_row
        self._arity = len(columns)
        self._field_names: list[str] | None = None
        self._named = False
        if isinstance(type_info, RowTypeInfo):
            self._field_names = list(type_info.field_names)
            self._named = self._field_names != [f"f{i}" for i in range(self._arity)]
        self._decoded_names = self._field_names  # PyFlink names ROW fields f0, f1, ...
        self._nullable = [self._is_row and not isinstance(c, PickledColumn) for c in columns]
        self._min_record_bytes = sum(c.min_record_bytes for c in columns)
        self._slack_bytes = sum(isinstance(c, StringColumn) for c in columns)
        self._allowed_flags = [
            (COLUMN_NULLS if nullable else 0)
            | (COLUMN_STRING_LENGTHS if isinstance(c, StringColumn) else 0)
            | (COLUMN_PACKED if c.packs else 0)
            for c, nullable in zip(columns, self._nullable)
        ]
        self._small = SmallCodec.for_schema(type_info, columns)

    def describe(self) -> str:
        inner = ", ".join(c.describe() for c in self.columns)
        return f"typed columnar {self._expr}: [{inner}]"

    # -- taking a batch apart ----------------------------------------------------------------------

    def _field_label(self, j: int) -> str:
        if self._field_names is not None and self._named:
            return f"field {j} ({self._field_names[j]!r})"
        return f"field {j}"

    def _record_error(self, i: int, record: Any, detail: str, *, show_record: bool = True) -> UsageError:
        suffix = f"; the record is {describe_value(record)}" if show_record else ""
        return UsageError(f"record {i} does not match {self._expr}: {detail}{suffix}")

    def _split(self, values: Sequence[Any] | np.ndarray) -> _Split:
        if not self._is_struct:
            if not isinstance(values, list | tuple | np.ndarray):
                values = list(values)
            return _Split([values])
        if isinstance(values, TupleColumns) and len(values.columns) == self._arity and self._is_tuple:
            return _Split(list(values.columns))  # already columns: no tuple is built or taken apart
        records: Sequence[Any] = values.tolist() if isinstance(values, np.ndarray) else values
        types = set(map(type, records))
        kinds = None
        if types <= {tuple}:
            rows: Sequence[Any] = records
        elif types == {Row}:
            rows = list(map(_get_values, records))
            kinds = self._row_kinds(records, all_rows=True)
        else:
            for t in types:
                if not issubclass(t, tuple | list | Row):
                    i = next(i for i, r in enumerate(records) if type(r) is t)
                    raise self._record_error(
                        i,
                        records[i],
                        f"got {describe_value(records[i])}, expected a tuple, list or Row of {self._arity} fields",
                        show_record=False,
                    )
            rows = [_get_values(r) if isinstance(r, Row) else r for r in records]
            if any(issubclass(t, Row) for t in types):
                kinds = self._row_kinds(records, all_rows=False)
        # One zip transposes the records (a third of the time of a getter per field); it stops at
        # the shortest record, so arity columns mean none is shorter, and then the total length
        # says whether one is longer (cheaper than a set of lengths).
        columns: list[Sequence[Any] | np.ndarray] = list(zip(*rows)) if rows else [()] * self._arity
        if len(columns) != self._arity or sum(map(len, rows)) != self._arity * len(rows):
            i = next(i for i, r in enumerate(rows) if len(r) != self._arity)
            raise self._record_error(
                i,
                records[i],
                f"got {describe_value(records[i])} with {len(rows[i])} fields, expected {self._arity}",
                show_record=False,
            )
        return _Split(columns, kinds)

    def _row_kinds(self, records: Sequence[Any], all_rows: bool) -> np.ndarray | None:
        """Check the field names of named Rows; the row kinds, or None if all are INSERT."""
        insert = RowKind.INSERT
        if all_rows:
            fields = list(map(_get_fields, records))
            kinds = list(map(_get_kind, records))
        else:
            fields = [_get_fields(r) if isinstance(r, Row) else None for r in records]
            kinds = [_get_kind(r) if isinstance(r, Row) else insert for r in records]
        names = self._field_names
        if self._named and fields.count(None) + fields.count(names) != len(fields):
            i, f = next((i, f) for i, f in enumerate(fields) if f is not None and f != names)
            raise self._record_error(i, records[i], f"its field names {f} differ from the declared {names}")
        if not self._is_row or kinds.count(insert) == len(kinds):
            return None
        return np.fromiter((k.value for k in kinds), dtype=np.uint8, count=len(kinds))

    def _prepare(self, batch: Batch) -> tuple[_Split, list[tuple[int, np.ndarray | None, Prepared]]]:
        split = self._split(batch.values)
        prepared = []
        for j, codec in enumerate(self.columns):
            column = split.columns[j]
            mask = None
            if self._nullable[j] and _may_hold_none(column) and any(map(is_, column, repeat(None))):
                mask = np.fromiter(map(is_, column, repeat(None)), dtype=np.bool_, count=len(column))
                placeholder = _placeholder(codec)
                column = [placeholder if v is None else v for v in column]
            try:
                p = codec.prepare(column)
            except Mismatch as m:
                raise self._mismatch(batch, j, m) from None
            prepared.append((p.flags | (COLUMN_NULLS if mask is not None else 0), mask, p))
        return split, prepared

    def _mismatch(self, batch: Batch, j: int, m: Mismatch) -> UsageError:
        if not self._is_struct:
            return UsageError(f"record {m.index} does not match {self._expr}: {m.detail}")
        record = batch.values[m.index]
        field_type = type_expr(self.columns[j].type_info)
        return self._record_error(
            m.index, record, f"{self._field_label(j)} {m.detail}, expected {field_type}"
        )

    def check_types(self, batch: Batch) -> None:
        split = self._split(batch.values)  # arity, tuple/list/Row, field names of named Rows
        for j, codec in enumerate(self.columns):
            column = split.columns[j]
            if self._nullable[j] and _may_hold_none(column) and any(map(is_, column, repeat(None))):
                placeholder = _placeholder(codec)
                column = [placeholder if v is None else v for v in column]
            try:
                codec.check_types(column)
            except Mismatch as m:
                raise self._mismatch(batch, j, m) from None

    def as_rows(self, values: Sequence[Any]) -> list[Any]:
        """ROW types: the records as ``Row``s, as a decoded frame holds them (named by the
        type, row kinds kept); tuples or lists of the declared arity become Rows. Other
        types: the values unchanged. Raises ``UsageError`` for a record of another shape."""
        if not self._is_row or not len(values):
            return list(values)
        split = self._split(values)
        return _make_rows(split.columns, self._decoded_names, split.kinds)  # type: ignore[arg-type]

    # -- encoding ----------------------------------------------------------------------------------

    def encode(self, batch: Batch) -> bytes:
        if self._small is not None and len(batch) < SMALL_BATCH_RECORDS:
            frame = self._small.encode(batch)
            if frame is not None:
                return frame
        split, prepared = self._prepare(batch)
        return self._frame(len(batch), _timestamps(batch), split.kinds, prepared)

    def _frame(
        self,
        n: int,
        timestamps: tuple[int, Prepared | None],
        kinds: np.ndarray | None,
        prepared: list[tuple[int, np.ndarray | None, Prepared]],
    ) -> bytes:
        """One frame of ``n`` records from their checked columns."""
        flags, ts = timestamps
        parts: list[Buffer] = [] if ts is None else ts.parts()
        if kinds is not None:
            parts.append(kinds)
            flags |= FLAG_ROW_KINDS
        for column_flags, mask, p in prepared:
            parts.append(bytes((column_flags,)))
            if mask is not None:
                parts.append(mask.view(np.uint8))
            parts.extend(p.parts())
        payload = b"".join(parts)  # then its length: cheaper than summing the parts' sizes
        return pack_header(self.codec, flags, n, len(payload)) + payload

    def _frames_by_channel(
        self, batch: Batch, permutation: Int64Array, offsets: Int64Array, counts: Int64Array
    ) -> list[bytes | None]:
        """A small batch: its columns are taken apart and checked once, then every channel's
        frame is cut from them (fixed-width columns by indexing their arrays, the others
        prepared again from the channel's values)."""
        split, prepared = self._prepare(batch)
        ts_flags, ts = _timestamps(batch)
        frames: list[bytes | None] = [None] * len(counts)
        bounds = offsets.tolist()
        for c in [c for c, k in enumerate(counts.tolist()) if k]:
            rows = permutation[bounds[c] : bounds[c + 1]]
            picked: list[int] | None = None
            mine = []
            for j, (column_flags, mask, p) in enumerate(prepared):
                q = p.select(rows)
                if q is None:
                    column = split.columns[j]
                    if picked is None:
                        picked = rows.tolist()
                    values = [column[i] for i in picked]
                    if mask is not None:
                        placeholder = _placeholder(self.columns[j])
                        values = [placeholder if v is None else v for v in values]
                    q = self.columns[j].prepare(values)
                    column_flags = q.flags | (column_flags & COLUMN_NULLS)  # the layout may differ
                mine.append((column_flags, None if mask is None else mask[rows], q))
            frames[c] = self._frame(
                len(rows),
                (ts_flags, None if ts is None else ts.select(rows)),
                None if split.kinds is None else split.kinds[rows],
                mine,
            )
        return frames

    def encode_partitioned(
        self, batch: Batch, channels: npt.NDArray[np.int32], num_channels: int
    ) -> list[bytes | None]:
        if (
            self._small is not None
            and 0 < len(batch) < SMALL_BATCH_RECORDS
            and type(channels) is np.ndarray
            and channels.dtype in _CHANNEL_DTYPES
            and channels.shape == (len(batch),)
            and type(num_channels) is int
        ):
            frames = self._small.encode_partitioned(batch, channels, num_channels)
            if frames is not None:
                return frames
        channels, permutation, offsets, counts = self._group(batch, channels, num_channels)
        if len(batch) == 0:
            return [None] * int(num_channels)
        if len(batch) <= SPLIT_ENCODE_RECORDS_PER_CHANNEL * num_channels:
            # a small batch: cutting each channel's frame from the checked columns costs less
            # than the column plans of the one-pass path, whose fixed cost dominates below
            # about a thousand records per channel
            return self._frames_by_channel(batch, permutation, offsets, counts)
        split, prepared = self._prepare(batch)
        sections = _Sections(counts)
        flags, ts = _timestamps(batch)
        if ts is not None:
            sections.add(ts.plan(channels, permutation, offsets, counts))
        if split.kinds is not None:
            sections.add(fixed_plan(split.kinds, permutation, offsets, counts))
            flags |= FLAG_ROW_KINDS
        for column_flags, mask, p in prepared:
            sections.add_byte(column_flags)
            if mask is not None:
                sections.add(fixed_plan(mask.view(np.uint8), permutation, offsets, counts))
            sections.add(p.plan(channels, permutation, offsets, counts))
        return sections.frames(self.codec, flags)

    # -- decoding ----------------------------------------------------------------------------------

    def decode(self, frame_header: FrameHeader, payload: memoryview) -> Batch:
        self._check_codec(frame_header)
        view = _as_payload(payload, frame_header)
        if self._small is not None:
            batch = self._small.decode(frame_header, view)
            if batch is not None:
                return batch
        n = frame_header.record_count
        ts, pos = _read_timestamps(view, frame_header)
        kinds = None
        if frame_header.has_row_kinds:
            if not self._is_row:
                raise ProtocolViolation(f"row-kind flag set on a frame of {self._expr}")
            raw, pos = read_fixed(view, pos, n, _U8, "the row-kind column")
            kinds = raw.copy()
            if n and int(kinds.max()) >= len(_ROW_KINDS):
                raise ProtocolViolation(
                    f"row kind {int(kinds.max())} in a frame of {self._expr}; valid kinds are 0..{len(_ROW_KINDS) - 1}"
                )
        raws: list[tuple[Any, np.ndarray | None]] = []
        for j, codec in enumerate(self.columns):
            if pos >= len(view):
                raise ProtocolViolation(
                    f"frame payload of {len(view)} bytes ends before column {j} of {self._expr}"
                )
            column_flags = view[pos]
            pos += 1
            if column_flags & ~self._allowed_flags[j]:
                raise ProtocolViolation(
                    f"column {j} of {self._expr} has flags 0x{column_flags:02x}; "
                    f"allowed are 0x{self._allowed_flags[j]:02x}"
                )
            mask = None
            if column_flags & COLUMN_NULLS:
                raw, pos = read_fixed(view, pos, n, _U8, f"the null mask of column {j}")
                mask = raw.astype(np.bool_)
            raw, pos = codec.decode(view, pos, n, column_flags)
            raws.append((raw, mask))
        if pos != len(view):
            raise ProtocolViolation(
                f"frame payload of {self._expr} has {len(view) - pos} bytes after its last column "
                f"({len(view)} bytes, {n} records)"
            )
        return Batch(self._assemble(raws, kinds), ts)

    def _assemble(self, raws: list[tuple[Any, np.ndarray | None]], kinds: np.ndarray | None) -> Any:
        if not self._is_struct:
            return self.columns[0].to_batch_values(raws[0][0])
        if self._is_tuple and all(mask is None for _, mask in raws):
            # tuples stay columns: a columnar operator reads them as such, and the tuples are
            # built only if something reads records (TupleColumns.records)
            return TupleColumns([codec.to_column(raw) for codec, (raw, _) in zip(self.columns, raws)])
        columns = []
        for codec, (raw, mask) in zip(self.columns, raws):
            values = codec.to_python(raw)
            if mask is not None:
                for i in np.flatnonzero(mask).tolist():
                    values[i] = None
            columns.append(values)
        if len(columns[0]) < _GC_PAUSE_RECORDS:  # too few records to trigger a collection
            return list(zip(*columns)) if self._is_tuple else _make_rows(columns, self._decoded_names, kinds)
        with _gc_paused():
            if self._is_tuple:
                return list(zip(*columns))
            return _make_rows(columns, self._decoded_names, kinds)


#: Batches of at least this many records are built with the garbage collector paused (a
#: collection is due every 700 new containers; below that, pausing costs more than it saves).
_GC_PAUSE_RECORDS = 700


def _may_hold_none(column: Any) -> bool:
    """False for a numpy column of numbers or ``Strings``, which cannot hold None (no need to look)."""
    if isinstance(column, Strings):
        return False
    return not isinstance(column, np.ndarray) or column.dtype.kind == "O"


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a batch's records are built.

    The records are new containers without cycles; building a million of them would
    otherwise trigger over a thousand collections, some traversing every live object of
    the process (measured: decoding 1 M Rows takes a third less time). Only the caller
    that paused the collector resumes it.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _placeholder(codec: ColumnCodec) -> Any:
    """A value of the column's type that stands in for None (the null mask says it is None)."""
    if isinstance(codec, FixedColumn):
        return {"int": 0, "float": 0.0, "bool": False, "char": " "}[codec.kind]
    if isinstance(codec, StringColumn):
        return ""
    if isinstance(codec, TextColumn):
        return codec.placeholder
    return b""


# -- choosing a serializer -------------------------------------------------------------------------


@functools.lru_cache(maxsize=512)
def _serializer_for(type_info: TypeInformation | None) -> BatchSerializer:
    if type_info is None or isinstance(type_info, PickledBytesTypeInfo):
        return PickleSerializer(type_info)
    column = column_for(type_info)
    if column is not None:
        return ColumnarSerializer(type_info, [column])
    if isinstance(type_info, TupleTypeInfo | RowTypeInfo) and type_info.field_types:
        fields: list[ColumnCodec] = [column_for(t) or PickledColumn(t) for t in type_info.field_types]
        return ColumnarSerializer(type_info, fields)
    return PickleSerializer(type_info)


def serializer_for(type_info: TypeInformation | None) -> BatchSerializer:
    """The serializer of a stream of ``type_info`` (None: an untyped stream, pickled)."""
    if type_info is not None and not isinstance(type_info, TypeInformation):
        raise UsageError(
            f"serializer_for needs a TypeInformation such as Types.LONG() or None, got {describe_value(type_info)}"
        )
    return _serializer_for(type_info)

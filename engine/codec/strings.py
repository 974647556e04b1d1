"""``Strings``: a column of strings as UTF-8 bytes and the bounds of each value.

A string column read from Arrow (the harness's replay, Parquet and CSV files) or decoded
from a frame is bytes already: one UTF-8 buffer and, per value, where it starts and ends.
Held that way, the column crosses the engine without a Python ``str`` per value:

- picking records (a filter's mask, the records of one channel) indexes the bounds and
  shares the bytes;
- a key_by hashes the bytes (``String.hashCode`` from UTF-8, ``weir.keys``);
- the serializer copies the bytes into frames, and the decoder hands the frame's bytes on;
- a vectorized window looks the keys up by their bytes.

To everything else it is a read-only sequence of ``str`` (``len``, indexing, iteration,
``tolist()``, equality with a list); the strings are built once, the first time
something reads them.

Values hold no None (a column with nulls stays a list). The bytes are UTF-8 as the wire
writes it (``surrogatepass``: a lone surrogate is kept, as Java keeps it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from weir.codec import kernels
from weir.keys.kernels import hash_utf8_strings

Int64Array = npt.NDArray[np.int64]
ByteArray = npt.NDArray[np.uint8]

__all__ = ["Strings"]


class Strings(Sequence[str]):
    """Strings ``data[starts[i]:ends[i]]`` (UTF-8), a sequence of ``str`` to whoever reads them.

    ``nul_free``: whether no value holds U+0000 (None: not known yet). The wire's compact
    layout separates values with NUL, so it needs to know; slices and picks inherit it.
    """

    __slots__ = ("_list", "data", "ends", "nul_free", "starts")

    def __init__(
        self, data: ByteArray, starts: Int64Array, ends: Int64Array, nul_free: bool | None = None
    ) -> None:
        if len(starts) != len(ends):
            raise ValueError(f"Strings needs as many starts as ends, got {len(starts)} and {len(ends)}")
        self.data = data
        self.starts = starts
        self.ends = ends
        self.nul_free = nul_free
        self._list: list[str] | None = None

    @staticmethod
    def from_arrow(array: Any) -> Strings | None:
        """The values of a pyarrow string array without nulls, sharing its bytes (None if it
        has nulls or is not of type string/large_string)."""
        import pyarrow as pa

        if array.null_count or not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
            return None
        n = len(array)
        buffers = array.buffers()
        offset_type = np.int32 if pa.types.is_string(array.type) else np.int64
        width = np.dtype(offset_type).itemsize
        offsets = np.frombuffer(buffers[1], offset_type, count=n + 1, offset=array.offset * width)
        data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.empty(0, np.uint8)
        bounds = offsets.astype(np.int64)
        return Strings(data, bounds[:-1], bounds[1:])

    @staticmethod
    def from_list(values: Sequence[str]) -> Strings:
        """``values`` (str) as one UTF-8 buffer."""
        encoded = [v.encode("utf-8", "surrogatepass") for v in values]
        bounds = np.zeros(len(encoded) + 1, np.int64)
        np.cumsum([len(b) for b in encoded], out=bounds[1:])
        data = np.frombuffer(b"".join(encoded), np.uint8)
        out = Strings(data, bounds[:-1], bounds[1:])
        out._list = list(values)
        return out

    # -- as a sequence of str ----------------------------------------------------------------------

    def tolist(self) -> list[str]:
        """The values as ``str`` (built once)."""
        if self._list is None:
            self._list = self._build_list()
        return self._list

    def _build_list(self) -> list[str]:
        n = len(self.starts)
        if not n:
            return []
        if self.has_no_nul():  # one blob with NUL between values: one decode, one split
            return self.joined().decode("utf-8", "surrogatepass").split("\x00")
        data = self.data
        return [
            bytes(data[s:e]).decode("utf-8", "surrogatepass")
            for s, e in zip(self.starts.tolist(), self.ends.tolist())
        ]

    def joined(self) -> bytes:
        """The values' bytes in order, NUL between them (the wire's compact layout)."""
        n = len(self.starts)
        sizes = self.ends - self.starts
        out = np.empty(int(sizes.sum()) + max(n - 1, 0), np.uint8)
        kernels.gather_strings(
            out, np.zeros(1, np.int64), self.data, self.starts, self.ends,
            np.arange(n, dtype=np.int64), np.array([0, n], np.int64), 0,
        )  # fmt: skip
        return out.tobytes()

    def has_no_nul(self) -> bool:
        """Whether no value holds U+0000 (looked up once, then known to slices and picks)."""
        if self.nul_free is None:
            data = self.data
            if len(self.starts) and self.is_contiguous():
                data = data[int(self.starts[0]) : int(self.ends[-1])]
            self.nul_free = not bool(np.any(data == 0)) if len(data) else True
        return self.nul_free

    def is_contiguous(self) -> bool:
        """Whether each value starts where the one before ends."""
        return bool(np.array_equal(self.starts[1:], self.ends[:-1]))

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Strings: ...

    def __getitem__(self, index: int | slice) -> str | Strings:
        if isinstance(index, slice):
            out = Strings(self.data, self.starts[index], self.ends[index], self.nul_free)
            if self._list is not None:
                out._list = self._list[index]
            return out
        if self._list is not None:
            return self._list[index]
        s, e = int(self.starts[index]), int(self.ends[index])
        return bytes(self.data[s:e]).decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Strings):
            return self.tolist() == other.tolist()
        if isinstance(other, list | tuple):
            return self.tolist() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.array(self.tolist(), dtype=object if dtype is None else dtype)

    def __repr__(self) -> str:
        head = self.tolist()[:5] if len(self) <= 5 else [*self[:5].tolist(), "…"]
        return f"Strings({head!r}, {len(self)} values)"

    # -- as columns --------------------------------------------------------------------------------

    def take(self, indices: np.ndarray) -> Strings:
        """The values at ``indices``, sharing the bytes."""
        return Strings(self.data, self.starts[indices], self.ends[indices], self.nul_free)

    def java_hashes(self) -> npt.NDArray[np.int32]:
        """``String.hashCode`` of every value, from the bytes."""
        result: npt.NDArray[np.int32] = hash_utf8_strings(self.data, self.starts, self.ends)
        return result

    def __arrow_array__(self, type: Any = None) -> Any:
        """``pa.array(strings)``: the values without a ``str`` each."""
        array = self.to_arrow()
        return array if type is None or array.type == type else array.cast(type)

    def to_arrow(self) -> Any:
        """The values as a pyarrow string array."""
        import pyarrow as pa

        if self.is_contiguous() and len(self):
            offsets = (self.starts - self.starts[0]).astype(np.int32)
            offsets = np.append(offsets, np.int32(self.ends[-1] - self.starts[0]))
            body = self.data[int(self.starts[0]) : int(self.ends[-1])]
            try:
                body.tobytes().decode("utf-8")  # Arrow holds strict UTF-8 (no lone surrogates)
            except UnicodeDecodeError:
                return pa.array(self.tolist(), pa.string())  # raises as for a list of these str
            return pa.Array.from_buffers(
                pa.string(), len(self), [None, pa.py_buffer(offsets), pa.py_buffer(body)]
            )
        return pa.array(self.tolist(), pa.string())

"""``pyflink.common.serialization``'s names: the row-format ``Encoder`` and the bulk-format
``BulkWriterFactory`` of file sinks.

It lives here, below the API and the runtime, because both the file system connector
(``weir.datastream.connectors.file_system`` re-exports it) and the file sink operator use it.
"""

from __future__ import annotations

from typing import Any

from weir.errors import UsageError

__all__ = ["BulkWriterFactory", "Encoder"]


class Encoder:
    """How a record becomes a line of a row-format file (``pyflink.common.Encoder``)."""

    def __init__(self, kind: str, charset: str = "UTF-8") -> None:
        self.kind = kind
        self.charset = charset

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> Encoder:
        """``str(record)`` and a newline, in ``charset_name`` (Flink's SimpleStringEncoder)."""
        try:
            "".encode(charset_name)
        except (LookupError, TypeError):
            raise UsageError(
                f"Encoder.simple_string_encoder: unknown charset {charset_name!r}; use e.g. 'UTF-8'"
            ) from None
        return Encoder("simple_string", charset_name)

    def encode(self, values: list[Any]) -> bytes:
        """The bytes of ``values``, one line each."""
        return "".join(f"{v}\n" for v in values).encode(self.charset)


class BulkWriterFactory:
    """How a part file of a bulk format (Parquet, CSV) is written: whole batches at a time,
    the file finished (footer, last block) when it rolls (``pyflink.common.serialization``'s
    name). The formats' factories are in ``weir.datastream.formats``; ``writer_factory``
    names the runtime side that writes a part file (``"module:name"`` of
    ``factory(self, file) -> writer``, imported only when a sink subtask opens a part).
    """

    writer_factory: str = ""

    def describe(self) -> dict[str, Any]:
        return {"class": type(self).__name__}

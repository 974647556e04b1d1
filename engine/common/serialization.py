"""``pyflink.common.serialization``'s names: the row-format ``Encoder`` and the bulk-format
``BulkWriterFactory`` of file sinks, and the record schemas message-queue connectors take
(``SimpleStringSchema``, ``ByteArraySchema``).

It lives here, below the API and the runtime, because both the file system connector
(``weir.datastream.connectors.file_system`` re-exports it) and the file sink operator use it.
"""

from __future__ import annotations

from typing import Any

from weir.errors import UsageError

__all__ = [
    "BulkWriterFactory",
    "ByteArraySchema",
    "DeserializationSchema",
    "Encoder",
    "RowDataBulkWriterFactory",
    "SerializationSchema",
    "SimpleStringSchema",
]


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


class RowDataBulkWriterFactory(BulkWriterFactory):
    """A bulk writer of rows of a declared row type (``get_row_type``): the Parquet and ORC
    writers of ``weir.datastream.formats``."""

    def __init__(self, row_type: Any) -> None:
        self._row_type = row_type

    def get_row_type(self) -> Any:
        """The row type the factory was made for (``for_row_type``'s argument)."""
        return self._row_type


class SerializationSchema:
    """Turns a record into the bytes of a message (``serialize``)."""

    def serialize(self, element: Any) -> bytes:
        raise NotImplementedError


class DeserializationSchema:
    """Turns the bytes of a message into a record (``deserialize``)."""

    def deserialize(self, message: bytes) -> Any:
        raise NotImplementedError


class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """Strings as their bytes in ``charset`` (Flink's SimpleStringSchema)."""

    def __init__(self, charset: str = "UTF-8") -> None:
        try:
            "".encode(charset)
        except (LookupError, TypeError):
            raise UsageError(f"SimpleStringSchema: unknown charset {charset!r}; use e.g. 'UTF-8'") from None
        self.charset = charset

    def serialize(self, element: Any) -> bytes:
        if not isinstance(element, str):
            raise UsageError(
                f"SimpleStringSchema serializes strings, got {element!r} ({type(element).__name__})"
            )
        return element.encode(self.charset)

    def deserialize(self, message: bytes) -> str:
        return bytes(message).decode(self.charset)


class ByteArraySchema(SerializationSchema, DeserializationSchema):
    """Messages as they are: ``bytes`` in, ``bytes`` out."""

    def serialize(self, element: Any) -> bytes:
        if not isinstance(element, bytes | bytearray | memoryview):
            raise UsageError(f"ByteArraySchema serializes bytes, got {element!r} ({type(element).__name__})")
        return bytes(element)

    def deserialize(self, message: bytes) -> bytes:
        return bytes(message)


class RowFieldExtractorSchema(SerializationSchema):
    """Serializes one field of a Row, which must already be bytes (a Kafka key or value taken
    from a record, as in PyFlink): ``RowFieldExtractorSchema(0).serialize(Row(b"k", b"v"))``
    is ``b"k"``; a None field is ``b""``."""

    def __init__(self, field_index: int) -> None:
        if isinstance(field_index, bool) or not isinstance(field_index, int) or field_index < 0:
            raise UsageError(
                f"RowFieldExtractorSchema field index must be a non-negative int, got {field_index!r}"
            )
        self.field_index = field_index

    def serialize(self, element: Any) -> bytes:
        try:
            value = element[self.field_index]
        except (IndexError, TypeError, KeyError):
            raise UsageError(
                f"RowFieldExtractorSchema({self.field_index}): the record {element!r} has no field {self.field_index}"
            ) from None
        if value is None:
            return b""
        if not isinstance(value, bytes | bytearray):
            raise UsageError(
                f"RowFieldExtractorSchema({self.field_index}): field {self.field_index} must be bytes, "
                f"got {value!r} ({type(value).__name__}); convert it to bytes first"
            )
        return bytes(value)

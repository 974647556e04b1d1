"""Avro, as in ``pyflink.datastream.formats.avro``, on fastavro.

- ``AvroSchema.parse_string(json)`` / ``parse_file(path)``: a parsed Avro schema.
- ``GenericRecordAvroTypeInfo(schema)``: a stream of Avro generic records, which in Python
  are dicts (field name to value), as PyFlink hands them to functions.
- ``env.create_input(AvroInputFormat(path, schema))``: the records of an Avro container file
  (or of every file under a directory), as dicts; files are dealt to the source's subtasks.
- ``FileSink.for_bulk_format(path, AvroBulkWriters.for_generic_record(schema))``: part files
  that are Avro container files (records as dicts, or Rows in the schema's field order).
- ``AvroRowSerializationSchema(avro_schema_string=...)`` / ``AvroRowDeserializationSchema``:
  a Row as Avro's binary encoding of one record (no container header, as Flink's) and back;
  nested records are nested Rows.

PyFlink also takes a Java record class (``record_class``); weir has no Java classes and
refuses it, naming ``avro_schema_string`` instead.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from weir.common.avro_values import avro_to_row, row_to_avro
from weir.common.io import InputFormat
from weir.common.serialization import BulkWriterFactory, DeserializationSchema, SerializationSchema
from weir.common.typeinfo import PickledBytesTypeInfo
from weir.common.types import Row
from weir.errors import UsageError

__all__ = [
    "AvroBulkWriters",
    "AvroInputFormat",
    "AvroRowDeserializationSchema",
    "AvroRowSerializationSchema",
    "AvroSchema",
    "GenericRecordAvroTypeInfo",
]


class AvroSchema:
    """A parsed Avro schema; ``str()`` is its JSON."""

    def __init__(self, schema_json: Any) -> None:
        import fastavro

        try:
            self.parsed: Any = fastavro.parse_schema(json.loads(json.dumps(schema_json)))
        except Exception as e:
            raise UsageError(f"AvroSchema: not a valid Avro schema: {e}") from None
        self._json = schema_json

    @staticmethod
    def parse_string(json_schema: str) -> AvroSchema:
        if not isinstance(json_schema, str):
            raise UsageError(
                f"AvroSchema.parse_string needs the schema as a JSON string, got {json_schema!r}"
            )
        try:
            return AvroSchema(json.loads(json_schema))
        except json.JSONDecodeError as e:
            raise UsageError(f"AvroSchema.parse_string: the schema is not JSON: {e}") from None

    @staticmethod
    def parse_file(file_path: str) -> AvroSchema:
        try:
            text = Path(file_path).read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"AvroSchema.parse_file: cannot read {file_path!r}: {e.strerror}") from None
        return AvroSchema.parse_string(text)

    def field_names(self) -> list[str]:
        """The fields of a record schema, in order."""
        if not isinstance(self.parsed, dict) or self.parsed.get("type") != "record":
            raise UsageError(f"the Avro schema {self} is not a record schema")
        return [f["name"] for f in self.parsed["fields"]]

    def __str__(self) -> str:
        return json.dumps(self._json, separators=(",", ":"))

    def __repr__(self) -> str:
        return f"AvroSchema({self})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AvroSchema) and str(other) == str(self)

    def __hash__(self) -> int:
        return hash(str(self))


def _schema_of(what: str, schema: Any) -> AvroSchema:
    if not isinstance(schema, AvroSchema):
        raise UsageError(f"{what} needs an AvroSchema (AvroSchema.parse_string(...)), got {schema!r}")
    return schema


class GenericRecordAvroTypeInfo(PickledBytesTypeInfo):
    """Avro generic records of ``schema``: dicts in Python, carried between tasks pickled."""

    def __init__(self, schema: AvroSchema) -> None:
        self.schema = _schema_of("GenericRecordAvroTypeInfo", schema)

    def _key(self) -> tuple[Any, ...]:
        return (str(self.schema),)

    def __repr__(self) -> str:
        return f"GenericRecordAvroTypeInfo({self.schema})"


def _schema_from_arguments(what: str, record_class: str | None, avro_schema_string: str | None) -> AvroSchema:
    if record_class is not None:
        raise UsageError(
            f"{what}: weir has no Java classes, so it cannot use the record class {record_class!r}; "
            "give the record's schema as avro_schema_string"
        )
    if avro_schema_string is None:
        raise UsageError(f"{what}: record_class or avro_schema_string should be specified")
    return AvroSchema.parse_string(avro_schema_string)


class AvroRowSerializationSchema(SerializationSchema):
    """A Row as the Avro binary encoding of one record of the schema."""

    def __init__(self, record_class: str | None = None, avro_schema_string: str | None = None) -> None:
        self.schema = _schema_from_arguments("AvroRowSerializationSchema", record_class, avro_schema_string)
        self.schema.field_names()  # a record schema

    def serialize(self, element: Any) -> bytes:
        import fastavro

        parsed = self.schema.parsed
        record = row_to_avro(element, parsed, parsed.get("__named_schemas", {}))
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, parsed, record)
        except (ValueError, TypeError) as e:
            raise UsageError(
                f"AvroRowSerializationSchema: {element!r} does not fit the schema: {e}"
            ) from None
        return out.getvalue()


class AvroRowDeserializationSchema(DeserializationSchema):
    """The Avro binary encoding of one record of the schema as a Row (named fields)."""

    def __init__(self, record_class: str | None = None, avro_schema_string: str | None = None) -> None:
        self.schema = _schema_from_arguments("AvroRowDeserializationSchema", record_class, avro_schema_string)
        self.schema.field_names()

    def deserialize(self, message: bytes) -> Row:
        import fastavro

        parsed = self.schema.parsed
        try:
            record = fastavro.schemaless_reader(io.BytesIO(bytes(message)), parsed, None)
        except Exception as e:
            raise UsageError(
                f"AvroRowDeserializationSchema: the message is not a record of the schema: {e}"
            ) from None
        row: Row = avro_to_row(record, parsed, parsed.get("__named_schemas", {}))
        return row


# -- files ---------------------------------------------------------------------------------------


class AvroInputFormat(InputFormat):
    """The records of the Avro container file at ``path`` (or of every file under it, hidden
    files excepted), as dicts; each file is read by one subtask."""

    reader_factory = "weir.operators.avro_io:avro_input_reader"

    def __init__(self, path: str, schema: AvroSchema) -> None:
        if not isinstance(path, str) or not path:
            raise UsageError(f"AvroInputFormat needs a path as a non-empty string, got {path!r}")
        self.path = path
        self.schema = _schema_of("AvroInputFormat", schema)
        self._type_info = GenericRecordAvroTypeInfo(schema)

    def get_produced_type(self) -> GenericRecordAvroTypeInfo:
        return self._type_info

    def produced_type(self) -> GenericRecordAvroTypeInfo:
        return self._type_info

    def read_file(self, path: Path) -> list[dict[str, Any]]:
        """Every record of one container file, read with this format's schema as the reader's."""
        import fastavro

        try:
            with path.open("rb") as f:
                records: list[dict[str, Any]] = list(fastavro.reader(f, reader_schema=self.schema.parsed))  # type: ignore[arg-type]
                return records
        except (ValueError, fastavro.read.SchemaResolutionError) as e:
            raise UsageError(f"AvroInputFormat: {str(path)!r} is not readable with the schema: {e}") from None

    def describe(self) -> dict[str, Any]:
        return {"class": "AvroInputFormat", "path": self.path, "schema": str(self.schema)}


class AvroWriterFactory(BulkWriterFactory):
    """Part files as Avro container files of ``schema``."""

    writer_factory = "weir.operators.avro_io:avro_part_writer"

    def __init__(self, schema: AvroSchema) -> None:
        self.schema = schema

    def describe(self) -> dict[str, Any]:
        return {"class": "AvroWriterFactory", "schema": str(self.schema)}

    def __repr__(self) -> str:
        return f"AvroWriterFactory({self.schema})"


class AvroBulkWriters:
    @staticmethod
    def for_generic_record(schema: AvroSchema) -> AvroWriterFactory:
        """Part files of Avro records of ``schema``: each record a dict (or a Row in the
        schema's field order)."""
        _schema_of("AvroBulkWriters.for_generic_record", schema).field_names()
        return AvroWriterFactory(schema)

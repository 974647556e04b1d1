"""``CsvSchema`` and ``CsvBulkWriters``, as in ``pyflink.datastream.formats.csv``.

``FileSink.for_bulk_format(path, CsvBulkWriters.for_schema(schema))`` writes each part file
as CSV, whole batches at a time (pyarrow's CSV writer; strings are quoted). The schema's
columns are the record's fields in order; number columns take weir's ``Types`` (PyFlink's
``DataTypes``), ``Types.LONG()`` by default as PyFlink's BIGINT. As in Flink, a file has no
header line unless ``set_use_header()``.
"""

from __future__ import annotations

from typing import Any

from weir.columnar.connectors import ARROW_TYPE_NAMES
from weir.common.serialization import BulkWriterFactory
from weir.common.typeinfo import BasicTypeInfo, Types
from weir.errors import UsageError

__all__ = ["CsvBulkWriters", "CsvSchema", "CsvSchemaBuilder"]

_NUMBERS = ("Long", "Integer", "Short", "Byte", "Double", "Float")


class CsvSchema:
    """Columns (name, type) and the file's separator and header."""

    def __init__(
        self, columns: list[tuple[str, BasicTypeInfo]], column_separator: str, use_header: bool
    ) -> None:
        self.columns = columns
        self.column_separator = column_separator
        self.use_header = use_header

    @staticmethod
    def builder() -> CsvSchemaBuilder:
        return CsvSchemaBuilder()

    def size(self) -> int:
        return len(self.columns)

    def __repr__(self) -> str:
        cols = ", ".join(f"{n}: {t!r}" for n, t in self.columns)
        return f"CsvSchema({cols}; separator {self.column_separator!r}, header {self.use_header})"


class CsvSchemaBuilder:
    def __init__(self) -> None:
        self._columns: list[tuple[str, BasicTypeInfo]] = []
        self._separator = ","
        self._use_header = False

    def _add(self, name: str, t: BasicTypeInfo) -> CsvSchemaBuilder:
        if not isinstance(name, str) or not name:
            raise UsageError(f"CsvSchema column name must be a non-empty string, got {name!r}")
        if name in (n for n, _ in self._columns):
            raise UsageError(f"CsvSchema has a column {name!r} already; column names are unique")
        self._columns.append((name, t))
        return self

    def add_string_column(self, name: str) -> CsvSchemaBuilder:
        return self._add(name, Types.STRING())

    def add_boolean_column(self, name: str) -> CsvSchemaBuilder:
        return self._add(name, Types.BOOLEAN())

    def add_number_column(self, name: str, number_type: Any = None) -> CsvSchemaBuilder:
        t = Types.LONG() if number_type is None else number_type
        if not isinstance(t, BasicTypeInfo) or t.name not in _NUMBERS:
            raise UsageError(
                f"CsvSchema.add_number_column({name!r}): number_type must be Types.LONG(), INT(), SHORT(), "
                f"BYTE(), DOUBLE() or FLOAT(), got {number_type!r}"
            )
        return self._add(name, t)

    def set_column_separator(self, char: str) -> CsvSchemaBuilder:
        if not isinstance(char, str) or len(char) != 1 or char in '"\r\n':
            raise UsageError(
                f"CsvSchema column separator must be one character (not a quote or newline), got {char!r}"
            )
        self._separator = char
        return self

    def set_use_header(self, use: bool = True) -> CsvSchemaBuilder:
        self._use_header = bool(use)
        return self

    def build(self) -> CsvSchema:
        if not self._columns:
            raise UsageError(
                "CsvSchema needs at least one column (add_string_column, add_number_column, ...)"
            )
        return CsvSchema(list(self._columns), self._separator, self._use_header)


class CsvBulkWriterFactory(BulkWriterFactory):
    """Writes part files as CSV with the schema's columns."""

    writer_factory = "weir.operators.columnar_io:csv_part_writer"

    def __init__(self, schema: CsvSchema) -> None:
        self.schema = schema
        self.field_names = [n for n, _ in schema.columns]
        self.arrow_types = [ARROW_TYPE_NAMES[t.name] for _, t in schema.columns]

    def writer_options(self) -> dict[str, Any]:
        return {"include_header": self.schema.use_header, "delimiter": self.schema.column_separator}

    def describe(self) -> dict[str, Any]:
        return {"class": "CsvBulkWriterFactory", "columns": self.field_names}

    def __repr__(self) -> str:
        return f"CsvBulkWriterFactory({self.schema!r})"


class CsvBulkWriters:
    @staticmethod
    def for_schema(schema: CsvSchema) -> CsvBulkWriterFactory:
        if not isinstance(schema, CsvSchema):
            raise UsageError(
                f"CsvBulkWriters.for_schema needs a CsvSchema (CsvSchema.builder()...build()), got {schema!r}"
            )
        return CsvBulkWriterFactory(schema)

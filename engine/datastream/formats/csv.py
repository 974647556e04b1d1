"""``CsvSchema`` and ``CsvBulkWriters``, as in ``pyflink.datastream.formats.csv``.

``FileSink.for_bulk_format(path, CsvBulkWriters.for_schema(schema))`` writes each part file
as CSV, whole batches at a time (pyarrow's CSV writer; strings are quoted). The schema's
columns are the record's fields in order; number columns take weir's ``Types`` (PyFlink's
``DataTypes``), ``Types.LONG()`` by default as PyFlink's BIGINT. As in Flink, a file has no
header line unless ``set_use_header()``.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from weir.columnar.connectors import ARROW_TYPE_NAMES
from weir.common.serialization import BulkWriterFactory, DeserializationSchema, SerializationSchema
from weir.common.typeinfo import BasicTypeInfo, RowTypeInfo, TypeInformation, Types
from weir.common.types import Row
from weir.datastream.formats._values import check_row_type, from_plain, to_plain
from weir.errors import UsageError

__all__ = [
    "CsvBulkWriters",
    "CsvRowDeserializationSchema",
    "CsvRowSerializationSchema",
    "CsvSchema",
    "CsvSchemaBuilder",
]

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


# -- one CSV line per message (Flink's CsvRowSerializationSchema / CsvRowDeserializationSchema) --


def _char(what: str, c: Any) -> str:
    if not isinstance(c, str) or len(c) != 1:
        raise UsageError(f"{what} must be one character, got {c!r}")
    return c


class _CsvDialect:
    def __init__(self, type_info: Any, what: str) -> None:
        self.type_info: RowTypeInfo = check_row_type(what, type_info)
        self.field_delimiter = ","
        self.array_delimiter = ";"
        self.quote: str | None = '"'
        self.escape: str | None = None
        self.null_literal = ""

    def csv_options(self) -> dict[str, Any]:
        if self.quote is None:
            return {
                "delimiter": self.field_delimiter,
                "quoting": csv.QUOTE_NONE,
                "escapechar": self.escape or "\\",
            }
        return {"delimiter": self.field_delimiter, "quotechar": self.quote, "escapechar": self.escape}


class CsvRowSerializationSchema(SerializationSchema):
    """A row as one CSV line: fields by the type's order, quoted only when they must be, arrays
    joined by the array element delimiter (``;``), None as the null literal (empty)."""

    def __init__(self, dialect: _CsvDialect, line_delimiter: str) -> None:
        self._dialect = dialect
        self._line_delimiter = line_delimiter

    class Builder:
        def __init__(self, type_info: TypeInformation) -> None:
            if type_info is None:
                raise UsageError("CsvRowSerializationSchema.Builder needs a row type, got None")
            self._dialect = _CsvDialect(type_info, "CsvRowSerializationSchema")
            self._line_delimiter = "\n"

        def set_field_delimiter(self, c: str) -> CsvRowSerializationSchema.Builder:
            self._dialect.field_delimiter = _char("CSV field delimiter", c)
            return self

        def set_line_delimiter(self, delimiter: str) -> CsvRowSerializationSchema.Builder:
            if delimiter not in ("\n", "\r", "\r\n", ""):
                raise UsageError(f"CSV line delimiter must be \\n, \\r, \\r\\n or empty, got {delimiter!r}")
            self._line_delimiter = delimiter
            return self

        def set_array_element_delimiter(self, delimiter: str) -> CsvRowSerializationSchema.Builder:
            self._dialect.array_delimiter = str(delimiter)
            return self

        def disable_quote_character(self) -> CsvRowSerializationSchema.Builder:
            self._dialect.quote = None
            return self

        def set_quote_character(self, c: str) -> CsvRowSerializationSchema.Builder:
            self._dialect.quote = _char("CSV quote character", c)
            return self

        def set_escape_character(self, c: str) -> CsvRowSerializationSchema.Builder:
            self._dialect.escape = _char("CSV escape character", c)
            return self

        def set_null_literal(self, s: str) -> CsvRowSerializationSchema.Builder:
            self._dialect.null_literal = str(s)
            return self

        def build(self) -> CsvRowSerializationSchema:
            return CsvRowSerializationSchema(self._dialect, self._line_delimiter)

    def _text(self, value: Any, t: TypeInformation) -> str:
        d = self._dialect
        if value is None:
            return d.null_literal
        element = getattr(t, "element_type", None)
        if element is not None:
            return d.array_delimiter.join(self._text(v, element) for v in value)
        if isinstance(t, RowTypeInfo):
            fields = value.get_fields_by_names(t.field_names) if isinstance(value, Row) else list(value)
            return d.array_delimiter.join(self._text(v, ft) for v, ft in zip(fields, t.field_types))
        plain = to_plain(value, t)
        if isinstance(plain, bool):
            return "true" if plain else "false"
        return str(plain)

    def serialize(self, element: Any) -> bytes:
        t = self._dialect.type_info
        if not isinstance(element, tuple | list | Row) or len(element) != t.get_arity():
            raise UsageError(
                f"CSV serialization of {t!r} needs a Row, tuple or list of {t.get_arity()} fields, got {element!r}"
            )
        fields = element.get_fields_by_names(t.field_names) if isinstance(element, Row) else list(element)
        out = io.StringIO()
        csv.writer(out, lineterminator=self._line_delimiter, **self._dialect.csv_options()).writerow(
            [self._text(v, ft) for v, ft in zip(fields, t.field_types)]
        )
        return out.getvalue().encode()


class CsvRowDeserializationSchema(DeserializationSchema):
    """One CSV line as a ``Row`` named by the type; the null literal reads as None. A line
    that does not fit raises ``UsageError`` unless ``set_ignore_parse_errors(True)`` (then
    None); with ``set_allow_comments(True)`` a line starting with ``#`` is None."""

    def __init__(self, dialect: _CsvDialect, allow_comments: bool, ignore_parse_errors: bool) -> None:
        self._dialect = dialect
        self._allow_comments = allow_comments
        self._ignore_errors = ignore_parse_errors

    class Builder:
        def __init__(self, type_info: TypeInformation) -> None:
            if type_info is None:
                raise UsageError("CsvRowDeserializationSchema.Builder needs a row type, got None")
            self._dialect = _CsvDialect(type_info, "CsvRowDeserializationSchema")
            self._allow_comments = False
            self._ignore_errors = False

        def set_field_delimiter(self, delimiter: str) -> CsvRowDeserializationSchema.Builder:
            self._dialect.field_delimiter = _char("CSV field delimiter", delimiter)
            return self

        def set_allow_comments(self, allow_comments: bool) -> CsvRowDeserializationSchema.Builder:
            self._allow_comments = bool(allow_comments)
            return self

        def set_array_element_delimiter(self, delimiter: str) -> CsvRowDeserializationSchema.Builder:
            self._dialect.array_delimiter = str(delimiter)
            return self

        def set_quote_character(self, c: str) -> CsvRowDeserializationSchema.Builder:
            self._dialect.quote = _char("CSV quote character", c)
            return self

        def set_escape_character(self, c: str) -> CsvRowDeserializationSchema.Builder:
            self._dialect.escape = _char("CSV escape character", c)
            return self

        def set_null_literal(self, null_literal: str) -> CsvRowDeserializationSchema.Builder:
            self._dialect.null_literal = str(null_literal)
            return self

        def set_ignore_parse_errors(self, ignore_parse_errors: bool) -> CsvRowDeserializationSchema.Builder:
            self._ignore_errors = bool(ignore_parse_errors)
            return self

        def build(self) -> CsvRowDeserializationSchema:
            return CsvRowDeserializationSchema(self._dialect, self._allow_comments, self._ignore_errors)

    def _value(self, text: str, t: TypeInformation, field: str) -> Any:
        d = self._dialect
        if text == d.null_literal:
            return None
        element = getattr(t, "element_type", None)
        if element is not None:
            return [self._value(part, element, field) for part in text.split(d.array_delimiter)]
        if isinstance(t, RowTypeInfo):
            parts = text.split(d.array_delimiter)
            return Row(
                **{
                    n: self._value(p, ft, f"{field}.{n}")
                    for n, ft, p in zip(t.field_names, t.field_types, parts)
                }
            )
        return from_plain(text, t, field)

    def deserialize(self, message: bytes) -> Any:
        text = message.decode() if isinstance(message, bytes | bytearray) else str(message)
        if self._allow_comments and text.lstrip().startswith("#"):
            return None
        t = self._dialect.type_info
        try:
            rows = list(csv.reader(io.StringIO(text), **self._dialect.csv_options()))
            if len(rows) != 1 or len(rows[0]) != t.get_arity():
                raise ValueError(f"expected one line of {t.get_arity()} fields")
            values = [self._value(v, ft, n) for v, ft, n in zip(rows[0], t.field_types, t.field_names)]
            return Row(**dict(zip(t.field_names, values)))
        except (ValueError, ArithmeticError, csv.Error) as e:
            if self._ignore_errors:
                return None
            raise UsageError(f"cannot read CSV message {text[:200]!r} as {t!r}: {e}") from None

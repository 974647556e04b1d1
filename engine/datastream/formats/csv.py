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
from weir.datastream.connectors.file_system import StreamFormat
from weir.datastream.formats._values import check_row_type, from_plain, to_plain
from weir.datastream.utils import ResultTypeQueryable
from weir.errors import UsageError

__all__ = [
    "CsvBulkWriters",
    "CsvReaderFormat",
    "CsvRowDeserializationSchema",
    "CsvRowSerializationSchema",
    "CsvSchema",
    "CsvSchemaBuilder",
]

_NUMBERS = ("Long", "Integer", "Short", "Byte", "Double", "Float")


class CsvSchema:
    """Columns (name, type, array element separator of an array column) and the file's dialect."""

    def __init__(
        self, columns: list[tuple[str, TypeInformation, str | None]], options: dict[str, Any]
    ) -> None:
        self.columns = columns
        self.options = options
        self.column_separator: str = options["column_separator"]
        self.use_header: bool = options["use_header"]

    @staticmethod
    def builder() -> CsvSchemaBuilder:
        return CsvSchemaBuilder()

    def size(self) -> int:
        return len(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    def get_type_info(self) -> RowTypeInfo:
        """The records' type: a row named by the columns (array columns are ``Types.LIST``)."""
        return Types.ROW_NAMED([c[0] for c in self.columns], [c[1] for c in self.columns])

    def is_plain(self) -> bool:
        """Only the separator and header differ from Flink's defaults, and no column is an array."""
        o = self.options
        return (
            all(sep is None for _, _, sep in self.columns)
            and o["quote_char"] == '"'
            and o["escape_char"] is None
            and o["null_value"] == ""
            and o["line_separator"] == "\n"
        )

    def __repr__(self) -> str:
        cols = ", ".join(f"{n}: {t!r}" for n, t, _ in self.columns)
        return f"CsvSchema({cols}; separator {self.column_separator!r}, header {self.use_header})"


def _one_char(what: str, char: Any, forbidden: str = "\r\n") -> str:
    if not isinstance(char, str) or len(char) != 1 or char in forbidden:
        raise UsageError(f"CsvSchema {what} must be one character (not a newline), got {char!r}")
    return char


class CsvSchemaBuilder:
    def __init__(self) -> None:
        self._columns: list[tuple[str, TypeInformation, str | None]] = []
        self._options: dict[str, Any] = {
            "column_separator": ",",
            "use_header": False,
            "quote_char": '"',
            "escape_char": None,
            "null_value": "",
            "line_separator": "\n",
            "array_element_separator": ";",
            "allow_comments": False,
            "skip_first_data_row": False,
            "strict_headers": False,
            "any_property_name": None,
        }

    def _add(self, name: str, t: TypeInformation, array_separator: str | None = None) -> CsvSchemaBuilder:
        if not isinstance(name, str) or not name:
            raise UsageError(f"CsvSchema column name must be a non-empty string, got {name!r}")
        if name in (c[0] for c in self._columns):
            raise UsageError(f"CsvSchema has a column {name!r} already; column names are unique")
        self._columns.append((name, t, array_separator))
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

    def add_array_column(self, name: str, separator: str = ";", element_type: Any = None) -> CsvSchemaBuilder:
        """An array column: its text is the elements joined by ``separator``; records hold a list."""
        element = Types.STRING() if element_type is None else element_type
        if not isinstance(element, BasicTypeInfo):
            raise UsageError(
                f"CsvSchema.add_array_column({name!r}): element_type must be a basic type such as "
                f"Types.STRING() or Types.INT(), got {element_type!r}"
            )
        if not isinstance(separator, str):
            raise UsageError(f"CsvSchema array separator must be a string, got {separator!r}")
        return self._add(name, Types.LIST(element), separator)

    def add_columns_from(self, schema: CsvSchema) -> CsvSchemaBuilder:
        if not isinstance(schema, CsvSchema):
            raise UsageError(f"add_columns_from needs a CsvSchema, got {schema!r}")
        for name, t, sep in schema.columns:
            self._add(name, t, sep)
        return self

    def clear_columns(self) -> CsvSchemaBuilder:
        self._columns.clear()
        return self

    def set_column_separator(self, char: str) -> CsvSchemaBuilder:
        self._options["column_separator"] = _one_char("column separator", char, '"\r\n')
        return self

    def set_use_header(self, use: bool = True) -> CsvSchemaBuilder:
        self._options["use_header"] = bool(use)
        return self

    def set_allow_comments(self, allow: bool = True) -> CsvSchemaBuilder:
        """Reading skips lines starting with ``#``."""
        self._options["allow_comments"] = bool(allow)
        return self

    def set_any_property_name(self, name: str) -> CsvSchemaBuilder:
        """Kept for Flink: Jackson's name for values past the last column."""
        self._options["any_property_name"] = name
        return self

    def set_array_element_separator(self, separator: str) -> CsvSchemaBuilder:
        """The separator of array columns added with the default one (``;``)."""
        if not isinstance(separator, str):
            raise UsageError(f"CsvSchema array element separator must be a string, got {separator!r}")
        self._options["array_element_separator"] = separator
        self._columns = [(n, t, separator if sep == ";" else sep) for n, t, sep in self._columns]
        return self

    def disable_array_element_separator(self) -> CsvSchemaBuilder:
        return self.set_array_element_separator("")

    def remove_array_element_separator(self, index: int) -> CsvSchemaBuilder:
        """Column ``index`` (an array column) keeps its text as one element."""
        if not isinstance(index, int) or not 0 <= index < len(self._columns):
            raise UsageError(f"CsvSchema has columns 0..{len(self._columns) - 1}, got index {index!r}")
        name, t, sep = self._columns[index]
        if sep is not None:
            self._columns[index] = (name, t, "")
        return self

    def set_escape_char(self, char: str) -> CsvSchemaBuilder:
        self._options["escape_char"] = _one_char("escape character", char)
        return self

    def disable_escape_char(self) -> CsvSchemaBuilder:
        self._options["escape_char"] = None
        return self

    def set_quote_char(self, char: str) -> CsvSchemaBuilder:
        self._options["quote_char"] = _one_char("quote character", char)
        return self

    def disable_quote_char(self) -> CsvSchemaBuilder:
        self._options["quote_char"] = None
        return self

    def set_line_separator(self, separator: str) -> CsvSchemaBuilder:
        if separator not in ("\n", "\r", "\r\n"):
            raise UsageError(f"CsvSchema line separator must be \\n, \\r or \\r\\n, got {separator!r}")
        self._options["line_separator"] = separator
        return self

    def set_null_value(self, null_value: str) -> CsvSchemaBuilder:
        """The text of a None value (empty by default); reading turns it back into None."""
        self._options["null_value"] = str(null_value)
        return self

    def set_skip_first_data_row(self, skip: bool = True) -> CsvSchemaBuilder:
        """Reading skips the first line after the header (or the first line, without one)."""
        self._options["skip_first_data_row"] = bool(skip)
        return self

    def set_strict_headers(self, strict: bool = True) -> CsvSchemaBuilder:
        """With a header, reading checks it names the columns in order."""
        self._options["strict_headers"] = bool(strict)
        return self

    def size(self) -> int:
        return len(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def build(self) -> CsvSchema:
        if not self._columns:
            raise UsageError(
                "CsvSchema needs at least one column (add_string_column, add_number_column, ...)"
            )
        return CsvSchema(list(self._columns), dict(self._options))


def _dialect(options: dict[str, Any]) -> dict[str, Any]:
    quote, escape = options["quote_char"], options["escape_char"]
    if quote is None:
        return {
            "delimiter": options["column_separator"],
            "quoting": csv.QUOTE_NONE,
            "escapechar": escape or "\\",
        }
    return {
        "delimiter": options["column_separator"],
        "quotechar": quote,
        "escapechar": escape,
        "doublequote": escape is None,
    }


def _field_text(value: Any, t: TypeInformation, sep: str | None, null_value: str) -> str:
    if value is None:
        return null_value
    if sep is not None:
        element: TypeInformation = getattr(t, "element_type", t)
        return sep.join(_field_text(v, element, None, null_value) for v in value)
    plain = to_plain(value, t)
    if isinstance(plain, bool):
        return "true" if plain else "false"
    return str(plain)


def _field_value(text: str, t: TypeInformation, sep: str | None, null_value: str, name: str) -> Any:
    if text == null_value:
        return None
    if sep is not None:
        element: TypeInformation = getattr(t, "element_type", t)
        if text == "":
            return []
        parts = text.split(sep) if sep else [text]
        return [from_plain(p, element, name) for p in parts]
    return from_plain(text, t, name)


class CsvBulkWriterFactory(BulkWriterFactory):
    """Writes part files as CSV with the schema's columns: with pyarrow's writer (strings quoted)
    when only the separator and header are set, else line by line with the schema's quote,
    escape, null value, line separator and array separators."""

    writer_factory = "weir.operators.columnar_io:csv_part_writer"

    def __init__(self, schema: CsvSchema) -> None:
        self.schema = schema
        self.field_names = [c[0] for c in schema.columns]
        self.arrow_types = (
            [ARROW_TYPE_NAMES[getattr(t, "name", "")] for _, t, _ in schema.columns]
            if schema.is_plain()
            else []
        )

    def writer_options(self) -> dict[str, Any]:
        return {"include_header": self.schema.use_header, "delimiter": self.schema.column_separator}

    def text_lines(self, records: list[Any], with_header: bool) -> str:
        """The records as CSV text (the writer's path for a schema that is not plain)."""
        o = self.schema.options
        out = io.StringIO()
        writer = csv.writer(out, lineterminator=o["line_separator"], **_dialect(o))
        if with_header:
            writer.writerow(self.field_names)
        for r in records:
            fields = (
                r.get_fields_by_names(self.field_names) if isinstance(r, Row) and r.get_field_names() else r
            )
            if not isinstance(fields, tuple | list | Row) or len(fields) != len(self.schema.columns):
                raise UsageError(
                    f"FileSink CSV: record {r!r} does not have the schema's {len(self.schema.columns)} fields"
                )
            writer.writerow(
                [
                    _field_text(v, t, sep, o["null_value"])
                    for v, (_, t, sep) in zip(fields, self.schema.columns)
                ]
            )
        return out.getvalue()

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


class CsvReaderFormat(StreamFormat):
    """Reads CSV files into Rows named by the schema's columns (``FileSource.for_record_stream_format``).

    The header line (``set_use_header``) is skipped, and checked against the column names with
    ``set_strict_headers``; ``set_skip_first_data_row`` skips one more line, ``set_allow_comments``
    lines starting with ``#``; blank lines are skipped. A line with another number of fields, or a
    value that does not convert, raises ``UsageError`` naming the file's line.
    """

    def __init__(self, schema: CsvSchema) -> None:
        super().__init__("csv")
        self.schema = schema

    @staticmethod
    def for_schema(schema: CsvSchema) -> CsvReaderFormat:
        if not isinstance(schema, CsvSchema):
            raise UsageError(f"CsvReaderFormat.for_schema needs a CsvSchema, got {schema!r}")
        return CsvReaderFormat(schema)

    def produced_type(self) -> RowTypeInfo:
        return self.schema.get_type_info()

    def parse_records(self, text: str, where: str) -> list[Any]:
        o, columns = self.schema.options, self.schema.columns
        names = [c[0] for c in columns]
        lines = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
        if o["allow_comments"]:
            lines = [(i, line) for i, line in lines if not line.lstrip().startswith("#")]
        if o["use_header"] and lines:
            number, header = lines.pop(0)
            found = next(csv.reader([header], **_dialect(o)))
            if o["strict_headers"] and found != names:
                raise UsageError(
                    f"{where} line {number}: the header is {found}; the schema's columns are {names}"
                )
        if o["skip_first_data_row"] and lines:
            lines.pop(0)
        records = []
        for number, line in lines:
            fields = next(csv.reader([line], **_dialect(o)))
            if len(fields) != len(columns):
                raise UsageError(
                    f"{where} line {number}: {len(fields)} fields, the schema has {len(columns)}: {line!r}"
                )
            try:
                values = [
                    _field_value(f, t, sep, o["null_value"], n) for f, (n, t, sep) in zip(fields, columns)
                ]
            except (ValueError, ArithmeticError) as e:
                raise UsageError(f"{where} line {number}: {e}") from None
            records.append(Row(**dict(zip(names, values))))
        return records


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


class CsvRowDeserializationSchema(DeserializationSchema, ResultTypeQueryable):
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

    def get_produced_type(self) -> RowTypeInfo:
        return self._dialect.type_info

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

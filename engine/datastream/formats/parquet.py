"""Parquet, as in ``pyflink.datastream.formats.parquet``: ``ParquetBulkWriters`` and
``ParquetColumnarRowInputFormat`` for rows, ``AvroParquetWriters`` and
``AvroParquetReaders`` for Avro generic records (dicts).

``FileSink.for_bulk_format(path, ParquetBulkWriters.for_row_type(row_type))`` writes each
part file as one Parquet file, whole batches at a time (pyarrow); a typed stream of tuples
is written from its columns without building records. ``row_type`` is weir's row type
(``Types.ROW_NAMED``; ``Types.ROW`` and ``Types.TUPLE`` name the columns f0, f1, ...), where
PyFlink takes the Table API's ``DataTypes.ROW``; ``hadoop_config`` and ``utc_timestamp`` are
accepted and have no effect (no Hadoop, no timestamp columns).
"""

from __future__ import annotations

from typing import Any

from weir.columnar.connectors import ARROW_TYPE_NAMES, field_types_of
from weir.common.avro_values import arrow_schema
from weir.common.serialization import BulkWriterFactory, RowDataBulkWriterFactory
from weir.common.typeinfo import RowTypeInfo, TupleTypeInfo, Types
from weir.common.types import Row
from weir.datastream.connectors.file_system import BulkFormat, StreamFormat
from weir.datastream.formats.avro import AvroSchema, GenericRecordAvroTypeInfo
from weir.errors import UsageError

__all__ = [
    "AvroParquetReaders",
    "AvroParquetWriters",
    "ParquetBulkWriters",
    "ParquetColumnarRowInputFormat",
    "ParquetWriterFactory",
]


class ParquetWriterFactory(RowDataBulkWriterFactory):
    """Writes part files as Parquet with the given columns (names and Arrow type names)."""

    writer_factory = "weir.operators.columnar_io:parquet_part_writer"

    def __init__(self, field_names: list[str], arrow_types: list[str], row_type: Any = None) -> None:
        super().__init__(row_type)
        self.field_names = field_names
        self.arrow_types = arrow_types

    def writer_options(self) -> dict[str, Any]:
        return {}

    def describe(self) -> dict[str, Any]:
        return {"class": "ParquetWriterFactory", "columns": dict(zip(self.field_names, self.arrow_types))}

    def __repr__(self) -> str:
        return f"ParquetWriterFactory({dict(zip(self.field_names, self.arrow_types))})"


class ParquetBulkWriters:
    @staticmethod
    def for_row_type(
        row_type: Any, hadoop_config: Any = None, utc_timestamp: bool = False
    ) -> ParquetWriterFactory:
        names, arrow_types = arrow_columns("ParquetBulkWriters.for_row_type", row_type)
        return ParquetWriterFactory(names, arrow_types, row_type)


def arrow_columns(what: str, row_type: Any) -> tuple[list[str], list[str]]:
    """The column names and Arrow type names of weir's row type (a RowTypeInfo, or a
    TupleTypeInfo whose columns are f0, f1, ...)."""
    if isinstance(row_type, RowTypeInfo):
        names = row_type.get_field_names()
        fields = field_types_of(what, Types.TUPLE(row_type.get_field_types()))
    elif isinstance(row_type, TupleTypeInfo):
        fields = field_types_of(what, row_type)
        names = [f"f{i}" for i in range(len(fields))]
    else:
        raise UsageError(
            f"{what} needs a row type such as "
            f"Types.ROW_NAMED(['id', 'name'], [Types.LONG(), Types.STRING()]), got {row_type!r}"
        )
    return names, [ARROW_TYPE_NAMES[t.name] for t in fields]


class ParquetColumnarRowInputFormat(BulkFormat):
    """Reads Parquet files into Rows of ``row_type`` (weir's row type: its field names are
    the columns read, its types the Rows' values), for ``FileSource.for_bulk_file_format``.
    ``is_case_sensitive=False`` matches column names whatever their case; ``batch_size`` is
    the number of rows read at a time; ``hadoop_config`` and ``is_utc_timestamp`` are
    accepted and have no effect (no Hadoop, no timestamp columns)."""

    kind = "parquet"

    def __init__(
        self,
        row_type: Any,
        hadoop_config: Any = None,
        batch_size: int = 2048,
        is_utc_timestamp: bool = False,
        is_case_sensitive: bool = True,
    ) -> None:
        if not isinstance(row_type, RowTypeInfo):
            raise UsageError(
                "ParquetColumnarRowInputFormat needs a row type such as "
                f"Types.ROW_NAMED(['id', 'name'], [Types.LONG(), Types.STRING()]), got {row_type!r}"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise UsageError(
                f"ParquetColumnarRowInputFormat batch_size must be a positive int, got {batch_size!r}"
            )
        arrow_columns("ParquetColumnarRowInputFormat", row_type)  # only the column types weir reads
        self.row_type = row_type
        self.batch_size = batch_size
        self.is_case_sensitive = is_case_sensitive

    def produced_type(self) -> RowTypeInfo:
        return self.row_type

    def read_file(self, path: Any) -> list[Any]:
        import pyarrow.parquet as pq

        names = self.row_type.get_field_names()
        parquet = pq.ParquetFile(path)
        available = parquet.schema_arrow.names
        if self.is_case_sensitive:
            columns = names
        else:
            by_lower = {c.lower(): c for c in available}
            columns = [by_lower.get(n.lower(), n) for n in names]
        missing = [c for c in columns if c not in available]
        if missing:
            raise UsageError(
                f"ParquetColumnarRowInputFormat: {str(path)!r} has no column {missing[0]!r} (it has {available})"
            )
        rows: list[Any] = []
        for batch in parquet.iter_batches(batch_size=self.batch_size, columns=columns):
            for values in zip(*(c.to_pylist() for c in batch.columns)):
                rows.append(Row(**dict(zip(names, values))))
        return rows


class AvroParquetRecordFormat(StreamFormat):
    """Parquet files read as Avro generic records (dicts) of a schema's fields."""

    def __init__(self, schema: Any) -> None:
        super().__init__("avro_parquet")
        self.schema = schema

    def produced_type(self) -> GenericRecordAvroTypeInfo:
        return GenericRecordAvroTypeInfo(self.schema)

    def read_file(self, path: Any) -> list[dict[str, Any]]:
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path, columns=self.schema.field_names())
        except Exception as e:
            raise UsageError(
                f"AvroParquetReaders: cannot read {str(path)!r} with the schema's fields: {e}"
            ) from None
        records: list[dict[str, Any]] = table.to_pylist()
        return records


class AvroParquetReaders:
    @staticmethod
    def for_generic_record(schema: Any) -> AvroParquetRecordFormat:
        """A format for ``FileSource.for_record_stream_format`` that reads Parquet files into
        Avro generic records (dicts) of ``schema``'s fields."""
        if not isinstance(schema, AvroSchema):
            raise UsageError(f"AvroParquetReaders.for_generic_record needs an AvroSchema, got {schema!r}")
        schema.field_names()
        return AvroParquetRecordFormat(schema)


class AvroParquetWriterFactory(BulkWriterFactory):
    """Part files as Parquet whose columns are an Avro record schema's fields."""

    writer_factory = "weir.operators.avro_io:avro_parquet_part_writer"

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self.arrow_schema = arrow_schema(schema.parsed)

    def describe(self) -> dict[str, Any]:
        return {"class": "AvroParquetWriterFactory", "schema": str(self.schema)}


class AvroParquetWriters:
    @staticmethod
    def for_generic_record(schema: Any) -> AvroParquetWriterFactory:
        """Part files as Parquet of Avro generic records (dicts, or Rows in the schema's field
        order) of ``schema``; Avro's types map to Parquet's as parquet-avro maps them."""
        if not isinstance(schema, AvroSchema):
            raise UsageError(f"AvroParquetWriters.for_generic_record needs an AvroSchema, got {schema!r}")
        schema.field_names()
        return AvroParquetWriterFactory(schema)

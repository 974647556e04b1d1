"""``ParquetBulkWriters``, as in ``pyflink.datastream.formats.parquet``.

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
from weir.common.serialization import BulkWriterFactory
from weir.common.typeinfo import RowTypeInfo, TupleTypeInfo, Types
from weir.errors import UsageError

__all__ = ["ParquetBulkWriters", "ParquetWriterFactory"]


class ParquetWriterFactory(BulkWriterFactory):
    """Writes part files as Parquet with the given columns (names and Arrow type names)."""

    writer_factory = "weir.operators.columnar_io:parquet_part_writer"

    def __init__(self, field_names: list[str], arrow_types: list[str]) -> None:
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
        if isinstance(row_type, RowTypeInfo):
            names = row_type.get_field_names()
            fields = field_types_of(
                "ParquetBulkWriters.for_row_type", Types.TUPLE(row_type.get_field_types())
            )
        elif isinstance(row_type, TupleTypeInfo):
            fields = field_types_of("ParquetBulkWriters.for_row_type", row_type)
            names = [f"f{i}" for i in range(len(fields))]
        else:
            raise UsageError(
                "ParquetBulkWriters.for_row_type needs a row type such as "
                f"Types.ROW_NAMED(['id', 'name'], [Types.LONG(), Types.STRING()]), got {row_type!r}"
            )
        return ParquetWriterFactory(names, [ARROW_TYPE_NAMES[t.name] for t in fields])

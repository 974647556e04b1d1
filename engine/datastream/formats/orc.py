"""``OrcBulkWriters``, as in ``pyflink.datastream.formats.orc``.

``FileSink.for_bulk_format(path, OrcBulkWriters.for_row_type(row_type))`` writes each part
file as one ORC file (pyarrow), whole batches at a time, the file finished when its part
rolls (on every checkpoint, as every bulk format). ``row_type`` is weir's row type, as for
``ParquetBulkWriters``; ``writer_properties`` are pyarrow's ORC writer options by Flink's
ORC keys where they match (``orc.compress``: NONE, ZLIB, SNAPPY, LZ4, ZSTD;
``orc.stripe.size``; ``orc.row.index.stride``), any other key is refused;
``hadoop_config`` is accepted and has no effect.
"""

from __future__ import annotations

from typing import Any

from weir.common.serialization import RowDataBulkWriterFactory
from weir.datastream.formats.parquet import arrow_columns
from weir.errors import UsageError

__all__ = ["OrcBulkWriters", "OrcWriterFactory"]

_COMPRESSIONS = ("NONE", "ZLIB", "SNAPPY", "LZ4", "ZSTD")


class OrcWriterFactory(RowDataBulkWriterFactory):
    """Writes part files as ORC with the given columns (names and Arrow type names)."""

    writer_factory = "weir.operators.columnar_io:orc_part_writer"

    def __init__(
        self, field_names: list[str], arrow_types: list[str], row_type: Any, options: dict[str, Any]
    ) -> None:
        super().__init__(row_type)
        self.field_names = field_names
        self.arrow_types = arrow_types
        self.options = options

    def writer_options(self) -> dict[str, Any]:
        return dict(self.options)

    def describe(self) -> dict[str, Any]:
        return {"class": "OrcWriterFactory", "columns": dict(zip(self.field_names, self.arrow_types))}


def _writer_options(properties: Any) -> dict[str, Any]:
    """pyarrow's ``ORCWriter`` options from Flink's ORC writer keys."""
    if properties is None:
        return {}
    values = properties.to_dict() if hasattr(properties, "to_dict") else dict(properties)
    options: dict[str, Any] = {}
    for key, value in values.items():
        if key == "orc.compress":
            if str(value).upper() not in _COMPRESSIONS:
                raise UsageError(
                    f"OrcBulkWriters: orc.compress must be one of {', '.join(_COMPRESSIONS)}, got {value!r}"
                )
            options["compression"] = str(value).upper()
        elif key == "orc.stripe.size":
            options["stripe_size"] = int(value)
        elif key == "orc.row.index.stride":
            options["row_index_stride"] = int(value)
        else:
            raise UsageError(
                f"OrcBulkWriters: weir does not support the ORC writer property {key!r}; "
                "it takes orc.compress, orc.stripe.size and orc.row.index.stride"
            )
    return options


class OrcBulkWriters:
    @staticmethod
    def for_row_type(
        row_type: Any, writer_properties: Any = None, hadoop_config: Any = None
    ) -> OrcWriterFactory:
        names, arrow_types = arrow_columns("OrcBulkWriters.for_row_type", row_type)
        return OrcWriterFactory(names, arrow_types, row_type, _writer_options(writer_properties))

"""The runtime sides of weir's Avro formats (``weir.datastream.formats.avro``): the reader of
``AvroInputFormat`` and the part writer of ``AvroBulkWriters``."""

from __future__ import annotations

from typing import Any

from weir.codec.batch import Batch
from weir.common.avro_values import row_to_avro
from weir.errors import UsageError
from weir.operators.sources import FileLinesReader


def avro_input_reader(input_format: Any, subtask: int, parallelism: int) -> FileLinesReader:
    """Files under the format's path dealt round robin; a split is ``[path, records read]``."""
    reader = FileLinesReader([input_format.path], "UTF-8", subtask, parallelism)
    reader.read_file = input_format.read_file
    return reader


class AvroPartWriter:
    """One part file as an Avro container file: a block per batch, the last one at ``finish``."""

    def __init__(self, factory: Any, file: Any) -> None:
        from fastavro.write import Writer

        self._parsed = factory.schema.parsed
        self._names = self._parsed.get("__named_schemas", {})
        self._writer = Writer(file, self._parsed)
        self._file = file

    def write_batch(self, batch: Batch) -> None:
        for record in batch.as_list():
            self._writer.write(row_to_avro(record, self._parsed, self._names))
        self._writer.flush()

    def finish(self) -> None:
        self._writer.flush()
        self._file.flush()


def avro_part_writer(factory: Any, file: Any) -> AvroPartWriter:
    return AvroPartWriter(factory, file)


class AvroParquetPartWriter:
    """One part file as Parquet with the columns of an Avro record schema."""

    def __init__(self, factory: Any, file: Any) -> None:
        import pyarrow.parquet as pq

        self._parsed = factory.schema.parsed
        self._names = self._parsed.get("__named_schemas", {})
        self._schema = factory.arrow_schema
        self._writer = pq.ParquetWriter(file, self._schema)

    def write_batch(self, batch: Batch) -> None:
        import pyarrow as pa

        records = [row_to_avro(r, self._parsed, self._names) for r in batch.as_list()]
        try:
            table = pa.Table.from_pylist(records, schema=self._schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise UsageError(
                f"AvroParquetWriters: a record does not fit the schema {self._schema}: {e}"
            ) from None
        self._writer.write_table(table)

    def finish(self) -> None:
        self._writer.close()


def avro_parquet_part_writer(factory: Any, file: Any) -> AvroParquetPartWriter:
    return AvroParquetPartWriter(factory, file)

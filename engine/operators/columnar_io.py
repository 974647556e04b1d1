"""The runtime side of the columnar sources and of the FileSink's bulk formats.

Readers (the ``reader_factory`` of ``weir.columnar.connectors``' sources):

- ``ColumnGeneratorReader``: ``DataGeneratorReader``'s splits and rate limit, one generator
  call per batch over an int64 array of indexes; the returned columns are checked against
  the source's type once per batch (length, dtype) and become the batch's values.
- ``ArrowFileReader``: splits ``[path, row group (None for CSV), rows read]`` dealt round
  robin over the subtasks; the split being read is held as one Arrow table and sliced into
  batches of columns. Splits are absolute, so a checkpoint restores them at any parallelism.

Part writers (the ``writer_factory`` of ``weir.datastream.formats``' bulk writer factories):
``ArrowPartWriter`` writes whole batches into one part file with pyarrow's Parquet or CSV
writer and finishes the file (footer, last block) when the FileSink rolls it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import trio

from weir.codec.batch import Batch, TupleColumns
from weir.codec.strings import Strings
from weir.columnar.connectors import ARROW_TYPE_NAMES
from weir.columnar.functions import columns_of
from weir.common.typeinfo import BasicTypeInfo, TupleTypeInfo
from weir.errors import UsageError
from weir.operators.sources import DataGeneratorReader, _SplitReader

#: dtypes named as examples of what converts to a field's dtype
_CANDIDATE_DTYPES = [
    np.dtype(n)
    for n in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float32", "float64")
]

# ------------------------------------------------------------------------------ checking columns


def _check_column(api: str, j: int, t: BasicTypeInfo, column: Any, n: int) -> np.ndarray | list[Any]:
    """Field ``j``'s column as a batch holds it: a numpy array of the type's dtype, or a list
    or ``Strings`` (strings). Converts without loss where numpy can; else a UsageError naming what fits."""
    what = f"{api}: field {j} ({t!r})"
    if t.numpy_dtype is None or t.python_type is str:  # strings: a list
        if isinstance(column, np.ndarray) and column.dtype.kind in "UO" and column.ndim == 1:
            column = column.tolist()
        elif isinstance(column, tuple):
            column = list(column)
        elif not isinstance(column, list | Strings):
            raise UsageError(
                f"{what} is {type(column).__name__}; a string column is a list, a numpy str array or Strings"
            )
    else:
        target = np.dtype(t.numpy_dtype)
        if not isinstance(column, np.ndarray) or column.ndim != 1:
            raise UsageError(
                f"{what} is {type(column).__name__}"
                + (f" of {column.ndim} dimensions" if isinstance(column, np.ndarray) else "")
                + f"; it needs a 1-D numpy array of {target}"
            )
        if column.dtype != target:
            if not np.can_cast(column.dtype, target, "safe"):
                fits = [str(d) for d in _CANDIDATE_DTYPES if np.can_cast(d, target, "safe")]
                raise UsageError(
                    f"{what} is a column of dtype {column.dtype}; it needs {target} "
                    f"(or a dtype that converts to it without loss: {', '.join(fits)})"
                )
            column = column.astype(target)
    if len(column) != n:
        raise UsageError(
            f"{what} has {len(column)} values for {n} indexes; a column holds one value per index"
        )
    return column


def checked_values(api: str, field_types: list[BasicTypeInfo], single: bool, out: Any, n: int) -> Any:
    """A batch's values from a generator's result ``out`` for ``n`` records: one column (a
    stream of one basic type) or ``TupleColumns``."""
    if single:
        if isinstance(out, tuple) and len(out) == 1:
            out = out[0]
        return _check_column(api, 0, field_types[0], out, n)
    if not isinstance(out, tuple | list) or len(out) != len(field_types):
        got = f"{len(out)} columns" if isinstance(out, tuple | list) else type(out).__name__
        raise UsageError(
            f"{api}: the generator returned {got}; the type has {len(field_types)} fields, "
            f"so it returns a tuple of {len(field_types)} columns"
        )
    return TupleColumns([_check_column(api, j, t, c, n) for j, (t, c) in enumerate(zip(field_types, out))])


# ------------------------------------------------------------------------------ readers


class ColumnGeneratorReader(DataGeneratorReader):
    """See the module docstring; splits, positions and rate as ``DataGeneratorReader``."""

    def __init__(self, source: Any, subtask: int, parallelism: int) -> None:
        super().__init__(
            source.generator, source.count, source.rate_limit, subtask, parallelism, source.batch_size
        )
        self.field_types = source.field_types
        self.single = not isinstance(source.type_info, TupleTypeInfo)

    def _generate(self, indexes: range) -> Batch:
        at = np.arange(indexes.start, indexes.stop, indexes.step, dtype=np.int64)
        out = self.generator(at)
        return Batch(checked_values("ColumnGeneratorSource", self.field_types, self.single, out, len(at)))


def arrow_column(chunked: Any) -> np.ndarray | Strings | list[Any]:
    """One column of an Arrow table slice: numpy (no copy where Arrow allows), ``Strings``
    for strings without nulls, or a list for other strings and a numeric column with nulls."""
    import pyarrow as pa

    array = chunked.chunk(0) if chunked.num_chunks == 1 else chunked.combine_chunks()
    strings = Strings.from_arrow(array)  # strings without nulls: Arrow's bytes, no str each
    if strings is not None:
        return strings
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type) or array.null_count:
        return array.to_pylist()
    return array.to_numpy(zero_copy_only=False)


class ArrowFileReader(_SplitReader):
    """See the module docstring."""

    def __init__(self, source: Any, subtask: int, parallelism: int) -> None:
        self.subtask, self.parallelism = subtask, parallelism
        self.file_format = source.file_format
        self.columns = list(source.columns)
        self.file_types = list(source.file_types)
        self.field_types = list(source.field_types)
        self.single = not isinstance(source.type_info, TupleTypeInfo)
        self.rate = None if source.rate_limit is None else source.rate_limit / parallelism
        self.batch_size = (
            source.batch_size
            if self.rate is None
            else max(1, min(source.batch_size, int(self.rate / 100) or 1))
        )
        self.emitted = 0
        self.started_at: float | None = None
        splits: list[list[Any]] = []
        for path in source.files:
            if self.file_format == "parquet":
                import pyarrow.parquet as pq

                groups = pq.ParquetFile(path).metadata.num_row_groups
                splits.extend([path, group, 0] for group in range(groups))
            else:
                splits.append([path, None, 0])
        self.splits = [s for i, s in enumerate(splits) if i % parallelism == subtask]
        self._table: Any = None  # the first split's rows, as Arrow

    def restore(self, position: Any) -> None:
        super().restore(position)
        self._table = None

    def restore_splits(self, splits: list[Any]) -> None:
        super().restore_splits(splits)
        self._table = None

    def _read(self, split: list[Any]) -> Any:
        import pyarrow as pa

        path, group = split[0], split[1]
        try:
            if group is not None:
                import pyarrow.parquet as pq

                table = pq.ParquetFile(path).read_row_group(group, columns=self.columns)
            else:
                import pyarrow.csv as pcsv

                options = pcsv.ConvertOptions(
                    include_columns=self.columns,
                    column_types={c: pa.type_for_alias(t) for c, t in zip(self.columns, self.file_types)},
                )
                table = pcsv.read_csv(path, convert_options=options)
        except FileNotFoundError:
            raise UsageError(
                f"ArrowFileSource file '{path}' disappeared before it was read to its end"
            ) from None
        except (OSError, ValueError, KeyError) as exc:
            raise UsageError(f"ArrowFileSource cannot read '{path}': {exc}") from None
        for i, (name, t) in enumerate(zip(self.columns, self.field_types)):
            target = pa.type_for_alias(ARROW_TYPE_NAMES[t.name])
            if table.column(i).type != target:
                try:
                    table = table.set_column(i, name, table.column(i).cast(target))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise UsageError(
                        f"ArrowFileSource: column {name!r} of '{path}' ({table.column(i).type}) does not "
                        f"convert to {t!r}: {exc}"
                    ) from None
        return table

    async def next_batch(self) -> Batch | None:
        while self.splits:
            split = self.splits[0]
            if self._table is None:
                self._table = self._read(split)
            rows = self._table.num_rows
            if split[2] < rows:
                end = min(split[2] + (self.batch_size or rows), rows)
                if self.rate is not None:  # as DataGeneratorReader: on the task's clock
                    if self.started_at is None:
                        self.started_at = trio.current_time()
                    await trio.sleep_until(self.started_at + self.emitted / self.rate)
                piece = self._table.slice(split[2], end - split[2])
                split[2] = end
                self.emitted += piece.num_rows
                columns = [arrow_column(piece.column(i)) for i in range(piece.num_columns)]
                return Batch(columns[0] if self.single else TupleColumns(columns))
            self.splits.pop(0)
            self._table = None
        return None


def column_generator_reader(source: Any, subtask: int, parallelism: int) -> ColumnGeneratorReader:
    return ColumnGeneratorReader(source, subtask, parallelism)


def arrow_file_reader(source: Any, subtask: int, parallelism: int) -> ArrowFileReader:
    return ArrowFileReader(source, subtask, parallelism)


# ------------------------------------------------------------------------------ bulk part writers


def batch_columns(batch: Batch, arity: int) -> list[Any]:
    """A batch's columns: as held (columns, an array of one basic type) or taken from its records."""
    columns = columns_of(batch.values)
    if columns is not None and len(columns) == arity:
        return list(columns)
    records = batch.as_list()
    if arity == 1 and not (records and isinstance(records[0], tuple | list) and len(records[0]) == 1):
        return [records]
    rows = [r if isinstance(r, tuple | list) else tuple(r) for r in records]
    if any(len(r) != arity for r in rows):
        bad = next(r for r in rows if len(r) != arity)
        raise UsageError(
            f"FileSink bulk format: record {bad!r} has {len(bad)} fields; the schema has {arity}"
        )
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(arity)]


class ArrowPartWriter:
    """Writes batches into one open part file with pyarrow; ``finish`` completes the file
    (the FileSink then fsyncs and closes it)."""

    def __init__(
        self, file: Any, names: list[str], types: list[str], kind: str, options: dict[str, Any]
    ) -> None:
        import pyarrow as pa

        self.schema = pa.schema([(n, pa.type_for_alias(t)) for n, t in zip(names, types)])
        self._kind = kind
        if kind == "parquet":
            import pyarrow.parquet as pq

            self._writer: Any = pq.ParquetWriter(file, self.schema, **options)
        elif kind == "orc":
            import pyarrow.orc as orc

            self._writer = orc.ORCWriter(file, **options)
        else:
            import pyarrow.csv as pcsv

            self._writer = pcsv.CSVWriter(file, self.schema, write_options=pcsv.WriteOptions(**options))

    def write_batch(self, batch: Batch) -> None:
        import pyarrow as pa

        columns = batch_columns(batch, len(self.schema))
        try:
            arrays = [pa.array(c, type=f.type) for c, f in zip(columns, self.schema)]
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise UsageError(
                f"FileSink bulk format: a batch does not fit the schema {self.schema}: {exc}"
            ) from None
        batch_ = pa.record_batch(arrays, schema=self.schema)
        if self._kind == "orc":  # pyarrow's ORC writer takes tables
            self._writer.write(pa.Table.from_batches([batch_]))
        else:
            self._writer.write_batch(batch_)

    def finish(self) -> None:
        self._writer.close()


def parquet_part_writer(factory: Any, file: Any) -> ArrowPartWriter:
    return ArrowPartWriter(
        file, factory.field_names, factory.arrow_types, "parquet", factory.writer_options()
    )


class TextCsvPartWriter:
    """CSV written line by line by the format's ``text_lines`` (a schema with a quote, escape,
    null value, line separator or array columns of its own)."""

    def __init__(self, factory: Any, file: Any) -> None:
        self._factory = factory
        self._file = file
        self._header_due = bool(factory.schema.use_header)

    def write_batch(self, batch: Batch) -> None:
        self._file.write(self._factory.text_lines(batch.as_list(), self._header_due).encode())
        self._header_due = False

    def finish(self) -> None:
        if self._header_due:  # an empty part still has its header, as pyarrow's writer gives it
            self._file.write(self._factory.text_lines([], True).encode())
        self._file.flush()


def orc_part_writer(factory: Any, file: Any) -> ArrowPartWriter:
    return ArrowPartWriter(file, factory.field_names, factory.arrow_types, "orc", factory.writer_options())


def csv_part_writer(factory: Any, file: Any) -> ArrowPartWriter | TextCsvPartWriter:
    if not factory.arrow_types:
        return TextCsvPartWriter(factory, file)
    return ArrowPartWriter(file, factory.field_names, factory.arrow_types, "csv", factory.writer_options())

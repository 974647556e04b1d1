"""Sources that produce columns and a sink function that takes them.

- ``ColumnGeneratorSource(generator, count, type_info)``: ``generator(indexes)`` returns the
  columns of the records at ``indexes`` (an int64 array), as ``DataGeneratorSource``'s
  ``generator_function(index)`` returns one record; the indexes are split across subtasks
  and checkpointed the same way.
- ``ArrowFileSource(paths)``: Parquet or CSV files read with pyarrow; Arrow record batches
  become columns (numpy without a copy where Arrow allows it, strings as lists). Splits are
  files (and a Parquet file's row groups), with the rows read of each, so a restore resumes
  exactly where the checkpoint was taken.
- ``BatchSinkFunction``: a ``SinkFunction`` whose ``invoke_batch(columns, timestamps)`` gets
  each batch's columns; a batch of records (not columns) goes through ``invoke``, which by
  default hands ``invoke_batch`` one record as columns of length one.

These are descriptions: their runtime sides are in ``weir.operators.columnar_io`` (readers)
and ``weir.operators.sinks`` (the ``add_sink`` operator).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from weir.common.typeinfo import BasicTypeInfo, RowTypeInfo, TupleTypeInfo, TypeInformation, Types
from weir.core.connectors import Source
from weir.core.functions import SinkFunction
from weir.errors import UsageError

__all__ = ["ArrowFileSource", "BatchSinkFunction", "ColumnGeneratorSource"]

#: Records one batch of a columnar source holds at most (the task may lower it: debloating).
DEFAULT_BATCH_SIZE = 4096

#: Types a field of a columnar stream may have, with the Arrow type name that holds it.
ARROW_TYPE_NAMES: dict[str, str] = {
    "Long": "int64",
    "Integer": "int32",
    "Short": "int16",
    "Byte": "int8",
    "Double": "double",
    "Float": "float",
    "Boolean": "bool",
    "String": "string",
}
_TYPES_NAMES = ["LONG()", "INT()", "SHORT()", "BYTE()", "DOUBLE()", "FLOAT()", "BOOLEAN()", "STRING()"]
#: Arrow type names read into a field, and the type they are read as.
_FROM_ARROW: dict[str, Callable[[], BasicTypeInfo]] = {
    "int64": Types.LONG,
    "int32": Types.INT,
    "int16": Types.SHORT,
    "int8": Types.BYTE,
    "double": Types.DOUBLE,
    "float": Types.FLOAT,
    "bool": Types.BOOLEAN,
    "string": Types.STRING,
    "large_string": Types.STRING,
}


def field_types_of(api: str, type_info: Any) -> list[BasicTypeInfo]:
    """The field types of a columnar stream's ``type_info``: one basic type, or a TUPLE of
    basic types (each numeric, boolean or STRING). A UsageError names what does not fit."""
    if isinstance(type_info, BasicTypeInfo):
        fields: Sequence[Any] = [type_info]
    elif isinstance(type_info, TupleTypeInfo):
        fields = type_info.get_field_types()
    elif isinstance(type_info, RowTypeInfo):
        raise UsageError(
            f"{api}: type_info {type_info!r} is a ROW; a columnar source produces tuples, so give "
            f"Types.TUPLE({type_info.get_field_types()!r}) (Rows are built record by record)"
        )
    else:
        raise UsageError(
            f"{api}: type_info must be a basic type such as Types.LONG() or a Types.TUPLE of them, "
            f"got {type_info!r}"
        )
    for i, t in enumerate(fields):
        if not isinstance(t, BasicTypeInfo) or t.name not in ARROW_TYPE_NAMES:
            raise UsageError(
                f"{api}: field {i} of {type_info!r} is {t!r}; a column holds one of "
                f"{', '.join(f'Types.{n}' for n in _TYPES_NAMES)}"
            )
    return list(fields)


class ColumnGeneratorSource(Source):
    """``generator(indexes) -> columns`` for the indexes in [0, count) (None: unbounded).

    ``type_info`` is required: it says what the columns are (a basic type: one array; a
    TUPLE: a tuple of columns, numpy arrays for numbers and booleans, lists or string arrays
    for strings). Every batch's columns are checked against it once (length and dtype).
    ``rate_limit`` caps records per second over the whole source.
    """

    produces_columns = True  # its batches are columns (weir plan: vectorized)

    reader_factory = "weir.operators.columnar_io:column_generator_reader"

    def __init__(
        self,
        generator: Callable[[np.ndarray], Any],
        count: int | None,
        type_info: TypeInformation,
        rate_limit: float | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if not callable(generator):
            raise UsageError(f"ColumnGeneratorSource needs a callable indexes -> columns, got {generator!r}")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            raise UsageError(
                f"ColumnGeneratorSource count must be a non-negative integer or None, got {count!r}"
            )
        _check_rate_limit("ColumnGeneratorSource", rate_limit)
        _check_batch_size("ColumnGeneratorSource", batch_size)
        self.field_types = field_types_of("ColumnGeneratorSource", type_info)
        self.generator = generator
        self.count = count
        self.type_info = type_info
        self.rate_limit = rate_limit
        self.batch_size = batch_size

    def is_bounded(self) -> bool:
        return self.count is not None

    def default_name(self) -> str:
        return "Column Generator"

    def produced_type(self) -> TypeInformation:
        return self.type_info

    def describe(self) -> dict[str, Any]:
        return {"class": "ColumnGeneratorSource", "count": self.count, "rate_limit": self.rate_limit}


def _check_rate_limit(api: str, rate_limit: Any) -> None:
    if rate_limit is not None and (
        isinstance(rate_limit, bool) or not isinstance(rate_limit, int | float) or rate_limit <= 0
    ):
        raise UsageError(f"{api} rate_limit must be positive records/s or None, got {rate_limit!r}")


def _check_batch_size(api: str, batch_size: Any) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise UsageError(f"{api} batch_size must be a positive number of records, got {batch_size!r}")


_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


class ArrowFileSource(Source):
    """Parquet or CSV files (or every file under directories) as columns; bounded.

    ``file_format``: ``"parquet"`` or ``"csv"`` (None: from the first file's suffix).
    ``columns``: the columns to read, in order (None: all). The produced type is the files'
    Arrow schema as a TUPLE (one column: its basic type), or ``type_info`` if given, to which
    the columns are cast. CSV files have a header line; every file is read with the column
    types of the first one. A null in a numeric column makes that batch's column a list.
    ``rate_limit`` caps records per second over the whole source (None: as fast as the job
    takes them), as ``DataGeneratorSource``'s does.
    """

    produces_columns = True  # its batches are columns (weir plan: vectorized)

    reader_factory = "weir.operators.columnar_io:arrow_file_reader"

    def __init__(
        self,
        paths: str | Sequence[str],
        file_format: str | None = None,
        columns: Sequence[str] | None = None,
        type_info: TypeInformation | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        rate_limit: float | None = None,
    ) -> None:
        if isinstance(paths, str):
            paths = [paths]
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise UsageError(f"ArrowFileSource needs at least one path as a non-empty string, got {paths!r}")
        _check_batch_size("ArrowFileSource", batch_size)
        _check_rate_limit("ArrowFileSource", rate_limit)
        self.rate_limit = rate_limit
        self.paths = list(paths)
        self.files = _list_files(self.paths)
        if file_format is None:
            suffix = Path(self.files[0]).suffix.lower()
            if suffix not in _FORMATS:
                raise UsageError(
                    f"ArrowFileSource cannot tell the format of '{self.files[0]}' from its suffix "
                    f"{suffix!r}; give file_format='parquet' or 'csv'"
                )
            file_format = _FORMATS[suffix]
        if file_format not in ("parquet", "csv"):
            raise UsageError(f"ArrowFileSource file_format must be 'parquet' or 'csv', got {file_format!r}")
        if columns is not None and (
            isinstance(columns, str) or not columns or not all(isinstance(c, str) for c in columns)
        ):
            raise UsageError(f"ArrowFileSource columns must be a non-empty list of names, got {columns!r}")
        self.file_format = file_format
        self.batch_size = batch_size
        schema = _read_schema(self.files[0], file_format)
        names = list(columns) if columns is not None else list(schema.names)
        missing = [c for c in names if c not in schema.names]
        if missing:
            raise UsageError(
                f"ArrowFileSource: '{self.files[0]}' has no column {missing[0]!r}; its columns are {schema.names}"
            )
        self.columns = names
        #: the Arrow type name of each column as the files hold it (CSV: as inferred from the first file)
        self.file_types = [str(schema.field(c).type) for c in names]
        if type_info is None:
            fields: list[TypeInformation] = []
            for name, arrow_type in zip(names, self.file_types):
                if arrow_type not in _FROM_ARROW:
                    raise UsageError(
                        f"ArrowFileSource: column {name!r} of '{self.files[0]}' has the Arrow type "
                        f"{arrow_type}; weir reads {', '.join(sorted(_FROM_ARROW))} (leave the column out "
                        "with columns=[...], or give a type_info to cast it to)"
                    )
                fields.append(_FROM_ARROW[arrow_type]())
            type_info = fields[0] if len(fields) == 1 else Types.TUPLE(fields)
        self.field_types = field_types_of("ArrowFileSource", type_info)
        if len(self.field_types) != len(names):
            raise UsageError(
                f"ArrowFileSource: type_info {type_info!r} has {len(self.field_types)} field(s) but "
                f"{len(names)} column(s) are read ({names})"
            )
        self.type_info = type_info

    def default_name(self) -> str:
        return "Arrow File Source"

    def produced_type(self) -> TypeInformation:
        return self.type_info

    def describe(self) -> dict[str, Any]:
        return {
            "class": "ArrowFileSource",
            "paths": list(self.paths),
            "format": self.file_format,
            "columns": list(self.columns),
        }


def _list_files(paths: list[str]) -> list[str]:
    """The files under ``paths`` (directories: every visible file, sorted), in order."""
    files: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            files.extend(
                str(f) for f in sorted(path.rglob("*")) if f.is_file() and not f.name.startswith((".", "_"))
            )
        elif path.is_file():
            files.append(str(path))
        else:
            raise UsageError(f"ArrowFileSource path '{p}' does not exist")
    if not files:
        raise UsageError(f"ArrowFileSource found no file under {paths}")
    return files


def _read_schema(path: str, file_format: str) -> Any:
    try:
        if file_format == "parquet":
            import pyarrow.parquet as pq

            return pq.read_schema(path)
        import pyarrow.csv as pcsv

        with pcsv.open_csv(path) as reader:
            return reader.schema
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise UsageError(f"ArrowFileSource cannot read '{path}' as {file_format}: {exc}") from None


class BatchSinkFunction(SinkFunction):
    """A sink function over columns: ``invoke_batch(columns, timestamps)`` once per batch.

    ``columns`` is a tuple with one column per field (numpy arrays for numbers and booleans,
    lists for strings; a stream of one basic type has one column); ``timestamps`` is an int64
    array of the records' event timestamps, or None. Batches that hold records rather than
    columns (an untyped stream, a per-record operator before the sink) go through
    ``invoke(value, context)``, which hands ``invoke_batch`` the record as columns of length
    one; override it to handle such records another way.
    """

    vectorized = True

    def invoke_batch(self, columns: tuple[Any, ...], timestamps: np.ndarray | None) -> None:
        raise NotImplementedError

    def invoke(self, value: Any, context: Any) -> None:
        fields = value if isinstance(value, tuple) else (value,)
        timestamp = getattr(context, "timestamp", lambda: None)() if context is not None else None
        self.invoke_batch(
            tuple(np.asarray([v]) if isinstance(v, int | float | bool) else [v] for v in fields),
            None if timestamp is None else np.asarray([timestamp], dtype=np.int64),
        )

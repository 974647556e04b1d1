"""``FileSource`` and ``FileSink``, as in ``pyflink.datastream.connectors.file_system``.

The FileSink is exactly-once: part files are written hidden ("in-progress"), closed and
fsynced when a checkpoint is taken ("pending"), and renamed to their final name only when
that checkpoint is complete. The runtime side is ``weir.operators.file_sink``;
docs/exactly-once.md tells the whole protocol. The classes here only describe the sink:
where files go (``BucketAssigner``), when a part file ends (``RollingPolicy``) and how
parts are named (``OutputFileConfig``).
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

from weir.common.serialization import BulkWriterFactory, Encoder
from weir.common.typeinfo import TypeInformation, Types
from weir.core.connectors import Sink, Source
from weir.core.functions import SinkFunction
from weir.core.references import load_reference
from weir.datastream.connectors.base import StreamTransformer, SupportsPreprocessing
from weir.errors import UsageError


class StreamFormat:
    """How a file's bytes become records."""

    def __init__(self, kind: str, charset: str = "UTF-8") -> None:
        self.kind = kind
        self.charset = charset

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> StreamFormat:
        return StreamFormat("text_line", charset_name)


class BulkFormat:
    """How a whole file becomes records at once (Parquet's columnar reader, as Flink's
    ``BulkFormat``): ``read_file(path)`` returns the file's records. The formats are in
    ``weir.datastream.formats`` (``ParquetColumnarRowInputFormat``)."""

    kind = "bulk"
    charset = "UTF-8"  # not used: a bulk format reads bytes

    def read_file(self, path: Any) -> list[Any]:
        raise NotImplementedError

    def produced_type(self) -> TypeInformation | None:
        return None


class FileEnumeratorProvider:
    """Which files under the source's paths are read, and in how many splits (Flink's
    ``FileEnumerator.Provider``). Both of Flink's defaults enumerate directories
    recursively and skip hidden files (names starting with '.' or '_'); the splittable one
    also cuts a file into one split per storage block, and a local file is one block, so on
    weir's local files both give one split per file, as Flink's do there."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @staticmethod
    def default_splittable_file_enumerator() -> FileEnumeratorProvider:
        return FileEnumeratorProvider("splittable")

    @staticmethod
    def default_non_splittable_file_enumerator() -> FileEnumeratorProvider:
        return FileEnumeratorProvider("non_splittable")

    def __repr__(self) -> str:
        return f"FileEnumeratorProvider({self.kind!r})"


class FileSplitAssignerProvider:
    """Which reader gets which split (Flink's ``FileSplitAssigner.Provider``). Flink's
    locality-aware assigner gives a reader the splits stored on its host first; every file
    weir reads is on its one host, so all splits are local and are dealt to the subtasks in
    turn."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @staticmethod
    def locality_aware_split_assigner() -> FileSplitAssignerProvider:
        return FileSplitAssignerProvider("locality_aware")

    def __repr__(self) -> str:
        return f"FileSplitAssignerProvider({self.kind!r})"


class FileSource(Source):
    """Reads files (or every file under directories): the files there when the job starts
    (bounded), or, with ``monitor_continuously(interval)``, also every file that appears
    under the paths later, looked for every ``interval`` (unbounded; each new file is read
    once, by the subtask its path hashes to)."""

    reader_factory = "weir.operators.sources:file_lines_reader"

    def __init__(
        self,
        paths: list[str],
        stream_format: StreamFormat | BulkFormat,
        monitor_interval_ms: int | None = None,
        file_enumerator: FileEnumeratorProvider | None = None,
        split_assigner: FileSplitAssignerProvider | None = None,
    ) -> None:
        self.paths = paths
        self.stream_format = stream_format
        self.monitor_interval_ms = monitor_interval_ms
        self.file_enumerator = (
            file_enumerator or FileEnumeratorProvider.default_non_splittable_file_enumerator()
        )
        self.split_assigner = split_assigner or FileSplitAssignerProvider.locality_aware_split_assigner()

    def is_bounded(self) -> bool:
        return self.monitor_interval_ms is None

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        return FileSourceBuilder(stream_format, list(paths))

    @staticmethod
    def for_bulk_file_format(bulk_format: BulkFormat, *paths: str) -> FileSourceBuilder:
        """Read whole files with a ``BulkFormat`` such as ``ParquetColumnarRowInputFormat``."""
        if not isinstance(bulk_format, BulkFormat):
            raise UsageError(
                "FileSource.for_bulk_file_format needs a BulkFormat such as "
                f"ParquetColumnarRowInputFormat(row_type), got {bulk_format!r}"
            )
        return FileSourceBuilder(bulk_format, list(paths))

    def default_name(self) -> str:
        return "File Source"

    def produced_type(self) -> TypeInformation:
        produced = getattr(self.stream_format, "produced_type", None)
        return produced() if callable(produced) else Types.STRING()

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "class": "FileSource",
            "paths": list(self.paths),
            "format": self.stream_format.kind,
            "file_enumerator": self.file_enumerator.kind,
            "split_assigner": self.split_assigner.kind,
        }
        if self.monitor_interval_ms is not None:
            out["monitor_interval_ms"] = self.monitor_interval_ms
        return out


class FileSourceBuilder:
    def __init__(self, stream_format: StreamFormat | BulkFormat, paths: list[str]) -> None:
        if not isinstance(stream_format, StreamFormat | BulkFormat):
            raise UsageError(
                f"FileSource needs a StreamFormat such as StreamFormat.text_line_format(), got {stream_format!r}"
            )
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise UsageError(f"FileSource needs at least one path as a non-empty string, got {paths!r}")
        self._format = stream_format
        self._paths = paths

    def monitor_continuously(self, discovery_interval: Any) -> FileSourceBuilder:
        """Keep looking for new files under the paths every ``discovery_interval``
        (``Duration``/``Time`` or ms): the source becomes unbounded."""
        from weir.common.time import to_millis

        interval = to_millis("FileSource discovery interval", discovery_interval)
        if interval <= 0:
            raise UsageError(f"FileSource discovery interval must be positive, got {discovery_interval!r}")
        self._monitor_ms: int | None = interval
        return self

    def process_static_file_set(self) -> FileSourceBuilder:
        """Read the files there when the job starts, then end (the default)."""
        self._monitor_ms = None
        return self

    def set_file_enumerator(self, file_enumerator: FileEnumeratorProvider) -> FileSourceBuilder:
        """Which files are read and how they are split (see ``FileEnumeratorProvider``)."""
        if not isinstance(file_enumerator, FileEnumeratorProvider):
            raise UsageError(
                "set_file_enumerator needs FileEnumeratorProvider.default_splittable_file_enumerator() or "
                f"default_non_splittable_file_enumerator(), got {file_enumerator!r}"
            )
        self._enumerator: FileEnumeratorProvider | None = file_enumerator
        return self

    def set_split_assigner(self, split_assigner: FileSplitAssignerProvider) -> FileSourceBuilder:
        """Which subtask reads which split (see ``FileSplitAssignerProvider``)."""
        if not isinstance(split_assigner, FileSplitAssignerProvider):
            raise UsageError(
                "set_split_assigner needs FileSplitAssignerProvider.locality_aware_split_assigner(), "
                f"got {split_assigner!r}"
            )
        self._assigner: FileSplitAssignerProvider | None = split_assigner
        return self

    def build(self) -> FileSource:
        return FileSource(
            self._paths,
            self._format,
            getattr(self, "_monitor_ms", None),
            getattr(self, "_enumerator", None),
            getattr(self, "_assigner", None),
        )


class OutputFileConfig:
    """Part file names: ``<part_prefix>-<subtask>-<counter><part_suffix>``."""

    def __init__(self, part_prefix: str = "part", part_suffix: str = "") -> None:
        if not isinstance(part_prefix, str) or not part_prefix or "/" in part_prefix or "\\" in part_prefix:
            raise UsageError(
                f"OutputFileConfig part_prefix must be a non-empty file name part without '/', got {part_prefix!r}"
            )
        if part_prefix.startswith("."):
            raise UsageError(
                f"OutputFileConfig part_prefix {part_prefix!r} starts with '.': finished part files "
                "would be hidden like in-progress ones; use a prefix such as 'part'"
            )
        if not isinstance(part_suffix, str) or "/" in part_suffix or "\\" in part_suffix:
            raise UsageError(
                f"OutputFileConfig part_suffix must be a string without '/', got {part_suffix!r}"
            )
        self.part_prefix = part_prefix
        self.part_suffix = part_suffix

    def get_part_prefix(self) -> str:
        return self.part_prefix

    def get_part_suffix(self) -> str:
        return self.part_suffix

    @staticmethod
    def builder() -> OutputFileConfigBuilder:
        return OutputFileConfigBuilder()

    def __repr__(self) -> str:
        return f"OutputFileConfig(part_prefix={self.part_prefix!r}, part_suffix={self.part_suffix!r})"


class OutputFileConfigBuilder:
    def __init__(self) -> None:
        self._prefix = "part"
        self._suffix = ""

    def with_part_prefix(self, prefix: str) -> OutputFileConfigBuilder:
        self._prefix = prefix
        return self

    def with_part_suffix(self, suffix: str) -> OutputFileConfigBuilder:
        self._suffix = suffix
        return self

    def build(self) -> OutputFileConfig:
        return OutputFileConfig(self._prefix, self._suffix)


OutputFileConfig.OutputFileConfigBuilder = OutputFileConfigBuilder  # type: ignore[attr-defined]  # PyFlink's name


# ------------------------------------------------------------------------------ buckets

_JAVA_FIELDS = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}


def java_date_format_to_strftime(pattern: str) -> str:
    """Translate the subset of Java's DateTimeFormatter patterns bucket names use (yyyy, yy,
    MM, dd, HH, mm, ss, quoted literals) into ``strftime``; anything else is a UsageError."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise UsageError(f"date-time bucket format {pattern!r}: unclosed quote at position {i}")
            out.append(pattern[i + 1 : end].replace("%", "%%") or "'")
            i = end + 1
            continue
        if c.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            run = pattern[i:j]
            if run not in _JAVA_FIELDS:
                raise UsageError(
                    f"date-time bucket format {pattern!r}: weir does not support the field {run!r}; "
                    f"use {', '.join(_JAVA_FIELDS)} and quoted literals"
                )
            out.append(_JAVA_FIELDS[run])
            i = j
            continue
        out.append("%%" if c == "%" else c)
        i += 1
    return "".join(out)


_OFFSET_ZONE = re.compile(r"^(?:GMT|UTC)?([+-])(\d{1,2}):?(\d{2})?$")


def _time_zone(timezone_id: str | None) -> _dt.tzinfo | None:
    """None: the system's zone (like Java's ZoneId.systemDefault()); else an IANA name or an offset."""
    if timezone_id is None:
        return None
    if timezone_id in ("UTC", "GMT", "Z"):
        return _dt.UTC
    m = _OFFSET_ZONE.match(timezone_id)
    if m:
        minutes = int(m.group(2)) * 60 + int(m.group(3) or 0)
        return _dt.timezone(_dt.timedelta(minutes=minutes if m.group(1) == "+" else -minutes))
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(timezone_id)
    except Exception:
        raise UsageError(
            f"date_time_bucket_assigner: unknown timezone_id {timezone_id!r}; use an IANA name such as "
            "'Europe/Berlin', 'UTC', or an offset such as 'GMT-08:00'"
        ) from None


class BucketAssigner:
    """Which directory under the base path a record goes to (its bucket).

    ``base_path_bucket_assigner()``: no bucketing, files go straight into the base path.
    ``date_time_bucket_assigner(format_str, timezone_id)``: one directory per processing-time
    period, named with a Java date pattern (default ``yyyy-MM-dd--HH``: one per hour), as
    Flink's DateTimeBucketAssigner. It is the FileSink's default, as in Flink.
    """

    def __init__(self, kind: str, format_str: str = "", timezone_id: str | None = None) -> None:
        self.kind = kind
        self.format_str = format_str
        self.timezone_id = timezone_id
        self._strftime = java_date_format_to_strftime(format_str) if kind == "date_time" else ""
        self._zone = _time_zone(timezone_id) if kind == "date_time" else None

    @staticmethod
    def base_path_bucket_assigner() -> BucketAssigner:
        return BucketAssigner("base_path")

    @staticmethod
    def date_time_bucket_assigner(
        format_str: str = "yyyy-MM-dd--HH", timezone_id: str | None = None
    ) -> BucketAssigner:
        if not isinstance(format_str, str) or not format_str:
            raise UsageError(f"date_time_bucket_assigner needs a non-empty format string, got {format_str!r}")
        return BucketAssigner("date_time", format_str, timezone_id)

    def bucket_id(self, processing_time_ms: int) -> str:
        """The bucket of records that arrive at ``processing_time_ms`` ("" is the base path itself)."""
        if self.kind == "base_path":
            return ""
        moment = _dt.datetime.fromtimestamp(processing_time_ms / 1000, tz=self._zone or _dt.UTC)
        if self._zone is None:
            moment = moment.astimezone()  # the system's zone
        bucket = moment.strftime(self._strftime)
        if "/" in bucket or bucket in (".", "..") or bucket.startswith("."):
            raise UsageError(
                f"date-time bucket format {self.format_str!r} gives the bucket name {bucket!r}, "
                "which is not a plain directory name"
            )
        return bucket

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.kind == "date_time":
            out.update(format=self.format_str, timezone_id=self.timezone_id)
        return out


# ------------------------------------------------------------------------------ rolling


class RollingPolicy:
    """When the in-progress part file of a bucket is closed and a new one started.

    Pure decisions on the file's size and times (milliseconds of processing time); the sink
    asks ``should_roll_on_event`` before writing a record, ``should_roll_on_checkpoint`` at
    every checkpoint and ``should_roll_on_processing_time`` every bucket check interval.
    A file that does not roll at a checkpoint is flushed and its length recorded, so a
    restore truncates it back and goes on appending (Flink's resumable in-progress files).
    """

    @staticmethod
    def default_rolling_policy(
        part_size: int = 1024 * 1024 * 128,
        rollover_interval: int = 60 * 1000,
        inactivity_interval: int = 60 * 1000,
    ) -> DefaultRollingPolicy:
        return DefaultRollingPolicy(part_size, rollover_interval, inactivity_interval)

    @staticmethod
    def on_checkpoint_rolling_policy() -> OnCheckpointRollingPolicy:
        return OnCheckpointRollingPolicy()

    def should_roll_on_event(self, size_bytes: int) -> bool:
        raise NotImplementedError

    def should_roll_on_checkpoint(self, size_bytes: int) -> bool:
        raise NotImplementedError

    def should_roll_on_processing_time(self, created_ms: int, last_write_ms: int, now_ms: int) -> bool:
        raise NotImplementedError

    def uses_processing_time(self) -> bool:
        return False


class DefaultRollingPolicy(RollingPolicy):
    """Rolls when the file is larger than ``part_size`` bytes (checked before each record and
    at each checkpoint), older than ``rollover_interval`` ms, or not written for
    ``inactivity_interval`` ms (checked every bucket check interval)."""

    def __init__(self, part_size: int, rollover_interval: int, inactivity_interval: int) -> None:
        for name, value in (
            ("part_size", part_size),
            ("rollover_interval", rollover_interval),
            ("inactivity_interval", inactivity_interval),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise UsageError(
                    f"RollingPolicy.default_rolling_policy: {name} must be a positive int, got {value!r}"
                )
        self.part_size = part_size
        self.rollover_interval = rollover_interval
        self.inactivity_interval = inactivity_interval

    def should_roll_on_event(self, size_bytes: int) -> bool:
        return size_bytes > self.part_size

    def should_roll_on_checkpoint(self, size_bytes: int) -> bool:
        return size_bytes > self.part_size

    def should_roll_on_processing_time(self, created_ms: int, last_write_ms: int, now_ms: int) -> bool:
        return (
            now_ms - created_ms >= self.rollover_interval
            or now_ms - last_write_ms >= self.inactivity_interval
        )

    def uses_processing_time(self) -> bool:
        return True

    def __repr__(self) -> str:
        return (
            f"DefaultRollingPolicy(part_size={self.part_size}, rollover_interval={self.rollover_interval}, "
            f"inactivity_interval={self.inactivity_interval})"
        )


class OnCheckpointRollingPolicy(RollingPolicy):
    """Rolls on every checkpoint, and only then: each checkpoint commits whole files."""

    def should_roll_on_event(self, size_bytes: int) -> bool:
        return False

    def should_roll_on_checkpoint(self, size_bytes: int) -> bool:
        return True

    def should_roll_on_processing_time(self, created_ms: int, last_write_ms: int, now_ms: int) -> bool:
        return False

    def __repr__(self) -> str:
        return "OnCheckpointRollingPolicy()"


# ------------------------------------------------------------------------------ compaction


class FileCompactStrategy:
    """When the FileSink compacts the part files of a bucket (Flink's ``FileCompactStrategy``):
    once ``num_checkpoints_before_compaction`` checkpoints have passed since the bucket's first
    file waiting to be compacted, or once the waiting files hold ``size_threshold`` bytes,
    whichever comes first (-1: that condition is off; at least one must be on)."""

    def __init__(
        self, size_threshold: int, num_checkpoints_before_compaction: int, num_compact_threads: int
    ) -> None:
        self.size_threshold = size_threshold
        self.num_checkpoints_before_compaction = num_checkpoints_before_compaction
        self.num_compact_threads = num_compact_threads

    @staticmethod
    def builder() -> FileCompactStrategy.Builder:
        return FileCompactStrategy.Builder()

    def describe(self) -> dict[str, Any]:
        return {
            "size_threshold": self.size_threshold,
            "num_checkpoints_before_compaction": self.num_checkpoints_before_compaction,
        }

    def __repr__(self) -> str:
        return (
            f"FileCompactStrategy(size_threshold={self.size_threshold}, "
            f"num_checkpoints_before_compaction={self.num_checkpoints_before_compaction})"
        )

    class Builder:
        def __init__(self) -> None:
            self._checkpoints = -1
            self._size = -1
            self._threads = -1

        def enable_compaction_on_checkpoint(
            self, num_checkpoints_before_compaction: int
        ) -> FileCompactStrategy.Builder:
            n = num_checkpoints_before_compaction
            if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                raise UsageError(f"Number of checkpoints before compaction should be more than 0, got {n!r}")
            self._checkpoints = n
            return self

        def set_size_threshold(self, size_threshold: int) -> FileCompactStrategy.Builder:
            if isinstance(size_threshold, bool) or not isinstance(size_threshold, int):
                raise UsageError(
                    f"the compaction size threshold must be an int of bytes, got {size_threshold!r}"
                )
            self._size = size_threshold
            return self

        def set_num_compact_threads(self, num_compact_threads: int) -> FileCompactStrategy.Builder:
            """Kept: weir compacts in the sink's own task, one file at a time."""
            n = num_compact_threads
            if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                raise UsageError(f"Compact threads should be more than 0, got {n!r}")
            self._threads = n
            return self

        def build(self) -> FileCompactStrategy:
            if self._size < 0 and self._checkpoints <= 0:
                raise UsageError(
                    "FileCompactStrategy: at least one trigger condition must be configured "
                    "(enable_compaction_on_checkpoint or set_size_threshold)"
                )
            return FileCompactStrategy(self._size, self._checkpoints, self._threads)


class FileCompactor:
    """How the files of one compaction become one file (Flink's ``FileCompactor``):
    ``concat_file_compactor(delimiter)`` appends them, with ``delimiter`` between neighbours;
    ``identical_file_compactor()`` copies its single input file."""

    def __init__(self, kind: str, file_delimiter: bytes | None = None) -> None:
        self.kind = kind
        self.file_delimiter = file_delimiter

    @staticmethod
    def concat_file_compactor(file_delimiter: bytes | None = None) -> FileCompactor:
        if file_delimiter is not None and not isinstance(file_delimiter, bytes | bytearray):
            raise UsageError(f"concat_file_compactor needs the delimiter as bytes, got {file_delimiter!r}")
        return FileCompactor("concat", bytes(file_delimiter) if file_delimiter else None)

    @staticmethod
    def identical_file_compactor() -> FileCompactor:
        return FileCompactor("identical")

    def compact(self, inputs: list[Any], output: Any) -> None:
        """Write the compacted content of the files ``inputs`` (paths) to ``output`` (a binary file)."""
        if self.kind == "identical" and len(inputs) != 1:
            raise UsageError(
                f"the identical file compactor copies one file, but {len(inputs)} are to be compacted; "
                "use FileCompactor.concat_file_compactor()"
            )
        for i, path in enumerate(inputs):
            if i and self.file_delimiter:
                output.write(self.file_delimiter)
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    output.write(chunk)

    def __repr__(self) -> str:
        return f"FileCompactor({self.kind!r})"


# ------------------------------------------------------------------------------ the sink


class FileSink(Sink, SupportsPreprocessing):
    """Writes records into part files under ``base_path``, exactly once: as lines
    (``for_row_format`` with an ``Encoder``) or whole batches in a bulk format
    (``for_bulk_format`` with ``ParquetBulkWriters`` or ``CsvBulkWriters`` of
    ``weir.datastream.formats``; such parts roll on every checkpoint).

    With checkpointing, a part file becomes visible (renamed from its hidden in-progress
    name) when the checkpoint after it was written is complete; without checkpointing, or
    for what was written after the last checkpoint, when the job FINISHES. Restores commit
    what the checkpoint had pre-committed and throw away the rest, so every record is in
    exactly one finished part file. One job per base path.
    """

    operator_factory = "weir.operators.file_sink:file_sink_operator"

    def __init__(
        self,
        base_path: str,
        encoder: Encoder | None,
        output_file_config: OutputFileConfig | None = None,
        rolling_policy: RollingPolicy | None = None,
        bucket_assigner: BucketAssigner | None = None,
        bucket_check_interval_ms: int = 60_000,
        bulk_writer_factory: BulkWriterFactory | None = None,
        compact_strategy: FileCompactStrategy | None = None,
        file_compactor: FileCompactor | None = None,
    ) -> None:
        self.base_path = base_path
        self.compact_strategy = compact_strategy
        self.file_compactor = file_compactor
        self.encoder = encoder
        self.bulk_writer_factory = bulk_writer_factory
        self.output_file_config = output_file_config or OutputFileConfig()
        self.rolling_policy = rolling_policy or RollingPolicy.default_rolling_policy()
        self.bucket_assigner = bucket_assigner or BucketAssigner.date_time_bucket_assigner()
        self.bucket_check_interval_ms = bucket_check_interval_ms

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> FileSinkBuilder:
        return FileSinkBuilder(base_path, encoder)

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: BulkWriterFactory) -> BulkFormatBuilder:
        return BulkFormatBuilder(base_path, writer_factory)

    def default_name(self) -> str:
        return "File Sink"

    def get_transformer(self) -> StreamTransformer | None:
        """None: weir's file formats take the records as they are (PyFlink's bulk formats
        convert Rows to the Table API's RowData first)."""
        return None

    def describe(self) -> dict[str, Any]:
        cfg = self.output_file_config
        return {
            "class": "FileSink",
            "base_path": self.base_path,
            "part_prefix": cfg.part_prefix,
            "part_suffix": cfg.part_suffix,
            "rolling_policy": repr(self.rolling_policy),
            "bucket_assigner": self.bucket_assigner.describe(),
            "format": "row" if self.bulk_writer_factory is None else self.bulk_writer_factory.describe(),
            **(
                {}
                if self.compact_strategy is None
                else {
                    "compaction": {**self.compact_strategy.describe(), "compactor": repr(self.file_compactor)}
                }
            ),
        }

    def commit_on_job_finished(self) -> list[str]:
        """The job FINISHED: commit what the sink's subtasks left pending at end of input.
        Called by the JobMaster; returns the committed files' paths."""
        return load_reference("weir.operators.file_sink:commit_end_of_input")(self)


class FileSinkBuilder:
    """``FileSink.for_row_format(base_path, encoder)`` (PyFlink's ``FileSink.RowFormatBuilder``)."""

    def __init__(self, base_path: str, encoder: Encoder | None) -> None:
        if not isinstance(base_path, str) or not base_path:
            raise UsageError(f"FileSink needs a base path as a non-empty string, got {base_path!r}")
        if not isinstance(encoder, Encoder) and not isinstance(self, BulkFormatBuilder):
            raise UsageError(
                f"FileSink needs an Encoder such as Encoder.simple_string_encoder(), got {encoder!r}"
            )
        self._base_path = base_path
        self._encoder = encoder
        self._config = OutputFileConfig()
        self._policy: RollingPolicy = RollingPolicy.default_rolling_policy()
        self._assigner = BucketAssigner.date_time_bucket_assigner()
        self._check_interval_ms = 60_000
        self._compaction: tuple[FileCompactStrategy, FileCompactor] | None = None

    def enable_compact(self, strategy: FileCompactStrategy, compactor: FileCompactor) -> FileSinkBuilder:
        """Compact a bucket's part files into one before they become visible: rolled files wait,
        hidden, until ``strategy`` fires, then ``compactor`` writes them into one part file that
        is committed with the next completed checkpoint (the inputs are deleted then); at the
        end of input every bucket is compacted. Exactly once, as without compaction."""
        if not isinstance(strategy, FileCompactStrategy):
            raise UsageError(
                f"enable_compact needs a FileCompactStrategy (FileCompactStrategy.builder()...build()), got {strategy!r}"
            )
        if not isinstance(compactor, FileCompactor):
            raise UsageError(
                f"enable_compact needs a FileCompactor such as FileCompactor.concat_file_compactor(), got {compactor!r}"
            )
        if isinstance(self, BulkFormatBuilder) and compactor.kind == "concat":
            raise UsageError(
                "a bulk-format FileSink's part files (Parquet, ORC, Avro, CSV with a header) cannot be "
                "concatenated into one valid file; compact a row-format FileSink, or use "
                "FileCompactor.identical_file_compactor()"
            )
        self._compaction = (strategy, compactor)
        return self

    def disable_compact(self) -> FileSinkBuilder:
        self._compaction = None
        return self

    def _compaction_args(self) -> dict[str, Any]:
        if self._compaction is None:
            return {}
        return {"compact_strategy": self._compaction[0], "file_compactor": self._compaction[1]}

    def with_output_file_config(self, output_file_config: OutputFileConfig) -> FileSinkBuilder:
        if not isinstance(output_file_config, OutputFileConfig):
            raise UsageError(
                f"with_output_file_config needs an OutputFileConfig (OutputFileConfig.builder()...build()), "
                f"got {output_file_config!r}"
            )
        self._config = output_file_config
        return self

    def with_rolling_policy(self, rolling_policy: RollingPolicy) -> FileSinkBuilder:
        if not isinstance(rolling_policy, RollingPolicy):
            raise UsageError(
                "with_rolling_policy needs RollingPolicy.default_rolling_policy(...) or "
                f"RollingPolicy.on_checkpoint_rolling_policy(), got {rolling_policy!r}"
            )
        self._policy = rolling_policy
        return self

    def with_bucket_assigner(self, bucket_assigner: BucketAssigner) -> FileSinkBuilder:
        if not isinstance(bucket_assigner, BucketAssigner):
            raise UsageError(
                "with_bucket_assigner needs BucketAssigner.base_path_bucket_assigner() or "
                f"BucketAssigner.date_time_bucket_assigner(...), got {bucket_assigner!r}"
            )
        self._assigner = bucket_assigner
        return self

    def with_bucket_check_interval(self, interval: int) -> FileSinkBuilder:
        """How often (ms of processing time) open part files are checked against the rolling policy."""
        if isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0:
            raise UsageError(
                f"with_bucket_check_interval needs a positive number of milliseconds, got {interval!r}"
            )
        self._check_interval_ms = interval
        return self

    def build(self) -> FileSink:
        return FileSink(
            self._base_path,
            self._encoder,
            self._config,
            self._policy,
            self._assigner,
            self._check_interval_ms,
            **self._compaction_args(),
        )


FileSink.RowFormatBuilder = FileSinkBuilder  # type: ignore[attr-defined]  # PyFlink's name


class BulkFormatBuilder(FileSinkBuilder):
    """``FileSink.for_bulk_format(base_path, writer_factory)`` (PyFlink's ``FileSink.BulkFormatBuilder``).

    Part files roll on every checkpoint (``OnCheckpointRollingPolicy``, the only rolling
    policy a bulk format takes, as in Flink): a Parquet file is complete only with its footer.
    """

    def __init__(self, base_path: str, writer_factory: BulkWriterFactory) -> None:
        super().__init__(base_path, None)
        if not isinstance(writer_factory, BulkWriterFactory):
            raise UsageError(
                "FileSink.for_bulk_format needs a BulkWriterFactory such as "
                f"ParquetBulkWriters.for_row_type(...) or CsvBulkWriters.for_schema(...), got {writer_factory!r}"
            )
        self._writer_factory = writer_factory
        self._policy = RollingPolicy.on_checkpoint_rolling_policy()

    def with_rolling_policy(self, rolling_policy: RollingPolicy) -> FileSinkBuilder:
        if not isinstance(rolling_policy, OnCheckpointRollingPolicy):
            raise UsageError(
                "a bulk-format FileSink rolls its part files on every checkpoint; with_rolling_policy takes "
                f"RollingPolicy.on_checkpoint_rolling_policy() only, got {rolling_policy!r}"
            )
        self._policy = rolling_policy
        return self

    def build(self) -> FileSink:
        return FileSink(
            self._base_path,
            None,  # a bulk format has no encoder
            self._config,
            self._policy,
            self._assigner,
            self._check_interval_ms,
            bulk_writer_factory=self._writer_factory,
            **self._compaction_args(),
        )


FileSink.BulkFormatBuilder = BulkFormatBuilder  # type: ignore[attr-defined]  # PyFlink's name


class StreamingFileSink(SinkFunction):
    """PyFlink's legacy file sink function (``ds.add_sink(StreamingFileSink.for_row_format(...)
    .build())``): in weir it is the exactly-once ``FileSink`` with the same builders, so the
    same part files, rolling and buckets; ``add_sink`` adds that sink."""

    def __init__(self, file_sink: FileSink) -> None:
        self.file_sink = file_sink

    def as_sink(self) -> FileSink:
        """The ``FileSink`` that ``DataStream.add_sink`` adds for this function."""
        return self.file_sink

    def invoke(self, value: Any, context: Any) -> None:
        raise UsageError("StreamingFileSink runs as a FileSink: add it with DataStream.add_sink(sink)")

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> StreamingFileSink.DefaultRowFormatBuilder:
        return StreamingFileSink.DefaultRowFormatBuilder(base_path, encoder)

    @staticmethod
    def for_bulk_format(
        base_path: str, writer_factory: BulkWriterFactory
    ) -> StreamingFileSink.DefaultBulkFormatBuilder:
        return StreamingFileSink.DefaultBulkFormatBuilder(base_path, writer_factory)

    class DefaultRowFormatBuilder(FileSinkBuilder):
        def build(self) -> StreamingFileSink:  # type: ignore[override]
            return StreamingFileSink(super().build())

    class DefaultBulkFormatBuilder(BulkFormatBuilder):
        def build(self) -> StreamingFileSink:  # type: ignore[override]
            return StreamingFileSink(super().build())

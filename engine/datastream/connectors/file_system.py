"""``FileSource`` and ``FileSink``, as in ``pyflink.datastream.connectors.file_system``."""

from __future__ import annotations

from typing import Any

from engine.common.typeinfo import TypeInformation, Types
from engine.datastream.connectors.base import Sink, Source
from engine.errors import UsageError


class StreamFormat:
    """How a file's bytes become records."""

    def __init__(self, kind: str, charset: str = "UTF-8") -> None:
        self.kind = kind
        self.charset = charset

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> StreamFormat:
        return StreamFormat("text_line", charset_name)


class FileSource(Source):
    """Reads files (or every file under directories); bounded."""

    def __init__(self, paths: list[str], stream_format: StreamFormat) -> None:
        self.paths = paths
        self.stream_format = stream_format

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        return FileSourceBuilder(stream_format, list(paths))

    def default_name(self) -> str:
        return "File Source"

    def produced_type(self) -> TypeInformation:
        return Types.STRING()

    def describe(self) -> dict[str, Any]:
        return {"class": "FileSource", "paths": list(self.paths), "format": self.stream_format.kind}


class FileSourceBuilder:
    def __init__(self, stream_format: StreamFormat, paths: list[str]) -> None:
        if not isinstance(stream_format, StreamFormat):
            raise UsageError(
                f"FileSource needs a StreamFormat such as StreamFormat.text_line_format(), got {stream_format!r}"
            )
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise UsageError(f"FileSource needs at least one path as a non-empty string, got {paths!r}")
        self._format = stream_format
        self._paths = paths

    def build(self) -> FileSource:
        return FileSource(self._paths, self._format)


class Encoder:
    """How a record becomes a line of a row-format file."""

    def __init__(self, kind: str, charset: str = "UTF-8") -> None:
        self.kind = kind
        self.charset = charset

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> Encoder:
        return Encoder("simple_string", charset_name)


class OutputFileConfig:
    def __init__(self, part_prefix: str = "part", part_suffix: str = "") -> None:
        self.part_prefix = part_prefix
        self.part_suffix = part_suffix

    @staticmethod
    def builder() -> OutputFileConfigBuilder:
        return OutputFileConfigBuilder()


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


class FileSink(Sink):
    """Writes rows into part files under ``base_path``; exactly-once with checkpoints."""

    def __init__(self, base_path: str, encoder: Encoder, output_file_config: OutputFileConfig) -> None:
        self.base_path = base_path
        self.encoder = encoder
        self.output_file_config = output_file_config

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> FileSinkBuilder:
        return FileSinkBuilder(base_path, encoder)

    def default_name(self) -> str:
        return "File Sink"

    def describe(self) -> dict[str, Any]:
        return {"class": "FileSink", "base_path": self.base_path}


class FileSinkBuilder:
    def __init__(self, base_path: str, encoder: Encoder) -> None:
        if not isinstance(base_path, str) or not base_path:
            raise UsageError(f"FileSink needs a base path as a non-empty string, got {base_path!r}")
        if not isinstance(encoder, Encoder):
            raise UsageError(
                f"FileSink needs an Encoder such as Encoder.simple_string_encoder(), got {encoder!r}"
            )
        self._base_path = base_path
        self._encoder = encoder
        self._config = OutputFileConfig()

    def with_output_file_config(self, output_file_config: OutputFileConfig) -> FileSinkBuilder:
        self._config = output_file_config
        return self

    def build(self) -> FileSink:
        return FileSink(self._base_path, self._encoder, self._config)

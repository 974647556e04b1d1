"""``pyflink.common.serialization``'s names: the row-format ``Encoder`` of file sinks."""

from __future__ import annotations

from weir.datastream.connectors.file_system import Encoder

__all__ = ["Encoder"]

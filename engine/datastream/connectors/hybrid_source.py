"""``HybridSource``, as in ``pyflink.datastream.connectors.hybrid_source``: reads its sources
one after the other (a bounded history, then more), as one source.

Each subtask reads its part of the first source, then its part of the next, and so on; Flink
switches all readers together when the whole current source is done, so across subtasks the
order can differ (within a subtask it is the sources' order). The job's checkpoints record
which source a subtask is in and its position there; the sources must produce one type.
"""

from __future__ import annotations

from typing import Any

from weir.common.typeinfo import TypeInformation
from weir.core.connectors import Source
from weir.errors import UsageError

__all__ = ["HybridSource", "HybridSourceBuilder"]


class HybridSource(Source):
    reader_factory = "weir.operators.sources:hybrid_source_reader"

    def __init__(self, sources: list[Source]) -> None:
        types = {t for t in (s.produced_type() for s in sources) if t is not None}
        if len(types) > 1:
            raise UsageError(
                f"HybridSource needs sources of one type, got {', '.join(sorted(map(repr, types)))}"
            )
        self.sources = sources
        self.is_parallel = all(s.is_parallel for s in sources)

    @staticmethod
    def builder(first_source: Source) -> HybridSourceBuilder:
        return HybridSourceBuilder(first_source)

    def is_bounded(self) -> bool:
        return self.sources[-1].is_bounded()

    def produced_type(self) -> TypeInformation | None:
        return self.sources[0].produced_type()

    def default_name(self) -> str:
        return "HybridSource"

    def describe(self) -> dict[str, Any]:
        return {"class": "HybridSource", "sources": [s.describe() for s in self.sources]}


class HybridSourceBuilder:
    def __init__(self, first_source: Source) -> None:
        self._sources: list[Source] = []
        self.add_source(first_source)

    def add_source(self, source: Source) -> HybridSourceBuilder:
        if not isinstance(source, Source):
            raise UsageError(f"HybridSource takes sources such as FileSource, got {source!r}")
        if self._sources and not self._sources[-1].is_bounded():
            raise UsageError(
                "HybridSource: only the last source may be unbounded; the one before this is not"
            )
        self._sources.append(source)
        return self

    def build(self) -> HybridSource:
        return HybridSource(list(self._sources))

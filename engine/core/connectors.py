"""What every source and sink tells the graph: a name, boundedness, parallelism limits.

The runtime gives each connector a reader or writer (``weir.cluster``); these
classes are the user-facing descriptions that go into transformations.
"""

from __future__ import annotations

from typing import Any

from weir.common.typeinfo import TypeInformation


class Source:
    """A FLIP-27-style source, used with ``env.from_source``."""

    #: a non-parallel source always runs with parallelism 1
    is_parallel = True

    def is_bounded(self) -> bool:
        return True

    def default_name(self) -> str:
        return type(self).__name__

    def produced_type(self) -> TypeInformation | None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"class": type(self).__name__}


class Sink:
    """A sink, used with ``DataStream.sink_to``."""

    def default_name(self) -> str:
        return type(self).__name__

    def describe(self) -> dict[str, Any]:
        return {"class": type(self).__name__}

"""The connector base API, as in ``pyflink.datastream.connectors.base``: ``Source`` and
``Sink``, ``DeliveryGuarantee``, and ``SupportsPreprocessing`` with its ``StreamTransformer``.

``Source`` and ``Sink`` live in ``weir.core.connectors``, beside the protocol by which a
connector names its runtime side; this module hands out the same classes.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from typing import Any

from weir.core.connectors import (
    Sink,
    Source,
)

__all__ = [
    "DeliveryGuarantee",
    "Sink",
    "Source",
    "StreamTransformer",
    "SupportsPreprocessing",
]


class DeliveryGuarantee(enum.Enum):
    """What a sink promises under failures (Flink's ``DeliveryGuarantee``): ``EXACTLY_ONCE``
    (weir's FileSink), ``AT_LEAST_ONCE`` (weir's JdbcSink: a restart may write a record
    again), ``NONE`` (best effort)."""

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1
    NONE = 2


class StreamTransformer(ABC):
    """Turns the stream a sink is added to into the stream the sink writes (``apply(ds)``)."""

    @abstractmethod
    def apply(self, ds: Any) -> Any:
        pass


class SupportsPreprocessing(ABC):
    """A sink whose ``get_transformer()`` (when not None) ``DataStream.sink_to`` applies to the
    stream before adding the sink, as PyFlink does."""

    @abstractmethod
    def get_transformer(self) -> StreamTransformer | None:
        pass

"""Connectors: sources and sinks, at PyFlink's module paths."""

from __future__ import annotations

from weir.datastream.connectors.base import DeliveryGuarantee, Sink, Source

__all__ = ["DeliveryGuarantee", "Sink", "Source"]

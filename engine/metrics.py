"""``weir.metrics``: the names of ``pyflink.metrics`` (user metrics a function registers
through ``runtime_context.get_metrics_group()``); they live in ``weir.core.metrics``."""

from __future__ import annotations

from weir.core.metrics import Counter, Distribution, Meter, Metric, MetricGroup

__all__ = ["Counter", "Distribution", "Meter", "Metric", "MetricGroup"]

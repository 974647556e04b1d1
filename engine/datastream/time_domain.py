"""``pyflink.datastream.time_domain``: ``TimeDomain``, at PyFlink's path (it lives in
``weir.core.functions``)."""

from __future__ import annotations

from weir.core.functions import TimeDomain

__all__ = ["TimeDomain"]

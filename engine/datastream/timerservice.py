"""``pyflink.datastream.timerservice``: ``TimerService``, at PyFlink's path (it lives in
``weir.core.functions``, where the operators' timer services subclass it)."""

from __future__ import annotations

from weir.core.functions import TimerService

__all__ = ["TimerService"]

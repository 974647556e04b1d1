"""The ``Source`` and ``Sink`` base classes, at weir's connector path.

They live in ``weir.core.connectors``, beside the protocol by which a connector names
its runtime side; this module hands out the same classes.
"""

from __future__ import annotations

from weir.core.connectors import (
    Sink,
    Source,
)

__all__ = [
    "Sink",
    "Source",
]

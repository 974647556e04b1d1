"""weir: Apache Flink's runtime re-created in Python on one machine.

The public API lives in :mod:`weir.datastream` and :mod:`weir.common`, mirroring
PyFlink's module paths so that a job file runs on Flink by swapping the import prefix.
"""

from __future__ import annotations

__version__ = "0.1.0"

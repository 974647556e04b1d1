"""``pyflink.datastream.state_backend``: the state backend choices, at PyFlink's path.

They live in ``weir.core.state_backend`` (descriptions; ``weir.state`` builds the
backends from them); this module hands out the same classes.
"""

from __future__ import annotations

import enum

from weir.core.state_backend import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    LmdbStateBackend,
    StateBackend,
    state_backend_from_config,
)

__all__ = [
    "EmbeddedRocksDBStateBackend",
    "HashMapStateBackend",
    "LmdbStateBackend",
    "PredefinedOptions",
    "StateBackend",
    "state_backend_from_config",
]


class PredefinedOptions(enum.Enum):
    """RocksDB's predefined tunings (Flink's ``PredefinedOptions``), for
    ``EmbeddedRocksDBStateBackend.set_predefined_options``. weir's RocksDB backend is LMDB,
    which has none of RocksDB's knobs: the choice is kept (``get_predefined_options``) and
    changes nothing."""

    DEFAULT = 0
    SPINNING_DISK_OPTIMIZED = 1
    SPINNING_DISK_OPTIMIZED_HIGH_MEM = 2
    FLASH_SSD_OPTIMIZED = 3

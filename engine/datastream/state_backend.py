"""``pyflink.datastream.state_backend``: the state backend choices, at PyFlink's path.

They live in ``weir.core.state_backend`` (descriptions; ``weir.state`` builds the
backends from them); this module hands out the same classes.
"""

from __future__ import annotations

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
    "StateBackend",
    "state_backend_from_config",
]

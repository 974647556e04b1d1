"""Keyed and operator state: the backend protocol, the heap and LMDB backends, snapshots.

``create_keyed_backend("hashmap" | "lmdb", ...)`` builds the backend that the
``state.backend.type`` option names; operators talk to it only through
``weir.state.backend.KeyedStateBackend``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from weir.errors import UsageError
from weir.keys.reference import KeyGroupRange
from weir.state.backend import (
    VOID_NAMESPACE,
    KeyedStateBackend,
    KeyedStateBackendStatistics,
    KeyedStateSnapshot,
    RuntimeStateProvider,
    SnapshotEntry,
    StateMetaInfo,
)
from weir.state.heap import HeapKeyedStateBackend
from weir.state.lmdb_backend import DEFAULT_COMMIT_EVERY_OPS, DEFAULT_MAP_SIZE_BYTES, LmdbKeyedStateBackend
from weir.state.operator_state import (
    OperatorListState,
    OperatorStateBackend,
    OperatorStateSnapshot,
    repartition_operator_state,
)

__all__ = [
    "BACKEND_KINDS",
    "VOID_NAMESPACE",
    "HeapKeyedStateBackend",
    "KeyedStateBackend",
    "KeyedStateBackendStatistics",
    "KeyedStateSnapshot",
    "LmdbKeyedStateBackend",
    "OperatorListState",
    "OperatorStateBackend",
    "OperatorStateSnapshot",
    "RuntimeStateProvider",
    "SnapshotEntry",
    "StateMetaInfo",
    "create_keyed_backend",
    "repartition_operator_state",
]

BACKEND_KINDS = ("hashmap", "lmdb")
_ALIASES = {"heap": "hashmap", "hashmap": "hashmap", "lmdb": "lmdb", "rocksdb": "lmdb"}


def create_keyed_backend(
    kind: str,
    operator_id: str,
    max_parallelism: int,
    key_group_range: KeyGroupRange,
    time_ms: Callable[[], int] | None = None,
    *,
    path: Path | str | None = None,
    map_size_bytes: int = DEFAULT_MAP_SIZE_BYTES,
    commit_every_ops: int = DEFAULT_COMMIT_EVERY_OPS,
) -> KeyedStateBackend:
    """The keyed state backend named by ``state.backend.type``; ``lmdb`` needs a ``path`` (its own directory)."""
    resolved = _ALIASES.get(str(kind).lower())
    if resolved is None:
        raise UsageError(
            f"state.backend.type {kind!r} is not a state backend; use one of {', '.join(BACKEND_KINDS)}"
        )
    if resolved == "hashmap":
        return HeapKeyedStateBackend(operator_id, max_parallelism, key_group_range, time_ms)
    if path is None:
        raise UsageError(f"the lmdb state backend of '{operator_id}' needs a path for its LMDB environment")
    return LmdbKeyedStateBackend(
        operator_id,
        max_parallelism,
        key_group_range,
        time_ms,
        path=path,
        map_size_bytes=map_size_bytes,
        commit_every_ops=commit_every_ops,
    )

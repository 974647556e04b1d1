"""Keyed and operator state: the backend protocol, the heap and LMDB backends, snapshots.

``create_keyed_backend("hashmap" | "lmdb", ...)`` builds the backend that the
``state.backend.type`` option names, and ``create_keyed_state_backend(choice, ...)`` the one
a ``StateBackend`` description (``weir.core.state_backend``) names; operators talk to it
only through ``weir.state.backend.KeyedStateBackend``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    "create_keyed_state_backend",
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


def create_keyed_state_backend(
    choice: Any,
    operator_id: str,
    subtask_index: int,
    max_parallelism: int,
    key_group_range: KeyGroupRange,
    time_ms: Callable[[], int] | None = None,
) -> KeyedStateBackend:
    """The keyed backend of one operator subtask, as the ``StateBackend`` description ``choice`` says
    (``HashMapStateBackend``, or ``LmdbStateBackend``: one LMDB directory per operator subtask)."""
    kind = getattr(choice, "type_name", None)
    if kind == "hashmap":
        return create_keyed_backend("hashmap", operator_id, max_parallelism, key_group_range, time_ms)
    if kind != "lmdb":
        raise UsageError(
            f"'{operator_id}': {choice!r} is not a state backend; use HashMapStateBackend or LmdbStateBackend"
        )
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in operator_id)
    backend = create_keyed_backend(
        "lmdb",
        operator_id,
        max_parallelism,
        key_group_range,
        time_ms,
        path=choice.get_db_storage_path() / f"{safe}-{subtask_index}",
        map_size_bytes=choice.map_size_bytes,
        commit_every_ops=choice.commit_every_ops,
    )
    if choice.enable_incremental_checkpointing:
        backend.enable_incremental_checkpointing(choice.max_chain_length)  # type: ignore[attr-defined]
    if choice.window_pane_memory_bytes is not None:
        backend.window_pane_memory_bytes = choice.window_pane_memory_bytes  # type: ignore[attr-defined]
    return backend

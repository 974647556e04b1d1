"""State backend choices, as in ``pyflink.datastream.state_backend`` (re-exported there).

Flink 2.x selects the backend through configuration: ``state.backend.type``
is ``hashmap`` (``HashMapStateBackend``: state as Python objects on the heap,
fastest, bounded by memory) or weir's ``lmdb`` (``LmdbStateBackend``: state
serialized into one LMDB environment per operator subtask, bounded by disk;
weir's counterpart of ``EmbeddedRocksDBStateBackend``, and ``rocksdb`` is an
alias for it). These classes describe the choice; the runtime builds the per-subtask
backend from them with ``weir.state.create_keyed_state_backend``, so the description
needs nothing of the runtime.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from weir.common.config_options import DEFAULT_WINDOW_PANE_MEMORY_BYTES
from weir.errors import UsageError

__all__ = [
    "DEFAULT_COMMIT_EVERY_OPS",
    "DEFAULT_MAP_SIZE_BYTES",
    "DEFAULT_WINDOW_PANE_MEMORY_BYTES",
    "EmbeddedRocksDBStateBackend",
    "HashMapStateBackend",
    "LmdbStateBackend",
    "StateBackend",
    "configured_state_backend",
    "state_backend_from_config",
]

DEFAULT_MAP_SIZE_BYTES = 64 << 20
DEFAULT_COMMIT_EVERY_OPS = 20_000


class StateBackend:
    """Which keyed state backend an operator subtask gets."""

    type_name = ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class HashMapStateBackend(StateBackend):
    """State as Python objects in dicts (``state.backend.type: hashmap``, the default)."""

    type_name = "hashmap"


class LmdbStateBackend(StateBackend):
    """State in LMDB (``state.backend.type: lmdb``); ``path`` is the parent of the per-subtask directories.

    With ``path=None`` a temporary directory is created on first use.
    ``enable_incremental_checkpointing`` mirrors PyFlink's
    ``EmbeddedRocksDBStateBackend``: True or False, or None to take
    ``execution.checkpointing.incremental`` (``state.backend.incremental``) from the
    job's configuration (default false). ``max_chain_length`` bounds the files of
    an incremental chain before a full one is written (None: the configuration's
    ``state.backend.lmdb.incremental.max-chain-length``). ``window_pane_memory_bytes`` is the
    memory a window operator subtask keeps its live accumulators in before it writes them to
    LMDB (None: ``state.backend.lmdb.memory.window-panes``, 256 MiB).
    """

    type_name = "lmdb"

    def __init__(
        self,
        path: str | Path | None = None,
        map_size_bytes: int = DEFAULT_MAP_SIZE_BYTES,
        commit_every_ops: int = DEFAULT_COMMIT_EVERY_OPS,
        enable_incremental_checkpointing: bool | None = None,
        max_chain_length: int | None = None,
        window_pane_memory_bytes: int | None = None,
    ) -> None:
        if map_size_bytes <= 0:
            raise UsageError(f"LmdbStateBackend map_size_bytes must be positive, got {map_size_bytes}")
        if enable_incremental_checkpointing not in (None, True, False):
            raise UsageError(
                "LmdbStateBackend enable_incremental_checkpointing must be True, False or None "
                f"(None: from the configuration), got {enable_incremental_checkpointing!r}"
            )
        chain = max_chain_length
        if chain is not None and (not isinstance(chain, int) or isinstance(chain, bool) or chain < 1):
            raise UsageError(f"LmdbStateBackend max_chain_length must be an integer >= 1, got {chain!r}")
        panes = window_pane_memory_bytes
        if panes is not None and (not isinstance(panes, int) or isinstance(panes, bool) or panes < 1):
            raise UsageError(
                f"LmdbStateBackend window_pane_memory_bytes must be a positive number of bytes, got {panes!r}"
            )
        self.window_pane_memory_bytes = panes
        self.path = Path(path) if path is not None else None
        self.map_size_bytes = map_size_bytes
        self.commit_every_ops = commit_every_ops
        self.enable_incremental_checkpointing = enable_incremental_checkpointing
        self.max_chain_length = max_chain_length

    def is_incremental_checkpoints_enabled(self) -> bool:
        """PyFlink's getter: whether checkpoints of this backend are incremental (unset counts as false)."""
        return bool(self.enable_incremental_checkpointing)

    def configure(self, conf: Any) -> LmdbStateBackend:
        """This backend with the settings it left open (None) taken from ``conf`` (Flink's ``configure``)."""
        from weir.common import config_options as o

        incremental = self.enable_incremental_checkpointing
        if incremental is None:
            incremental = bool(conf.get_option(o.CHECKPOINTING_INCREMENTAL))
        chain = self.max_chain_length
        if chain is None:
            chain = int(conf.get_option(o.LMDB_INCREMENTAL_MAX_CHAIN_LENGTH))
        panes = self.window_pane_memory_bytes
        if panes is None:
            panes = int(conf.get_option(o.LMDB_WINDOW_PANE_MEMORY))
        return self.with_path(
            self.path,
            enable_incremental_checkpointing=incremental,
            max_chain_length=chain,
            window_pane_memory_bytes=panes,
        )

    def with_path(self, path: str | Path | None, **changes: Any) -> LmdbStateBackend:
        """A copy of this backend keeping its state under ``path`` (and with ``changes`` applied)."""
        settings: dict[str, Any] = {
            "map_size_bytes": self.map_size_bytes,
            "commit_every_ops": self.commit_every_ops,
            "enable_incremental_checkpointing": self.enable_incremental_checkpointing,
            "max_chain_length": self.max_chain_length,
            "window_pane_memory_bytes": self.window_pane_memory_bytes,
        }
        settings.update(changes)
        return LmdbStateBackend(path, **settings)

    def get_db_storage_path(self) -> Path:
        if self.path is None:
            self.path = Path(tempfile.mkdtemp(prefix="weir-lmdb-"))
        return self.path

    def __repr__(self) -> str:
        incremental = (
            ""
            if self.enable_incremental_checkpointing is None
            else (f", enable_incremental_checkpointing={self.enable_incremental_checkpointing}")
        )
        return f"LmdbStateBackend(path={self.path!r}{incremental})"


class EmbeddedRocksDBStateBackend(LmdbStateBackend):
    """PyFlink's embedded on-disk backend, which weir runs on LMDB (``state.backend.type:
    rocksdb`` is the same choice). A PyFlink job that sets it runs unchanged: the storage
    paths and incremental checkpoints apply; RocksDB's tuning (predefined options, options
    factory, transfer threads) is kept and read back, and changes nothing in LMDB."""

    def __init__(self, enable_incremental_checkpointing: bool | None = None) -> None:
        super().__init__(enable_incremental_checkpointing=enable_incremental_checkpointing)
        self._predefined_options: Any = None
        self._options: str | None = None
        self._transfer_threads = 4

    def set_db_storage_paths(self, *paths: str) -> None:
        """The directory the subtasks' databases go under (the first path: LMDB has one)."""
        self.path = Path(paths[0]) if paths else None

    def get_db_storage_paths(self) -> list[str]:
        return [] if self.path is None else [str(self.path)]

    def set_predefined_options(self, options: Any) -> None:
        self._predefined_options = options

    def get_predefined_options(self) -> Any:
        return self._predefined_options

    def set_options(self, options_factory_class_name: str) -> None:
        self._options = options_factory_class_name

    def get_options(self) -> str | None:
        return self._options

    def set_number_of_transfer_threads(self, number_of_transfering_threads: int) -> None:
        self._transfer_threads = int(number_of_transfering_threads)

    def get_number_of_transfer_threads(self) -> int:
        return self._transfer_threads


def configured_state_backend(chosen: StateBackend | None, conf: Any) -> StateBackend:
    """The backend a job runs with: ``chosen`` (``set_state_backend``) or the one
    ``state.backend.type`` names, with the settings it left open taken from ``conf``."""
    from weir.common import config_options as o

    backend = chosen if chosen is not None else state_backend_from_config(conf.get_option(o.STATE_BACKEND))
    configure = getattr(backend, "configure", None)
    return configure(conf) if configure is not None else backend


def state_backend_from_config(backend_type: str, path: str | Path | None = None) -> StateBackend:
    """The backend that ``state.backend.type`` names (``hashmap``/``heap`` or ``lmdb``/``rocksdb``)."""
    kind = str(backend_type).lower()
    if kind in ("hashmap", "heap"):
        return HashMapStateBackend()
    if kind in ("lmdb", "rocksdb"):
        return LmdbStateBackend(path)
    raise UsageError(f"state.backend.type {backend_type!r} is not a state backend; use hashmap or lmdb")

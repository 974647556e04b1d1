"""The shared state registry: which retained checkpoints still need each shared file. Pure.

Theory of operation
-------------------
Incremental checkpoints upload only new files to ``shared/`` and reference
the older ones again (Flink's ``SharedStateRegistry``). A shared file may be
deleted only when no retained checkpoint references it any more.

Events: ``register(checkpoint_id, files)`` when a checkpoint completes (or is
found on restore), ``release(checkpoint_id)`` when retention drops it.
``release`` returns the files whose last reference just went away and, when a
``delete`` callback was given, calls it for each of them (the registry itself
does no I/O). Invariants:

- a file is referenced by the set of registered checkpoints that list it;
- ``release`` returns a file exactly once: when that set becomes empty;
- a file that any registered checkpoint lists is never returned.

``unused_files(all_files)`` finds orphans -- shared files on disk that no
registered checkpoint lists (uploaded for a checkpoint that was aborted, or
left behind by a crash) -- to clean up after a job ends.

Checkpoints in flight. A checkpoint that is still pending when another one
completes may have built its incremental state on files that the completion
now releases (its snapshot was taken before it learned of the completion).
``release(checkpoint_id, in_flight=...)`` therefore *holds* such files instead
of deleting them: ``on_in_flight_changed(in_flight)`` deletes a held file once
none of the checkpoints that were in flight at its release is still in flight,
and ``register`` takes a held file back when a completing checkpoint lists it.
``delete_unreferenced(files)`` deletes what an aborted checkpoint uploaded:
the files of the list that no registered checkpoint references and none is
holding. With one checkpoint at a time nothing is ever held.

What it does not do: private files (``CheckpointStorage.discard`` removes a
checkpoint's own directory), decide retention (the coordinator does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from weir.errors import UsageError

__all__ = ["SharedStateRegistry", "SharedStateRegistryStatistics"]


@dataclass(frozen=True, slots=True)
class SharedStateRegistryStatistics:
    number_of_checkpoints: int
    number_of_files: int
    number_of_deleted_files: int
    number_of_held_files: int = 0


class SharedStateRegistry:
    """Reference counts of shared files (paths, e.g. ``shared/0001.sst``) over retained checkpoints."""

    def __init__(self, delete: Callable[[str], None] | None = None) -> None:
        self._delete = delete
        #: checkpoint id -> the shared files it references
        self._checkpoints: dict[int, frozenset[str]] = {}
        #: shared file -> the registered checkpoints that reference it (never empty)
        self._references: dict[str, set[int]] = {}
        #: unreferenced file -> the checkpoints in flight when it was released (deleted once they end)
        self._held: dict[str, frozenset[int]] = {}
        self._deleted = 0

    def register(self, checkpoint_id: int, shared_files: Iterable[str]) -> None:
        """Record that ``checkpoint_id`` is retained and needs ``shared_files``."""
        if not isinstance(checkpoint_id, int) or isinstance(checkpoint_id, bool) or checkpoint_id < 0:
            raise UsageError(
                f"shared state registry: checkpoint_id must be an integer >= 0, got {checkpoint_id!r}"
            )
        if checkpoint_id in self._checkpoints:
            raise UsageError(f"shared state registry: checkpoint {checkpoint_id} is already registered")
        files = frozenset(shared_files)
        for f in files:
            if not isinstance(f, str) or not f:
                raise UsageError(
                    f"shared state registry: checkpoint {checkpoint_id} lists an invalid file {f!r}; "
                    "expected a non-empty path"
                )
        self._checkpoints[checkpoint_id] = files
        for f in files:
            self._references.setdefault(f, set()).add(checkpoint_id)
            self._held.pop(f, None)

    def release(self, checkpoint_id: int, in_flight: Iterable[int] = ()) -> list[str]:
        """Forget ``checkpoint_id``; the files no retained checkpoint needs any more (sorted), now deleted.

        With ``in_flight`` (ids of checkpoints still pending) those files are held
        instead, and deleted by ``on_in_flight_changed`` once they are all over.
        """
        files = self._checkpoints.pop(checkpoint_id, None)
        if files is None:
            retained = sorted(self._checkpoints)
            raise UsageError(
                f"shared state registry: checkpoint {checkpoint_id!r} is not registered (retained: {retained})"
            )
        unused = []
        for f in files:
            refs = self._references[f]
            refs.discard(checkpoint_id)
            if not refs:
                del self._references[f]
                unused.append(f)
        unused.sort()
        guard = frozenset(in_flight)
        if guard:
            for f in unused:
                self._held[f] = self._held.get(f, frozenset()) | guard
            return []
        return self._delete_now(unused)

    def on_in_flight_changed(self, in_flight: Iterable[int]) -> list[str]:
        """``in_flight`` are the checkpoints pending now; delete held files none of them may use (sorted)."""
        pending = frozenset(in_flight)
        done = sorted(f for f, guard in self._held.items() if not guard & pending)
        for f in done:
            del self._held[f]
        return self._delete_now(done)

    def delete_unreferenced(self, shared_files: Iterable[str]) -> list[str]:
        """Delete the files of ``shared_files`` that no registered checkpoint references and none is holding
        (what an aborted checkpoint uploaded); the files deleted, sorted."""
        doomed = sorted({f for f in shared_files if f not in self._references and f not in self._held})
        return self._delete_now(doomed)

    def held_files(self) -> frozenset[str]:
        """Unreferenced files kept for checkpoints that were in flight when they were released."""
        return frozenset(self._held)

    def _delete_now(self, files: list[str]) -> list[str]:
        self._deleted += len(files)
        if self._delete is not None:
            for f in files:
                self._delete(f)
        return files

    def reference_count(self, shared_file: str) -> int:
        """How many retained checkpoints reference ``shared_file`` (0 when none)."""
        return len(self._references.get(shared_file, ()))

    def referenced_files(self) -> frozenset[str]:
        return frozenset(self._references)

    def retained_checkpoints(self) -> list[int]:
        return sorted(self._checkpoints)

    def files_of(self, checkpoint_id: int) -> frozenset[str]:
        if checkpoint_id not in self._checkpoints:
            raise UsageError(f"shared state registry: checkpoint {checkpoint_id!r} is not registered")
        return self._checkpoints[checkpoint_id]

    def unused_files(self, all_files: Iterable[str]) -> list[str]:
        """The files of ``all_files`` that no registered checkpoint references (sorted): orphans."""
        return sorted({f for f in all_files if f not in self._references})

    def statistics(self) -> SharedStateRegistryStatistics:
        return SharedStateRegistryStatistics(
            number_of_checkpoints=len(self._checkpoints),
            number_of_files=len(self._references),
            number_of_deleted_files=self._deleted,
            number_of_held_files=len(self._held),
        )

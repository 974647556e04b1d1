"""Random incremental checkpoints with retention: a shared file is deleted iff no retained checkpoint needs it."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.checkpoint.metadata import CheckpointMetadata, OperatorCheckpointState, SubtaskStateHandle
from weir.checkpoint.registry import SharedStateRegistry
from weir.checkpoint.storage import CheckpointStorage
from weir.keys.reference import KeyGroupRange

FILES = [f"shared/{i:03d}.sst" for i in range(12)]

# each step: the shared files the next checkpoint references, and how many checkpoints to retain
steps = st.lists(
    st.tuples(st.sets(st.sampled_from(FILES), max_size=6), st.integers(min_value=1, max_value=4)),
    min_size=1,
    max_size=25,
)


@given(steps=steps)
def test_registry_deletes_exactly_the_unreferenced_files(steps: list[tuple[set[str], int]]) -> None:
    deleted: list[str] = []
    registry = SharedStateRegistry(delete=deleted.append)
    retained: dict[int, set[str]] = {}
    ever_registered: set[str] = set()
    for checkpoint_id, (files, retain) in enumerate(steps, start=1):
        registry.register(checkpoint_id, files)
        retained[checkpoint_id] = files
        ever_registered |= files
        while len(retained) > retain:
            oldest = min(retained)
            released = registry.release(oldest)
            del retained[oldest]
            still_needed = set().union(*retained.values())
            # nothing still referenced is deleted; everything dropped by the released checkpoint that no
            # other retained checkpoint needs is deleted now, exactly once
            assert not set(released) & still_needed
            assert sorted(released) == sorted(f for f in steps[oldest - 1][0] if f not in still_needed)
            assert deleted[len(deleted) - len(released) :] == released
        still_needed = set().union(*retained.values())
        assert registry.referenced_files() == still_needed
        assert set(registry.unused_files(FILES)) == set(FILES) - still_needed
        for f in FILES:
            assert registry.reference_count(f) == sum(f in fs for fs in retained.values())
    # releasing everything at the end deletes every file that was ever referenced and not deleted yet
    for checkpoint_id in sorted(retained):
        registry.release(checkpoint_id)
    assert registry.referenced_files() == frozenset()
    assert set(deleted) == ever_registered
    assert registry.statistics().number_of_deleted_files == len(deleted)


@given(steps=steps)
@settings(max_examples=30, deadline=None)
def test_storage_with_retention_keeps_every_retained_checkpoint_restorable(
    steps: list[tuple[set[str], int]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        storage = CheckpointStorage(Path(tmp), "job")
        registry = SharedStateRegistry(delete=storage.delete_shared_file)
        retained: list[int] = []
        for checkpoint_id, (files, retain) in enumerate(steps, start=1):
            shared = tuple(
                storage.write_state_file(checkpoint_id, f.removeprefix("shared/"), f.encode(), shared=True)
                for f in sorted(files)
            )
            keyed = storage.write_state_file(checkpoint_id, "keyed", b"k")
            metadata = CheckpointMetadata(
                "job",
                checkpoint_id,
                checkpoint_id,
                (
                    OperatorCheckpointState(
                        "op", 1, 8, (SubtaskStateHandle(0, "keyed", keyed, KeyGroupRange(0, 7), shared),)
                    ),
                ),
            )
            storage.write_metadata(checkpoint_id, metadata)
            registry.register(checkpoint_id, [f.path for f in shared])
            retained.append(checkpoint_id)
            while len(retained) > retain:
                oldest = retained.pop(0)
                registry.release(oldest)
                storage.discard(oldest)
            for cid in retained:
                storage.load(cid, verify_checksums=True)  # every retained checkpoint is intact
            assert storage.list_checkpoints().checkpoint_ids == retained[::-1]
            assert set(storage.list_shared_files()) == registry.referenced_files()

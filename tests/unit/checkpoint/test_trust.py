"""The checkpoint signing key and what recovery does with a checkpoint it did not sign."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from weir.checkpoint.metadata import (
    CheckpointMetadata,
    OperatorCheckpointState,
    SubtaskStateHandle,
    parse,
    serialize,
)
from weir.checkpoint.storage import CheckpointStorage
from weir.checkpoint.trust import is_signed_by_this_user, key_path, sign
from weir.errors import UsageError
from weir.keys.reference import KeyGroupRange


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WEIR_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _checkpoint(storage: CheckpointStorage, checkpoint_id: int) -> CheckpointMetadata:
    handle = storage.write_state_file(checkpoint_id, "op-0.state", b"state")
    metadata = CheckpointMetadata(
        "job", checkpoint_id, 0,
        (OperatorCheckpointState("op", 1, 8, (SubtaskStateHandle(0, "keyed", handle, KeyGroupRange(0, 7)),)),),
    )  # fmt: skip
    storage.write_metadata(checkpoint_id, metadata)
    return metadata


def test_the_key_is_made_private_whatever_the_umask(home: Path) -> None:
    old = os.umask(0)
    try:
        signature = sign("sha256:" + "0" * 64)
    finally:
        os.umask(old)
    assert signature.startswith("hmac-sha256:") and len(signature) == len("hmac-sha256:") + 64
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(key_path()).st_mode) == 0o600
    assert sign("sha256:" + "0" * 64) == signature  # the same key next time


def test_a_readable_key_is_refused(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home.mkdir(mode=0o700)
    key_path().write_bytes(os.urandom(32))
    os.chmod(key_path(), 0o644)
    with pytest.raises(UsageError, match=r"must be yours and private \(mode 0600\).*chmod 600"):
        sign("sha256:" + "1" * 64)


def test_another_home_does_not_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    metadata = parse(serialize(_metadata(), sign=sign), "m")
    assert is_signed_by_this_user(metadata)
    monkeypatch.setenv("WEIR_HOME", str(tmp_path / "elsewhere"))
    assert not is_signed_by_this_user(metadata)
    assert not is_signed_by_this_user(parse(serialize(_metadata()), "m"))  # unsigned


def _metadata() -> CheckpointMetadata:
    return CheckpointMetadata("job", 1, 0)


def test_recovery_skips_a_checkpoint_this_user_did_not_sign(tmp_path: Path) -> None:
    storage = CheckpointStorage(tmp_path / "ckpts", "job")
    _checkpoint(storage, 1)
    newest = _checkpoint(storage, 2)
    assert storage.latest_valid().metadata == newest
    storage.metadata_path(2).write_bytes(serialize(newest))  # rewritten by someone without the key
    latest = storage.latest_valid()
    assert latest.metadata is not None and latest.metadata.checkpoint_id == 1
    assert "not signed with your checkpoint signing key" in latest.skipped[0].reason

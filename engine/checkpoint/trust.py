"""Who wrote a checkpoint: ``_metadata`` signatures with a key only its user holds. I/O (the key file).

Theory of operation
-------------------
A checkpoint's ``_metadata`` lists every state file with its SHA-256, and carries a
checksum of its own body (``weir.checkpoint.metadata``). Anybody who can write the
directory can recompute those, so they prove that nothing was damaged, not who wrote
it. The signature does that: HMAC-SHA256 of the body's checksum under a 32-byte key
kept in ``$WEIR_HOME/checkpoint-signing.key`` (mode 0600 in a 0700 directory, created on
first use, never leaves the machine). A signature that verifies means this user's weir
wrote the metadata, hence (through the SHA-256s) every state file it names.

What follows from a verified signature is one thing only: a restore may rebuild the
opaque values (pickled Python objects of types weir has no data encoding for) that
state files can hold. Without one -- a savepoint copied from another machine or user, or
a file edited after it was written -- everything that is plain data restores as usual,
and an opaque value is refused with an error naming the file, unless the user accepts
the risk explicitly (``weir.state.state_file``).

What it does not do: encrypt, or protect against somebody who can read the user's key
(that person can already run code as the user).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from weir.checkpoint.metadata import CheckpointMetadata
from weir.errors import UsageError
from weir.private_files import private_dir, read_private, weir_home, write_private

__all__ = ["KEY_FILE_NAME", "SIGNATURE_PREFIX", "is_signed_by_this_user", "key_path", "sign"]

KEY_FILE_NAME = "checkpoint-signing.key"
SIGNATURE_PREFIX = "hmac-sha256:"
_KEY_BYTES = 32
_keys: dict[Path, bytes] = {}


def key_path() -> Path:
    """Where the signing key of the current user lives (``$WEIR_HOME`` decides)."""
    return weir_home() / KEY_FILE_NAME


def _check_key_file(path: Path) -> None:
    st = os.lstat(path)
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        raise UsageError(
            f"checkpoint signing key {path} must be yours and private (mode 0600), found uid {st.st_uid} "
            f"mode {stat.S_IMODE(st.st_mode):04o}; remove it (a new key is made) or run: chmod 600 {path}"
        )


def _signing_key() -> bytes:
    path = key_path()
    key = _keys.get(path)
    if key is not None:
        return key
    private_dir(path.parent)
    with contextlib.suppress(FileExistsError):  # made before, or just now by another process: use it
        write_private(path, secrets.token_bytes(_KEY_BYTES), exclusive=True)
    _check_key_file(path)
    key = read_private(path)
    if len(key) != _KEY_BYTES:
        raise UsageError(
            f"checkpoint signing key {path} holds {len(key)} bytes, expected {_KEY_BYTES}; remove it and "
            "weir makes a new one (checkpoints signed with the old key then restore as foreign ones)"
        )
    _keys[path] = key
    return key


def sign(checksum: str) -> str:
    """The signature of a metadata body's ``checksum`` under the current user's key."""
    digest = hmac.new(_signing_key(), checksum.encode("utf-8"), hashlib.sha256).hexdigest()
    return SIGNATURE_PREFIX + digest


def is_signed_by_this_user(metadata: CheckpointMetadata) -> bool:
    """True when ``metadata`` (as parsed) carries a signature this user's key made over its checksum."""
    if metadata.checksum is None or metadata.signature is None:
        return False
    return hmac.compare_digest(sign(metadata.checksum), metadata.signature)

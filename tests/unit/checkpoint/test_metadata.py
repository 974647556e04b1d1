"""The ``_metadata`` format: round trips, validation, and clear errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weir.checkpoint.metadata import (
    FORMAT_VERSION,
    CheckpointMetadata,
    FileHandle,
    OperatorCheckpointState,
    SubtaskStateHandle,
    body_checksum,
    parse,
    serialize,
)
from weir.errors import UsageError
from weir.keys.reference import KeyGroupRange


def _file(path: str, data: bytes = b"x", shared: bool = False) -> FileHandle:
    return FileHandle.of(path, data, shared=shared)


def _metadata(checkpoint_id: int = 3) -> CheckpointMetadata:
    prefix = f"chk-{checkpoint_id}"
    window = OperatorCheckpointState(
        operator_id="window",
        parallelism=2,
        max_parallelism=128,
        state_handles=(
            SubtaskStateHandle(
                0,
                "keyed",
                _file(f"{prefix}/window-0-keyed", b"k0"),
                KeyGroupRange(0, 63),
                shared_files=(_file("shared/a.sst", b"a", True), _file("shared/b.sst", b"b", True)),
            ),
            SubtaskStateHandle(1, "keyed", _file(f"{prefix}/window-1-keyed", b"k1"), KeyGroupRange(64, 127)),
            SubtaskStateHandle(
                1, "timers", _file(f"{prefix}/window-1-timers", b"t1"), KeyGroupRange(64, 127)
            ),
        ),
    )
    source = OperatorCheckpointState(
        operator_id="source",
        parallelism=2,
        max_parallelism=128,
        state_handles=(
            SubtaskStateHandle(0, "operator", _file(f"{prefix}/source-0-op", b"o")),
            SubtaskStateHandle(1, "operator", _file(f"{prefix}/source-1-op", b"p")),
        ),
        source_positions={0: {"partition-0": 1050}, 1: [1, "two", None]},
    )
    return CheckpointMetadata(
        job_id="job-1", checkpoint_id=checkpoint_id, timestamp_ms=1234, operators=(window, source)
    )


def test_round_trip_is_exact_and_deterministic() -> None:
    m = _metadata()
    data = serialize(m)
    assert parse(data, "mem") == m
    assert serialize(parse(data, "mem")) == data
    doc = json.loads(data)
    assert doc["format_version"] == FORMAT_VERSION
    assert doc["kind"] == "checkpoint"
    assert b"pickle" not in data and data.startswith(b"{")


def test_savepoint_round_trip_and_queries() -> None:
    handle = SubtaskStateHandle(0, "keyed", _file("op/state", b"abc"), KeyGroupRange(0, 9))
    m = CheckpointMetadata(
        job_id="j",
        checkpoint_id=7,
        timestamp_ms=0,
        operators=(OperatorCheckpointState("op", 1, 10, (handle,)),),
        kind="savepoint",
        savepoint_format="canonical",
    )
    back = parse(serialize(m), "sp")
    assert back == m and back.is_savepoint and back.savepoint_format == "canonical"
    assert back.size_bytes() == 3 and len(back.files()) == 1


def test_file_queries_count_shared_files_once() -> None:
    m = _metadata()
    assert [f.path for f in m.shared_files()] == ["shared/a.sst", "shared/b.sst"]
    assert len(m.private_files()) == 5
    assert m.size_bytes() == sum(f.size_bytes for f in m.files())
    assert m.operator("source").source_positions[0] == {"partition-0": 1050}
    with pytest.raises(UsageError, match="no operator 'nope'"):
        m.operator("nope")


def test_newer_version_names_file_and_supported_versions() -> None:
    doc = json.loads(serialize(_metadata()))
    doc["format_version"] = FORMAT_VERSION + 1
    with pytest.raises(UsageError) as e:
        parse(json.dumps(doc).encode(), "/ckpt/chk-3/_metadata")
    msg = str(e.value)
    assert "/ckpt/chk-3/_metadata" in msg
    assert f"{FORMAT_VERSION + 1}" in msg and "newer weir" in msg
    assert f"versions 1..{FORMAT_VERSION}" in msg


@pytest.mark.parametrize("cut", [1, 10, 100, -2])
def test_truncated_file_is_rejected(cut: int) -> None:
    data = serialize(_metadata())
    with pytest.raises(UsageError, match=r"/x/_metadata: file: is not valid JSON .*truncated or corrupt"):
        parse(data[:cut], "/x/_metadata")


def test_empty_and_binary_files_are_rejected() -> None:
    with pytest.raises(UsageError, match="is empty"):
        parse(b"", "f")
    with pytest.raises(UsageError, match="not UTF-8"):
        parse(b"\x80\x04\x95", "f")  # a pickle
    with pytest.raises(UsageError, match="not a weir metadata file"):
        parse(b'{"hello": 1}', "f")
    with pytest.raises(UsageError, match="expected a JSON object"):
        parse(b"[1, 2]", "f")


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.pop("job_id"), r"\$\.job_id: missing"),
        (lambda d: d.update(checkpoint_id="3"), r"\$\.checkpoint_id: expected int"),
        (lambda d: d.update(checkpoint_id=True), r"\$\.checkpoint_id: expected int"),
        (lambda d: d.update(format_version=0), "format_version: 0 is not a valid version"),
        (lambda d: d.update(kind="backup"), "kind must be one of"),
        (lambda d: d["operators"][0].update(parallelism=500), r"operators\[0\].*parallelism"),
        (
            lambda d: d["operators"][0]["state_handles"][0]["file"].update(sha256="abc"),
            r"operators\[0\]\.state_handles\[0\]\.file: sha256 .* 64 lowercase hex",
        ),
        (
            lambda d: d["operators"][0]["state_handles"][0]["file"].update(path="../../etc/passwd"),
            "not a valid state file path",
        ),
        (
            lambda d: d["operators"][0]["state_handles"][0].update(key_group_range=None),
            "needs a key group range",
        ),
        (
            lambda d: d["operators"][0]["state_handles"][0].update(key_group_range=[0, 200]),
            "beyond max_parallelism 128",
        ),
        (
            lambda d: d["operators"][0]["state_handles"][0].update(state_kind="rocks"),
            "state_kind must be one of keyed, operator, timers, channel",
        ),
        (lambda d: d["operators"][0]["state_handles"][0].pop("shared_files"), "shared_files: missing"),
        (lambda d: d["operators"][1]["source_positions"].update(x=1), "keys must be subtask indexes"),
        (lambda d: d["operators"][1].update(operator_id="window"), "appears twice"),
    ],
)
def test_malformed_fields_are_named(mutate: object, expected: str) -> None:
    doc = json.loads(serialize(_metadata()))
    mutate(doc)  # type: ignore[operator]
    doc["checksum"] = body_checksum(doc)  # a consistent file, so the field check speaks
    with pytest.raises(UsageError, match=expected) as e:
        parse(json.dumps(doc).encode(), "some/_metadata")
    assert "some/_metadata" in str(e.value)


def test_constructor_validation() -> None:
    with pytest.raises(UsageError, match="must be under 'shared/'"):
        FileHandle.of("chk-1/a", b"", shared=True)
    with pytest.raises(UsageError, match="has no key groups"):
        SubtaskStateHandle(0, "operator", _file("chk-1/a"), KeyGroupRange(0, 1))
    with pytest.raises(UsageError, match="must be under 'chk-2/'"):
        CheckpointMetadata(
            "j",
            2,
            0,
            (OperatorCheckpointState("op", 1, 1, (SubtaskStateHandle(0, "operator", _file("chk-1/a")),)),),
        )
    with pytest.raises(UsageError, match="self-contained"):
        CheckpointMetadata(
            "j",
            2,
            0,
            (
                OperatorCheckpointState(
                    "op", 1, 1, (SubtaskStateHandle(0, "operator", _file("shared/a", shared=True)),)
                ),
            ),
            kind="savepoint",
            savepoint_format="native",
        )
    with pytest.raises(UsageError, match="savepoint_format"):
        CheckpointMetadata("j", 2, 0, kind="savepoint")
    with pytest.raises(UsageError, match="plain JSON"):
        OperatorCheckpointState("src", 1, 1, source_positions={0: object()})
    with pytest.raises(UsageError, match="different size or checksum"):
        CheckpointMetadata(
            "j",
            1,
            0,
            (
                OperatorCheckpointState(
                    "op",
                    2,
                    2,
                    (
                        SubtaskStateHandle(0, "operator", _file("chk-1/a", b"1")),
                        SubtaskStateHandle(1, "operator", _file("chk-1/a", b"2")),
                    ),
                ),
            ),
        )


def test_metadata_and_registry_are_pure() -> None:
    import subprocess
    import sys

    code = (
        "import sys, weir.checkpoint.metadata, weir.checkpoint.registry\n"
        "bad = sorted(m for m in ('trio', 'lmdb', 'weir.checkpoint.storage') if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    import weir.checkpoint.metadata as metadata_module

    source = Path(metadata_module.__file__).read_text(encoding="utf-8")
    assert "import pickle" not in source  # the metadata format is never pickle


def _edited(mutate: object) -> bytes:
    doc = json.loads(serialize(_metadata()))
    mutate(doc)  # type: ignore[operator]
    return json.dumps(doc).encode()


def test_an_edit_that_leaves_valid_json_fails_the_checksum() -> None:
    data = _edited(lambda d: d["operators"][0]["state_handles"].pop(1))
    with pytest.raises(UsageError, match=r"some/_metadata: checksum: .*edited or damaged"):
        parse(data, "some/_metadata")
    doc = json.loads(serialize(_metadata()))
    assert doc["checksum"].startswith("sha256:") and doc["signature"] is None
    signed = json.loads(serialize(_metadata(), sign=lambda c: "hmac-sha256:" + c[-64:]))
    assert signed["checksum"] == doc["checksum"]  # the signature is outside the body
    assert parse(serialize(_metadata(), sign=lambda c: "sig"), "m").signature == "sig"


def _recomputed(mutate: object) -> bytes:
    doc = json.loads(serialize(_metadata()))
    mutate(doc)  # type: ignore[operator]
    doc["checksum"] = body_checksum(doc)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["operators"][0]["state_handles"].pop(1), r"key groups 64\.\.127 are missing"),
        (lambda d: d["operators"][0]["state_handles"].pop(0), r"no state of subtask\(s\) 0 at"),
        (
            lambda d: d["operators"][0]["state_handles"][1].update(key_group_range=[60, 127]),
            r"key groups 60\.\.63 are held twice",
        ),
        (
            lambda d: d["operators"][1]["state_handles"].pop(1),
            r"operator 'source' has no state of subtask\(s\) 1 at parallelism 2",
        ),
    ],
)
def test_a_restore_needs_every_key_group_and_subtask_once(mutate: object, expected: str) -> None:
    with pytest.raises(UsageError, match=expected) as e:
        parse(_recomputed(mutate), "some/_metadata")
    assert "some/_metadata" in str(e.value) and "incomplete" in str(e.value)

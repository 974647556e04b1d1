"""Stable operator IDs: state is restored by them, so they must not drift."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from weir.common import WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.errors import UsageError
from weir.graph.job_graph import generate_job_graph

REPO = Path(__file__).resolve().parents[3]


def build(extra_upstream: bool = False, with_uids: bool = False) -> dict[str, str]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    s = env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "s")
    if extra_upstream:
        s = s.filter(lambda x: x > 0).name("extra")
    m = s.map(lambda x: (x % 3, x)).name("m")
    r = m.key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).name("r")
    if with_uids:
        r.uid("reduce-uid")
    r.map(lambda x: x).name("after").print().name("sink")
    job = generate_job_graph(env.get_stream_graph())
    return {op.name: op.id for v in job.vertices for op in v.operators}


def test_same_job_twice_gives_the_same_ids() -> None:
    assert build() == build()


def test_ids_are_equal_across_processes() -> None:
    script = textwrap.dedent(
        """
        import json, sys
        sys.path.insert(0, "tests/unit/graph")
        from test_operator_ids import build
        print(json.dumps(build()))
        """
    )
    runs = [
        subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    first, second = (json.loads(r.stdout) for r in runs)
    assert first == second == build()


def test_an_upstream_change_changes_downstream_auto_ids_but_never_a_uid() -> None:
    before = build(with_uids=True)
    after = build(extra_upstream=True, with_uids=True)
    assert after["r"] == before["r"]  # uid-given
    for name in ("m", "after", "Sink: sink"):
        assert after[name] != before[name], name


def test_ids_are_32_hex_characters_and_unique() -> None:
    ids = build()
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids.values())
    assert len(set(ids.values())) == len(ids)


def test_uid_hash_is_used_as_given(env: StreamExecutionEnvironment) -> None:
    env.from_collection([1]).map(lambda x: x).name("m").set_uid_hash(
        "0123456789abcdef0123456789ABCDEF"
    ).print()
    job = generate_job_graph(env.get_stream_graph())
    ids = {op.name: op.id for v in job.vertices for op in v.operators}
    assert ids["m"] == "0123456789abcdef0123456789abcdef"


def test_duplicate_uid_is_an_error_naming_both_operators(env: StreamExecutionEnvironment) -> None:
    s = env.from_collection([1])
    s.map(lambda x: x).name("first").uid("same").print()
    s.filter(bool).name("second").uid("same").print()
    with pytest.raises(UsageError, match=r"uid 'same' is used by both 'first'.*and 'second'"):
        env.get_stream_graph()


def test_bad_uid_hash_is_an_error(env: StreamExecutionEnvironment) -> None:
    with pytest.raises(UsageError, match="32 hexadecimal"):
        env.from_collection([1]).map(lambda x: x).set_uid_hash("xyz")

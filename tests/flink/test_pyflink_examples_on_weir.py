"""Flink's own DataStream examples, from the installed apache-flink wheel, run on weir unchanged.

Nothing of Flink's is in this repository: each example is read from PyFlink's environment
(``pyflink/examples/datastream/*.py`` and ``windowing/*.py``; ``connectors/`` needs Kafka
brokers and friends, and ``asyncio/``'s one example reads an unbounded Table API datagen
source through ``StreamTableEnvironment``), copied to a temporary directory with ``pyflink.``
swapped for ``weir.``, run with weir's Python, and its original run with PyFlink's; the
printed records must be the same (as multisets: the examples run at the default
parallelism, so their print order is not defined).

An example weir cannot run yet is an expected failure with the reason; ``strict`` makes
the day it starts passing fail this test until the table below says so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .two_engines import assert_same_output, pyflink_examples_dir, run_on_pyflink, run_on_weir

pytestmark = [pytest.mark.flink, pytest.mark.timeout(1800)]  # each PyFlink run starts a JVM

# example (relative to pyflink/examples/datastream) -> why weir cannot run it yet, or None
EXAMPLES: dict[str, str | None] = {
    "basic_operations.py": None,
    "event_time_timer.py": None,
    "process_json_data.py": None,
    "state_access.py": None,
    "word_count.py": None,
    "streaming_word_count.py": "needs the Table API (StreamTableEnvironment): weir has only the DataStream API",
    "windowing/session_with_dynamic_gap_window.py": None,
    "windowing/session_with_gap_window.py": None,
    "windowing/sliding_time_window.py": None,
    "windowing/tumbling_count_window.py": None,
    "windowing/tumbling_time_window.py": None,
}


def _cases() -> list[object]:
    cases = []
    for name, reason in EXAMPLES.items():
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        cases.append(pytest.param(name, marks=marks, id=name))
    return cases


def swap_to_weir(source: str) -> str:
    """The user's edit: every ``pyflink.`` becomes ``weir.``."""
    return re.sub(r"\bpyflink\.", "weir.", source)


def test_the_table_names_every_example_of_the_installed_wheel() -> None:
    examples = pyflink_examples_dir()
    shipped = {
        str(path.relative_to(examples))
        for pattern in ("*.py", "windowing/*.py")
        for path in examples.glob(pattern)
        if path.name != "__init__.py"
    }
    assert shipped == set(EXAMPLES), "examples added to or gone from the wheel: update EXAMPLES"


@pytest.mark.parametrize("name", _cases())
def test_flink_example_runs_on_weir_with_pyflinks_output(name: str, tmp_path: Path) -> None:
    original = pyflink_examples_dir() / name
    on_weir = tmp_path / "weir" / original.name
    on_weir.parent.mkdir()
    on_weir.write_text(swap_to_weir(original.read_text(encoding="utf-8")), encoding="utf-8")
    (tmp_path / "flink").mkdir()
    weir = run_on_weir(on_weir, on_weir.parent)
    if weir.returncode != 0:  # no need to start a JVM to know the example fails on weir
        pytest.fail(f"weir failed:\n{weir.stderr[-3000:]}")
    flink = run_on_pyflink(original, tmp_path / "flink")
    assert_same_output(weir, flink)

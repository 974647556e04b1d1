"""The runnable examples of docs/testing.md pass, run by pytest the way a user runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "testing"


def test_the_testing_examples_pass(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(str(EXAMPLES), "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=11)

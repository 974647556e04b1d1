"""``assert_output``: compare what a job produced with what it should have, with a readable diff.

Unordered (the default) compares multisets: the message lists records that are
*missing* (expected but absent, or fewer times than expected), *unexpected* (produced
but never expected) and *duplicated* (expected, but produced more often). Ordered also
requires the same sequence and points at the first position where they part.

Records may be unhashable (lists, dicts, sets): they are compared through a frozen copy
(lists become tuples, dicts sorted items, sets frozensets) and shown as they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from weir.errors import UsageError

SHOWN_PER_SECTION = 20


def _freeze(value: Any) -> Any:
    """``value`` itself when hashable (its own equality counts), else a hashable stand-in."""
    try:
        hash(value)
    except TypeError:
        pass
    else:
        return value
    if isinstance(value, list | tuple):
        return (f"<{type(value).__name__}>", tuple(_freeze(v) for v in value))
    if isinstance(value, dict):
        return ("<dict>", frozenset((_freeze(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, set):
        return ("<set>", frozenset(_freeze(v) for v in value))
    return ("<unhashable>", type(value).__name__, repr(value))


def _records_of(result: Any, what: str) -> list[Any]:
    records = getattr(result, "records", None)  # a CollectingSink
    if records is not None and not callable(records):
        return list(records)
    if isinstance(result, str | bytes) or not isinstance(result, Iterable):
        raise UsageError(
            f"assert_output needs the {what} as a CollectingSink or an iterable of records, got {result!r}"
        )
    return list(result)


class OutputDiff:
    """The difference between an actual and an expected output (empty when they agree)."""

    def __init__(self, actual: list[Any], expected: list[Any], ordered: bool) -> None:
        self.actual = actual
        self.expected = expected
        self.ordered = ordered
        frozen_actual = [_freeze(v) for v in actual]
        frozen_expected = [_freeze(v) for v in expected]
        shown: dict[Any, Any] = {}
        for f, v in zip(frozen_expected + frozen_actual, expected + actual):
            shown.setdefault(f, v)
        got, want = Counter(frozen_actual), Counter(frozen_expected)
        self.missing: list[tuple[Any, int, int]] = []  # (record, expected count, actual count)
        self.unexpected: list[tuple[Any, int]] = []  # (record, actual count)
        self.duplicated: list[tuple[Any, int, int]] = []
        for key in _stable(want, frozen_expected):
            if got[key] < want[key]:
                self.missing.append((shown[key], want[key], got[key]))
        for key in _stable(got, frozen_actual):
            if want[key] == 0:
                self.unexpected.append((shown[key], got[key]))
            elif got[key] > want[key]:
                self.duplicated.append((shown[key], want[key], got[key]))
        self.first_difference: int | None = None
        if ordered and frozen_actual != frozen_expected:
            n = min(len(frozen_actual), len(frozen_expected))
            self.first_difference = next((i for i in range(n) if frozen_actual[i] != frozen_expected[i]), n)

    def __bool__(self) -> bool:
        return bool(self.missing or self.unexpected or self.duplicated or self.first_difference is not None)

    def describe(self, expected_label: str = "expected", actual_label: str = "actual") -> str:
        """The diff as text; the labels name the two sides (e.g. "clean run", "with failures")."""
        mode = "ordered" if self.ordered else "unordered"
        lines = [
            f"output differs from {expected_label} ({mode}): {len(self.expected)} {expected_label}, "
            f"{len(self.actual)} {actual_label}"
        ]

        def section(title: str, rows: list[str]) -> None:
            if rows:
                lines.append(f"  {title} ({len(rows)}):")
                lines.extend(f"    {row}" for row in rows[:SHOWN_PER_SECTION])
                if len(rows) > SHOWN_PER_SECTION:
                    lines.append(f"    ... and {len(rows) - SHOWN_PER_SECTION} more")

        section(
            "missing",
            [
                f"{v!r}" + (f"  {w}× in {expected_label}, {g}× in {actual_label}" if w > 1 or g > 0 else "")
                for v, w, g in self.missing
            ],
        )
        section("unexpected", [f"{v!r}" + (f"  ({g}×)" if g > 1 else "") for v, g in self.unexpected])
        section(
            "duplicated",
            [f"{v!r}  {w}× in {expected_label}, {g}× in {actual_label}" for v, w, g in self.duplicated],
        )
        if self.first_difference is not None:
            i = self.first_difference
            lines.append(f"  order: first difference at position {i}")
            lo = max(0, i - 2)
            lines.append(f"    {expected_label}[{lo}:{i + 3}] = {self.expected[lo : i + 3]!r}")
            lines.append(f"    {actual_label}[{lo}:{i + 3}] = {self.actual[lo : i + 3]!r}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe() if self else "outputs agree"


def _stable(counts: Counter[Any], order: list[Any]) -> list[Any]:
    """The keys of ``counts`` in first-appearance order."""
    seen: dict[Any, None] = {}
    for key in order:
        if key in counts:
            seen.setdefault(key, None)
    return list(seen)


def diff_output(result: Any, expected: Iterable[Any], ordered: bool = False) -> OutputDiff:
    """The OutputDiff of ``result`` (a CollectingSink or records) against ``expected``."""
    return OutputDiff(_records_of(result, "result"), _records_of(expected, "expected records"), ordered)


def assert_output(result: Any, expected: Iterable[Any], ordered: bool = False) -> None:
    """Fail with a readable diff unless ``result`` holds exactly the ``expected`` records
    (as a multiset; with ``ordered=True`` also in the same order)."""
    __tracebackhide__ = True
    difference = diff_output(result, expected, ordered)
    if difference:
        raise AssertionError(difference.describe())

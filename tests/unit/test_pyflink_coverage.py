"""tools/pyflink_coverage.py counts by name: a class, and each method it defines itself."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

TOOL = Path(__file__).resolve().parents[2] / "tools" / "pyflink_coverage.py"


def load_tool() -> Any:
    spec = importlib.util.spec_from_file_location("pyflink_coverage", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pyflink_coverage"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def module_with(name: str, **classes: type) -> types.ModuleType:
    module = types.ModuleType(name)
    for cls_name, cls in classes.items():
        cls.__module__ = name
        setattr(module, cls_name, cls)
    return module


def test_a_class_counts_with_its_own_public_methods_and_weir_matches_by_name() -> None:
    tool = load_tool()

    class Stream:
        def map(self) -> None: ...
        def key_by(self) -> None: ...
        def _private(self) -> None: ...

    class Sink:
        def name(self) -> None: ...

    reference = module_with("pyflink.datastream", Stream=Stream, Sink=Sink)
    reference.__all__ = ["Stream", "Sink"]  # type: ignore[attr-defined]

    class WeirStream:
        def map(self) -> None: ...

    weir = types.ModuleType("weir.datastream")
    weir.Stream = WeirStream  # type: ignore[attr-defined]
    names = {"classes": tool.user_facing([reference], "pyflink.datastream"), "all": reference.__all__}  # type: ignore[attr-defined]
    coverage = tool.compare("datastream", names, [weir])
    assert sorted(coverage.present) == ["Stream", "Stream.map"]
    assert sorted(coverage.missing) == ["Sink", "Sink.name", "Stream.key_by"]
    assert (coverage.all_present, coverage.all_missing) == (["Stream"], ["Sink"])


def test_without_pyflink_the_tool_says_how_to_get_it(monkeypatch: Any, tmp_path: Path) -> None:
    tool = load_tool()
    monkeypatch.setenv("WEIR_FLINK_PYTHON", str(tmp_path / "no-such-python"))
    try:
        tool.measure()
    except SystemExit as exit_:
        assert "make flink-env" in str(exit_.code) and "no-such-python" in str(exit_.code)
    else:
        raise AssertionError("measure() ran without PyFlink")

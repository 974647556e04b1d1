"""Count, by name, how much of PyFlink's user-facing DataStream API weir has.

    python tools/pyflink_coverage.py [--missing] [--json]

Needs apache-flink installed beside weir (``pip install apache-flink``); it only imports
the two packages, it starts no JVM. What is counted (docs/pyflink-coverage.md):

* every public class defined in a module of ``pyflink.datastream`` or ``pyflink.common``
  (tests excluded), and every public method, property, static and class method the class
  itself defines: an item is ``Class`` or ``Class.method``. Not user-facing, so not
  counted: the bridges to the JVM (a name with ``java`` in it, or starting ``to_j_`` or
  ``get_j_``) and PyFlink's ``Internal*`` classes;
* weir has ``Class`` when a class of that name is reachable from a module of the mirrored
  package (``weir.datastream`` for ``pyflink.datastream``, ``weir.common`` for
  ``pyflink.common``), and ``Class.method`` when that class has the attribute;
* separately, the names of each package's ``__all__`` that import from weir's package.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

PACKAGES = ("datastream", "common")


@dataclass
class Coverage:
    package: str
    present: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    all_present: list[str] = field(default_factory=list)
    all_missing: list[str] = field(default_factory=list)


def submodules(package: ModuleType, skip: tuple[str, ...] = ("tests",)) -> list[ModuleType]:
    """``package`` and every submodule that imports, except those under a ``skip`` part."""
    modules = [package]
    for info in pkgutil.walk_packages(getattr(package, "__path__", []), package.__name__ + "."):
        if any(part in skip for part in info.name.split(".")):
            continue
        try:
            modules.append(importlib.import_module(info.name))
        except Exception:  # a module needing an optional dependency: not user-facing here
            continue
    return modules


def is_user_facing(name: str) -> bool:
    """Not private, not a bridge to the JVM, not one of PyFlink's Internal* classes."""
    return not (name.startswith(("_", "to_j_", "get_j_", "Internal")) or "java" in name.lower())


def user_facing(modules: list[ModuleType], prefix: str) -> dict[str, list[str]]:
    """Public classes defined under ``prefix`` → the public members each defines itself."""
    classes: dict[str, list[str]] = {}
    for module in modules:
        for name, value in vars(module).items():
            if not is_user_facing(name) or not inspect.isclass(value):
                continue
            if not getattr(value, "__module__", "").startswith(prefix) or value.__name__ != name:
                continue
            members = sorted(
                m
                for m, v in vars(value).items()
                if is_user_facing(m)
                and (inspect.isfunction(v) or isinstance(v, staticmethod | classmethod | property))
            )
            classes.setdefault(name, members)
    return classes


def reachable_classes(modules: list[ModuleType]) -> dict[str, type]:
    """Every class a module of weir's package holds under a public name."""
    found: dict[str, type] = {}
    for module in modules:
        for name, value in vars(module).items():
            if not name.startswith("_") and inspect.isclass(value):
                found.setdefault(name, value)
    return found


def compare(
    package: str, reference: list[ModuleType], reference_prefix: str, weir: list[ModuleType]
) -> Coverage:
    cov = Coverage(package)
    have = reachable_classes(weir)
    for cls, members in sorted(user_facing(reference, reference_prefix).items()):
        target: Any = have.get(cls)
        (cov.present if target is not None else cov.missing).append(cls)
        for m in members:
            (cov.present if target is not None and hasattr(target, m) else cov.missing).append(f"{cls}.{m}")
    names = getattr(reference[0], "__all__", [])
    for name in names:
        (cov.all_present if hasattr(weir[0], name) else cov.all_missing).append(name)
    return cov


def measure() -> list[Coverage]:
    try:
        import pyflink  # noqa: F401
    except ImportError:
        raise SystemExit(
            "tools/pyflink_coverage.py needs PyFlink to compare against: install it beside weir with "
            "`pip install apache-flink` (or `pip install 'weir[flink]'`)"
        ) from None
    out = []
    for package in PACKAGES:
        reference = submodules(importlib.import_module(f"pyflink.{package}"))
        weir = submodules(importlib.import_module(f"weir.{package}"))
        out.append(compare(package, reference, f"pyflink.{package}", weir))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--missing", action="store_true", help="list the names weir lacks")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    results = measure()
    if args.json:
        print(json.dumps([vars(c) for c in results], indent=2))
        return 0
    total_present = sum(len(c.present) for c in results)
    total = total_present + sum(len(c.missing) for c in results)
    for c in results:
        n = len(c.present) + len(c.missing)
        n_all = len(c.all_present) + len(c.all_missing)
        print(
            f"pyflink.{c.package}: {len(c.present)} of {n} classes and methods; "
            f"{len(c.all_present)} of the {n_all} names of __all__"
        )
        if args.missing:
            print("  missing: " + ", ".join(c.missing))
            print("  missing from __all__: " + ", ".join(c.all_missing))
    print(f"together: {total_present} of {total} ({100 * total_present / total:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

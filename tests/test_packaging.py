"""The distribution installs one import name, ``weir``, and loads every module once."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"weir": "engine", "weir.harness": "harness", "weir.workloads": "workloads"}


def _packages_on_disk() -> set[str]:
    names = set()
    for package, folder in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            names.add(".".join([package, *parts]))
    return names


def test_pyproject_lists_every_package_under_its_one_name() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == FOLDERS
    assert set(config["packages"]) == _packages_on_disk()


def test_importing_everything_loads_each_module_once_and_only_under_weir() -> None:
    code = (
        "import importlib, pkgutil, sys\n"
        "import weir, weir.harness, weir.workloads\n"
        "for pkg in (weir, weir.harness, weir.workloads):\n"
        "    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(info.name)\n"
        "files = {}\n"
        "for name, module in list(sys.modules.items()):\n"
        "    f = getattr(module, '__file__', None)\n"
        "    if f and (name.split('.')[0] in ('engine', 'harness', 'workloads') or name.startswith('weir')):\n"
        "        files.setdefault(f, []).append(name)\n"
        "print('\\n'.join(f'{f}: {names}' for f, names in files.items()\n"
        "                 if len(names) > 1 or not names[0].startswith('weir')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"modules loaded twice or under another name:\n{out.stdout}"

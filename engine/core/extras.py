"""Optional dependencies: the packages an extra of weir brings (``pip install weir[kafka]``).

A connector that needs one imports it through ``import_extra`` when it starts, never at
module import, so the API that describes the connector (and ``weir plan``) works without it,
and a job that runs it without the package fails with one error naming the extra to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from weir.errors import UsageError

__all__ = ["import_extra", "missing_extra"]


def _message(package: str, extra: str, needed_by: str) -> str:
    return (
        f"{needed_by} needs the Python package '{package}', which is not installed: pip install weir[{extra}]"
    )


def import_extra(module: str, *, package: str, extra: str, needed_by: str) -> ModuleType:
    """``module``, or a UsageError naming ``pip install weir[extra]`` when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(_message(package, extra, needed_by)) from None


def missing_extra(module: str, *, package: str, extra: str, needed_by: str) -> str | None:
    """The error ``import_extra`` would raise, as text, or None when ``module`` imports."""
    try:
        import_extra(module, package=package, extra=extra, needed_by=needed_by)
    except UsageError as e:
        return str(e)
    return None

"""``"module:name"`` references: how a description names runtime code without importing it.

A connector names the factory of its reader or operator, and ``weir.core.execution`` the
executors it knows, as such strings; the runtime resolves them when it needs them, so the
bottom packages import nothing above them.
"""

from __future__ import annotations

import importlib
from typing import Any

from weir.errors import UsageError

__all__ = ["load_reference"]


def load_reference(reference: str) -> Any:
    """The object a ``"module:name"`` reference names, importing the module on first use."""
    module, _, name = reference.partition(":")
    if not module or not name:
        raise UsageError(f"{reference!r} is not a 'module:name' reference")
    try:
        target: Any = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot load {reference!r}: {exc}") from exc
    return target

"""``OutputTag``: names a side output, as in ``pyflink.datastream.output_tag``.

It lives in ``weir.core`` because the runtime recognises it too: a function of an operator
whose side outputs are consumed may ``yield output_tag, value`` (PyFlink's way) and the
operator sends ``value`` to that side output.
"""

from __future__ import annotations

from typing import Any

from weir.common.typeinfo import TypeInformation, check_type_info
from weir.errors import UsageError


class OutputTag:
    def __init__(self, tag_id: str, type_info: TypeInformation | None = None) -> None:
        if not isinstance(tag_id, str) or not tag_id:
            raise UsageError(f"OutputTag needs a non-empty string id, got {tag_id!r}")
        self.tag_id = tag_id
        self.type_info = check_type_info(f"OutputTag('{tag_id}') type_info", type_info)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self) -> int:
        return hash(("OutputTag", self.tag_id))

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r})"


def is_tagged(value: Any) -> bool:
    """``value`` is PyFlink's side-output form: a tuple whose first item is an OutputTag."""
    return isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], OutputTag)

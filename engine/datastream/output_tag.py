"""``pyflink.datastream.output_tag``: ``OutputTag``, at PyFlink's path.

It lives in ``weir.core.output_tag`` (the runtime routes ``yield tag, value`` by it); this
module hands out the same class.
"""

from __future__ import annotations

from weir.core.output_tag import OutputTag

__all__ = ["OutputTag"]

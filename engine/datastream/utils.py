"""``ResultTypeQueryable``, as in ``pyflink.datastream.utils``: an object that names the type
of what it produces (the row deserialization schemas do)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from weir.common.typeinfo import TypeInformation

__all__ = ["ResultTypeQueryable"]


class ResultTypeQueryable(ABC):
    @abstractmethod
    def get_produced_type(self) -> TypeInformation:
        """The type of the values this object produces."""

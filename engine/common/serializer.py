"""``TypeSerializer``: writes one value to a byte stream and reads it back, as
``pyflink.common.serializer``. A user may implement one for a window type of a custom
``WindowAssigner`` (``get_window_serializer``); weir's own window serializers write
Flink's layouts (big-endian longs)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from io import BytesIO
from typing import Any, Generic, TypeVar

T = TypeVar("T")

__all__ = ["TypeSerializer", "VoidNamespaceSerializer"]


class TypeSerializer(ABC, Generic[T]):
    """Serializes elements of one type to a ``BytesIO`` and back."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, self.__class__) and self.__dict__ == other.__dict__

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @abstractmethod
    def serialize(self, element: T, stream: BytesIO) -> None:
        """Writes ``element`` to ``stream``."""

    @abstractmethod
    def deserialize(self, stream: BytesIO) -> T:
        """Reads one element from ``stream``."""


VOID = b""


class VoidNamespaceSerializer(TypeSerializer[bytes]):
    """The namespace of state that has none: writes nothing, reads ``b''``."""

    def serialize(self, element: Any, stream: BytesIO) -> None:
        pass

    def deserialize(self, stream: BytesIO) -> bytes:
        return VOID

"""``JsonRowSerializationSchema`` and ``JsonRowDeserializationSchema``, as in
``pyflink.datastream.formats.json``: a row type's records as one JSON object per message.

Serializing writes the fields in the type's order, compact (``{"id":1,"name":"a"}``), nested
rows as objects, arrays and lists as arrays, dates and times as ISO 8601 text, BigDecimal as
a number. Deserializing reads an object into a ``Row`` named by the type: a missing field is
None unless ``fail_on_missing_field()``; a message that is not JSON, or a field of the wrong
kind, raises ``UsageError`` naming it unless ``ignore_parse_errors()``, which makes it None.
"""

from __future__ import annotations

import json
from typing import Any

from weir.common.serialization import DeserializationSchema, SerializationSchema
from weir.common.typeinfo import RowTypeInfo
from weir.datastream.formats._values import check_row_type, from_plain, to_plain
from weir.datastream.utils import ResultTypeQueryable
from weir.errors import UsageError

__all__ = ["JsonRowDeserializationSchema", "JsonRowSerializationSchema"]


class JsonRowDeserializationSchema(DeserializationSchema, ResultTypeQueryable):
    def __init__(
        self, type_info: RowTypeInfo, fail_on_missing_field: bool, ignore_parse_errors: bool
    ) -> None:
        if fail_on_missing_field and ignore_parse_errors:
            raise UsageError(
                "JSON deserialization: fail_on_missing_field and ignore_parse_errors exclude each other"
            )
        self.type_info = type_info
        self._fail_on_missing = fail_on_missing_field
        self._ignore_errors = ignore_parse_errors

    @staticmethod
    def builder() -> JsonRowDeserializationSchema.Builder:
        return JsonRowDeserializationSchema.Builder()

    class Builder:
        def __init__(self) -> None:
            self._type_info: RowTypeInfo | None = None
            self._fail_on_missing = False
            self._ignore_errors = False

        def type_info(self, type_info: RowTypeInfo) -> JsonRowDeserializationSchema.Builder:
            self._type_info = check_row_type("JsonRowDeserializationSchema", type_info)
            return self

        def fail_on_missing_field(self) -> JsonRowDeserializationSchema.Builder:
            self._fail_on_missing = True
            return self

        def ignore_parse_errors(self) -> JsonRowDeserializationSchema.Builder:
            self._ignore_errors = True
            return self

        def build(self) -> JsonRowDeserializationSchema:
            if self._type_info is None:
                raise UsageError("JsonRowDeserializationSchema.builder() needs type_info(...) before build()")
            return JsonRowDeserializationSchema(self._type_info, self._fail_on_missing, self._ignore_errors)

    def deserialize(self, message: bytes) -> Any:
        try:
            node = json.loads(message)
            if not isinstance(node, dict):
                raise ValueError(f"expected a JSON object, got {node!r}")
            if self._fail_on_missing:
                missing = [n for n in self.type_info.field_names if n not in node]
                if missing:
                    raise ValueError(f"fields {missing} are missing")
            return from_plain(node, self.type_info, "$")
        except (ValueError, TypeError, ArithmeticError) as e:
            if self._ignore_errors:
                return None
            raise UsageError(
                f"cannot read JSON message {bytes(message)[:200]!r} as {self.type_info!r}: {e}"
            ) from None

    def get_produced_type(self) -> RowTypeInfo:
        return self.type_info


class JsonRowSerializationSchema(SerializationSchema):
    def __init__(self, type_info: RowTypeInfo) -> None:
        self.type_info = type_info

    @staticmethod
    def builder() -> JsonRowSerializationSchema.Builder:
        return JsonRowSerializationSchema.Builder()

    class Builder:
        def __init__(self) -> None:
            self._type_info: RowTypeInfo | None = None

        def with_type_info(self, type_info: RowTypeInfo) -> JsonRowSerializationSchema.Builder:
            self._type_info = check_row_type("JsonRowSerializationSchema", type_info)
            return self

        def build(self) -> JsonRowSerializationSchema:
            if self._type_info is None:
                raise UsageError(
                    "JsonRowSerializationSchema.builder() needs with_type_info(...) before build()"
                )
            return JsonRowSerializationSchema(self._type_info)

    def serialize(self, element: Any) -> bytes:
        if not isinstance(element, tuple | list) and not hasattr(element, "get_fields_by_names"):
            raise UsageError(
                f"JSON serialization of {self.type_info!r} needs a Row, tuple or list, got {element!r}"
            )
        if len(element) != self.type_info.get_arity():
            raise UsageError(
                f"JSON serialization of {self.type_info!r}: the record has {len(element)} fields, "
                f"the type {self.type_info.get_arity()}: {element!r}"
            )
        return json.dumps(
            to_plain(element, self.type_info), separators=(",", ":"), ensure_ascii=False
        ).encode()

"""Rows and Avro's generic values (dicts), both ways, for a parsed fastavro schema: what the
Avro formats (``weir.datastream.formats.avro``) and their runtime sides share."""

from __future__ import annotations

from typing import Any

from weir.common.types import Row
from weir.errors import UsageError

__all__ = ["arrow_schema", "avro_to_row", "row_to_avro"]


def _named(schema: Any, names: dict[str, Any]) -> Any:
    """``schema`` with a reference to a named type replaced by that type's definition."""
    if isinstance(schema, str) and schema in names:
        return names[schema]
    return schema


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        return str(schema["type"]) if not isinstance(schema["type"], dict | list) else _kind(schema["type"])
    return str(schema)


def row_to_avro(value: Any, schema: Any, names: dict[str, Any]) -> Any:
    """A Row (fields in the schema's order) or dict as the generic value of ``schema``."""
    schema = _named(schema, names)
    kind = _kind(schema)
    if kind == "record":
        fields = (
            schema["fields"] if isinstance(schema, dict) and "fields" in schema else schema["type"]["fields"]
        )
        if isinstance(value, dict):
            return {f["name"]: row_to_avro(value.get(f["name"]), f["type"], names) for f in fields}
        if isinstance(value, Row | tuple | list):
            if len(value) != len(fields):
                raise UsageError(
                    f"Avro record {schema.get('name')!r} has {len(fields)} fields, the row {value!r} has {len(value)}"
                )
            return {f["name"]: row_to_avro(v, f["type"], names) for f, v in zip(fields, value)}
        raise UsageError(f"Avro record {schema.get('name')!r} needs a Row or a dict, got {value!r}")
    if kind == "array" and value is not None:
        return [row_to_avro(v, schema["items"], names) for v in value]
    if kind == "map" and value is not None:
        return {k: row_to_avro(v, schema["values"], names) for k, v in value.items()}
    if kind == "union":
        if value is None:
            return None
        branches = [b for b in schema if _kind(_named(b, names)) != "null"]
        if isinstance(value, Row | dict):
            records = [b for b in branches if _kind(_named(b, names)) == "record"]
            if records:
                return row_to_avro(value, records[0], names)
        return value
    return value


def avro_to_row(value: Any, schema: Any, names: dict[str, Any]) -> Any:
    """A generic value of ``schema`` with records as named Rows (Flink's AvroRowDeserializationSchema)."""
    schema = _named(schema, names)
    kind = _kind(schema)
    if value is None:
        return None
    if kind == "record":
        fields = schema["fields"]
        return Row(**{f["name"]: avro_to_row(value.get(f["name"]), f["type"], names) for f in fields})
    if kind == "array":
        return [avro_to_row(v, schema["items"], names) for v in value]
    if kind == "map":
        return {k: avro_to_row(v, schema["values"], names) for k, v in value.items()}
    if kind == "union":
        if isinstance(value, dict):
            for branch in schema:
                b = _named(branch, names)
                if _kind(b) == "record" and set(value) == {f["name"] for f in b["fields"]}:
                    return avro_to_row(value, b, names)
        return value
    return value


_ARROW_PRIMITIVES = {
    "null": "null",
    "boolean": "bool",
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "bytes": "binary",
    "string": "string",
    "enum": "string",
}


def arrow_type(schema: Any, names: dict[str, Any]) -> Any:
    """The Arrow type of an Avro schema (Parquet's columns for Avro records, as parquet-avro
    maps them); a union of more than null and one other type has none (a UsageError)."""
    import pyarrow as pa

    schema = _named(schema, names)
    if isinstance(schema, list):
        others = [b for b in schema if b != "null"]
        if len(others) != 1:
            raise UsageError(f"Avro union {schema!r}: Parquet takes only unions of null and one type")
        return arrow_type(others[0], names)
    if isinstance(schema, dict):
        logical = schema.get("logicalType")
        if logical == "date":
            return pa.date32()
        if logical in ("timestamp-millis", "timestamp-micros"):
            return pa.timestamp("ms" if logical == "timestamp-millis" else "us", tz="UTC")
        if logical == "decimal":
            return pa.decimal128(schema["precision"], schema.get("scale", 0))
        kind = schema["type"]
        if kind == "record":
            return pa.struct([pa.field(f["name"], arrow_type(f["type"], names)) for f in schema["fields"]])
        if kind == "array":
            return pa.list_(arrow_type(schema["items"], names))
        if kind == "map":
            return pa.map_(pa.string(), arrow_type(schema["values"], names))
        if kind == "fixed":
            return pa.binary(schema["size"])
        if kind == "enum":
            return pa.string()
        return arrow_type(kind, names)
    if schema in _ARROW_PRIMITIVES:
        return pa.type_for_alias(_ARROW_PRIMITIVES[schema])
    raise UsageError(f"Avro type {schema!r} has no Parquet column type in weir")


def arrow_schema(parsed: Any) -> Any:
    """The Arrow schema of the columns of an Avro record schema."""
    import pyarrow as pa

    names = parsed.get("__named_schemas", {})
    return pa.schema([pa.field(f["name"], arrow_type(f["type"], names)) for f in parsed["fields"]])

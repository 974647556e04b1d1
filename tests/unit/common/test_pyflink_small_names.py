"""Small PyFlink names with behaviour: field extraction, scheduling constraint, the operator
state store of broadcast contexts, and types that name what they produce."""

from __future__ import annotations

import pytest

from weir.common import InputDependencyConstraint, Row, Types
from weir.common.serialization import RowFieldExtractorSchema
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.formats.csv import CsvRowDeserializationSchema
from weir.datastream.formats.json import JsonRowDeserializationSchema
from weir.datastream.functions import BroadcastProcessFunction
from weir.datastream.state import MapStateDescriptor, OperatorStateStore
from weir.datastream.utils import ResultTypeQueryable
from weir.errors import UsageError


def test_a_row_field_of_bytes_is_the_message() -> None:
    schema = RowFieldExtractorSchema(1)
    assert schema.serialize(Row(b"key", b"value")) == b"value"
    assert schema.serialize((b"k", None)) == b""
    with pytest.raises(UsageError, match="field 1 must be bytes, got 'v' \\(str\\)"):
        schema.serialize(Row(b"k", "v"))
    with pytest.raises(UsageError, match="has no field 1"):
        schema.serialize(Row(b"k"))
    with pytest.raises(UsageError, match="non-negative int, got -1"):
        RowFieldExtractorSchema(-1)


def test_input_dependency_constraint_has_flinks_values() -> None:
    assert [(c.name, c.value) for c in InputDependencyConstraint] == [("ANY", 0), ("ALL", 1)]


def test_the_deserialization_schemas_name_their_produced_type() -> None:
    row = Types.ROW_NAMED(["a"], [Types.INT()])
    json_schema = JsonRowDeserializationSchema.builder().type_info(row).build()
    csv_schema = CsvRowDeserializationSchema.Builder(row).build()
    for schema in (json_schema, csv_schema):
        assert isinstance(schema, ResultTypeQueryable) and schema.get_produced_type() == row


MAPPING = MapStateDescriptor("mapping", Types.INT(), Types.STRING())


class _Lookup(BroadcastProcessFunction):
    def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
        assert isinstance(ctx, OperatorStateStore)
        state = ctx.get_broadcast_state(MAPPING)
        yield f"{value}:{state.get(value % 2) if state.contains(value % 2) else '?'}"

    def process_broadcast_element(self, value, ctx):  # type: ignore[no-untyped-def]
        assert isinstance(ctx, OperatorStateStore)
        ctx.get_broadcast_state(MAPPING).put(value[0], value[1])


def test_the_broadcast_contexts_are_operator_state_stores() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    rules = env.from_collection([(0, "even"), (1, "odd")]).broadcast(MAPPING)
    out = env.from_collection([1, 2]).connect(rules).process(_Lookup()).execute_and_collect()
    assert len(list(out)) == 2

"""Declarative aggregates: several aggregates of several fields in one keyed operator.

``Aggregates(key(), window_start(), count(), sum(1), max(2))`` lists the output fields in
order. On a window (``windowed.aggregate(Aggregates(...))``) it emits one tuple per key and
window; on a keyed stream (``keyed.process(RunningAggregates(...))``) one tuple per record
with the running values of the record's key, as Flink's keyed ``sum`` does.

Both are ordinary PyFlink functions (an ``AggregateFunction``, a ``KeyedProcessFunction``), so
the per-record operators run them unchanged; weir runs them vectorized when the input is a
typed stream and the fields are numeric. The accumulator is one list ``[n, s_1, ..., s_m]``:
``n`` the number of records, then one slot per aggregate of a field (``mean``'s slot is the
sum). It is the state of both paths, so a checkpoint of either restores into the other.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any

from weir.common.typeinfo import BasicTypeInfo, RowTypeInfo, TupleTypeInfo, TypeInformation, Types
from weir.core import functions as fn
from weir.errors import UsageError

#: the aggregates of a field, and what they emit
FIELD_KINDS = ("sum", "min", "max", "mean", "first", "last")
#: the outputs that read no field
PLAIN_KINDS = ("key", "window_start", "window_end", "count")
NUMERIC = ("Byte", "Short", "Integer", "Long", "Float", "Double")  # BasicTypeInfo names


@dataclass(frozen=True)
class Output:
    """One output field of ``Aggregates``: its kind and, for an aggregate of a field, the
    field (a position, or a name of a named ROW)."""

    kind: str
    field: int | str | None = None

    def describe(self) -> str:
        return self.kind + "()" if self.field is None else f"{self.kind}({self.field!r})"


def key() -> Output:
    """The key of the group (the key selector's key)."""
    return Output("key")


def window_start() -> Output:
    """The window's start (epoch ms); windows only."""
    return Output("window_start")


def window_end() -> Output:
    """The window's end (epoch ms, exclusive); windows only."""
    return Output("window_end")


def count() -> Output:
    """The number of records."""
    return Output("count")


def _field_output(kind: str, field: int | str) -> Output:
    if isinstance(field, bool) or not isinstance(field, int | str):
        raise UsageError(
            f"{kind}(field): field must be a position (int) or a ROW field name (str), got {field!r}"
        )
    return Output(kind, field)


def sum(field: int | str) -> Output:
    """The sum of a numeric field (int64 sums wrap past 2^63 - 1, as a Java long)."""
    return _field_output("sum", field)


def min(field: int | str) -> Output:
    """The smallest value of a numeric field (the earliest one on ties and NaN)."""
    return _field_output("min", field)


def max(field: int | str) -> Output:
    """The largest value of a numeric field (the earliest one on ties and NaN)."""
    return _field_output("max", field)


def mean(field: int | str) -> Output:
    """The mean of a numeric field, a DOUBLE."""
    return _field_output("mean", field)


def first(field: int | str) -> Output:
    """The field of the group's first record (arrival order)."""
    return _field_output("first", field)


def last(field: int | str) -> Output:
    """The field of the group's last record (arrival order)."""
    return _field_output("last", field)


class _Spec:
    """What ``Aggregates`` and ``RunningAggregates`` share: the outputs and the accumulator."""

    def __init__(self, outputs: tuple[Output, ...], windowed: bool) -> None:
        what = "Aggregates" if windowed else "RunningAggregates"
        if not outputs:
            raise UsageError(f"{what}() needs at least one output, e.g. {what}(key(), count(), sum(1))")
        for o in outputs:
            if not isinstance(o, Output):
                raise UsageError(
                    f"{what}: each output is one of key(), window_start(), window_end(), count(), "
                    f"sum/min/max/mean/first/last(field); got {o!r}"
                )
            if not windowed and o.kind in ("window_start", "window_end"):
                raise UsageError(f"{what}: {o.describe()} is only defined on a window")
        self.outputs = tuple(outputs)
        #: positions of the outputs that have an accumulator slot (aggregates of a field)
        self.slots = [i for i, o in enumerate(self.outputs) if o.kind in FIELD_KINDS]
        self._getters: list[Any] | None = None

    def describe(self) -> str:
        return ", ".join(o.describe() for o in self.outputs)

    # -- fields ------------------------------------------------------------------------------------
    def field_positions(self, input_type: TypeInformation | None) -> list[int] | None:
        """The position of each slot's field in the input's records, or None when a field cannot
        be resolved by position (an untyped stream given names)."""
        positions = []
        for i in self.slots:
            f = self.outputs[i].field
            if isinstance(f, int):
                positions.append(f)
            elif isinstance(input_type, RowTypeInfo) and f in input_type.field_names:
                positions.append(input_type.field_names.index(f))
            else:
                return None
        return positions

    def check_input(self, input_type: TypeInformation | None) -> None:
        """One UsageError for a field that does not exist or is not numeric (``sum``/``min``/
        ``max``/``mean`` need numbers; ``first``/``last`` take any type)."""
        if input_type is None:
            return
        types = _field_types(input_type)
        for i in self.slots:
            o = self.outputs[i]
            t = _field_type(types, input_type, o.field)
            if t is None:
                raise UsageError(
                    f"{o.describe()}: the input {input_type} has no field {o.field!r}; "
                    f"valid are {_valid_fields(input_type)}"
                )
            if o.kind in ("sum", "min", "max", "mean") and _basic_name(t) not in NUMERIC:
                raise UsageError(
                    f"{o.describe()}: field {o.field!r} is {t}, not a number; "
                    f"{o.kind} takes a BYTE, SHORT, INT, LONG, FLOAT or DOUBLE field"
                )

    def output_type(
        self, input_type: TypeInformation | None, key_type: TypeInformation | None
    ) -> TypeInformation | None:
        """The TUPLE the outputs make, when every field's type is known."""
        if input_type is None:
            return None
        types = _field_types(input_type)
        out = []
        for o in self.outputs:
            if o.kind == "key":
                if key_type is None:
                    return None
                out.append(key_type)
            elif o.kind in ("window_start", "window_end", "count"):
                out.append(Types.LONG())
            elif o.kind == "mean":
                out.append(Types.DOUBLE())
            else:
                t = _field_type(types, input_type, o.field)
                if t is None:
                    return None
                if o.kind == "sum" and _basic_name(t) in ("Byte", "Short", "Integer"):
                    t = Types.LONG()  # a sum of small ints is a Python int: LONG holds it
                out.append(t)
        return Types.TUPLE(out)

    def _field_getters(self) -> list[Any]:
        if self._getters is None:
            getters = []
            for i in self.slots:
                f = self.outputs[i].field
                if isinstance(f, str):
                    getters.append(lambda r, f=f: r[f] if not hasattr(r, f) else getattr(r, f))
                else:
                    getters.append(lambda r, f=f: r[f])
            self._getters = getters
        return self._getters

    # -- the accumulator, record by record (the per-record path and the reference) -----------------
    def create_accumulator(self) -> list[Any]:
        return [0] + [None] * len(self.slots)

    def add(self, value: Any, accumulator: list[Any]) -> list[Any]:
        n = accumulator[0]
        for j, get in enumerate(self._field_getters(), start=1):
            kind = self.outputs[self.slots[j - 1]].kind
            v = get(value)
            if n == 0:
                accumulator[j] = v
            elif kind == "sum" or kind == "mean":
                accumulator[j] = accumulator[j] + v
            elif kind == "min":
                if v < accumulator[j]:
                    accumulator[j] = v
            elif kind == "max":
                if v > accumulator[j]:
                    accumulator[j] = v
            elif kind == "last":
                accumulator[j] = v
        accumulator[0] = n + 1
        return accumulator

    def merge(self, acc_a: list[Any], acc_b: list[Any]) -> list[Any]:
        if acc_a[0] == 0:
            return list(acc_b)
        if acc_b[0] == 0:
            return list(acc_a)
        out = [acc_a[0] + acc_b[0]]
        for j, i in enumerate(self.slots, start=1):
            kind, a, b = self.outputs[i].kind, acc_a[j], acc_b[j]
            if kind in ("sum", "mean"):
                out.append(a + b)
            elif kind == "min":
                out.append(b if b < a else a)
            elif kind == "max":
                out.append(b if b > a else a)
            elif kind == "first":
                out.append(a)
            else:
                out.append(b)
        return out

    def result(
        self, accumulator: list[Any], key_value: Any, start: int | None, end: int | None
    ) -> tuple[Any, ...]:
        """The output tuple of one group."""
        out: list[Any] = []
        slot = 1
        n = accumulator[0]
        for o in self.outputs:
            kind = o.kind
            if kind == "key":
                out.append(key_value)
            elif kind == "window_start":
                out.append(start)
            elif kind == "window_end":
                out.append(end)
            elif kind == "count":
                out.append(n)
            else:
                v = accumulator[slot]
                slot += 1
                out.append(v / n if kind == "mean" else v)
        return tuple(out)


class Aggregates(fn.AggregateFunction):
    """Several aggregates of a window at once: ``windowed.aggregate(Aggregates(key(),
    window_start(), count(), sum(1)))`` emits ``(key, start, count, sum)`` per key and window.

    As an ``AggregateFunction`` it accumulates ``[n, s_1, ..., s_m]``; ``get_result`` gives the
    outputs with ``key``/``window_start``/``window_end`` as None (the window operator fills
    them in; with a window function of your own, leave them out)."""

    def __init__(self, *outputs: Output) -> None:
        self.spec = _Spec(tuple(outputs), windowed=True)

    @property
    def outputs(self) -> tuple[Output, ...]:
        return self.spec.outputs

    def needs_window_context(self) -> bool:
        return any(o.kind in ("key", "window_start", "window_end") for o in self.spec.outputs)

    def create_accumulator(self) -> list[Any]:
        return self.spec.create_accumulator()

    def add(self, value: Any, accumulator: list[Any]) -> list[Any]:
        return self.spec.add(value, accumulator)

    def get_result(self, accumulator: list[Any]) -> tuple[Any, ...]:
        return self.spec.result(accumulator, None, None, None)

    def merge(self, acc_a: list[Any], acc_b: list[Any]) -> list[Any]:
        return self.spec.merge(acc_a, acc_b)

    def __repr__(self) -> str:
        return f"Aggregates({self.spec.describe()})"


class AggregatesWindowFunction(fn.ProcessWindowFunction):
    """The per-record path's window function for ``Aggregates``: key and window into the row."""

    def __init__(self, spec: _Spec) -> None:
        self.spec = spec

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        window = context.window()
        filled = {"key": key, "window_start": window.start, "window_end": window.end}
        outputs = self.spec.outputs
        for result in elements:  # Aggregates.get_result: None where key and window go
            yield tuple(filled.get(o.kind, v) for o, v in zip(outputs, result))


class RunningAggregates(fn.KeyedProcessFunction):
    """Running aggregates per key: ``keyed.process(RunningAggregates(key(), count(), sum(1)))``
    emits, for every record, the outputs over the key's records so far (Flink's keyed
    ``sum`` for several fields at once). State: one ``ValueState`` ``running-aggregates`` of
    the accumulator."""

    STATE_NAME = "running-aggregates"

    def __init__(self, *outputs: Output) -> None:
        self.spec = _Spec(tuple(outputs), windowed=False)
        self._state: Any = None

    @property
    def outputs(self) -> tuple[Output, ...]:
        return self.spec.outputs

    def open(self, runtime_context: Any) -> None:
        from weir.core.state import ValueStateDescriptor

        self._state = runtime_context.get_state(
            ValueStateDescriptor(self.STATE_NAME, Types.PICKLED_BYTE_ARRAY())
        )

    def process_element(self, value: Any, ctx: Any) -> Any:
        accumulator = self._state.value()
        if accumulator is None:
            accumulator = self.spec.create_accumulator()
        accumulator = self.spec.add(value, accumulator)
        self._state.update(accumulator)
        yield self.spec.result(accumulator, ctx.get_current_key(), None, None)

    def __repr__(self) -> str:
        return f"RunningAggregates({self.spec.describe()})"


# -- types -----------------------------------------------------------------------------------------
def _basic_name(t: TypeInformation) -> str | None:
    return getattr(t, "name", None) if isinstance(t, BasicTypeInfo) else None


def _field_types(input_type: TypeInformation) -> list[TypeInformation]:
    if isinstance(input_type, TupleTypeInfo | RowTypeInfo):
        return list(input_type.get_field_types())
    return [input_type]


def _field_type(
    types: list[TypeInformation], input_type: TypeInformation, field: Any
) -> TypeInformation | None:
    if isinstance(field, int) and not isinstance(field, bool):
        if not isinstance(input_type, TupleTypeInfo | RowTypeInfo):
            return input_type if field == 0 else None
        return types[field] if -len(types) <= field < len(types) else None
    if isinstance(input_type, RowTypeInfo) and field in input_type.field_names:
        return types[input_type.field_names.index(field)]
    return None


def _valid_fields(input_type: TypeInformation) -> str:
    if isinstance(input_type, RowTypeInfo) and input_type.field_names:
        return f"positions 0..{len(input_type.field_names) - 1} or names {list(input_type.field_names)}"
    if isinstance(input_type, TupleTypeInfo | RowTypeInfo):
        return f"positions 0..{input_type.get_arity() - 1}"
    return "0 (the record itself)"


__all__ = [
    "Aggregates",
    "AggregatesWindowFunction",
    "Output",
    "RunningAggregates",
    "count",
    "first",
    "key",
    "last",
    "max",
    "mean",
    "min",
    "sum",
    "window_end",
    "window_start",
]
_ = builtins  # the module shadows sum/min/max; builtins stays reachable for its own code

"""Vectorized ``keyed.process(RunningAggregates(...))``: running aggregates per key on whole batches.

Theory of operation
-------------------
``RunningAggregatesOperator`` gives the records the per-record ``KeyedProcessOperator``
running ``weir.columnar.RunningAggregates`` gives: per record, the outputs over its key's
records so far, with the record's timestamp. A batch becomes columns (key, one value
column per slot); keys become dense key slots (``IntKeySlots`` for int64 keys, the window
operators' ``_ObjectKeys`` otherwise, after the same key-selector probe); one numba call
(``kernels.running_aggregate``) folds every record into its key's count and accumulators in
arrival order and writes the key's running values after it into output columns, which
are emitted as ``TupleColumns`` in the outputs' order.

State: the per-record path's, a ``ValueState`` ``running-aggregates`` per key holding the
accumulator list ``[n, s_1, ..., s_m]``. The arrays are the truth between checkpoints;
``prepare_snapshot_pre_barrier`` writes the keys touched since the last checkpoint into the
keyed backend. After a restore, a key's accumulator is read from the backend the first
time the key shows up (once per key), so rescaling and either path's checkpoints work
unchanged.

Eligibility (``explain``): the input is a TUPLE/ROW (or one numeric basic type) and every
aggregated field is a number; otherwise the per-record operator runs the function.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import numpy as np

from weir.codec.batch import Batch, TupleColumns
from weir.codec.strings import Strings
from weir.columnar.aggregates import RunningAggregates
from weir.common.typeinfo import BasicTypeInfo, RowTypeInfo, TupleTypeInfo, Types
from weir.core.state import ValueStateDescriptor
from weir.graph.stream_graph import StreamNode
from weir.operators.keyed import _KeyedOperator
from weir.operators.window import kernels as wk
from weir.operators.window.aggregates import (
    AggregatesPlan,
    canonical_accumulators,
    from_canonical,
    output_columns,
    slot_columns,
    slot_layout,
)
from weir.operators.window.shared import IDENTITY, identity, probe_agrees, probe_key_field
from weir.operators.window.vector import IntKeySlots, _ends, _ObjectKeys, check_key_groups
from weir.time.timers import InternalTimerService

__all__ = ["RunningAggregatesOperator", "explain"]


def explain(node: StreamNode) -> tuple[bool, str]:
    """Whether ``keyed.process(...)`` of ``node`` runs vectorized, and why (``"vectorized:
    ..."`` or ``"per-record: <why>"``); pure."""
    spec = node.operator
    assert spec is not None
    columnar = spec.options.get("columnar")
    if columnar is None:
        return False, "per-record: a KeyedProcessFunction of the user's"
    plan, why = slot_layout(columnar["spec"], columnar.get("input_type"))
    if plan is None:
        return False, f"per-record: {why}"
    return True, f"vectorized: RunningAggregates({plan.spec.describe()})"


def plan_of(node: StreamNode) -> AggregatesPlan | None:
    spec = node.operator
    assert spec is not None
    columnar = spec.options.get("columnar")
    return None if columnar is None else slot_layout(columnar["spec"], columnar.get("input_type"))[0]


class RunningAggregatesOperator(_KeyedOperator):
    """A keyed operator emitting, per record, the running ``RunningAggregates`` of its key."""

    count: np.ndarray
    iacc: np.ndarray
    facc: np.ndarray
    dirty: np.ndarray

    def __init__(self, name: str, key_selector: Any, plan: AggregatesPlan, input_type: Any) -> None:
        super().__init__(name, key_selector)
        self.plan = plan
        self.spec = plan.spec
        self.input_type = input_type
        self.descriptor = ValueStateDescriptor(RunningAggregates.STATE_NAME, Types.PICKLED_BYTE_ARRAY())
        self.timers = (
            InternalTimerService()
        )  # none are set; a checkpoint holds the same as the per-record path's
        self._ops = (plan.iops, plan.fops)
        self.mi, self.mf = len(plan.iops), len(plan.fops)
        self._int_keys: IntKeySlots | None = IntKeySlots()
        self._objects: _ObjectKeys | None = None
        self._capacity = 0
        self._alloc(1024)
        self.vectorized_reason = "vectorized"

    def _alloc(self, capacity: int) -> None:
        old = None if not self._capacity else (self.count, self.iacc, self.facc, self.dirty)
        k0 = self._capacity
        self.count = np.zeros(capacity, np.int64)
        self.iacc = np.zeros((capacity, self.mi), np.int64)
        self.facc = np.zeros((capacity, self.mf), np.float64)
        self.dirty = np.zeros(capacity, np.bool_)
        if old is not None:
            self.count[:k0], self.iacc[:k0], self.facc[:k0], self.dirty[:k0] = old
        self._capacity = capacity

    # -- lifecycle -----------------------------------------------------------------------------
    def open(self) -> None:
        super().open()
        self.state = self.backend.get_state(self.descriptor)
        #: accumulators may wait in the backend (a restore): read each new key's once
        self._restored = (
            self.context.is_restored or next(self.backend.keys(self.descriptor.name), None) is not None
        )
        t = self.input_type
        field = probe_key_field(self._key_of, t)
        key_type: Any = None
        if field == IDENTITY:
            key_type = t
        elif field is not None and isinstance(t, TupleTypeInfo | RowTypeInfo):
            key_type = t.field_types[field]
        self._key_field = field
        self._key_getter = None if field is None or field == IDENTITY else itemgetter(field)
        if not (isinstance(key_type, BasicTypeInfo) and key_type.python_type is int):
            self._to_object_keys()

    # -- keys ----------------------------------------------------------------------------------
    def check_new_keys(self, keys: Any) -> None:
        check_key_groups(self.name, keys, self.backend.max_parallelism, self.backend.key_group_range)

    def _to_object_keys(self) -> None:
        """Keys as Python objects from here on; slots stay as they are."""
        if self._objects is not None:
            return
        objects = _ObjectKeys()
        if self._int_keys is not None:
            objects.objects = self._int_keys.slot_keys[: self._int_keys.n_keys].tolist()
            objects.ids = {k: i for i, k in enumerate(objects.objects)}
        self._objects, self._int_keys = objects, None

    def _n_keys(self) -> int:
        return self._int_keys.n_keys if self._int_keys is not None else len(self._objects or ())

    def _key_list(self, slots: np.ndarray) -> list[Any]:
        if self._int_keys is not None:
            result: list[Any] = self._int_keys.slot_keys[slots].tolist()
            return result
        assert self._objects is not None
        return self._objects.keys(slots)

    def _slots(self, values: Any, n: int) -> tuple[np.ndarray, Any]:
        """The key slot of every record, and the keys (an int64 array, ``Strings`` or a list)."""
        field = self._key_field
        if field is not None:
            getter = identity if field == IDENTITY else self._key_getter
            if not probe_agrees(getter, self._key_of, _ends(values)):
                self._key_field = field = None
                self._to_object_keys()
        column = (
            values.columns[field]
            if isinstance(values, TupleColumns) and field not in (None, IDENTITY)
            else None
        )
        if isinstance(column, Strings):  # string keys by their bytes; the output keeps the column
            if self._int_keys is not None:
                self._to_object_keys()
            assert self._objects is not None
            return self._objects.string_slots(column, self), column
        if self._int_keys is not None:
            try:
                if isinstance(values, np.ndarray):
                    keys: Any = values.astype(np.int64, copy=False)
                elif isinstance(column, np.ndarray) and column.dtype.kind == "i":
                    keys = column.astype(np.int64, copy=False)
                else:
                    source = values if field == IDENTITY else map(self._key_getter, values)  # type: ignore[arg-type]
                    keys = np.fromiter(source, np.int64, n)
                before = self._int_keys.n_keys
                slots = self._int_keys.slots(keys)
                if self._int_keys.n_keys > before:
                    self.check_new_keys(self._int_keys.slot_keys[before : self._int_keys.n_keys])
                return slots, keys
            except (TypeError, OverflowError, ValueError):
                self._to_object_keys()
        assert self._objects is not None
        if field is None:
            records = values.tolist() if isinstance(values, np.ndarray) else values
            keys = [self._key_of(v) for v in records]
        elif field == IDENTITY:
            keys = values.tolist() if isinstance(values, np.ndarray) else list(values)
        elif column is not None:
            keys = column.tolist() if isinstance(column, np.ndarray) else list(column)
        else:
            keys = list(map(self._key_getter, values))  # type: ignore[arg-type]
        return self._objects.slots(keys, self), keys

    # -- records -------------------------------------------------------------------------------
    def process_batch(self, batch: Batch) -> None:
        n = len(batch)
        if n == 0:
            return
        self.metrics.records_in += n
        values = batch.values
        before = self._n_keys()
        slots, keys = self._slots(values, n)
        after = self._n_keys()
        if after > self._capacity:
            self._alloc(max(after, 2 * self._capacity))
        if self._restored and after > before:
            self._load(before, after)
        ivals, fvals = slot_columns(self.plan, values, n, f"operator '{self.name}'")
        out_count = np.empty(n, np.int64)
        out_i = np.empty((n, self.mi), np.int64)
        out_f = np.empty((n, self.mf), np.float64)
        iops, fops = self._ops
        wk.running_aggregate(
            slots, ivals, fvals, iops, fops, self.count, self.iacc, self.facc, out_count, out_i, out_f
        )
        self.dirty[slots] = True
        if not isinstance(keys, np.ndarray) and self._int_keys is not None:
            keys = np.asarray(keys, np.int64)
        rows = output_columns(self.spec, self.plan, keys, None, 0, out_count, out_i, out_f)
        self._emit(Batch(rows, batch.timestamps))

    def _load(self, first: int, end: int) -> None:
        """Accumulators of key slots ``first .. end - 1`` (new keys) from the restored backend."""
        backend, state = self.backend, self.state
        what = f"operator '{self.name}'"
        for slot, key in zip(range(first, end), self._key_list(np.arange(first, end))):
            backend.set_current_key(key)
            stored = state.value()
            if stored is None:
                continue
            count, ints, floats = from_canonical(self.plan, stored, what)
            self.count[slot] = count
            self.iacc[slot] = ints
            self.facc[slot] = floats

    # -- checkpoints ---------------------------------------------------------------------------
    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        """Write the accumulators of the keys touched since the last checkpoint into the backend."""
        slots = np.flatnonzero(self.dirty[: self._n_keys()])
        if not len(slots):
            return
        backend, state = self.backend, self.state
        accumulators = canonical_accumulators(
            self.plan, self.count[slots], self.iacc[slots], self.facc[slots]
        )
        for key, accumulator in zip(self._key_list(slots), accumulators):
            backend.set_current_key(key)
            state.update(accumulator)
        self.dirty[slots] = False

    def statistics(self) -> dict[str, Any]:
        return {"keys": self._n_keys(), "key_field": self._key_field}

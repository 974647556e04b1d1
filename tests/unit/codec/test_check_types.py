"""``BatchSerializer.check_types``: the per-batch check of records that stay in a chain."""

from __future__ import annotations

import numpy as np
import pytest

from weir.codec.batch import Batch
from weir.codec.serializers import serializer_for
from weir.common import Row, Types
from weir.errors import UsageError

PAIR = Types.ROW_NAMED(["name", "n"], [Types.STRING(), Types.LONG()])


def _batch(values: object) -> Batch:
    return Batch(values, np.zeros(len(values), dtype=np.int64))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("type_info", "values"),
    [
        (Types.LONG(), [1, 2, np.int64(3)]),
        (Types.LONG(), np.arange(5)),
        (Types.DOUBLE(), [1.5, 2]),
        (Types.STRING(), ["a", ""]),
        (Types.PRIMITIVE_ARRAY(Types.BYTE()), [b"x", bytearray(b"y")]),
        (PAIR, [("a", 1), Row(name="b", n=None), ["c", 3]]),
        (None, [object(), "anything"]),
    ],
)
def test_records_of_the_declared_type_pass(type_info: object, values: object) -> None:
    serializer_for(type_info).check_types(_batch(values))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("type_info", "values", "message"),
    [
        (Types.LONG(), [1, "s"], "record 1 does not match Types.LONG(): got 's' (str)"),
        (Types.LONG(), np.array([0.5]), "record 0 does not match Types.LONG(): got 0.5 (float)"),
        (Types.STRING(), ["a", 7], "record 1 does not match Types.STRING(): got 7 (int)"),
        (PAIR, [("a", 1), ("b",)], "record 1 does not match Types.ROW_NAMED"),
        (PAIR, [("a", 1), ("b", "2")], "field 1 ('n') got '2' (str), expected Types.LONG()"),
        (PAIR, [Row(other="a", n=1)], "its field names ['other', 'n'] differ"),
    ],
)
def test_a_record_of_another_type_is_named(type_info: object, values: object, message: str) -> None:
    with pytest.raises(UsageError) as info:
        serializer_for(type_info).check_types(_batch(values))  # type: ignore[arg-type]
    assert message in str(info.value)

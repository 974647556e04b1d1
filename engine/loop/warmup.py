"""Load the numba kernels once per process before a job's clock starts.

Kernels are compiled ahead (``cache=True``) but loading them costs a few hundred
milliseconds on first use; doing it here keeps that out of a job's runtime and latency.
"""

from __future__ import annotations

import numpy as np

from weir.codec.batch import Batch
from weir.codec.reader import FrameReader
from weir.codec.serializers import serializer_for
from weir.common.typeinfo import Types
from weir.keys import channels_for_hashes, java_hash_array

_done = False


def warm_up() -> None:
    global _done
    if _done:
        return
    channels = np.array([0, 1, 0], dtype=np.int32)
    for type_info, values in (
        (Types.LONG(), np.array([1, 2, 3], dtype=np.int64)),
        (Types.TUPLE([Types.STRING(), Types.LONG()]), [("a", 1), ("b", 2), ("c", 3)]),
        (Types.DOUBLE(), [1.0, 2.0, 3.0]),
        (None, [1, "x", None]),
    ):
        serializer = serializer_for(type_info)
        for frame in serializer.encode_partitioned(Batch(values, np.arange(3, dtype=np.int64)), channels, 2):
            if frame is not None:
                FrameReader(serializer).feed(frame)
    for keys in ([1, 2, 3], ["a", "b", "c"], [1.5, 2.5, 3.5]):
        channels_for_hashes(java_hash_array(keys), 128, 2)
    _done = True

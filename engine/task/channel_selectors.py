"""Channel selection for a whole batch: which subpartition each record goes to.

One vectorized call per batch: key groups for HASH come from the numba kernels in
``weir.keys`` (Flink's murmur hash of a stable, Java-compatible key hash, then
``key_group * parallelism // max_parallelism``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from weir.codec.batch import Batch
from weir.codec.strings import Strings
from weir.columnar.probe import FieldColumn
from weir.core import functions as fn
from weir.errors import UsageError
from weir.graph.partitioners import Partitioner
from weir.keys import channels_for_hashes, java_hash_array


class ChannelSelector:
    broadcast = False

    def select(self, batch: Batch, num_channels: int) -> np.ndarray:
        raise NotImplementedError


class FirstChannelSelector(ChannelSelector):
    """FORWARD (one subpartition) and GLOBAL (everything to subtask 0)."""

    def select(self, batch: Batch, num_channels: int) -> np.ndarray:
        return np.zeros(len(batch), dtype=np.int32)


class RoundRobinSelector(ChannelSelector):
    """REBALANCE and RESCALE: records dealt in turn, starting where the last batch stopped."""

    def __init__(self, start: int) -> None:
        self.next = start

    def select(self, batch: Batch, num_channels: int) -> np.ndarray:
        n = len(batch)
        channels = ((np.arange(n, dtype=np.int64) + self.next) % num_channels).astype(np.int32)
        self.next = (self.next + n) % num_channels
        return channels


class ShuffleSelector(ChannelSelector):
    """SHUFFLE: uniformly random, seeded per subtask so runs repeat."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def select(self, batch: Batch, num_channels: int) -> np.ndarray:
        return self.rng.integers(0, num_channels, size=len(batch), dtype=np.int32)


class BroadcastSelector(ChannelSelector):
    broadcast = True

    def select(self, batch: Batch, num_channels: int) -> np.ndarray:  # pragma: no cover - not used
        raise AssertionError("broadcast writes every record to every channel")


class KeyGroupSelector(ChannelSelector):
    """HASH (key_by): key → key group → consumer subtask, for the whole batch at once."""

    def __init__(self, key_selector: Any, max_parallelism: int) -> None:
        self.key_of = (
            key_selector.fn if type(key_selector) is fn._KeySelectorCallable else key_selector.get_key
        )
        self.max_parallelism = max_parallelism
        #: reads the keys of a columnar batch as one column (None: a batch of records):
        #: weir.columnar's field(i), or a selector that returns one field (``lambda r: r[0]``)
        self.key_column = getattr(key_selector, "key_column", None) or FieldColumn(self.key_of).column
        self._cache: dict[int, dict[str, int]] = {}

    def keys(self, batch: Batch) -> list[Any]:
        key_of = self.key_of
        return list(map(key_of, batch.as_list()))

    #: String keys whose channel is remembered (a stream has far fewer distinct keys than records).
    CACHE_ENTRIES = 1 << 16

    def select(self, batch: Batch, num_channels: int) -> np.ndarray:
        column = self.key_column(batch.values)
        if isinstance(column, np.ndarray | Strings):  # a key field of a columnar batch: one hashing call
            return self._channels(column, num_channels)  # (Strings: hashed from their bytes)
        keys = column if isinstance(column, list) else self.keys(batch)  # a column of strings, or records
        cache = self._cache.get(num_channels)
        if cache is None:
            cache = self._cache[num_channels] = {}
        try:
            # only str keys are cached: a str never equals a key of another type, so a hit is
            # never a key whose Java hash differs (True == 1 == 1.0 in Python, not in Java)
            return np.fromiter(map(cache.__getitem__, keys), np.int32, len(keys))
        except KeyError as miss:
            if type(miss.args[0]) is not str:  # keys of other types are never cached
                return self._channels(keys, num_channels)
        except TypeError:  # an unhashable key: the hashing below names it
            return self._channels(keys, num_channels)
        missing = list({k: None for k in keys if k not in cache})
        if not all(type(k) is str for k in missing):  # a batch of str and other keys
            return self._channels(keys, num_channels)
        if len(cache) + len(missing) > self.CACHE_ENTRIES:
            cache.clear()
            missing = list(dict.fromkeys(keys))
        cache.update(zip(missing, self._channels(missing, num_channels).tolist()))
        return np.fromiter(map(cache.__getitem__, keys), np.int32, len(keys))

    def _channels(self, keys: list[Any] | np.ndarray | Strings, num_channels: int) -> np.ndarray:
        hashes = java_hash_array(keys)
        return np.asarray(channels_for_hashes(hashes, self.max_parallelism, num_channels), dtype=np.int32)


class CustomSelector(ChannelSelector):
    """CUSTOM (partition_custom): the user's ``partition(key, num_partitions)`` per record."""

    def __init__(self, partitioner: Any, key_selector: Any) -> None:
        self.partition = partitioner.partition
        self.key_of = key_selector.get_key

    def select(self, batch: Batch, num_channels: int) -> np.ndarray:
        partition, key_of = self.partition, self.key_of
        channels = [partition(key_of(v), num_channels) for v in batch.as_list()]
        for c in channels:
            if isinstance(c, bool) or not isinstance(c, int | np.integer) or not 0 <= c < num_channels:
                raise UsageError(
                    f"partition_custom: the partitioner returned {c!r} for {num_channels} partitions; "
                    f"it must return an int in 0..{num_channels - 1}"
                )
        return np.asarray(channels, dtype=np.int32)


def selector_for(
    partitioner: Partitioner, subtask_index: int, consumer_max_parallelism: int, seed: int
) -> ChannelSelector:
    name = partitioner.name
    if name in ("FORWARD", "GLOBAL"):
        return FirstChannelSelector()
    if name in ("REBALANCE", "RESCALE"):
        return RoundRobinSelector(subtask_index)
    if name == "SHUFFLE":
        return ShuffleSelector(seed * 7919 + subtask_index)
    if name == "BROADCAST":
        return BroadcastSelector()
    if name == "HASH":
        return KeyGroupSelector(partitioner.key_selector, consumer_max_parallelism)
    if name == "CUSTOM":
        return CustomSelector(partitioner.custom, partitioner.key_selector)
    raise ValueError(f"unknown partitioner {name}")  # pragma: no cover

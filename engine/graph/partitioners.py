"""Stream partitioners as the graph sees them: a name, a distribution pattern, a key selector.

The runtime turns these into channel selectors (``weir.network``); here they only
decide edges: which are all-to-all, which are pointwise, and what the plan prints.
Names are Flink's ``StreamPartitioner.toString()`` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class DistributionPattern(Enum):
    """How producer subtasks connect to consumer subtasks (Flink's DistributionPattern)."""

    ALL_TO_ALL = "ALL_TO_ALL"
    POINTWISE = "POINTWISE"


@dataclass(frozen=True, eq=False)
class Partitioner:
    name: str  # FORWARD, HASH, REBALANCE, RESCALE, SHUFFLE, BROADCAST, GLOBAL, CUSTOM
    key_selector: Any = None  # only for HASH and CUSTOM
    custom: Any = None  # only for CUSTOM: the user's Partitioner

    @property
    def pattern(self) -> DistributionPattern:
        if self.name in ("FORWARD", "RESCALE"):
            return DistributionPattern.POINTWISE
        return DistributionPattern.ALL_TO_ALL

    @property
    def is_forward(self) -> bool:
        return self.name == "FORWARD"

    @property
    def is_broadcast(self) -> bool:
        return self.name == "BROADCAST"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Partitioner) and (self.name, self.key_selector, self.custom) == (
            other.name,
            other.key_selector,
            other.custom,
        )

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return self.name


FORWARD = Partitioner("FORWARD")
REBALANCE = Partitioner("REBALANCE")
RESCALE = Partitioner("RESCALE")
SHUFFLE = Partitioner("SHUFFLE")
BROADCAST = Partitioner("BROADCAST")
GLOBAL = Partitioner("GLOBAL")


def key_group_partitioner(key_selector: Any) -> Partitioner:
    """keyBy: the key group of each record's key decides its consumer subtask."""
    return Partitioner("HASH", key_selector)


def custom_partitioner(partitioner: Any, key_selector: Any) -> Partitioner:
    """partition_custom: the user's Partitioner picks the consumer subtask of each record's key."""
    return Partitioner("CUSTOM", key_selector, partitioner)

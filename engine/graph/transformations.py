"""Transformations: what each DataStream API call appends to the environment.

Each transformation knows its inputs, output type, parallelism, max parallelism,
uid, name, slot sharing group and chaining strategy. Physical ones (source, one-input
operator, two-input operator, sink) become StreamNodes; virtual ones (partition, union, side output) only
shape the edges between them. Nothing here runs anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from weir.common.typeinfo import TypeInformation
from weir.errors import UsageError
from weir.graph.partitioners import Partitioner

UPPER_BOUND_MAX_PARALLELISM = 1 << 15
LOWER_BOUND_MAX_PARALLELISM = 1 << 7


class ChainingStrategy(Enum):
    """Flink's ChainingStrategy: may an operator be chained to its predecessor / successor."""

    ALWAYS = "ALWAYS"  # chain to predecessor and successor
    NEVER = "NEVER"  # never chain
    HEAD = "HEAD"  # chain to successors only (a chain starts here)
    HEAD_WITH_SOURCES = "HEAD_WITH_SOURCES"  # like HEAD, but may chain to a source


class ExchangeMode(Enum):
    """Flink's StreamExchangeMode for a partitioning step."""

    UNDEFINED = "UNDEFINED"
    PIPELINED = "PIPELINED"
    BATCH = "BATCH"


@dataclass(frozen=True)
class OperatorSpec:
    """What an operator does: a kind the runtime knows, the user function, its options.

    ``kind`` is one of: map, flat_map, filter, process, keyed_process, reduce, aggregation,
    window, timestamps_watermarks; two-input: co_map, co_flat_map, co_process,
    keyed_co_process, broadcast_process, keyed_broadcast_process (``broadcast_input2``: input 2
    is a broadcast stream, not keyed). ``options`` holds kind-specific settings (for a window:
    assigner, trigger, allowed lateness, late-data tag, the window function).
    """

    kind: str
    function: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    keyed: bool = False  # needs a keyed input (its state is keyed state)


@dataclass(eq=False)
class Transformation:
    id: int
    name: str
    output_type: TypeInformation | None
    inputs: list[Transformation] = field(default_factory=list)
    parallelism: int | None = None  # None: the environment's default, resolved in the StreamGraph
    max_parallelism: int | None = None
    uid: str | None = None
    uid_hash: str | None = None
    slot_sharing_group: str | None = None  # None: inherited from inputs, else "default"
    chaining_strategy: ChainingStrategy = ChainingStrategy.ALWAYS
    description: str | None = None
    parallelism_fixed: bool = False  # a non-parallel operator (parallelism must stay 1)
    buffer_timeout_ms: int | None = None  # None: the job's (execution.buffer-timeout.interval)

    is_physical = True

    def set_parallelism(self, parallelism: int) -> None:
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise UsageError(
                f"parallelism of operator '{self.name}' must be a positive integer, got {parallelism!r}"
            )
        if self.parallelism_fixed and parallelism != 1:
            raise UsageError(
                f"operator '{self.name}' is non-parallel: its parallelism must be 1, got {parallelism}"
            )
        if self.max_parallelism is not None and parallelism > self.max_parallelism:
            raise UsageError(
                f"parallelism {parallelism} exceeds max_parallelism {self.max_parallelism} "
                f"for operator '{self.name}'"
            )
        self.parallelism = parallelism

    def set_max_parallelism(self, max_parallelism: int) -> None:
        check_max_parallelism(f"operator '{self.name}'", max_parallelism)
        if self.parallelism is not None and self.parallelism > max_parallelism:
            raise UsageError(
                f"parallelism {self.parallelism} exceeds max_parallelism {max_parallelism} "
                f"for operator '{self.name}'"
            )
        self.max_parallelism = max_parallelism


def check_max_parallelism(what: str, max_parallelism: object) -> int:
    if (
        isinstance(max_parallelism, bool)
        or not isinstance(max_parallelism, int)
        or not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM
    ):
        raise UsageError(
            f"max_parallelism of {what} must be within 1..{UPPER_BOUND_MAX_PARALLELISM}, got {max_parallelism!r}"
        )
    return max_parallelism


@dataclass(eq=False)
class SourceTransformation(Transformation):
    source: Any = None
    watermark_strategy: Any = None
    bounded: bool = True


@dataclass(eq=False)
class OneInputTransformation(Transformation):
    operator: OperatorSpec = field(default_factory=lambda: OperatorSpec("map"))
    state_key_selector: Any = None  # set when the input is a keyed stream


@dataclass(eq=False)
class TwoInputTransformation(Transformation):
    """An operator over two inputs (``inputs[0]`` is input 1, ``inputs[1]`` input 2), from
    ``connect``. Keyed when both inputs are keyed: one key selector per input, one keyed state."""

    operator: OperatorSpec = field(default_factory=lambda: OperatorSpec("co_map"))
    state_key_selector1: Any = None
    state_key_selector2: Any = None


@dataclass(eq=False)
class SinkTransformation(Transformation):
    sink: Any = None


@dataclass(eq=False)
class PartitionTransformation(Transformation):
    partitioner: Partitioner | None = None
    exchange_mode: ExchangeMode = ExchangeMode.UNDEFINED
    is_physical = False


@dataclass(eq=False)
class UnionTransformation(Transformation):
    is_physical = False


@dataclass(eq=False)
class SideOutputTransformation(Transformation):
    tag: Any = None
    is_physical = False

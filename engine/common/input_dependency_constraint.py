"""``InputDependencyConstraint``, as ``pyflink.common.InputDependencyConstraint``: when a task
with several inputs may be scheduled. weir deploys a streaming job's tasks at once, and a
batch job region by region once all its inputs are produced (``ALL``)."""

from __future__ import annotations

import enum


class InputDependencyConstraint(enum.Enum):
    ANY = 0  # schedule once any input is consumable
    ALL = 1  # schedule once all inputs are consumable

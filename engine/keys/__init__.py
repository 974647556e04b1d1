"""Key groups: which key group a key belongs to, and which subtask owns a key group.

``reference`` is the plain-Python definition (Flink's ``KeyGroupRangeAssignment``
with Java's ``hashCode``); ``kernels`` computes the same for whole numpy batches.
"""

from __future__ import annotations

from weir.keys.kernels import (
    channels_for_hashes,
    channels_for_key_groups,
    hash_bool_array,
    hash_float64_array,
    hash_int64_array,
    hash_utf8_strings,
    hash_utf16_strings,
    java_hash_array,
    key_groups_for_hashes,
    murmur_hash_array,
    string_hashes,
)
from weir.keys.reference import (
    DEFAULT_LOWER_BOUND_MAX_PARALLELISM,
    UPPER_BOUND_MAX_PARALLELISM,
    KeyGroupRange,
    assign_key_to_parallel_operator,
    assign_to_key_group,
    compute_default_max_parallelism,
    compute_key_group_for_key_hash,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
    java_hash,
    murmur_hash,
    round_up_to_power_of_two,
)

__all__ = [
    "DEFAULT_LOWER_BOUND_MAX_PARALLELISM",
    "UPPER_BOUND_MAX_PARALLELISM",
    "KeyGroupRange",
    "assign_key_to_parallel_operator",
    "assign_to_key_group",
    "channels_for_hashes",
    "channels_for_key_groups",
    "compute_default_max_parallelism",
    "compute_key_group_for_key_hash",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "hash_bool_array",
    "hash_float64_array",
    "hash_int64_array",
    "hash_utf8_strings",
    "hash_utf16_strings",
    "java_hash",
    "java_hash_array",
    "key_groups_for_hashes",
    "murmur_hash",
    "murmur_hash_array",
    "round_up_to_power_of_two",
    "string_hashes",
]

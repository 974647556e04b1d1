"""``SlotSharingGroup`` and ``MemorySize``, as in ``pyflink.datastream.slot_sharing_group``.

weir places operators by the group's name; the resources a group may carry (CPU cores,
heap, off-heap and managed memory, external resources) are kept and read back, and do not
size slots: a weir slot is a share of one Python process, not a resource profile.
"""

from __future__ import annotations

from typing import Any

from weir.errors import UsageError

_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class MemorySize:
    """An amount of memory in bytes."""

    def __init__(self, j_memory_size: Any = None, bytes_size: int | None = None) -> None:
        size = bytes_size if bytes_size is not None else j_memory_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise UsageError(f"MemorySize needs a non-negative number of bytes, got {size!r}")
        self._bytes = size

    @staticmethod
    def of_mebi_bytes(mebi_bytes: int) -> MemorySize:
        return MemorySize(bytes_size=mebi_bytes << 20)

    def get_bytes(self) -> int:
        return self._bytes

    def get_kibi_bytes(self) -> int:
        return self._bytes >> 10

    def get_mebi_bytes(self) -> int:
        return self._bytes >> 20

    def get_gibi_bytes(self) -> int:
        return self._bytes >> 30

    def get_tebi_bytes(self) -> int:
        return self._bytes >> 40

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemorySize) and other._bytes == self._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __lt__(self, other: MemorySize) -> bool:
        return self._bytes < other._bytes

    def __le__(self, other: MemorySize) -> bool:
        return self._bytes <= other._bytes

    def __str__(self) -> str:
        """Flink's form: the largest unit that divides the size (``100 mb``), else bytes."""
        for unit, factor in reversed(_UNITS.items()):
            if self._bytes and self._bytes % factor == 0:
                return f"{self._bytes // factor} {unit}b"
        return f"{self._bytes} bytes"


class SlotSharingGroup:
    """A named slot sharing group, with the resources PyFlink lets it carry."""

    def __init__(
        self,
        name: str,
        cpu_cores: float | None = None,
        task_heap_memory: MemorySize | None = None,
        task_off_heap_memory: MemorySize | None = None,
        managed_memory: MemorySize | None = None,
        external_resources: dict[str, float] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise UsageError(f"slot sharing group name must be a non-empty string, got {name!r}")
        self.name = name
        self._cpu_cores = cpu_cores
        self._task_heap_memory = task_heap_memory
        self._task_off_heap_memory = task_off_heap_memory
        self._managed_memory = managed_memory
        self._external_resources = dict(external_resources or {})

    def get_name(self) -> str:
        return self.name

    def get_cpu_cores(self) -> float | None:
        return self._cpu_cores

    def get_task_heap_memory(self) -> MemorySize | None:
        return self._task_heap_memory

    def get_task_off_heap_memory(self) -> MemorySize | None:
        return self._task_off_heap_memory

    def get_managed_memory(self) -> MemorySize | None:
        return self._managed_memory

    def get_external_resources(self) -> dict[str, float]:
        return dict(self._external_resources)

    @staticmethod
    def builder(name: str) -> SlotSharingGroup.Builder:
        return SlotSharingGroup.Builder(name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SlotSharingGroup) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    class Builder:
        def __init__(self, name: str) -> None:
            self._name = name
            self._cpu_cores: float | None = None
            self._memory: dict[str, MemorySize] = {}
            self._external: dict[str, float] = {}

        def set_cpu_cores(self, cpu_cores: float) -> SlotSharingGroup.Builder:
            if isinstance(cpu_cores, bool) or not isinstance(cpu_cores, int | float) or cpu_cores <= 0:
                raise UsageError(f"set_cpu_cores needs a positive number, got {cpu_cores!r}")
            self._cpu_cores = float(cpu_cores)
            return self

        def _set_memory(self, what: str, size: Any) -> SlotSharingGroup.Builder:
            if not isinstance(size, MemorySize):
                raise UsageError(f"set_{what} needs a MemorySize, got {size!r}")
            self._memory[what] = size
            return self

        def set_task_heap_memory(self, task_heap_memory: MemorySize) -> SlotSharingGroup.Builder:
            return self._set_memory("task_heap_memory", task_heap_memory)

        def set_task_heap_memory_mb(self, task_heap_memory_mb: int) -> SlotSharingGroup.Builder:
            return self._set_memory("task_heap_memory", MemorySize.of_mebi_bytes(task_heap_memory_mb))

        def set_task_off_heap_memory(self, task_off_heap_memory: MemorySize) -> SlotSharingGroup.Builder:
            return self._set_memory("task_off_heap_memory", task_off_heap_memory)

        def set_task_off_heap_memory_mb(self, task_off_heap_memory_mb: int) -> SlotSharingGroup.Builder:
            return self._set_memory("task_off_heap_memory", MemorySize.of_mebi_bytes(task_off_heap_memory_mb))

        def set_managed_memory(self, managed_memory: MemorySize) -> SlotSharingGroup.Builder:
            return self._set_memory("managed_memory", managed_memory)

        def set_managed_memory_mb(self, managed_memory_mb: int) -> SlotSharingGroup.Builder:
            return self._set_memory("managed_memory", MemorySize.of_mebi_bytes(managed_memory_mb))

        def set_external_resource(self, name: str, value: float) -> SlotSharingGroup.Builder:
            self._external[str(name)] = float(value)
            return self

        def build(self) -> SlotSharingGroup:
            return SlotSharingGroup(
                self._name,
                self._cpu_cores,
                self._memory.get("task_heap_memory"),
                self._memory.get("task_off_heap_memory"),
                self._memory.get("managed_memory"),
                self._external,
            )

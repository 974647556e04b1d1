"""``TestStream``: a scripted source that says exactly when each element and watermark arrives.

In the spirit of Apache Beam's TestStream. A test builds a script::

    events = (
        TestStream(type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
        .add_elements(TimestampedValue(("a", 1), 1_000), TimestampedValue(("b", 2), 2_000))
        .advance_watermark_to(9_999)
        .add_elements(TimestampedValue(("a", 5), 3_000))        # late now
        .advance_processing_time(60_000)
        .advance_watermark_to_infinity()
    )
    env.from_source(events, WatermarkStrategy.no_watermarks(), "events")

Theory of operation
-------------------
The script is one list of steps: elements (with optional event timestamps), watermark
advances, processing-time advances, idle / active marks, and the end. It runs at any
parallelism ``p``; every source subtask walks the whole script in order:

- *Elements* are dealt to subtasks: an element pinned with ``subtask=i`` goes to subtask
  ``i``; else, with a ``key_selector``, to the subtask its key maps to (so all elements of
  a key come from one subtask and keep their order downstream); else round robin over
  the script's elements (element ``n`` to subtask ``n % p``). A subtask emits its share of
  an elements step as one batch.
- *Watermark advances* are emitted by every subtask (or only the named ones), so the
  downstream watermark (the minimum over channels) reaches the value.
- *Idle / active marks* are emitted by the named subtasks (all by default). A subtask
  that emits an element or a watermark while idle becomes active again first.
- *Processing-time advances* move the job's processing time forward by the given
  milliseconds: every subtask sleeps on the Trio clock until the same target time. Under
  a MockClock (``weir_clock``) that is instant; on the real clock it really sleeps.

Every step other than elements is a *synchronisation point*: each subtask waits until all
subtasks have reached it, and then until the whole Trio program is quiet
(``trio.testing.wait_all_tasks_blocked``), i.e. everything emitted before the step has
been processed as far as it can go. So "advance the watermark to 10, then add an element
at 3" produces a late element at any parallelism, and a processing-time advance starts
only after the elements before it reached the operators. Between two synchronisation
points the subtasks run freely: elements from different subtasks interleave in any order,
those of one subtask keep theirs. Quiet means blocked: records sitting in a network
buffer that waits for its flush timeout count as processed only after that timeout;
``env.set_buffer_timeout(0)`` makes every batch leave at once.

The source is replayable: checkpoints record each subtask's position in the script, and
recovery resumes there (at the same parallelism). End of script is end of input: the
subtasks emit the final watermark (Long.MAX) and finish.

What it does not do: run beside a job that never blocks (the quiet wait would not end);
rescale its position to another parallelism.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import trio
import trio.testing

from weir.codec.batch import NO_TIMESTAMP, Batch
from weir.common.typeinfo import TypeInformation
from weir.common.watermark_strategy import WatermarkStrategy
from weir.core.connectors import Source
from weir.errors import UsageError
from weir.operators.factory import SourceOperator
from weir.operators.sources import SourceReader

MAX_WATERMARK = (1 << 63) - 1


@dataclass(frozen=True)
class TimestampedValue:
    """An element with its event timestamp (epoch milliseconds)."""

    value: Any
    timestamp: int

    def __post_init__(self) -> None:
        if isinstance(self.timestamp, bool) or not isinstance(self.timestamp, int):
            raise UsageError(f"TimestampedValue timestamp must be an int (ms), got {self.timestamp!r}")


# -- steps -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Elements:
    items: tuple[tuple[Any, int | None, int | None], ...]  # (value, timestamp, pinned subtask)


@dataclass(frozen=True)
class _Watermark:
    timestamp: int
    subtasks: tuple[int, ...] | None


@dataclass(frozen=True)
class _ProcessingTime:
    advance_ms: int


@dataclass(frozen=True)
class _Idle:
    idle: bool
    subtasks: tuple[int, ...] | None


@dataclass(frozen=True)
class _End:
    final_watermark: bool


_Step = _Elements | _Watermark | _ProcessingTime | _Idle | _End


def _check_ms(what: str, value: object, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{what} must be an int (milliseconds), got {value!r}")
    if minimum is not None and value < minimum:
        raise UsageError(f"{what} must be at least {minimum}, got {value}")
    return value


def _check_subtasks(what: str, subtasks: Iterable[int] | int | None) -> tuple[int, ...] | None:
    if subtasks is None:
        return None
    chosen = (subtasks,) if isinstance(subtasks, int) else tuple(subtasks)
    for s in chosen:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise UsageError(f"{what}: subtask indexes must be non-negative ints, got {s!r}")
    return chosen


class TestStream(Source):
    """A scripted, replayable source; build the script with the chaining methods."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        type_info: TypeInformation | None = None,
        key_selector: Callable[[Any], Any] | None = None,
    ) -> None:
        if key_selector is not None and not callable(key_selector):
            raise UsageError(f"TestStream key_selector must be a callable, got {key_selector!r}")
        self.type_info = type_info
        self.key_selector = key_selector
        self.steps: list[_Step] = []

    # -- the script ----------------------------------------------------------------------------
    def _append(self, step: _Step) -> TestStream:
        if self.steps and isinstance(self.steps[-1], _End):
            raise UsageError(
                f"TestStream: the script already ended (step {len(self.steps) - 1}); "
                f"nothing can follow end() or advance_watermark_to_infinity()"
            )
        self.steps.append(step)
        return self

    def add_elements(
        self, *elements: Any, timestamp: int | None = None, subtask: int | None = None
    ) -> TestStream:
        """Elements in this order. A ``TimestampedValue`` carries its own timestamp; other
        values get ``timestamp`` (or none). ``subtask`` pins them to one source subtask."""
        if not elements:
            raise UsageError("TestStream.add_elements needs at least one element")
        if timestamp is not None:
            _check_ms("add_elements(timestamp)", timestamp)
        if subtask is not None:
            _check_subtasks("add_elements(subtask)", subtask)
        items: list[tuple[Any, int | None, int | None]] = []
        for element in elements:
            if isinstance(element, TimestampedValue):
                items.append((element.value, element.timestamp, subtask))
            else:
                items.append((element, timestamp, subtask))
        return self._append(_Elements(tuple(items)))

    def advance_watermark_to(self, timestamp: int, subtasks: Iterable[int] | int | None = None) -> TestStream:
        """Every subtask (or only ``subtasks``) emits watermark ``timestamp`` (ignored if not ahead)."""
        _check_ms("advance_watermark_to(timestamp)", timestamp)
        return self._append(_Watermark(timestamp, _check_subtasks("advance_watermark_to", subtasks)))

    def advance_processing_time(self, duration_ms: int) -> TestStream:
        """Processing time moves forward by ``duration_ms`` once everything before has been processed."""
        return self._append(
            _ProcessingTime(_check_ms("advance_processing_time(duration_ms)", duration_ms, 0))
        )

    def mark_idle(self, subtasks: Iterable[int] | int | None = None) -> TestStream:
        """The subtasks (all by default) declare themselves idle: downstream watermarks stop waiting for them."""
        return self._append(_Idle(True, _check_subtasks("mark_idle", subtasks)))

    def mark_active(self, subtasks: Iterable[int] | int | None = None) -> TestStream:
        return self._append(_Idle(False, _check_subtasks("mark_active", subtasks)))

    def advance_watermark_to_infinity(self) -> TestStream:
        """End of event time and of the script (Beam's name)."""
        return self._append(_End(final_watermark=True))

    def end(self) -> TestStream:
        """End of the script: the source finishes (which also ends event time, as any bounded source)."""
        return self._append(_End(final_watermark=False))

    # -- Source --------------------------------------------------------------------------------
    def is_bounded(self) -> bool:
        return True

    def default_name(self) -> str:
        return "TestStream"

    def produced_type(self) -> TypeInformation | None:
        return self.type_info

    def describe(self) -> dict[str, Any]:
        return {"class": "TestStream", "steps": len(self.steps)}

    def plan(self, parallelism: int) -> list[list[_Step]]:
        """The script as each of ``parallelism`` subtasks sees it: the same steps, with each
        elements step cut down to that subtask's share."""
        if parallelism < 1:
            raise UsageError(f"TestStream parallelism must be at least 1, got {parallelism}")
        for index, step in enumerate(self.steps):
            pinned: tuple[int, ...] = ()
            if isinstance(step, _Elements):
                pinned = tuple(s for _, _, s in step.items if s is not None)
            elif isinstance(step, (_Watermark, _Idle)) and step.subtasks is not None:
                pinned = step.subtasks
            bad = [s for s in pinned if s >= parallelism]
            if bad:
                raise UsageError(
                    f"TestStream step {index} ({type(step).__name__.strip('_').lower()}) names subtask {bad[0]}, "
                    f"but the source runs at parallelism {parallelism} (subtasks 0..{parallelism - 1})"
                )
        shares: list[list[_Step]] = [[] for _ in range(parallelism)]
        dealt = 0
        for step in self.steps:
            if not isinstance(step, _Elements):
                for share in shares:
                    share.append(step)
                continue
            parts: list[list[tuple[Any, int | None, int | None]]] = [[] for _ in range(parallelism)]
            for item in step.items:
                value, _, pinned_subtask = item
                if pinned_subtask is not None:
                    target = pinned_subtask
                elif self.key_selector is not None:
                    from weir.keys import assign_key_to_parallel_operator

                    target = assign_key_to_parallel_operator(self.key_selector(value), 128, parallelism)
                else:
                    target = dealt % parallelism
                    dealt += 1
                parts[target].append(item)
            for share, part in zip(shares, parts):
                share.append(_Elements(tuple(part)))
        return shares

    def create_source_operator(
        self,
        name: str,
        subtask: int,
        parallelism: int,
        interval_ms: int,
        watermark_strategy: WatermarkStrategy | None,
    ) -> SourceOperator:
        """The runtime's hook (``weir.operators.factory.create_source``)."""
        strategy = watermark_strategy
        if (
            strategy is not None
            and strategy.kind == WatermarkStrategy.NONE
            and strategy.timestamp_assigner is None
        ):
            strategy = None
        try:
            steps, error = self.plan(parallelism)[subtask], None
        except UsageError as exc:  # reported when the operator opens, as the subtask's failure
            steps, error = [], exc
        reader = TestStreamReader(steps, subtask, parallelism, error)
        return TestStreamSourceOperator(name, reader, strategy, interval_ms)

    def __repr__(self) -> str:
        return f"TestStream({len(self.steps)} steps)"


# -- synchronisation across subtasks -----------------------------------------------------------


class _Rendezvous:
    """Where the subtasks of one source attempt meet at synchronisation points.

    ``progress[s]`` is the last point subtask ``s`` has reached (None: not started yet;
    a restored subtask starts past the points before its position). Points are numbered
    ``2 * step`` (before the step takes effect) and ``2 * step + 1`` (after it).
    """

    def __init__(self, parallelism: int) -> None:
        self.progress: list[float | None] = [None] * parallelism
        self.processing_time_targets: dict[int, int] = {}
        self._changed = trio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def reach(self, subtask: int, point: float) -> None:
        current = self.progress[subtask]
        if current is None or point > current:
            self.progress[subtask] = point
        self._notify()

    async def wait_for(self, point: float) -> None:
        """Until every subtask has reached ``point``. Cancellation: stops waiting."""
        while not all(p is not None and p >= point for p in self.progress):
            await self._changed.wait()


_rendezvous: weakref.WeakKeyDictionary[Any, dict[tuple[str, int], _Rendezvous]] = weakref.WeakKeyDictionary()


def _rendezvous_for(context: Any) -> _Rendezvous:
    """One rendezvous per (job, source operator, attempt). A job is known by its
    processing-time clock, one function object per submitted job, shared by its tasks."""
    per_job = _rendezvous.setdefault(context.processing_time_ms, {})
    key = (context.operator_id, context.attempt_number)
    found = per_job.get(key)
    if found is None:
        found = per_job[key] = _Rendezvous(context.parallelism)
    return found


# -- runtime -----------------------------------------------------------------------------------


class _Control(Batch):
    """A step that is not data: the source operator emits it as a watermark or status."""

    __slots__ = ("kind", "timestamp")

    def __init__(self, kind: str, timestamp: int = 0) -> None:
        super().__init__([])
        self.kind = kind
        self.timestamp = timestamp


class TestStreamReader(SourceReader):
    """One subtask's walk through the script (its share of it)."""

    __test__ = False

    # processing-time steps sleep this much past the target, so timers due exactly at the
    # target fire first even when the clock is not aligned to whole milliseconds
    SLACK_S = 0.0009

    def __init__(
        self, steps: list[_Step], subtask: int, parallelism: int, error: UsageError | None = None
    ) -> None:
        self.steps = steps
        self.error = error
        self.subtask = subtask
        self.parallelism = parallelism
        self.step = 0
        self._pending_sync: int | None = None  # a step whose "after" point is still to be met
        self._rendezvous: _Rendezvous | None = None
        self._clock: Callable[[], int] | None = None

    def position(self) -> Any:
        return {"step": self.step}

    def restore(self, position: Any) -> None:
        step = int(position["step"])
        if not 0 <= step <= len(self.steps):
            raise UsageError(
                f"TestStream position {position!r} is outside its script of {len(self.steps)} steps"
            )
        self.step = step

    def close(self) -> None:
        pass

    def bind(self, context: Any) -> None:
        """Join the subtasks of this attempt; called when the operator opens."""
        if self.error is not None:
            raise self.error
        self._clock = context.processing_time_ms
        self._rendezvous = _rendezvous_for(context)
        self._rendezvous.reach(self.subtask, 2 * self.step - 1)

    async def _sync(self, point: int) -> None:
        assert self._rendezvous is not None
        self._rendezvous.reach(self.subtask, point)
        await self._rendezvous.wait_for(point)
        await trio.testing.wait_all_tasks_blocked()

    async def _advance_processing_time(self, step: int, advance_ms: int) -> None:
        assert self._rendezvous is not None and self._clock is not None
        await self._sync(2 * step)
        clock = self._clock
        target = self._rendezvous.processing_time_targets.setdefault(step, clock() + advance_ms)
        while (now := clock()) < target:
            await trio.sleep((target - now) / 1000)
        await trio.sleep(self.SLACK_S)

    async def next_batch(self) -> Batch | None:
        if self._rendezvous is None:
            raise UsageError("TestStreamReader runs only inside a TestStream source operator")
        while True:
            if self._pending_sync is not None:
                point, self._pending_sync = self._pending_sync, None
                await self._sync(point)
            if self.step >= len(self.steps):
                self._rendezvous.reach(self.subtask, float("inf"))
                return None
            index = self.step
            step = self.steps[index]
            self.step += 1
            if isinstance(step, _Elements):
                if step.items:
                    return _elements_batch(step.items)
                continue
            if isinstance(step, _ProcessingTime):
                await self._advance_processing_time(index, step.advance_ms)
                self._pending_sync = 2 * index + 1
                continue
            self._pending_sync = 2 * index + 1
            if isinstance(step, _End):
                self.step = len(self.steps)
                if step.final_watermark:
                    return _Control("watermark", MAX_WATERMARK)
                continue
            if step.subtasks is not None and self.subtask not in step.subtasks:
                continue
            if isinstance(step, _Watermark):
                return _Control("watermark", step.timestamp)
            return _Control("idle" if step.idle else "active")


def _elements_batch(items: tuple[tuple[Any, int | None, int | None], ...]) -> Batch:
    values = [value for value, _, _ in items]
    if all(ts is None for _, ts, _ in items):
        return Batch(values)
    stamps = np.array([NO_TIMESTAMP if ts is None else ts for _, ts, _ in items], dtype=np.int64)
    return Batch(values, stamps)


class TestStreamSourceOperator(SourceOperator):
    """The head of a TestStream task: emits the script's data, watermarks and idleness."""

    __test__ = False

    reader: TestStreamReader

    def open(self) -> None:
        super().open()
        self.idle = False
        self.reader.bind(self.context)

    def _set_idle(self, idle: bool) -> None:
        if idle != self.idle:
            self.idle = idle
            self.chain_output.emit_watermark_status(idle)

    def emit_batch(self, batch: Batch) -> None:
        if isinstance(batch, _Control):
            super().emit_batch(Batch([]))  # keeps the position bookkeeping of a source
            if batch.kind == "watermark":
                self._set_idle(False)
                if batch.timestamp > self.current_watermark:
                    self.current_watermark = batch.timestamp
                    self.chain_output.emit_watermark(batch.timestamp)
            else:
                self._set_idle(batch.kind == "idle")
            return
        if len(batch):
            self._set_idle(False)
        super().emit_batch(batch)

    def finish(self) -> None:
        self._set_idle(False)
        super().finish()

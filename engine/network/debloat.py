"""Buffer debloating: how many records a task takes in one step, from its measured throughput.

Theory of operation
-------------------
A checkpoint barrier waits behind whatever a task is busy with. In Flink that is the
in-flight data in the network buffers, and buffer debloating keeps it to about
``taskmanager.network.memory.buffer-debloat.target`` (1 s) of processing by sizing the
buffers from the measured throughput. In weir a task's step is a whole batch: a source
reads a batch and pushes it through its chain in one go, and every task of a TaskManager
shares one Trio loop. A barrier therefore waits behind a whole batch of every busy task,
several times over (trigger, barrier, alignment, acknowledgement are separate steps of
the loop). So weir debloats the step: a batch must take at most
``target / STEPS_PER_TARGET`` of processing, and a batch's size follows the measured
processing rate of the task's chain.

The first batch is a probe of ``PROBE_BATCH`` records whose rate sizes the next batches
at once, so a slow chain never runs a full batch. Then, events:
``on_batch(records, busy_s, now_s)`` after each batch, with the seconds the task
spent processing it (not waiting for output: backpressure is not processing). Every
``period`` the records and busy time seen so far make one throughput sample; the rate used
is the smaller of the newest sample and the exponential moving average over ``samples``
samples, so a slow chain shrinks batches at once and a faster one grows them gently.
Decision: ``on_batch`` returns the new batch size, or None when it stays; a new size
within ``threshold_percentages`` of the current one is not announced (as Flink's).

Invariants: ``min_batch <= batch_size <= max_batch``; ``max_batch`` is the batch size the
source was configured with, so a fast chain keeps exactly its configured batches (after
the probe).
It does not touch Trio or a clock: time is the ``now_s`` argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from weir.errors import UsageError

# a batch may take this fraction of the target: a checkpoint needs some 10 to 20 steps of the
# loop (trigger, barrier, alignment, a worker thread's write and its return, the metadata,
# the notification), each as long as one batch of every busy task of the loop
STEPS_PER_TARGET = 100
# the first batch of a task: small, so that a slow chain is found out in one cheap step
PROBE_BATCH = 256


@dataclass(frozen=True)
class DebloatSettings:
    """``taskmanager.network.memory.buffer-debloat.*`` of one job."""

    enabled: bool = True
    target_ms: int = 1000
    period_ms: int = 200
    samples: int = 20
    threshold_percentages: int = 25

    def __post_init__(self) -> None:
        for name in ("target_ms", "period_ms", "samples", "threshold_percentages"):
            value = getattr(self, name)
            if value <= 0:
                raise UsageError(f"buffer debloating: {name} must be positive, got {value}")

    @classmethod
    def from_configuration(cls, conf: Any) -> DebloatSettings:
        """The settings a ``Configuration`` gives (Flink's keys, weir's defaults)."""
        from weir.common import config_options as opts

        return cls(
            enabled=conf.get_option(opts.BUFFER_DEBLOAT_ENABLED),
            target_ms=conf.get_option(opts.BUFFER_DEBLOAT_TARGET),
            period_ms=conf.get_option(opts.BUFFER_DEBLOAT_PERIOD),
            samples=conf.get_option(opts.BUFFER_DEBLOAT_SAMPLES),
            threshold_percentages=conf.get_option(opts.BUFFER_DEBLOAT_THRESHOLD),
        )

    @property
    def step_budget_s(self) -> float:
        """Processing time one batch may take."""
        return self.target_ms / 1000 / STEPS_PER_TARGET


class BatchDebloater:
    """The batch size of one task, from its processing rate. Pure: time is a parameter."""

    def __init__(self, settings: DebloatSettings, max_batch: int, min_batch: int = 1) -> None:
        if not 1 <= min_batch <= max_batch:
            raise UsageError(
                f"batch debloater: need 1 <= min_batch <= max_batch, got {min_batch}, {max_batch}"
            )
        self.settings = settings
        self.max_batch = max_batch
        self.min_batch = min_batch
        self.batch_size = min(max_batch, PROBE_BATCH)
        self.rate: float | None = None  # records per busy second, moving average
        self._probed = False
        self._alpha = 2.0 / (settings.samples + 1)
        self._period_start_s = 0.0
        self._records = 0
        self._busy_s = 0.0

    def on_batch(self, records: int, busy_s: float, now_s: float) -> int | None:
        """Account one processed batch; the new batch size when it changes, else None."""
        if not self._probed:
            return self._on_probe(records, busy_s, now_s)
        self._records += records
        self._busy_s += busy_s
        if now_s - self._period_start_s < self.settings.period_ms / 1000 or self._busy_s <= 0:
            return None
        sample = self._records / self._busy_s
        self._period_start_s, self._records, self._busy_s = now_s, 0, 0.0
        self.rate = sample if self.rate is None else self._alpha * sample + (1 - self._alpha) * self.rate
        return self._resize(min(sample, self.rate))

    def _on_probe(self, records: int, busy_s: float, now_s: float) -> int | None:
        """The first batch sizes the next ones at once; it does not seed the average (it may
        have paid for warm-up), so a probe that looked slow costs one period at most."""
        self._probed = True
        self._period_start_s = now_s
        new = self.max_batch if busy_s <= 0 else self._wanted(records / busy_s)
        if new == self.batch_size:
            return None
        self.batch_size = new
        return new

    def _wanted(self, rate: float) -> int:
        return max(self.min_batch, min(self.max_batch, round(rate * self.settings.step_budget_s)))

    def _resize(self, rate: float) -> int | None:
        new = self._wanted(rate)
        if new == self.batch_size:
            return None
        if abs(1 - self.batch_size / new) * 100 < self.settings.threshold_percentages:
            return None
        self.batch_size = new
        return new

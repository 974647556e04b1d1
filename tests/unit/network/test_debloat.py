"""The batch debloater: throughput samples in, batch sizes out (no Trio, no clock)."""

from __future__ import annotations

import pytest

from weir.common import Configuration
from weir.errors import UsageError
from weir.network.debloat import PROBE_BATCH, STEPS_PER_TARGET, BatchDebloater, DebloatSettings

SETTINGS = DebloatSettings(target_ms=1000, period_ms=200, samples=20, threshold_percentages=25)
BUDGET_S = 1.0 / STEPS_PER_TARGET  # what one batch may take at a 1 s target


def feed(debloater: BatchDebloater, per_record_s: float, until_s: float, now_s: float = 0.0) -> float:
    """Batches of the debloater's current size at ``per_record_s`` each, back to back."""
    while now_s < until_s:
        records = debloater.batch_size
        busy = records * per_record_s
        now_s += busy
        debloater.on_batch(records, busy, now_s)
    return now_s


def probed(per_record_s: float, max_batch: int = 4096) -> BatchDebloater:
    """A debloater past its probe batch, which took ``per_record_s`` a record."""
    debloater = BatchDebloater(SETTINGS, max_batch=max_batch)
    debloater.on_batch(PROBE_BATCH, PROBE_BATCH * per_record_s, now_s=PROBE_BATCH * per_record_s)
    return debloater


def test_the_first_batch_is_a_small_probe() -> None:
    assert BatchDebloater(SETTINGS, max_batch=4096).batch_size == PROBE_BATCH
    assert BatchDebloater(SETTINGS, max_batch=100).batch_size == 100


def test_a_slow_probe_shrinks_the_batch_to_the_step_budget_at_once() -> None:
    debloater = BatchDebloater(SETTINGS, max_batch=4096)
    # 0.2 ms a record (a user function calling a model)
    assert debloater.on_batch(PROBE_BATCH, PROBE_BATCH * 0.0002, now_s=0.05) == round(BUDGET_S / 0.0002)


def test_a_fast_probe_restores_the_configured_batch_at_once() -> None:
    debloater = BatchDebloater(SETTINGS, max_batch=4096)
    assert debloater.on_batch(PROBE_BATCH, PROBE_BATCH * 1e-6, now_s=0.001) == 4096


def test_a_probe_that_took_no_time_restores_the_configured_batch() -> None:
    """Under a MockClock processing takes no time: batches keep their size."""
    debloater = BatchDebloater(SETTINGS, max_batch=4096)
    assert debloater.on_batch(PROBE_BATCH, 0.0, now_s=0.0) == 4096


def test_a_probe_slowed_by_warm_up_costs_one_period_at_most() -> None:
    debloater = probed(per_record_s=0.0002)  # the first batch paid for a compilation
    assert debloater.batch_size < 4096
    feed(debloater, per_record_s=1e-6, until_s=0.26, now_s=0.05)
    assert debloater.batch_size == 4096


def test_no_decision_before_a_period_has_passed() -> None:
    debloater = probed(per_record_s=1e-6)
    assert debloater.on_batch(4096, 0.15, now_s=0.15) is None
    assert debloater.batch_size == 4096


def test_a_chain_that_slows_down_shrinks_the_batch_within_a_period() -> None:
    debloater = probed(per_record_s=1e-6)
    # 0.2 ms a record now: 4096 records take 0.82 s, one sample
    assert debloater.on_batch(4096, 0.8192, now_s=0.9) == round(BUDGET_S / 0.0002)
    assert debloater.batch_size * 0.0002 <= BUDGET_S


def test_a_fast_chain_keeps_its_configured_batch() -> None:
    debloater = probed(per_record_s=1e-6)
    feed(debloater, per_record_s=1e-6, until_s=5.0)  # 1 M records/s
    assert debloater.batch_size == 4096


def test_busy_time_not_wall_time_sets_the_rate() -> None:
    """A batch that waited for output (backpressure) did not take longer to process."""
    debloater = probed(per_record_s=1e-6)
    assert debloater.on_batch(4096, busy_s=0.004, now_s=1.0) is None  # 1 M/s busy, idle otherwise
    assert debloater.batch_size == 4096


def test_growth_follows_the_moving_average_gently() -> None:
    debloater = probed(per_record_s=0.0002)
    now = feed(debloater, per_record_s=0.0002, until_s=2.0)
    small = debloater.batch_size
    assert small == round(BUDGET_S / 0.0002)
    # the chain becomes 10x faster: one period later the batch has grown, but not to 10x
    now = feed(debloater, per_record_s=0.00002, until_s=now + 0.25)
    assert small < debloater.batch_size < 10 * small
    feed(debloater, per_record_s=0.00002, until_s=now + 30)
    assert debloater.batch_size == pytest.approx(10 * small, rel=0.3)


def test_changes_under_the_threshold_are_not_announced() -> None:
    debloater = probed(per_record_s=1e-5)  # 100 k records/s: 1000 a batch
    assert debloater.batch_size == 1000
    # 110 k records/s wants 1100: 10% off, under 25%
    assert debloater.on_batch(1100, 0.01, now_s=0.01) is None
    assert debloater.on_batch(21_000, 0.19, now_s=0.2) is None
    assert debloater.batch_size == 1000


def test_the_batch_never_drops_below_min_batch() -> None:
    debloater = BatchDebloater(SETTINGS, max_batch=4096, min_batch=1)
    assert debloater.on_batch(PROBE_BATCH, PROBE_BATCH * 0.5, now_s=200.0) == 1  # half a second a record


def test_settings_from_flink_keys() -> None:
    conf = Configuration()
    conf.set_string("taskmanager.network.memory.buffer-debloat.enabled", "false")
    conf.set_string("taskmanager.network.memory.buffer-debloat.target", "300 ms")
    conf.set_string("taskmanager.network.memory.buffer-debloat.period", "50 ms")
    conf.set_string("taskmanager.network.memory.buffer-debloat.samples", "5")
    conf.set_string("taskmanager.network.memory.buffer-debloat.threshold-percentages", "10")
    assert DebloatSettings.from_configuration(conf) == DebloatSettings(False, 300, 50, 5, 10)
    assert DebloatSettings.from_configuration(Configuration()) == DebloatSettings()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("taskmanager.network.memory.buffer-debloat.target", "0 ms", "must be positive"),
        ("taskmanager.network.memory.buffer-debloat.samples", "-3", "must be positive"),
        ("taskmanager.network.memory.buffer-debloat.enabled", "sometimes", "expected true or false"),
    ],
)
def test_bad_settings_name_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(UsageError, match=f"{key}: {message}"):
        conf = Configuration()
        conf.set_string(key, value)
        DebloatSettings.from_configuration(conf)


def test_bad_batch_bounds_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match="min_batch <= max_batch"):
        BatchDebloater(SETTINGS, max_batch=0)

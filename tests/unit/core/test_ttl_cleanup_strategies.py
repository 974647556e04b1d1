"""StateTtlConfig.get_cleanup_strategies: what the builder configured, with Flink's defaults."""

from __future__ import annotations

from weir.common import Duration, Time
from weir.datastream.state import StateTtlConfig

CS = StateTtlConfig.CleanupStrategies


def test_by_default_cleanup_runs_in_background_with_flinks_default_strategies() -> None:
    strategies = StateTtlConfig.new_builder(Time.seconds(1)).build().get_cleanup_strategies()
    assert strategies.is_cleanup_in_background()
    assert not strategies.in_full_snapshot()
    incremental = strategies.get_incremental_cleanup_strategy()
    assert (incremental.get_cleanup_size(), incremental.run_cleanup_for_every_record()) == (5, False)
    rocksdb = strategies.get_rocksdb_compact_filter_cleanup_strategy()
    assert rocksdb.get_query_time_after_num_entries() == 1000
    assert rocksdb.get_periodic_compaction_time() == Duration.of_days(30)


def test_the_builder_records_each_strategy() -> None:
    config = (
        StateTtlConfig.new_builder(Time.seconds(1))
        .cleanup_full_snapshot()
        .cleanup_incrementally(10, True)
        .cleanup_in_rocksdb_compact_filter(50)
        .build()
    )
    strategies = config.get_cleanup_strategies()
    assert strategies.in_full_snapshot() and config.cleanup_in_full_snapshot
    assert strategies.get_incremental_cleanup_strategy().get_cleanup_size() == 10
    assert strategies.get_incremental_cleanup_strategy().run_cleanup_for_every_record()
    assert strategies.get_rocksdb_compact_filter_cleanup_strategy().get_query_time_after_num_entries() == 50


def test_without_background_cleanup_there_are_no_default_strategies() -> None:
    strategies = (
        StateTtlConfig.new_builder(Time.seconds(1))
        .disable_cleanup_in_background()
        .build()
        .get_cleanup_strategies()
    )
    assert not strategies.is_cleanup_in_background()
    assert strategies.get_incremental_cleanup_strategy() is None
    assert strategies.get_rocksdb_compact_filter_cleanup_strategy() is None
    assert isinstance(CS.EmptyCleanupStrategy(), CS.CleanupStrategy)

"""The pytest plugin: weir_env on the shared cluster, the weir marker, every way of running a job."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.errors import JobExecutionError, UsageError
from weir.testing import TestEnvironment, assert_output, collect

pytest_plugins = ["pytester"]

CLUSTERS_SEEN: list[Any] = []


@pytest.mark.parametrize("run", range(2))
def test_every_test_gets_a_fresh_environment_on_one_shared_cluster(weir_env, weir_cluster, run: int) -> None:
    assert isinstance(weir_env, StreamExecutionEnvironment) and isinstance(weir_env, TestEnvironment)
    assert weir_env.get_transformations() == []
    before = weir_cluster.jobs_run
    out = collect(weir_env.from_collection([1, 2, 3]).map(lambda x: x * 10))
    weir_env.execute()
    assert_output(out, [10, 20, 30])
    assert weir_cluster.jobs_run == before + 1
    CLUSTERS_SEEN.append(weir_env.cluster.cluster)
    assert all(c is CLUSTERS_SEEN[0] for c in CLUSTERS_SEEN)  # the same MiniCluster in both runs


@pytest.mark.weir(parallelism=3, taskmanagers=2)
def test_the_marker_sets_parallelism_and_taskmanagers(weir_env) -> None:
    assert weir_env.get_parallelism() == 3
    assert weir_env.cluster.cluster.config.taskmanagers == 2
    numbers = weir_env.from_source(NumberSequenceSource(1, 300), WatermarkStrategy.no_watermarks(), "n")
    out = collect(numbers.rebalance().map(lambda n: n, output_type=Types.LONG()))
    weir_env.execute()
    assert sorted(out.records_by_subtask()) == [0, 1, 2]
    assert_output(out, range(1, 301))


@pytest.mark.weir(parallelism=[1, 2], taskmanagers=[1, 2])
def test_list_values_in_the_marker_run_the_test_per_combination(weir_env, request) -> None:
    p, tm = weir_env.get_parallelism(), weir_env.cluster.cluster.config.taskmanagers
    assert request.node.callspec.id == f"p{p}-tm{tm}"


@pytest.mark.weir(config={"pipeline.max-parallelism": 64, "execution.buffer-timeout.interval": "5 ms"})
def test_the_marker_passes_configuration_keys(weir_env) -> None:
    assert weir_env.get_max_parallelism() == 64
    assert weir_env.get_buffer_timeout() == 5


def test_weir_env_flushes_every_batch_unless_told_otherwise(weir_env) -> None:
    assert weir_env.get_buffer_timeout() == 0


def test_execute_and_collect_and_execute_async_use_the_shared_cluster(
    weir_env, weir_cluster, weir_clock
) -> None:
    before = weir_cluster.jobs_run
    with weir_env.from_collection(list(range(100))).map(lambda x: x + 1).execute_and_collect() as records:
        assert sorted(records) == list(range(1, 101))
    assert weir_env.from_collection([1, 2]).execute_and_collect(limit=1) in ([1], [2])
    out = collect(weir_env.from_collection([4, 5]))
    client = weir_env.execute_async("async")
    result = client.get_job_execution_result().result(60)
    assert result.get_job_status().name == "FINISHED"
    assert_output(out, [4, 5])
    assert weir_cluster.jobs_run == before + 3


async def test_async_tests_await_run(weir_env, weir_clock) -> None:
    out = collect(weir_env.from_collection([1, 2, 3]))
    with pytest.raises(UsageError, match=r"await weir_env\.run"):
        weir_env.execute()
    result = await weir_env.run("from an async test")
    assert result.get_job_status().name == "FINISHED"
    assert_output(out, [1, 2, 3])
    await trio.sleep(0)


def explode(x: int) -> int:
    if x == 2:
        raise ValueError("two is not allowed")
    return x


def test_a_failing_job_raises_with_its_cause_and_the_cluster_goes_on(weir_env) -> None:
    weir_env.from_collection([1, 2, 3]).map(explode).add_sink(lambda _: None)
    with pytest.raises(JobExecutionError, match="two is not allowed"):
        weir_env.execute()
    out = collect(weir_env.from_collection([7]))
    weir_env.execute()
    assert out.records == [7]


@pytest.mark.weir(slots_per_taskmanager=2)
def test_a_job_larger_than_the_cluster_gets_a_clear_error(weir_env) -> None:
    weir_env.set_parallelism(3)
    weir_env.from_source(NumberSequenceSource(1, 9), WatermarkStrategy.no_watermarks(), "n").print()
    with pytest.raises(UsageError, match=r"needs 3 slots but the test cluster has 2 .*slots_per_taskmanager"):
        weir_env.execute()


def test_the_plugin_is_installed_as_an_entry_point(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_user="""
        import pytest
        from weir.testing import collect, assert_output

        @pytest.mark.weir(parallelism=[1, 2])
        def test_double(weir_env):
            out = collect(weir_env.from_collection([1, 2]).map(lambda x: 2 * x))
            weir_env.execute()
            assert_output(out, [2, 4])

        def test_wrong(weir_env):
            out = collect(weir_env.from_collection([1, 2]))
            weir_env.execute()
            assert_output(out, [1, 3])
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--strict-markers")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*missing (1):*", "*3*", "*unexpected (1):*", "*2*"])
    markers = pytester.runpytest_inprocess("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.weir(parallelism=1, taskmanagers=1*"])

"""Live statistics of tasks in TaskManager processes, read through the dashboard's REST API.

A fast source (p=1) feeds a slow sink (p=2) on 2 TaskManager processes; while the job runs,
``/jobs/<id>`` must show growing record counts, numbers that only the processes' periodic
``task_statistics`` reports can carry, and a gauge holding any object arrives as its str.
Wall clock; the test waits on the API's answers with a timeout that fails it.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from tests.integration.runtime.test_dashboard import ok
from weir.cluster.client import job_settings_for
from weir.cluster.entrypoint import json_safe
from weir.cluster.minicluster import ClusterConfig, open_minicluster
from weir.cluster.web.server import run_web_monitor
from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.functions import SinkFunction
from weir.graph.job_graph import generate_job_graph


class SlowSink(SinkFunction):
    """Sleeps a millisecond every 50 records (slower than the source, yet a buffer of records
    takes well under a second), and keeps a gauge that holds a non-JSON object."""

    def open(self, runtime_context: Any) -> None:
        self.last: object = object()
        self.seen = 0
        runtime_context.get_metrics_group().gauge("last", lambda: self.last)

    def invoke(self, value: Any, context: Any) -> None:
        self.seen += 1
        if self.seen % 50 == 0:
            time.sleep(0.001)  # the TaskManager process is busy: its source waits for buffers


async def test_a_job_on_taskmanager_processes_shows_live_counts_and_gauges() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    (
        env.from_source(
            DataGeneratorSource(lambda i: i, None, type_info=Types.LONG()),
            WatermarkStrategy.no_watermarks(),
            "fast source",
        )
        .rebalance()
        .add_sink(SlowSink())
        .name("slow sink")
        .set_parallelism(2)
    )
    job_graph = generate_job_graph(env.get_stream_graph("live statistics"))
    config = ClusterConfig(taskmanagers=2, slots_per_taskmanager=1, taskmanager_processes=True)
    with trio.fail_after(180):
        async with open_minicluster(config) as cluster, trio.open_nursery() as nursery:
            url = (await nursery.start(run_web_monitor, cluster, "127.0.0.1", 0)).rstrip("/")
            handle = cluster.submit(job_graph, job_settings_for(env))
            jid = handle.job_id
            counts: list[int] = []
            while len(counts) < 2 or counts[-1] <= counts[0]:  # two reports that differ
                job = await ok(f"{url}/jobs/{jid}")
                written = job["vertices"][0]["metrics"]["write-records"]
                if job["state"] == "RUNNING" and written > 0 and (not counts or written != counts[-1]):
                    counts.append(written)
                await trio.sleep(0.2)
            assert job["vertices"][1]["metrics"]["read-records"] > 0
            assert job["vertices"][0]["metrics"]["write-records-complete"] is False
            gauges = [s.user_metrics for s in handle.job_master.task_statistics().values() if s.user_metrics]
            lasts = [values["last"] for m in gauges for values in m.values()]
            assert lasts and all(isinstance(v, str) and "object" in v for v in lasts), gauges
            handle.cancel()
            await handle.wait()
            nursery.cancel_scope.cancel()


def test_json_safe_keeps_json_and_names_the_rest() -> None:
    class Odd:
        def __str__(self) -> str:
            raise ValueError("no")

    assert json_safe({"a": [1, 2.5, None, True], 3: ("x",)}) == {"a": [1, 2.5, None, True], "3": ["x"]}
    assert json_safe({"o": Odd()}) == {"o": "<Odd: str() failed: ValueError>"}
    assert json_safe({1, 2}) in ("{1, 2}", "{2, 1}")

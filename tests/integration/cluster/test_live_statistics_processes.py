"""Live statistics of tasks in TaskManager processes, read through the dashboard's REST API.

A fast source (p=1) feeds a slow sink (p=1) in its own slot sharing group, on 2 TaskManager
processes of one slot each: the source runs alone in one process and the sink in the other.
While the job runs, ``/jobs/<id>`` must show growing record counts, numbers that only the
processes' periodic ``task_statistics`` reports can carry, and a gauge holding any object
arrives as its str. The only thing that can slow the source is the sink's credit over the
TCP connection: its output buffers fill, it waits for one, and the time it waits must reach
the JobManager's back-pressure sampler, which calls the source vertex ``high`` and the sink
(no output to wait for) ``ok``.

Wall clock (a child process cannot follow a MockClock); the test polls the API until each
condition holds, under a timeout that fails it.
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

TIMEOUT_S = 180  # generous: a failure, never a measurement
POLL_S = 0.2  # between two reads of the API, not a wait for the condition


class SlowSink(SinkFunction):
    """Waits a millisecond every 20 records, as a sink writing to a slow external system
    (about 20,000 records/s, far below the source; a buffer of records takes well under a
    second), and keeps a gauge that holds a non-JSON object."""

    def open(self, runtime_context: Any) -> None:
        self.last: object = object()
        self.seen = 0
        runtime_context.get_metrics_group().gauge("last", lambda: self.last)

    def invoke(self, value: Any, context: Any) -> None:
        self.seen += 1
        if self.seen % 20 == 0:
            time.sleep(0.001)


async def test_a_job_on_taskmanager_processes_shows_live_counts_gauges_and_back_pressure() -> None:
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
        .slot_sharing_group("sink")
    )
    job_graph = generate_job_graph(env.get_stream_graph("live statistics"))
    source_id, sink_id = (v.id for v in job_graph.vertices)
    config = ClusterConfig(taskmanagers=2, slots_per_taskmanager=1, taskmanager_processes=True)
    with trio.fail_after(TIMEOUT_S):
        async with open_minicluster(config) as cluster, trio.open_nursery() as nursery:
            url = (await nursery.start(run_web_monitor, cluster, "127.0.0.1", 0)).rstrip("/")
            handle = cluster.submit(job_graph, job_settings_for(env))
            jid = handle.job_id
            counts: list[int] = []
            read = 0
            while len(counts) < 2 or counts[-1] <= counts[0] or read == 0:  # two reports that differ
                job = await ok(f"{url}/jobs/{jid}")
                written = job["vertices"][0]["metrics"]["write-records"]
                if job["state"] == "RUNNING" and written > 0 and (not counts or written != counts[-1]):
                    counts.append(written)
                read = job["vertices"][1]["metrics"]["read-records"]  # the sink's process reports too
                await trio.sleep(POLL_S)
            assert job["vertices"][0]["metrics"]["write-records-complete"] is False

            while (pressure := await ok(f"{url}/jobs/{jid}/vertices/{source_id}/backpressure"))[
                "backpressure-level"
            ] != "high":
                await trio.sleep(POLL_S)
            (subtask,) = pressure["subtasks"]
            assert subtask["backpressure-level"] == "high" and subtask["ratio"] > 0.5
            # two processes: the source's wait was for credit over the TCP connection
            placed = [
                (await ok(f"{url}/jobs/{jid}/vertices/{vid}"))["subtasks"][0]["taskmanager-id"]
                for vid in (source_id, sink_id)
            ]
            assert len(set(placed)) == 2, placed
            # the dashboard's TaskManagers: each process with the port it serves partitions at
            tms = (await ok(f"{url}/taskmanagers"))["taskmanagers"]
            pids = dict(zip([te.taskmanager_id for te in cluster.task_executors], cluster.taskmanager_pids()))
            assert sorted((tm["id"], tm["dataPort"] > 0) for tm in tms) == [
                (tm_id, True) for tm_id in sorted(pids)
            ]
            assert all(
                tm["path"] == f"tcp://127.0.0.1:{tm['dataPort']} (pid {pids[tm['id']]})" for tm in tms
            ), tms
            source, sink = (await ok(f"{url}/jobs/{jid}"))["vertices"]
            assert source["metrics"]["accumulated-backpressured-time"] > 0
            assert sink["metrics"]["accumulated-backpressured-time"] == 0
            sink_pressure = await ok(f"{url}/jobs/{jid}/vertices/{sink_id}/backpressure")
            assert sink_pressure["backpressure-level"] == "ok"  # it has no output to wait for

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

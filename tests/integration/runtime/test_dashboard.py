"""The dashboard's REST API over real HTTP, on an embedded cluster running real jobs.

Each test starts a MiniCluster and the dashboard's server on an ephemeral loopback port, runs
a job, and reads the API the way a browser or curl would (urllib in a worker thread), checking
the answers against the job's own JobGraph, its records and checkpoints, and the slots.
"""

from __future__ import annotations

import functools
import gc
import json
import urllib.error
import urllib.request
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from weir.cluster.client import job_settings_for
from weir.cluster.minicluster import ClusterConfig, MiniCluster, open_minicluster
from weir.cluster.web.server import run_web_monitor
from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.builtin import CollectSink
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.functions import SinkFunction
from weir.graph.job_graph import generate_job_graph
from weir.graph.status import JobStatus


def http(
    url: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


async def get(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, Any]:
    status, response_headers, body = await trio.to_thread.run_sync(http, url, method, headers)
    assert response_headers["content-type"].startswith("application/json"), response_headers
    return status, json.loads(body)


async def ok(url: str) -> Any:
    status, body = await get(url)
    assert status == 200, body
    return body


class Dashboard:
    def __init__(self, cluster: MiniCluster, url: str) -> None:
        self.cluster = cluster
        self.url = url.rstrip("/")


@pytest.fixture
async def dashboard() -> AsyncIterator[Dashboard]:
    config = ClusterConfig(taskmanagers=2, slots_per_taskmanager=2)
    async with open_minicluster(config) as cluster, trio.open_nursery() as nursery:
        url = await nursery.start(run_web_monitor, cluster, "127.0.0.1", 0)
        yield Dashboard(cluster, url)
        nursery.cancel_scope.cancel()


def finite_job(records: int) -> tuple[StreamExecutionEnvironment, Any]:
    """numbers (p=2) -> rebalance -> double (p=3) -> key_by -> sink (p=2): three vertices."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    (
        env.from_source(NumberSequenceSource(0, records - 1), WatermarkStrategy.no_watermarks(), "numbers")
        .rebalance()
        .map(lambda n: n * 2, output_type=Types.LONG())
        .name("double")
        .set_parallelism(3)
        .key_by(lambda n: n % 7, key_type=Types.LONG())
        .add_sink(lambda v: None)
        .name("drop")
    )
    return env, generate_job_graph(env.get_stream_graph("finite"))


async def test_a_finished_job_is_described_with_flink_shapes_and_its_own_numbers(
    dashboard: Dashboard,
) -> None:
    env, job_graph = finite_job(10_000)
    handle = dashboard.cluster.submit(job_graph, job_settings_for(env))
    with trio.fail_after(120):
        result = await handle.wait()
    assert result.status is JobStatus.FINISHED
    url, jid = dashboard.url, handle.job_id

    assert await ok(f"{url}/jobs") == {"jobs": [{"id": jid, "status": "FINISHED"}]}
    (summary,) = (await ok(f"{url}/jobs/overview"))["jobs"]
    assert summary["jid"] == jid and summary["name"] == "finite" and summary["state"] == "FINISHED"
    assert summary["tasks"]["total"] == 2 + 3 + 2 == summary["tasks"]["finished"]
    assert summary["end-time"] >= summary["start-time"] > 0
    assert summary["duration"] == summary["end-time"] - summary["start-time"]

    job = await ok(f"{url}/jobs/{jid}")
    assert (job["jid"], job["name"], job["state"], job["job-type"]) == (
        jid,
        "finite",
        "FINISHED",
        "STREAMING",
    )
    expected = [(v.id, v.name, v.parallelism) for v in job_graph.vertices]
    assert [(v["id"], v["name"], v["parallelism"]) for v in job["vertices"]] == expected
    assert len(expected) == 3 and [p for _, _, p in expected] == [2, 3, 2]
    assert {v["status"] for v in job["vertices"]} == {"FINISHED"}
    source, double, sink = (v["metrics"] for v in job["vertices"])
    # Flink counts records crossing the network: a source reads none, a sink writes none
    assert (source["read-records"], source["write-records"]) == (0, 10_000)
    assert (double["read-records"], double["write-records"]) == (10_000, 10_000)
    assert (sink["read-records"], sink["write-records"]) == (10_000, 0)
    assert source["write-bytes"] == double["read-bytes"] > 0  # what was written arrived
    assert double["write-bytes"] == sink["read-bytes"] > 0
    assert all(m["read-records-complete"] and m["write-records-complete"] for m in (source, double, sink))
    nodes = {n["id"]: n for n in job["plan"]["nodes"]}
    assert nodes[job_graph.vertices[0].id]["inputs"] == []
    assert [(i["id"], i["ship_strategy"]) for i in nodes[job_graph.vertices[1].id]["inputs"]] == [
        (job_graph.vertices[0].id, "REBALANCE")
    ]
    assert [(i["id"], i["ship_strategy"]) for i in nodes[job_graph.vertices[2].id]["inputs"]] == [
        (job_graph.vertices[1].id, "HASH")
    ]

    vertex = await ok(f"{url}/jobs/{jid}/vertices/{job_graph.vertices[1].id}")
    assert (vertex["name"], vertex["parallelism"]) == ("double", 3)
    assert [s["subtask"] for s in vertex["subtasks"]] == [0, 1, 2]
    assert {s["status"] for s in vertex["subtasks"]} == {"FINISHED"}
    assert sum(s["metrics"]["read-records"] for s in vertex["subtasks"]) == 10_000
    assert {s["taskmanager-id"] for s in vertex["subtasks"]} <= {"taskmanager-0", "taskmanager-1"}

    overview = await ok(f"{url}/overview")
    assert overview["taskmanagers"] == 2 and overview["slots-total"] == 4
    assert overview["slots-available"] == 4  # the finished job gave its slots back
    assert (overview["jobs-running"], overview["jobs-finished"]) == (0, 1)


_OPENED_SINKS: weakref.WeakSet[Any] = weakref.WeakSet()


class _RememberedSink(SinkFunction):
    """A sink whose open instances the test can see go away with their operators."""

    def open(self, runtime_context: Any) -> None:
        _OPENED_SINKS.add(self)

    def invoke(self, value: Any, context: Any) -> None:
        pass


async def test_an_ended_job_keeps_its_numbers_but_lets_its_operators_go(dashboard: Dashboard) -> None:
    # the cluster keeps ended jobs for the dashboard; each of their operators held its state
    # (a window's panes), so kept tasks grew a long-lived process by a job's state per job
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_source(NumberSequenceSource(0, 999), WatermarkStrategy.no_watermarks(), "numbers").key_by(
        lambda n: n % 7, key_type=Types.LONG()
    ).add_sink(_RememberedSink()).name("remember")
    job_graph = generate_job_graph(env.get_stream_graph("remembered"))
    handle = dashboard.cluster.submit(job_graph, job_settings_for(env))
    with trio.fail_after(120):
        assert (await handle.wait()).status is JobStatus.FINISHED
    gc.collect()
    assert len(_OPENED_SINKS) == 0, "the ended job's operators are still referenced"
    sink = job_graph.vertices[-1].id
    vertex = await ok(f"{dashboard.url}/jobs/{handle.job_id}/vertices/{sink}")
    assert sum(s["metrics"]["read-records"] for s in vertex["subtasks"]) == 1_000
    assert sum(s.records_in for s in handle.job_master.statistics()) >= 1_000


def backpressured_job() -> tuple[StreamExecutionEnvironment, Any, int]:
    """A fast source (p=1) -> rebalance -> a collect sink (p=2) whose records the test reads, or
    stops reading to hold the sink, and so every buffer behind it; checkpoints every 100 ms."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.enable_checkpointing(100)
    sink = CollectSink()
    (
        env.from_source(
            DataGeneratorSource(lambda i: i, None, type_info=Types.LONG()),
            WatermarkStrategy.no_watermarks(),
            "fast source",
        )
        .rebalance()
        .sink_to(sink)
        .name("slow sink")
        .set_parallelism(2)
    )
    graph = env.get_stream_graph("backpressured")
    node = next(n for n in graph.nodes.values() if getattr(n.transformation, "sink", None) is sink)
    return env, generate_job_graph(graph), node.id


async def test_a_running_job_shows_back_pressure_checkpoints_and_slots(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    env, job_graph, sink_node = backpressured_job()
    send, receive = trio.open_memory_channel[list[Any]](0)
    settings = job_settings_for(env, {sink_node: send})
    settings.checkpoint_dir = tmp_path / "checkpoints"
    handle = dashboard.cluster.submit(job_graph, settings)
    url, jid = dashboard.url, handle.job_id
    source_id, sink_id = (v.id for v in job_graph.vertices)
    with trio.fail_after(120):
        async for _ in receive:  # records flow while the sink's reader keeps up
            driver = handle.job_master.checkpoints
            if driver is not None and len(driver.completed) >= 2:
                break
        checkpoints = await ok(f"{url}/jobs/{jid}/checkpoints")
        # now nobody reads: the sink waits, its input fills, the source waits for buffers and
        # the dashboard's sampler sees it back-pressured
        while (pressure := await ok(f"{url}/jobs/{jid}/vertices/{source_id}/backpressure"))[
            "backpressure-level"
        ] != "high":
            await trio.sleep(0.2)
    assert pressure["status"] == "ok" and pressure["end-timestamp"] > 0
    (subtask,) = pressure["subtasks"]
    assert subtask["subtask"] == 0 and subtask["backpressure-level"] == "high" and subtask["ratio"] > 0.5
    sink_pressure = await ok(f"{url}/jobs/{jid}/vertices/{sink_id}/backpressure")
    assert [s["subtask"] for s in sink_pressure["subtasks"]] == [0, 1]
    assert sink_pressure["backpressure-level"] == "ok"  # it has no output to wait for

    job = await ok(f"{url}/jobs/{jid}")
    assert job["state"] == "RUNNING" and job["end-time"] == -1
    assert [(v["name"], v["parallelism"], v["status"]) for v in job["vertices"]] == [
        ("Source: fast source", 1, "RUNNING"),
        ("Sink: slow sink", 2, "RUNNING"),
    ]
    assert job["vertices"][0]["metrics"]["write-records"] > 0
    assert job["vertices"][0]["metrics"]["write-records-complete"] is False

    # checkpoints: the API's history is the driver's, newest first
    driver = handle.job_master.checkpoints
    done = {r.checkpoint_id: r for r in driver.history.finished}
    history = checkpoints["history"]
    assert [h["id"] for h in history] == sorted((h["id"] for h in history), reverse=True)
    for entry in history:
        if entry["status"] == "COMPLETED":
            record = done[entry["id"]]
            assert entry["end_to_end_duration"] == record.duration_ms >= 0
            assert entry["checkpointed_size"] == record.checkpointed_size_bytes
            assert entry["state_size"] == record.full_size_bytes
            assert entry["alignment_duration"] == round(record.alignment_ms, 3)
            assert entry["checkpoint_type"] == "CHECKPOINT" and entry["is_savepoint"] is False
            assert entry["num_acknowledged_subtasks"] == entry["num_subtasks"] == 3
    counts = checkpoints["counts"]
    assert counts["total"] == counts["completed"] + counts["failed"] + counts["in_progress"]
    assert counts["completed"] >= 2 and checkpoints["latest"]["completed"]["status"] == "COMPLETED"
    assert (
        checkpoints["summary"]["end_to_end_duration"]["max"]
        >= checkpoints["summary"]["end_to_end_duration"]["min"]
    )

    # slots: the job holds 2 of the 4 (slot sharing: one slot per sink subtask)
    tms = (await ok(f"{url}/taskmanagers"))["taskmanagers"]
    assert [tm["id"] for tm in tms] == ["taskmanager-0", "taskmanager-1"]
    assert all(tm["slotsNumber"] == 2 for tm in tms)
    assert sum(tm["freeSlots"] for tm in tms) == 2
    held = [s for tm in tms for s in tm["slots"] if s["job"] is not None]
    assert len(held) == 2 and {s["job"] for s in held} == {jid}
    assert all(tm["timeSinceLastHeartbeat"] > 0 for tm in tms)
    overview = await ok(f"{url}/overview")
    assert (overview["slots-total"], overview["slots-available"], overview["jobs-running"]) == (4, 2, 1)

    handle.cancel()
    with trio.fail_after(60):
        await handle.wait()
    assert (await ok(f"{url}/jobs/{jid}"))["state"] == "CANCELED"


async def test_unknown_paths_are_404_and_writes_405_with_json_errors(dashboard: Dashboard) -> None:
    url = dashboard.url
    status, body = await get(f"{url}/no/such/thing")
    assert status == 404 and "/overview" in body["errors"][0]
    status, body = await get(f"{url}/jobs/0123abcd")
    assert status == 404 and "0123abcd" in body["errors"][0]
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        status, headers, raw = await trio.to_thread.run_sync(http, f"{url}/jobs", method)
        assert status == 405 and "GET" in headers["allow"]
        assert "read-only" in json.loads(raw)["errors"][0]
    status, body = await get(f"{url}/overview", headers={"Host": "attacker.example:8081"})
    assert status == 403 and "attacker.example" in body["errors"][0]


async def test_the_page_is_served_from_the_package(dashboard: Dashboard) -> None:
    status, headers, body = await trio.to_thread.run_sync(http, dashboard.url + "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b'<script src="app.js"' in body and b"http" not in body.replace(b"http://www.w3.org", b"")
    assert "script-src 'self'" in headers["content-security-policy"]
    for path, kind in (("/app.js", "text/javascript"), ("/style.css", "text/css")):
        status, headers, body = await trio.to_thread.run_sync(http, dashboard.url + path)
        assert status == 200 and headers["content-type"].startswith(kind) and len(body) > 500


def _listening(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.append(address)
    return found


async def test_it_binds_loopback_only(dashboard: Dashboard) -> None:
    assert dashboard.url.startswith("http://127.0.0.1:")
    port = int(dashboard.url.rsplit(":", 1)[1])
    assert _listening(port) == ["0100007F"]  # 127.0.0.1, and no other address


async def test_the_url_names_rest_address_when_given(dashboard: Dashboard) -> None:
    async with trio.open_nursery() as nursery:
        url = await nursery.start(
            functools.partial(run_web_monitor, dashboard.cluster, "127.0.0.1", 0, address="localhost")
        )
        assert url.startswith("http://localhost:") and url.endswith("/")
        assert (await ok(f"{url}overview"))["taskmanagers"] == 2  # and it answers there
        nursery.cancel_scope.cancel()

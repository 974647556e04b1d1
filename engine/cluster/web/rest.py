"""The dashboard's REST API: a read-only subset of Flink's monitoring API over a running cluster.

Theory of operation
-------------------
``RestApi.get(path)`` maps one request path to ``(status, JSON body)``; it holds no sockets
and no event loop, so the HTTP server (``weir.cluster.web.server``) is a thin driver around
it and tests can call it directly. It reads the cluster's own objects on every request --
the Dispatcher's job handles, each JobMaster's ExecutionGraph, checkpoint driver and task
statistics, the ResourceManager's slot inventory -- so an answer is a snapshot of that
moment, never a cache.

The shapes and field names are Flink's (``/overview``, ``/jobs``, ``/jobs/overview``,
``/jobs/<jid>``, ``/jobs/<jid>/vertices/<vid>``, ``.../backpressure``,
``/jobs/<jid>/checkpoints``, ``/taskmanagers``); fields weir has no number for are left
out rather than made up, and the few weir adds are named in docs/dashboard.md.

Back pressure is a ratio over the last sampling interval, as Flink's
``backPressuredTimeMsPerSecond``: ``BackPressureSampler`` is fed, once per interval, each
task's cumulative time spent waiting for output buffers, and answers the share of the
interval spent waiting. Levels follow Flink's thresholds: ratio <= 0.10 is ``ok``,
<= 0.5 ``low``, above ``high``.

Invariants: an unknown path is a 404 and a known one never raises for a job in any status
(a job that is still being scheduled has no ExecutionGraph yet and answers with what it has).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from weir import __version__

OK_MAX_RATIO = 0.10  # Flink's thresholds between the back-pressure levels
LOW_MAX_RATIO = 0.5
CHECKPOINT_HISTORY_SIZE = 10  # web.checkpoints.history: how many recent checkpoints /checkpoints lists

_JOB_STATES = ("INITIALIZING", "CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING", "CANCELED",
               "FINISHED", "RESTARTING", "SUSPENDED", "RECONCILING")  # fmt: skip
_EXECUTION_STATES = ("CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RUNNING", "FINISHED",
                     "CANCELING", "CANCELED", "FAILED", "RECONCILING")  # fmt: skip
_TERMINAL_EXECUTION_STATES = ("FINISHED", "CANCELING", "CANCELED", "FAILED")


class ClusterView(Protocol):
    """What the dashboard reads: the embedded MiniCluster has these, and so must a JobManager
    that mounts the server (``jobs``: job id -> handle with ``job_master``, ``start_ms``,
    ``end_ms``)."""

    jobs: Mapping[str, Any]
    resource_manager: Any
    task_executors: list[Any]


def backpressure_level(ratio: float) -> str:
    """Flink's level of a back-pressure ratio: ``ok``, ``low`` or ``high``."""
    if ratio <= OK_MAX_RATIO:
        return "ok"
    return "low" if ratio <= LOW_MAX_RATIO else "high"


@dataclass(frozen=True)
class _Sample:
    backpressured_s: float
    elapsed_s: float


class BackPressureSampler:
    """Back-pressure ratio per execution attempt over the last sampling interval. Pure.

    ``on_sample`` takes, per attempt, the cumulative seconds it spent back-pressured and
    the seconds it has existed; the ratio is the growth of the first over the growth of the
    second since the previous sample (before a second sample: since the attempt started).
    Invariant: 0 <= ratio <= 1."""

    def __init__(self) -> None:
        self._last: dict[str, _Sample] = {}
        self._ratios: dict[str, float] = {}
        self.sampled_ms: int = -1  # epoch ms of the latest sample

    def on_sample(self, now_ms: int, samples: Mapping[str, tuple[float, float]]) -> None:
        ratios: dict[str, float] = {}
        for execution_id, (backpressured_s, elapsed_s) in samples.items():
            previous = self._last.get(execution_id, _Sample(0.0, 0.0))
            d_elapsed = elapsed_s - previous.elapsed_s
            d_busy = backpressured_s - previous.backpressured_s
            ratio = d_busy / d_elapsed if d_elapsed > 0 else self._ratios.get(execution_id, 0.0)
            ratios[execution_id] = min(1.0, max(0.0, ratio))
        self._last = {e: _Sample(*s) for e, s in samples.items()}
        self._ratios = ratios
        self.sampled_ms = now_ms

    def ratio(self, execution_id: str, fallback: tuple[float, float] | None = None) -> float:
        """The attempt's latest ratio; one not sampled yet gets its ratio since it started."""
        if execution_id in self._ratios:
            return self._ratios[execution_id]
        if fallback is None or fallback[1] <= 0:
            return 0.0
        return min(1.0, max(0.0, fallback[0] / fallback[1]))


def backpressure_sample(stats: Any, now_s: float) -> tuple[float, float]:
    """(cumulative seconds waiting for output buffers, seconds alive) of one ``TaskStatistics``,
    counting a wait that is going on at ``now_s`` (Trio clock) up to now."""
    return _backpressured_s(stats, now_s), stats.busy_seconds


def _backpressured_s(stats: Any, now_s: float | None = None) -> float:
    """Seconds the task waited for output buffers (its partitions' waits, one at a time)."""
    waited = sum(p.backpressured_time_s for p in stats.partitions)
    ongoing = [p.backpressured_since for p in stats.partitions if p.backpressured_since is not None]
    if now_s is not None and ongoing:
        waited += max(0.0, now_s - min(ongoing))
    return waited


class NotFound(Exception):
    """A path that names no resource (404); the message says what would be valid."""


def _summary(values: list[float]) -> dict[str, float | int]:
    """Flink's StatsSummaryDto: min/max/avg and percentiles of the completed checkpoints."""
    if not values:
        return {"min": 0, "max": 0, "avg": 0, "p50": 0, "p90": 0, "p95": 0, "p99": 0, "p999": 0}
    ordered = sorted(values)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]  # nearest rank

    return {
        "min": ordered[0],
        "max": ordered[-1],
        "avg": int(sum(ordered) / len(ordered)),
        "p50": pct(0.5),
        "p90": pct(0.9),
        "p95": pct(0.95),
        "p99": pct(0.99),
        "p999": pct(0.999),
    }


class RestApi:
    """Answers GET requests from a ``ClusterView``. ``now_ms``: epoch milliseconds; ``now_s``:
    the Trio clock the tasks' statistics use (for a wait that is going on)."""

    def __init__(
        self,
        cluster: ClusterView,
        now_ms: Callable[[], int],
        now_s: Callable[[], float],
        sampler: BackPressureSampler | None = None,
    ) -> None:
        self.cluster = cluster
        self.now_ms = now_ms
        self.now_s = now_s
        self.sampler = sampler or BackPressureSampler()
        j, v = r"(?P<jid>[^/]+)", r"(?P<vid>[^/]+)"
        self._routes: list[tuple[re.Pattern[str], Callable[..., dict[str, Any]]]] = [
            (re.compile(p + r"/?"), h)
            for p, h in (
                (r"/overview", self.overview),
                (r"/config", self.config),
                (r"/jobs", self.jobs),
                (r"/jobs/overview", self.jobs_overview),
                (rf"/jobs/{j}", self.job),
                (rf"/jobs/{j}/vertices/{v}", self.vertex),
                (rf"/jobs/{j}/vertices/{v}/backpressure", self.backpressure),
                (rf"/jobs/{j}/checkpoints", self.checkpoints),
                (r"/taskmanagers", self.taskmanagers),
            )
        ]

    # -- routing -------------------------------------------------------------------------------
    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) of ``GET path``: 200, or 404 with Flink's ``{"errors": [...]}``."""
        for pattern, handler in self._routes:
            match = pattern.fullmatch(path)
            if match is not None:
                try:
                    return 200, handler(**match.groupdict())
                except NotFound as exc:
                    return 404, {"errors": [str(exc)]}
        return 404, {
            "errors": [
                f"no REST resource at {path!r}; weir serves /overview, /config, /jobs, /jobs/overview, "
                "/jobs/<jobid>, /jobs/<jobid>/vertices/<vertexid>[/backpressure], "
                "/jobs/<jobid>/checkpoints and /taskmanagers"
            ]
        }

    def _handle(self, jid: str) -> Any:
        handle = self.cluster.jobs.get(jid)
        if handle is None:
            known = ", ".join(self.cluster.jobs) or "none"
            raise NotFound(f"job {jid!r} not found (jobs of this cluster: {known})")
        return handle

    def _vertex(self, handle: Any, vid: str) -> Any:
        eg = handle.job_master.execution_graph
        for ejv in [] if eg is None else eg.job_vertices:
            if ejv.id == vid:
                return ejv
        known = ", ".join(f"{v.id} ({v.name})" for v in handle.job_master.job_graph.vertices)
        raise NotFound(f"job {handle.job_id} has no vertex {vid!r} (its vertices: {known})")

    # -- cluster -------------------------------------------------------------------------------
    def overview(self) -> dict[str, Any]:
        slots = self.cluster.resource_manager.slot_manager.statistics()
        states = [h.job_master.job_status.name for h in self.cluster.jobs.values()]
        return {
            "taskmanagers": len(slots.task_managers),
            "slots-total": slots.total,
            "slots-available": slots.free,
            "jobs-running": sum(s not in ("FINISHED", "CANCELED", "FAILED") for s in states),
            "jobs-finished": states.count("FINISHED"),
            "jobs-cancelled": states.count("CANCELED"),
            "jobs-failed": states.count("FAILED"),
            "weir-version": __version__,
        }

    def config(self) -> dict[str, Any]:
        return {"refresh-interval": 1000, "timezone-name": "UTC", "weir-version": __version__,
                "features": {"web-submit": False, "web-cancel": False}}  # fmt: skip

    def taskmanagers(self) -> dict[str, Any]:
        rm = self.cluster.resource_manager
        slot_manager = rm.slot_manager
        slots = slot_manager.statistics()
        heartbeats = rm.statistics().heartbeats
        now_ms, trio_ms = self.now_ms(), self.now_s() * 1000.0
        by_tm: dict[str, list[dict[str, Any]]] = {}
        for slot_id, status in slot_manager.slots().items():
            by_tm.setdefault(slot_id.tm_id, []).append(
                {"index": slot_id.index, "state": str(status.state), "job": status.job_id}
            )
        running = {te.taskmanager_id: te for te in self.cluster.task_executors}
        out = []
        for tm_id, counts in slots.task_managers.items():
            deadline = heartbeats.deadlines_ms.get(tm_id)
            last = -1 if deadline is None else int(now_ms - (trio_ms - (deadline - heartbeats.timeout_ms)))
            te = running.get(tm_id)
            path, data_port = _taskmanager_address(te)
            out.append(
                {
                    "id": tm_id,
                    "path": path,
                    "dataPort": data_port,
                    "timeSinceLastHeartbeat": last,  # Flink's name; the value is the last heartbeat's time
                    "slotsNumber": counts.total,
                    "freeSlots": counts.free,
                    "hardware": {"cpuCores": os.cpu_count() or 1},
                    "slots": sorted(by_tm.get(tm_id, []), key=lambda s: s["index"]),
                    "tasks": 0 if te is None else len(te.tasks),
                }
            )
        return {"taskmanagers": out}

    # -- jobs ----------------------------------------------------------------------------------
    def jobs(self) -> dict[str, Any]:
        return {
            "jobs": [
                {"id": jid, "status": h.job_master.job_status.name} for jid, h in self.cluster.jobs.items()
            ]
        }

    def _times(self, handle: Any) -> tuple[int, int, int]:
        end = -1 if handle.end_ms is None else handle.end_ms
        return handle.start_ms, end, (end if end >= 0 else self.now_ms()) - handle.start_ms

    def _task_counts(self, vertices: list[Any]) -> dict[str, int]:
        counts = dict.fromkeys(_EXECUTION_STATES, 0)
        for ev in vertices:
            counts[ev.current_execution.state.name] += 1
        return counts

    def jobs_overview(self) -> dict[str, Any]:
        out = []
        for jid, handle in self.cluster.jobs.items():
            master = handle.job_master
            start, end, duration = self._times(handle)
            eg = master.execution_graph
            vertices = [] if eg is None else eg.all_execution_vertices()
            tasks = {k.lower(): v for k, v in self._task_counts(vertices).items()}
            tasks["total"] = sum(v.parallelism for v in master.job_graph.vertices)
            out.append(
                {
                    "jid": jid,
                    "name": master.job_graph.job_name,
                    "state": master.job_status.name,
                    "start-time": start,
                    "end-time": end,
                    "duration": duration,
                    "last-modification": end if end >= 0 else start,
                    "tasks": tasks,
                }
            )
        return {"jobs": out}

    def job(self, jid: str) -> dict[str, Any]:
        handle = self._handle(jid)
        master = handle.job_master
        graph = master.job_graph
        start, end, duration = self._times(handle)
        eg = master.execution_graph
        stats = master.task_statistics()
        vertices = []
        status_counts = dict.fromkeys(_EXECUTION_STATES, 0)
        for jv in graph.vertices:
            ejv = None if eg is None else next(x for x in eg.job_vertices if x.id == jv.id)
            subtasks = [] if ejv is None else ejv.task_vertices
            counts = self._task_counts(subtasks)
            status = _aggregate_state(counts, jv.parallelism)
            status_counts[status] += 1
            vertices.append(
                {
                    "id": jv.id,
                    "name": jv.name,
                    "maxParallelism": jv.max_parallelism,
                    "parallelism": jv.parallelism,
                    "status": status,
                    "start-time": start,
                    "end-time": end,
                    "duration": duration,
                    "tasks": counts,
                    "metrics": self._metrics(
                        [stats.get(ev.current_execution.attempt_id) for ev in subtasks],
                        complete=bool(subtasks)
                        and all(
                            ev.current_execution.state.name in _TERMINAL_EXECUTION_STATES for ev in subtasks
                        ),
                    ),
                }
            )
        return {
            "jid": jid,
            "name": graph.job_name,
            "isStoppable": False,
            "state": master.job_status.name,
            "job-type": "BATCH" if graph.is_batch else "STREAMING",
            "start-time": start,
            "end-time": end,
            "duration": duration,
            "maxParallelism": max((v.max_parallelism for v in graph.vertices), default=-1),
            "now": self.now_ms(),
            "vertices": vertices,
            "status-counts": status_counts,
            "plan": _plan(jid, graph),
        }

    def _metrics(self, stats: list[Any], complete: bool) -> dict[str, Any]:
        present = [s for s in stats if s is not None]
        return {
            "read-bytes": sum(_bytes_in(s) for s in present),
            "read-bytes-complete": complete,
            "write-bytes": sum(_bytes_out(s) for s in present),
            "write-bytes-complete": complete,
            "read-records": sum(s.records_in for s in present),
            "read-records-complete": complete,
            "write-records": sum(s.records_out for s in present),
            "write-records-complete": complete,
            "accumulated-backpressured-time": int(1000 * sum(_backpressured_s(s) for s in present)),
        }

    def vertex(self, jid: str, vid: str) -> dict[str, Any]:
        handle = self._handle(jid)
        ejv = self._vertex(handle, vid)
        master = handle.job_master
        stats = master.task_statistics()
        start, end, duration = self._times(handle)
        subtasks = []
        for ev in ejv.task_vertices:
            execution = ev.current_execution
            s = stats.get(execution.attempt_id)
            state = execution.state.name
            subtasks.append(
                {
                    "subtask": ev.subtask_index,
                    "status": state,
                    "attempt": execution.attempt_number,
                    "endpoint": _taskmanager_id(master, ev),
                    "taskmanager-id": _taskmanager_id(master, ev),
                    "start-time": start,
                    "end-time": end,
                    "duration": duration,
                    "metrics": self._metrics([s], complete=state in _TERMINAL_EXECUTION_STATES),
                }
            )
        return {
            "id": ejv.id,
            "name": ejv.name,
            "parallelism": ejv.parallelism,
            "maxParallelism": ejv.max_parallelism,
            "now": self.now_ms(),
            "subtasks": subtasks,
        }

    def backpressure(self, jid: str, vid: str) -> dict[str, Any]:
        handle = self._handle(jid)
        ejv = self._vertex(handle, vid)
        stats = handle.job_master.task_statistics()
        now_s = self.now_s()
        subtasks = []
        for ev in ejv.task_vertices:
            execution = ev.current_execution
            s = stats.get(execution.attempt_id)
            fallback = None if s is None else backpressure_sample(s, now_s)
            ratio = self.sampler.ratio(execution.attempt_id, fallback) if s is not None else 0.0
            subtasks.append(
                {
                    "subtask": ev.subtask_index,
                    "attempt-number": execution.attempt_number,
                    "backpressure-level": backpressure_level(ratio),
                    "ratio": round(ratio, 4),
                }
            )
        worst = max((s["ratio"] for s in subtasks), default=0.0)
        return {
            "status": "ok",
            "backpressure-level": backpressure_level(worst),
            "end-timestamp": self.sampler.sampled_ms if self.sampler.sampled_ms >= 0 else self.now_ms(),
            "subtasks": subtasks,
        }

    # -- checkpoints ---------------------------------------------------------------------------
    def checkpoints(self, jid: str) -> dict[str, Any]:
        handle = self._handle(jid)
        master = handle.job_master
        driver = master.checkpoints
        if driver is None:
            raise NotFound(f"job {jid} takes no checkpoints (a BATCH job, or one still being scheduled)")
        eg = master.execution_graph
        num_subtasks = 0 if eg is None else len(eg.all_execution_vertices())
        history = driver.history
        in_progress = [_checkpoint_entry(r, num_subtasks) for r in history.records.values()]
        finished = [_checkpoint_entry(r, num_subtasks) for r in history.finished]
        completed = [e for e in finished if e["status"] == "COMPLETED"]
        failed = [e for e in finished if e["status"] == "FAILED"]
        restored = master.restarts + (1 if master.settings.savepoint_restore is not None else 0)
        newest_first = sorted(in_progress + finished, key=lambda e: e["id"], reverse=True)
        return {
            "counts": {
                "restored": restored,
                "total": len(in_progress) + len(finished),
                "in_progress": len(in_progress),
                "completed": len(completed),
                "failed": len(failed),
            },
            "summary": {
                name: _summary([e[name] for e in completed])
                for name in (
                    "checkpointed_size",
                    "state_size",
                    "end_to_end_duration",
                    "alignment_buffered",
                    "processed_data",
                    "persisted_data",
                )
            },
            "latest": {
                "completed": next((e for e in reversed(completed) if not e["is_savepoint"]), None),
                "savepoint": next((e for e in reversed(completed) if e["is_savepoint"]), None),
                "failed": failed[-1] if failed else None,
                "restored": None,
            },
            "history": newest_first[:CHECKPOINT_HISTORY_SIZE],
        }


def _checkpoint_entry(record: Any, num_subtasks: int) -> dict[str, Any]:
    """Flink's CheckpointStatistics of one record, plus weir's alignment/sync/async durations."""
    status = record.status
    kind = "SAVEPOINT" if record.kind == "savepoint" else (
        "UNALIGNED_CHECKPOINT" if record.unaligned else "CHECKPOINT"
    )  # fmt: skip
    entry: dict[str, Any] = {
        "className": {"COMPLETED": "completed", "FAILED": "failed"}.get(status, "in_progress"),
        "id": record.checkpoint_id,
        "status": status,
        "is_savepoint": record.kind == "savepoint",
        "checkpoint_type": kind,
        "trigger_timestamp": record.trigger_ms,
        "latest_ack_timestamp": -1 if record.end_ms is None else record.end_ms,
        "end_to_end_duration": -1 if record.duration_ms is None else record.duration_ms,
        "checkpointed_size": record.checkpointed_size_bytes,
        "state_size": record.full_size_bytes,
        "alignment_buffered": 0,  # aligned checkpoints block channels; nothing is buffered
        "processed_data": 0,
        "persisted_data": record.persisted_in_flight_bytes,
        "num_subtasks": num_subtasks,
        "num_acknowledged_subtasks": record.acknowledged,
        "tasks": {},
        "alignment_duration": round(record.alignment_ms, 3),
        "sync_duration": round(record.sync_ms, 3),
        "async_duration": round(record.async_ms, 3),
    }
    if record.failure is not None:
        entry["failure_message"] = record.failure
    return entry


def _aggregate_state(counts: Mapping[str, int], parallelism: int) -> str:
    """A vertex's status from its subtasks' (Flink's ExecutionJobVertex aggregate)."""
    if parallelism and counts["FINISHED"] == parallelism:
        return "FINISHED"
    for state in ("FAILED", "CANCELING", "CANCELED", "RUNNING", "INITIALIZING", "DEPLOYING", "SCHEDULED"):
        if counts[state]:
            return state
    return "RUNNING" if counts["FINISHED"] else "CREATED"


def _plan(jid: str, graph: Any) -> dict[str, Any]:
    """Flink's JSON plan: one node per JobVertex with its inputs (producer id, ship strategy)."""
    return {
        "jid": jid,
        "name": graph.job_name,
        "type": "BATCH" if graph.is_batch else "STREAMING",
        "nodes": [
            {
                "id": v.id,
                "parallelism": v.parallelism,
                "operator": "",
                "operator_strategy": "",
                "description": v.name,
                "inputs": [
                    {
                        "num": i,
                        "id": edge.producer.id,
                        "ship_strategy": str(edge.partitioner),
                        "exchange": "blocking"
                        if edge.result_partition_type.is_blocking
                        else "pipelined_bounded",
                    }
                    for i, edge in enumerate(v.inputs)
                ],
                "optimizer_properties": {},
            }
            for v in graph.vertices
        ],
    }


def _taskmanager_id(master: Any, ev: Any) -> str:
    plan = master.plan
    if plan is None:
        return "-"
    try:
        return str(master.task_executors[plan.taskmanager_of(ev)].taskmanager_id)
    except (IndexError, KeyError):
        return "-"


def _bytes_in(stats: Any) -> int:
    gate = stats.gate
    return 0 if gate is None else sum(c.bytes_received for c in gate.channels)


def _bytes_out(stats: Any) -> int:
    return sum(sp.bytes_written for p in stats.partitions for sp in p.subpartitions)


def _taskmanager_address(te: Any) -> tuple[str, int]:
    """Flink's "path" and "dataPort" of a TaskManager: for a TaskManager process, where it
    serves its partitions (the address it registered with); for one in the JobManager's
    process, "embedded" and -1 (its channels never leave the process)."""
    address = getattr(te, "data_address", None)
    if (
        isinstance(address, list | tuple) and len(address) == 2 and isinstance(address[0], str)
        and type(address[1]) is int
    ):  # fmt: skip
        pid = getattr(te, "pid", None)
        return f"tcp://{address[0]}:{address[1]}" + (
            f" (pid {pid})" if isinstance(pid, int) else ""
        ), address[1]
    return "embedded", -1

"""The standalone cluster: a JobManager process with its TaskManager processes, and its clients.

Theory of operation
-------------------
``weir cluster start`` writes a new secret to ``$WEIR_HOME/cluster/secret`` (0600 in a
0700 directory) and the cluster's Flink keys to ``config.json``, and starts
``python -m weir.cluster.entrypoint jobmanager`` in its own session. The JobManager
process runs an embedded cluster whose TaskManagers are child processes
(``weir.taskmanager.processes``, see ``minicluster``), its RPC endpoint bound to
``jobmanager.rpc.address``/``jobmanager.rpc.port``, and a ``Dispatcher`` that answers
clients on the same endpoint. Once its TaskManagers registered it writes
``jobmanager.json`` (host, port, pid); ``weir cluster start`` returns when that file
appears (or fails with the log's last lines if the process died first).

Clients (``weir run --jobmanager``, a script with ``execution.target: remote``,
``weir cancel/savepoint/stop/list``) read the secret, open an RPC connection as role
``client``, send one request and read the answer:

- ``submit_job`` + payload (job graph, JobSettings without the caller's clock or collect
  channels) -> ``submitted`` {job_id}; with ``wait`` later ``job_result`` + payload
  (JobResult, task statistics); with ``collect`` {node id} (``execute_and_collect``) first
  that collect sink's messages, each as ``records`` + payload (``weir.operators.collect``),
  and the job is cancelled when the client closes the connection before its end;
- ``list_jobs`` -> ``jobs``; ``job_status`` {job_id} -> ``status`` {status};
  ``wait_job`` {job_id} -> ``job_result``; ``cancel_job`` -> ``ok``; ``savepoint``
  {job_id, target, format, stop} -> ``savepoint_done`` {path}; ``list_taskmanagers`` ->
  ``taskmanagers`` [{id, slots, registered}]; ``wait_taskmanager`` {taskmanager_id,
  timeout_s} -> ``taskmanager_registered`` once it registered; ``shutdown`` -> ``ok``,
  then the process ends and its TaskManagers with it.

``weir cluster add-taskmanager`` (``add_taskmanager``) is Flink's ``taskmanager.sh start``:
one more TaskManager process for the running cluster, in its own session, with the
cluster's network keys, writing to the cluster's log; it returns once the JobManager
answers that it registered (``wait_taskmanager``), or says so if the process exits first.
The next job's slot plan counts it. It ends with the JobManager.

``execute_remote``, ``collect_remote`` and ``submit_remote`` are the clients of
``execute()``, ``execute_and_collect()`` and ``execute_async()`` (``RemoteJobClient``).

A request that cannot be met gets ``error`` {message}: the client raises it as one clear
line. Only holders of the secret get past the handshake, so only the user who started
the cluster (the secret file is theirs, 0600) can submit, cancel, stop or savepoint.

A TaskManager started by hand (``python -m weir.cluster.entrypoint taskmanager
--jobmanager HOST:PORT --id NAME``) reads the same secret and takes part in the next
deployment. A JobManager that dies takes its jobs with it; their retained checkpoints
resume with ``weir run -s``.

The JobManager serves the dashboard (``weir.cluster.web``) for its jobs at ``rest.port``
(``weir cluster start --rest-port``; 8081 unless set, as Flink's JobManager does; 0 takes a
free port), bound to ``rest.bind-address`` (loopback unless set); its URL is in
``jobmanager.json``. A port in use ends the JobManager, and its TaskManagers with it, as it
starts, and ``weir cluster start`` reports it. ``REST_HOOK``, when set, replaces it:
``REST_HOOK(cluster, rest_port)`` is started in the JobManager's nursery.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import trio

from weir import private_files
from weir.cluster import rpc
from weir.cluster.control import _alive
from weir.common.completable_future import CompletableFuture
from weir.common.job_client import JobClient as JobClientBase
from weir.common.job_client import JobID
from weir.errors import JobExecutionError, ProtocolViolation, UsageError, WeirError

ADDRESS_FILE = "jobmanager.json"
CONFIG_FILE = "config.json"
LOG_FILE = "jobmanager.log"
REST_HOOK: Callable[..., Any] | None = None  # (cluster, rest_port, task_status) -> awaitable


# -- the JobManager process ---------------------------------------------------------------------


class Dispatcher:
    """Answers clients' requests on the JobManager's endpoint (see the module docstring)."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.shutdown = trio.Event()

    def handlers(self) -> dict[str, Callable[[rpc.RpcConnection, rpc.Message], Any]]:
        return {
            "submit_job": self.on_submit,
            "list_jobs": self.on_list,
            "cancel_job": self.on_cancel,
            "savepoint": self.on_savepoint,
            "wait_job": self.on_wait,
            "job_status": self.on_status,
            "list_taskmanagers": self.on_taskmanagers,
            "wait_taskmanager": self.on_wait_taskmanager,
            "shutdown": self.on_shutdown,
        }

    def _handle(self, message: rpc.Message) -> Any:
        job_id = message.get("job_id", str, "a client")
        handle = self.cluster.jobs.get(job_id)
        if handle is None:
            known = ", ".join(self.cluster.jobs) or "none"
            raise UsageError(f"no job {job_id} on this cluster (jobs: {known})")
        return handle

    async def _answer(self, connection: rpc.RpcConnection, work: Callable[[], Any]) -> None:
        try:
            header, payload = await work()
        except WeirError as exc:
            header, payload = {"type": "error", "message": str(exc)}, None
        await connection.send(header, payload)

    async def on_submit(self, connection: rpc.RpcConnection, message: rpc.Message) -> None:
        from weir.cluster.client import processing_time_source

        try:
            job_graph, settings = message.load()
        except Exception as exc:
            await connection.send(
                {
                    "type": "error",
                    "message": f"the JobManager could not load the job: {type(exc).__name__}: {exc}",
                }
            )
            return
        settings.processing_time_ms = processing_time_source()
        collect = message.header.get("collect")
        if collect is not None and (not isinstance(collect, int) or isinstance(collect, bool)):
            await connection.send(
                {"type": "error", "message": f"submit_job: collect must be a node id, got {collect!r}"}
            )
            return
        records_in, records_out = trio.open_memory_channel[tuple[Any, ...]](0)
        settings.collect_channels = {} if collect is None else {collect: records_in}
        try:
            handle = self.cluster.submit(job_graph, settings)
        except WeirError as exc:
            await connection.send({"type": "error", "message": str(exc)})
            return
        await connection.send({"type": "submitted", "job_id": handle.job_id})
        if collect is not None:
            await self._stream_records(connection, handle, records_in, records_out)
        elif message.header.get("wait"):
            await self._send_result(connection, handle)

    async def _stream_records(
        self,
        connection: rpc.RpcConnection,
        handle: Any,
        records_in: trio.MemorySendChannel[tuple[Any, ...]],
        records_out: trio.MemoryReceiveChannel[tuple[Any, ...]],
    ) -> None:
        """``execute_and_collect`` on this cluster: the collect sink's messages (records,
        commits, restarts: ``weir.operators.collect``) go to the client as ``records``
        messages, then the job's ``job_result``; the client decides what to return when. The client's socket paces the
        job (a client that reads slowly fills it, and the sink waits); a client that goes away
        (its iterator closed) cancels the job, as closing Flink's collect iterator does."""

        async def close_at_the_end() -> None:
            await handle.wait()  # every sink subtask delivered its records before it finished
            await records_in.aclose()

        async def cancel_when_the_client_leaves() -> None:
            request = await connection.receive()
            handle.cancel()
            if request is not None:
                raise ProtocolViolation(f"a collecting client sent {request.type!r}; expected nothing")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(close_at_the_end)
            nursery.start_soon(cancel_when_the_client_leaves)
            try:
                async for records in records_out:
                    await connection.send({"type": "records"}, records)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                handle.cancel()
                raise
            await self._send_result(connection, handle)
            nursery.cancel_scope.cancel()

    async def on_wait(self, connection: rpc.RpcConnection, message: rpc.Message) -> None:
        try:
            handle = self._handle(message)
        except WeirError as exc:
            await connection.send({"type": "error", "message": str(exc)})
            return
        await self._send_result(connection, handle)

    async def _send_result(self, connection: rpc.RpcConnection, handle: Any) -> None:
        result = await handle.wait()
        stats = handle.job_master.statistics()
        failure = result.failure
        try:
            rpc.dumps(failure)
        except Exception:  # one that does not pickle travels as its text
            result.failure = JobExecutionError(f"{type(failure).__name__}: {failure}")
        try:
            await connection.send({"type": "job_result", "job_id": handle.job_id}, (result, stats))
        except Exception:  # statistics that do not pickle: the result alone
            await connection.send({"type": "job_result", "job_id": handle.job_id}, (result, []))

    async def on_list(self, connection: rpc.RpcConnection, message: rpc.Message) -> None:
        jobs = [
            {
                "job_id": job_id,
                "name": h.job_master.job_graph.job_name,
                "status": h.job_master.job_status.name,
            }
            for job_id, h in self.cluster.jobs.items()
        ]
        await connection.send({"type": "jobs", "jobs": jobs})

    async def on_taskmanagers(self, connection: rpc.RpcConnection, message: rpc.Message) -> None:
        registered = self.cluster.resource_manager.slot_manager.is_registered
        taskmanagers = [
            {"id": te.taskmanager_id, "slots": te.num_slots, "registered": registered(te.taskmanager_id)}
            for te in self.cluster.task_executors
        ]
        await connection.send({"type": "taskmanagers", "taskmanagers": taskmanagers})

    async def on_wait_taskmanager(self, connection: rpc.RpcConnection, message: rpc.Message) -> None:
        """Answer once TaskManager ``taskmanager_id`` registered (``weir cluster
        add-taskmanager``), waiting at most the client's ``timeout_s``; an error after it."""

        async def work() -> Any:
            tm_id = message.get("taskmanager_id", str, "a client")
            timeout_s = message.get("timeout_s", (int, float), "a client")
            endpoint, registered = (
                self.cluster.endpoint,
                self.cluster.resource_manager.slot_manager.is_registered,
            )
            with trio.move_on_after(timeout_s):
                while not registered(tm_id):
                    await endpoint.registered_changed.wait()
                return {"type": "taskmanager_registered"}, None
            raise UsageError(f"TaskManager {tm_id} did not register within {timeout_s:g} s")

        await self._answer(connection, work)

    async def on_status(self, connection: rpc.RpcConnection, message: rpc.Message) -> None:
        async def work() -> Any:
            return {"type": "status", "status": self._handle(message).job_master.job_status.name}, None

        await self._answer(connection, work)

    async def on_cancel(self, connection: rpc.RpcConnection, message: rpc.Message) -> None:
        async def work() -> Any:
            self._handle(message).cancel()
            return {"type": "ok"}, None

        await self._answer(connection, work)

    async def on_savepoint(self, connection: rpc.RpcConnection, message: rpc.Message) -> None:
        async def work() -> Any:
            handle = self._handle(message)
            target = message.header.get("target")
            fmt = message.header.get("format", "canonical")
            stop = message.header.get("stop")
            if not (target is None or isinstance(target, str)) or fmt not in ("canonical", "native"):
                raise UsageError(f"savepoint request with target {target!r}, format {fmt!r}")
            path = await handle.job_master.trigger_savepoint(target, fmt, stop)
            return {"type": "savepoint_done", "path": path}, None

        await self._answer(connection, work)

    async def on_shutdown(self, connection: rpc.RpcConnection, message: rpc.Message) -> None:
        await connection.send({"type": "ok"})
        self.shutdown.set()


def cluster_config_from_keys(keys: dict[str, Any]) -> Any:
    """The JobManager's ClusterConfig from Flink's keys (and weir's ``local.number-taskmanager``)."""
    from weir.cluster.client import busy_poll_min_load
    from weir.cluster.minicluster import ClusterConfig
    from weir.common import config_options as opts

    conf = _configuration(keys)
    return ClusterConfig(
        taskmanagers=int(conf.get_option(opts.NUMBER_OF_TASKMANAGERS)),
        slots_per_taskmanager=int(conf.get_option(opts.SLOTS_PER_TASKMANAGER) or 1),
        network_memory_bytes=int(conf.get_option(opts.NETWORK_MEMORY)),
        segment_size=int(conf.get_option(opts.SEGMENT_SIZE)),
        buffers_per_channel=int(conf.get_option(opts.BUFFERS_PER_CHANNEL)),
        floating_buffers_per_gate=int(conf.get_option(opts.FLOATING_BUFFERS_PER_GATE)),
        taskmanager_processes=True,
        taskmanagers_may_join=True,  # weir cluster add-taskmanager, or one started by hand
        replace_lost_taskmanagers=bool(conf.get_option(opts.REPLACE_LOST_TASKMANAGERS)),
        rpc_host=str(conf.get_option(opts.JOBMANAGER_RPC_ADDRESS)),
        rpc_port=int(conf.get_option(opts.JOBMANAGER_RPC_PORT)),
        working_dir=str(rpc.cluster_dir() / "work"),
        busy_poll_min_load=busy_poll_min_load(conf),
    )


def rest_port_of(keys: dict[str, Any]) -> int:
    """The port the JobManager serves the dashboard at: ``rest.port``, else Flink's 8081."""
    from weir.common import config_options as opts

    return int(_configuration(keys).get_option(opts.REST_PORT))


def _configuration(keys: dict[str, Any]) -> Any:
    from weir.common.configuration import Configuration

    conf = Configuration()
    for key, value in keys.items():
        conf.set_string(key, str(value))
    return conf


async def run_jobmanager(keys: dict[str, Any]) -> None:
    """Run the standalone JobManager until a client asks it to shut down."""
    from weir.cluster.minicluster import open_minicluster

    config = cluster_config_from_keys(keys)
    config.secret = rpc.read_cluster_secret()
    Path(config.working_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    async with open_minicluster(config) as cluster:
        dispatcher = Dispatcher(cluster)
        cluster.endpoint.handlers.update(dispatcher.handlers())
        async with trio.open_nursery() as nursery:
            address: dict[str, Any] = {
                "host": config.rpc_host,
                "port": cluster.endpoint.port,
                "pid": os.getpid(),
            }
            rest_port = rest_port_of(keys)
            if REST_HOOK is not None:
                await nursery.start(REST_HOOK, cluster, rest_port)
            else:  # the dashboard, as `weir run --web` serves it
                from weir.cluster.web.server import run_web_monitor

                bind = str(keys.get("rest.bind-address", "127.0.0.1"))
                view: Any = cluster  # a ClusterView: jobs, resource_manager, task_executors
                address["dashboard"] = await nursery.start(
                    functools.partial(run_web_monitor, view, bind, rest_port)
                )
            private_files.write_private(rpc.cluster_dir() / ADDRESS_FILE, json.dumps(address).encode())
            await dispatcher.shutdown.wait()
            nursery.cancel_scope.cancel()


def run_jobmanager_process(config_path: str | None) -> int:
    """``python -m weir.cluster.entrypoint jobmanager``: the cluster's keys from ``config_path``."""
    path = Path(config_path) if config_path else rpc.cluster_dir() / CONFIG_FILE
    keys = json.loads(private_files.read_private(path, max_bytes=1 << 20))
    try:
        trio.run(run_jobmanager, keys)
    except BaseExceptionGroup as group:  # e.g. the dashboard's port in use: one line, not a trace
        from weir.cluster.task_executor import first_cause

        raise first_cause(group) from None
    finally:
        (rpc.cluster_dir() / ADDRESS_FILE).unlink(missing_ok=True)
    return 0


# -- starting and stopping (weir cluster start / stop) -------------------------------------------


def read_address() -> dict[str, Any] | None:
    """The running cluster's address file, or None when there is none."""
    path = rpc.cluster_dir() / ADDRESS_FILE
    if not os.path.lexists(path.parent):
        return None
    try:
        private_files.check_private_dir(path.parent)
        data = json.loads(private_files.read_private(path, max_bytes=4096))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise UsageError(f"the cluster's address file {path} is unreadable: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("port"), int):
        raise UsageError(f"the cluster's address file {path} holds {data!r}")
    return data


def start_cluster(keys: dict[str, Any], timeout_s: float = 180.0) -> dict[str, Any]:
    """Start a JobManager process (and its TaskManagers) in the background; returns its address
    once the TaskManagers registered. Refuses when a cluster of this user already runs."""
    existing = read_address()
    if existing is not None and _alive(int(existing.get("pid", -1))):
        raise UsageError(
            f"a cluster already runs (JobManager pid {existing['pid']} at {existing['host']}:{existing['port']}); "
            "stop it first with `weir cluster stop`"
        )
    cluster_config_from_keys(keys)  # bad keys are reported here, not in the background
    rest_port_of(keys)
    rpc.create_cluster_secret()
    directory = rpc.cluster_dir()
    (directory / ADDRESS_FILE).unlink(missing_ok=True)
    private_files.write_private(directory / CONFIG_FILE, json.dumps(keys).encode())
    log_path = directory / LOG_FILE
    command = [
        sys.executable,
        "-m",
        "weir.cluster.entrypoint",
        "jobmanager",
        "--config",
        str(directory / CONFIG_FILE),
    ]
    process = _spawn(command, log_path, append=False)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        address = read_address()
        if address is not None and address.get("pid") == process.pid:
            return address
        if process.poll() is not None:
            raise UsageError(
                f"the JobManager exited with status {process.returncode} while starting; "
                f"last lines of {log_path}:\n{_last_lines(log_path)}"
            )
        time.sleep(0.05)  # waits for the address file: the event is another process's write
    process.kill()
    raise UsageError(f"the cluster did not come up within {timeout_s:.0f} s; see {log_path}")


def stop_cluster(timeout_s: float = 60.0) -> dict[str, Any] | None:
    """Ask the running cluster to shut down and wait for its JobManager to exit."""
    address = read_address()
    if address is None:
        return None
    pid = int(address.get("pid", -1))
    if _alive(pid):
        try:
            request({"type": "shutdown"}, address=(address["host"], address["port"]))
        except (OSError, WeirError):
            os.kill(pid, 15)
        deadline = time.monotonic() + timeout_s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # waits for the process's exit
    (rpc.cluster_dir() / ADDRESS_FILE).unlink(missing_ok=True)
    return address


def add_taskmanager(slots: int | None = None, timeout_s: float = 180.0) -> dict[str, Any]:
    """Start one more TaskManager process for the running cluster (Flink's ``taskmanager.sh
    start``) with ``slots`` slots (default: the cluster's ``taskmanager.numberOfTaskSlots``);
    returns {id, pid, slots} once the JobManager answers that it registered."""
    from weir.cluster.minicluster import taskmanager_command

    address = read_address()
    if address is None or not _alive(int(address.get("pid", -1))):
        raise UsageError("no standalone cluster is running; start one with `weir cluster start`")
    directory = rpc.cluster_dir()
    keys = json.loads(private_files.read_private(directory / CONFIG_FILE, max_bytes=1 << 20))
    config = cluster_config_from_keys(keys)
    slots = config.slots_per_taskmanager if slots is None else slots
    if slots < 1:
        raise UsageError(f"a TaskManager needs at least one slot, got --slots {slots}")
    where = (str(address["host"]), int(address["port"]))
    known = {tm["id"] for tm in _taskmanagers(where)}
    taskmanager_id = next(f"taskmanager-{i}" for i in itertools.count() if f"taskmanager-{i}" not in known)
    log_path = directory / LOG_FILE
    process = _spawn(taskmanager_command(config, where[1], taskmanager_id, slots), log_path, append=True)
    outcome = trio.run(_registered_or_exited, process, where, taskmanager_id, timeout_s)
    if outcome == "exited":
        raise UsageError(
            f"TaskManager {taskmanager_id} exited with status {process.returncode} before registering; "
            f"last lines of {log_path}:\n{_last_lines(log_path)}"
        )
    if outcome == "timeout":
        process.kill()
        raise UsageError(
            f"TaskManager {taskmanager_id} did not register within {timeout_s:.0f} s; see {log_path}"
        )
    return {"id": taskmanager_id, "pid": process.pid, "slots": slots}


async def _registered_or_exited(
    process: subprocess.Popen[bytes], address: tuple[str, int], taskmanager_id: str, timeout_s: float
) -> str:
    """ "registered" when the JobManager answers that ``taskmanager_id`` registered (its
    ``wait_taskmanager`` request waits for that), "exited" when the process ends first,
    "timeout" after ``timeout_s``."""
    outcome = ["timeout"]
    failed: list[WeirError] = []
    with trio.move_on_after(timeout_s):
        async with trio.open_nursery() as nursery:

            async def registered() -> None:
                request = {
                    "type": "wait_taskmanager",
                    "taskmanager_id": taskmanager_id,
                    "timeout_s": timeout_s,
                }
                try:
                    await _exchange(request, None, address, replies=1)
                    outcome[0] = "registered"
                except OSError as exc:
                    failed.append(_unreachable(address, exc))
                except WeirError as exc:  # the JobManager's answer was an error
                    failed.append(exc)
                nursery.cancel_scope.cancel()

            async def exited() -> None:
                await trio.to_thread.run_sync(process.wait, abandon_on_cancel=True)
                outcome[0] = "exited"
                nursery.cancel_scope.cancel()

            nursery.start_soon(registered)
            nursery.start_soon(exited)
    if failed:
        raise failed[0]
    return outcome[0]


def _spawn(command: list[str], log_path: Path, append: bool) -> subprocess.Popen[bytes]:
    """``command`` in a session of its own (it outlives the command that started it), its
    output into ``log_path`` (0600, never through a symlink), importing as this process does."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    mode = os.O_APPEND if append else os.O_TRUNC
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | mode, 0o600)
    with os.fdopen(fd, "wb") as log:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, env=env
        )


def _last_lines(log_path: Path, count: int = 5) -> str:
    return "\n".join(log_path.read_text(errors="replace").strip().splitlines()[-count:])


def _taskmanagers(address: tuple[str, int]) -> list[dict[str, Any]]:
    (reply,) = request({"type": "list_taskmanagers"}, address=address)
    taskmanagers = reply.header.get("taskmanagers")
    if not isinstance(taskmanagers, list) or not all(
        isinstance(tm, dict) and isinstance(tm.get("id"), str) for tm in taskmanagers
    ):
        raise ProtocolViolation(f"the JobManager listed TaskManagers as {taskmanagers!r}")
    return taskmanagers


# -- clients ------------------------------------------------------------------------------------------


def parse_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"JobManager address {text!r} is not HOST:PORT (e.g. 127.0.0.1:6123)")
    return host, int(port)


def default_address() -> tuple[str, int]:
    address = read_address()
    if address is None:
        raise UsageError(
            f"no standalone cluster is running (no {rpc.cluster_dir() / ADDRESS_FILE}); "
            "start one with `weir cluster start` or name one with --jobmanager HOST:PORT"
        )
    return str(address["host"]), int(address["port"])


async def _exchange(
    header: dict[str, Any], payload: Any, address: tuple[str, int], replies: int
) -> list[rpc.Message]:
    connection = await rpc.connect(address[0], address[1], rpc.read_cluster_secret(), "client")
    out: list[rpc.Message] = []
    try:
        await connection.send(header, payload)
        for _ in range(replies):
            reply = await connection.receive()
            if reply is None:
                raise JobExecutionError(
                    f"the JobManager at {address[0]}:{address[1]} closed the connection before answering "
                    f"{header['type']!r} (it died, or refused the request)"
                )
            if reply.type == "error":
                raise UsageError(str(reply.header.get("message")))
            out.append(reply)
    finally:
        await connection.aclose()
    return out


def request(
    header: dict[str, Any], payload: Any = None, address: tuple[str, int] | None = None, replies: int = 1
) -> list[rpc.Message]:
    """Send one request to the cluster and return its answers (synchronous)."""
    address = address or default_address()
    try:
        return trio.run(_exchange, header, payload, address, replies)
    except OSError as exc:
        raise UsageError(f"cannot reach the JobManager at {address[0]}:{address[1]}: {exc}") from None


def _register_job_modules() -> None:
    """Modules loaded from the job file's directory travel by value (the cluster cannot import them)."""
    import cloudpickle

    if not sys.argv or not sys.argv[0].endswith(".py"):
        return
    directory = Path(sys.argv[0]).resolve().parent
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and module.__name__ != "__main__" and Path(file).resolve().parent == directory:
            cloudpickle.register_pickle_by_value(module)


def _remote_address(settings: Any) -> tuple[str, int]:
    from weir.common import config_options as opts

    conf = settings.configuration
    return str(conf.get_option(opts.JOBMANAGER_RPC_ADDRESS)), int(conf.get_option(opts.JOBMANAGER_RPC_PORT))


def _job_graph(graph: Any) -> Any:
    """The job graph as the JobManager gets it: the job file's own modules travel by value."""
    from weir.graph.job_graph import generate_job_graph

    job_graph = generate_job_graph(graph)
    _register_job_modules()
    return job_graph


async def _job_settings(settings: Any) -> Any:
    """The job's settings as the JobManager gets them: without the caller's processing-time
    clock (they read Trio's clock, so they are made in Trio; the JobManager uses its own)."""
    import dataclasses

    from weir.cluster.client import job_settings_for

    return dataclasses.replace(job_settings_for(settings), processing_time_ms=_no_clock)


def _unreachable(address: tuple[str, int], exc: OSError) -> UsageError:
    return UsageError(f"cannot reach the JobManager at {address[0]}:{address[1]}: {exc}")


def execute_remote(settings: Any, graph: Any) -> Any:
    """``env.execute()`` with ``execution.target: remote``: submit to the JobManager at
    jobmanager.rpc.address/port and wait for the job's end."""
    from weir.cluster.client import JobExecutionResult
    from weir.cluster.job_master import raise_for_result

    address = _remote_address(settings)
    job_graph = _job_graph(graph)

    async def submit() -> list[rpc.Message]:
        header = {"type": "submit_job", "wait": True}
        return await _exchange(header, (job_graph, await _job_settings(settings)), address, 2)

    try:
        _submitted, finished = trio.run(submit)
    except OSError as exc:
        raise _unreachable(address, exc) from None
    result, stats = finished.load()
    raise_for_result(result)
    return JobExecutionResult(result, stats)


def collect_remote(settings: Any, graph: Any, sink_node_id: int) -> Any:
    """``execute_and_collect()`` with ``execution.target: remote``: the job runs on the
    cluster and its collect sink's records stream back over this client's connection
    (``Dispatcher._stream_records``). Closing the iterator closes the connection, and the
    JobManager cancels the job."""
    from weir.cluster.client import CloseableIterator, collect_guarantee
    from weir.cluster.job_master import raise_for_result
    from weir.operators.collect import CollectResults, check_message

    address = _remote_address(settings)
    job_graph = _job_graph(graph)
    results = CollectResults(collect_guarantee(settings))

    async def produce(deliver: Callable[[list[Any]], Any]) -> None:
        job_settings = await _job_settings(settings)
        try:
            connection = await rpc.connect(address[0], address[1], rpc.read_cluster_secret(), "client")
        except OSError as exc:
            raise _unreachable(address, exc) from None
        try:
            header = {"type": "submit_job", "collect": sink_node_id}
            await connection.send(header, (job_graph, job_settings))
            while (reply := await connection.receive()) is not None:
                if reply.type == "error":
                    raise UsageError(str(reply.header.get("message")))
                if reply.type == "records":
                    if records := results.take(check_message(reply.load(), "the JobManager")):
                        await deliver(records)
                elif reply.type == "job_result":
                    result, _stats = reply.load()
                    raise_for_result(result)
                    return
                elif reply.type != "submitted":
                    raise ProtocolViolation(f"the JobManager sent {reply.type!r} to a collecting client")
            raise JobExecutionError(
                f"the JobManager at {address[0]}:{address[1]} closed the connection before the job ended"
            )
        finally:
            await connection.aclose()

    return CloseableIterator(produce)


def submit_remote(settings: Any, graph: Any) -> RemoteJobClient:
    """``execute_async()`` with ``execution.target: remote``: submit the job and return at once
    with a client for it; the job runs on the cluster whatever the caller does next."""
    address = _remote_address(settings)
    job_graph = _job_graph(graph)

    async def submit() -> list[rpc.Message]:
        return await _exchange({"type": "submit_job"}, (job_graph, await _job_settings(settings)), address, 1)

    try:
        (submitted,) = trio.run(submit)
    except OSError as exc:
        raise _unreachable(address, exc) from None
    return RemoteJobClient(submitted.get("job_id", str, "the JobManager"), address)


class RemoteJobClient(JobClientBase):
    """A job on the standalone cluster (PyFlink's JobClient of a remote environment): every
    call is one request to the JobManager."""

    def __init__(self, job_id: str, address: tuple[str, int]) -> None:
        self._job_id = job_id
        self._address = address

    def _request(self, header: dict[str, Any], replies: int = 1) -> list[rpc.Message]:
        return request({**header, "job_id": self._job_id}, address=self._address, replies=replies)

    def get_job_id(self) -> JobID:
        return JobID(self._job_id)

    def get_job_status(self) -> CompletableFuture:
        """The job's status now, asked of the JobManager (a future done at once)."""
        from weir.graph.status import JobStatus

        (reply,) = self._request({"type": "job_status"})
        return CompletableFuture.completed(JobStatus[reply.get("status", str, "the JobManager")])

    def cancel(self) -> None:
        self._request({"type": "cancel_job"})

    def _savepoint(self, directory: str | None, format_type: Any, stop: str | None) -> Future:
        from weir.cluster.client import _savepoint_format

        future: Future = Future()
        header = {"type": "savepoint", "target": directory, "format": _savepoint_format(format_type),
                  "stop": stop}  # fmt: skip
        try:
            (reply,) = self._request(header)
        except WeirError as exc:
            future.set_exception(exc)
        else:
            future.set_result(reply.get("path", str, "the JobManager"))
        return future

    def trigger_savepoint(
        self, savepoint_directory: str | None = None, format_type: Any = "canonical"
    ) -> Future:
        """Take a savepoint while the job goes on; ``.result()`` is its directory."""
        return self._savepoint(savepoint_directory, format_type, None)

    def stop_with_savepoint(
        self,
        advance_to_end_of_event_time: bool = False,
        savepoint_directory: str | None = None,
        format_type: Any = "canonical",
    ) -> Future:
        """Take a savepoint and end the job; with ``advance_to_end_of_event_time`` event time ends first."""
        stop = "drain" if advance_to_end_of_event_time else "no_drain"
        return self._savepoint(savepoint_directory, format_type, stop)

    def get_job_execution_result(self) -> CompletableFuture:
        """A future of the job's JobExecutionResult: ``.result(timeout_s)`` waits for the job's end
        (asked of the JobManager from a thread of its own) and raises its failure."""
        from weir.cluster.client import JobExecutionResult
        from weir.cluster.job_master import raise_for_result

        def wait() -> Any:
            from weir.graph.status import JobStatus

            (finished,) = self._request({"type": "wait_job"})
            result, stats = finished.load()
            raise_for_result(result)
            if result.status is JobStatus.CANCELED:  # as the JobClient of a job in this process
                raise JobExecutionError(f"job '{result.job_name}' ({result.job_id}) was cancelled")
            return JobExecutionResult(result, stats)

        future: Future = Future()

        def run() -> None:
            try:
                future.set_result(wait())
            except BaseException as exc:
                future.set_exception(exc)

        threading.Thread(target=run, daemon=True, name="weir-remote-result").start()
        return CompletableFuture(future)


def _no_clock() -> int:
    raise JobExecutionError("the JobManager replaces the submitter's processing-time clock with its own")


class RemoteExecutor:
    """``execution.target: remote``: jobs go to a standalone cluster (jobmanager.rpc.address/port)."""

    def execute(self, graph: Any, settings: Any) -> Any:
        from weir.cluster import client

        return client.execute_stream_graph(settings, graph)  # looked up now: `weir run` records it

    def execute_async(self, graph: Any, settings: Any) -> Any:
        from weir.cluster import client

        return client.submit_stream_graph(settings, graph)

    def execute_and_collect(self, graph: Any, settings: Any, sink_node_id: int, limit: int | None) -> Any:
        from weir.cluster import client

        return client.execute_and_collect(settings, graph, sink_node_id, limit)

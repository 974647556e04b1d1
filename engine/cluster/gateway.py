"""The JobManager's side of TaskManager processes: gateways with TaskExecutor's interface, and the
RPC endpoint TaskManagers register with.

Theory of operation
-------------------
A JobMaster deploys through whatever sits in its list of TaskExecutors: in the embedded
cluster an in-process ``TaskExecutor``; with TaskManagers as processes a
``RemoteTaskExecutor`` here, with the same interface (``submit_task``, ``tasks``,
``network.release_partition``, ``statistics``, ``num_slots``, ``taskmanager_id``).

``submit_task`` keeps the deployment (with its callbacks into the JobMaster) and sends a
copy without them: ``ship_deployment`` drops what cannot cross a process (callbacks, the
processing-time clock, collect channels: their node ids travel) and pickles the rest,
user functions included, as a signed payload; a failure injector travels as a copy
(``FailureInjector.for_deployment``) whose failures come back as ``injected_failure``
messages, recorded on the kept one. The TaskManager process rebuilds the callbacks as RPC
messages (``entrypoint``); each message that comes back (``task_event``,
``checkpoint_ack``, ``checkpoint_metrics``, ``checkpoint_decline``, ``recovery_note``)
is handed to the kept deployment's callback or the task's ``report``, so the JobMaster
cannot tell a remote task from a local one; ``collect`` (a collect sink's records) goes
to the kept deployment's collect channel, and ``collect_ack`` goes back once it was
taken; ``task_statistics`` (every second from a running task) becomes what the task's
``statistics()`` returns. Checkpoint triggers, notifications, cancellation and partition
releases go out as messages.

A gateway outlives its connections: messages are queued in its outbox, and whichever
connection is attached sends them. When the connection ends (the process died, or its
heartbeats stopped and the ResourceManager declared it dead) the gateway unregisters the
TaskManager from the ResourceManager — so every JobMaster using it fails over at once —
and reports every task it still ran as failed. A TaskManager that registers again under
the same id (the embedded cluster restarts a dead child) gets the same gateway and the
queued messages; unknown execution ids in them are ignored on its side.

``JobManagerEndpoint.serve`` accepts TaskManager connections: the handshake over the
cluster's secret, then ``register`` (id, slots, pid), then messages until the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from weir.cluster.rpc import Message, RpcConnection, dumps
from weir.errors import JobExecutionError, ProtocolViolation, UsageError, WeirError
from weir.operators.collect import check_message
from weir.task.task import TaskDeployment

Report = Callable[[str, str, BaseException | None], None]

#: the callbacks and process-local objects a deployment loses on its way to another process
_LOCAL_FIELDS: dict[str, Any] = {
    "processing_time_ms": None,
    "on_checkpoint_ack": None,
    "on_checkpoint_metrics": None,
    "on_checkpoint_decline": None,
    "on_recovery_note": None,
}


class TaskManagerLost(JobExecutionError):
    """A TaskManager process went away while running a task."""


def ship_deployment(deployment: TaskDeployment) -> bytes:
    """The deployment as a payload another process can load (see the module docstring). Its
    collect channels travel as their node ids: the TaskManager process sends those nodes'
    records back as ``collect`` messages (``entrypoint.RemoteCollectChannel``)."""
    injector = deployment.failure_injector
    if injector is not None:
        injector = injector.for_deployment(deployment.attempt_number)
    collect = dict.fromkeys(deployment.collect_channels)
    return dumps(
        dataclasses.replace(deployment, **_LOCAL_FIELDS, failure_injector=injector, collect_channels=collect)
    )


def pack_exception(exc: BaseException | None) -> bytes:
    """An exception as a payload; one that does not pickle becomes a JobExecutionError with its text."""
    if exc is None:
        return b""
    try:
        blob = dumps(exc)
        pickle.loads(blob)  # an exception whose __init__ needs other arguments does not load
        return blob
    except Exception:
        return dumps(JobExecutionError(f"{type(exc).__name__}: {exc}"))


class RemoteTask:
    """What a JobMaster calls on a running task, sent to its TaskManager process."""

    def __init__(self, gateway: RemoteTaskExecutor, execution_id: str) -> None:
        self.gateway = gateway
        self.execution_id = execution_id
        self.keyed_backends: list[Any] = []
        self.last_statistics: Any = None

    def trigger_checkpoint(self, barrier: Any, stop: str | None = None) -> None:
        self.gateway.send(
            {
                "type": "trigger_checkpoint",
                "execution_id": self.execution_id,
                "checkpoint_id": barrier.checkpoint_id,
                "timestamp": barrier.timestamp,
                "is_savepoint": barrier.is_savepoint,
                "unaligned": barrier.unaligned,
                "native": barrier.native,
                "stop": stop,
            }
        )

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.gateway.send(
            {"type": "notify_checkpoint", "execution_id": self.execution_id,
             "checkpoint_id": checkpoint_id, "aborted": False}
        )  # fmt: skip

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.gateway.send(
            {"type": "notify_checkpoint", "execution_id": self.execution_id,
             "checkpoint_id": checkpoint_id, "aborted": True}
        )  # fmt: skip

    def statistics(self) -> Any:
        return self.last_statistics


@dataclass
class RemoteTaskHandle:
    deployment: TaskDeployment
    report: Report
    gateway: RemoteTaskExecutor
    task: RemoteTask | None = None
    done: trio.Event = field(default_factory=trio.Event)

    def cancel(self) -> None:
        self.gateway.send({"type": "cancel", "execution_id": self.deployment.execution_id})


class _RemoteNetwork:
    def __init__(self, gateway: RemoteTaskExecutor) -> None:
        self.gateway = gateway

    def release_partition(self, partition_id: str) -> None:
        self.gateway.send({"type": "release_partition", "partition_id": partition_id})


class RemoteTaskExecutor:
    """A TaskManager process, seen from the JobManager; see the module docstring."""

    def __init__(self, taskmanager_id: str, num_slots: int) -> None:
        self.taskmanager_id = taskmanager_id
        self.num_slots = num_slots
        self.network = _RemoteNetwork(self)
        self.tasks: dict[str, RemoteTaskHandle] = {}
        self.heartbeats_enabled = True
        self.connection: RpcConnection | None = None
        self.pid: int | None = None
        self.data_address: Any = None  # where its NetworkEnvironment serves partitions (TCP transport)
        self.registered = trio.Event()
        self._outbox_send, self._outbox = trio.open_memory_channel[bytes](math.inf)
        self._codec: Any = None
        self.nursery: trio.Nursery | None = None  # the attached connection's: collect forwarding

    # -- sending ---------------------------------------------------------------------------------
    def send(self, header: dict[str, Any], blob: bytes = b"") -> None:
        """Queue a message for the TaskManager (sent when a connection is attached)."""
        if self._codec is None:
            return  # never connected: nothing of ours runs there
        self._outbox_send.send_nowait(self._codec.encode(header, blob))

    async def run_outbox(self, connection: RpcConnection) -> None:
        """Move queued messages to ``connection``'s sender. Cancellation: stops."""
        async for frame in self._outbox:
            connection.send_frame_nowait(frame)

    # -- TaskExecutor's interface ----------------------------------------------------------------
    def submit_task(self, deployment: TaskDeployment, report: Report) -> RemoteTaskHandle:
        if self.connection is None and self._codec is None:
            raise WeirError(f"TaskManager {self.taskmanager_id} has not registered")
        payload = ship_deployment(deployment)
        handle = RemoteTaskHandle(deployment, report, self)
        self.tasks[deployment.execution_id] = handle
        self.send({"type": "submit", "execution_id": deployment.execution_id}, payload)
        return handle

    def crash(self) -> list[Path]:
        """Failure injection: the TaskManager process cancels every task and deletes its local state."""
        self.send({"type": "crash"})
        return []

    def statistics(self) -> dict[str, Any]:
        return {
            "taskmanager": self.taskmanager_id,
            "slots": self.num_slots,
            "pid": self.pid,
            "connected": self.connection is not None,
            "tasks": [
                h.task.last_statistics
                for h in self.tasks.values()
                if h.task is not None and h.task.last_statistics is not None
            ],
        }

    # -- receiving -------------------------------------------------------------------------------
    def attach(self, connection: RpcConnection, pid: int | None, data_address: Any) -> None:
        self.connection = connection
        self._codec = connection.codec
        self.pid = pid
        self.data_address = data_address
        self.registered.set()

    def detach(self, reason: str) -> None:
        """The connection ended: every task still here failed with ``reason``."""
        self.connection = None
        self.registered = trio.Event()
        lost = TaskManagerLost(f"TaskManager {self.taskmanager_id} (pid {self.pid}) was lost: {reason}")
        for execution_id, handle in list(self.tasks.items()):
            self._report(handle, "fail", lost)
            self.tasks.pop(execution_id, None)
            handle.done.set()

    def _report(self, handle: RemoteTaskHandle, event: str, exc: BaseException | None) -> None:
        with contextlib.suppress(KeyError):  # an attempt its JobMaster already dropped (restarted)
            handle.report(handle.deployment.execution_id, event, exc)

    def on_message(self, message: Message) -> None:
        kind = message.type
        execution_id = message.get("execution_id", str, f"TaskManager {self.taskmanager_id}")
        handle = self.tasks.get(execution_id)
        if handle is None:
            return  # an attempt that ended meanwhile
        d = handle.deployment
        if kind == "task_event":
            event = message.get("event", str)
            if event not in ("initialize", "run", "finish", "fail", "canceled"):
                raise ProtocolViolation(f"TaskManager {self.taskmanager_id} sent task event {event!r}")
            if event == "initialize" and handle.task is None:
                handle.task = RemoteTask(self, execution_id)
            exc = None
            if event == "fail":
                try:
                    exc = message.load()
                except Exception as load_error:  # e.g. an exception class whose __init__ wants more
                    exc = JobExecutionError(
                        f"a task of TaskManager {self.taskmanager_id} failed with an exception that "
                        f"does not load here ({type(load_error).__name__}: {load_error})"
                    )
            elif message.blob and handle.task is not None:
                handle.task.last_statistics = message.load()
            if event in ("finish", "fail", "canceled"):
                self.tasks.pop(execution_id, None)
                handle.done.set()
            self._report(handle, event, exc)
        elif kind == "checkpoint_ack" and d.on_checkpoint_ack is not None:
            d.on_checkpoint_ack(
                execution_id, message.get("checkpoint_id", int), message.load(), message.get("size", int)
            )
        elif kind == "checkpoint_metrics" and d.on_checkpoint_metrics is not None:
            d.on_checkpoint_metrics(execution_id, message.get("checkpoint_id", int), message.load())
        elif kind == "checkpoint_decline" and d.on_checkpoint_decline is not None:
            d.on_checkpoint_decline(
                execution_id, message.get("checkpoint_id", int), message.get("reason", str),
                message.get("counts", bool),
            )  # fmt: skip
        elif kind == "collect":
            self._collect(d, execution_id, message)
        elif kind == "task_statistics":
            if handle.task is not None:
                handle.task.last_statistics = message.load()
        elif kind == "recovery_note" and d.on_recovery_note is not None:
            d.on_recovery_note(message.get("line", str))
        elif kind == "injected_failure":
            if d.failure_injector is None:
                raise ProtocolViolation(
                    f"TaskManager {self.taskmanager_id} reported an injected failure for {execution_id}, "
                    "whose job injects none"
                )
            try:
                d.failure_injector.record_remote(
                    message.get("fault", int), message.get("attempt", int), message.get("what", str)
                )
            except UsageError as exc:
                raise ProtocolViolation(f"TaskManager {self.taskmanager_id}: {exc}") from None
        elif kind not in ("checkpoint_ack", "checkpoint_metrics", "checkpoint_decline", "recovery_note"):
            raise ProtocolViolation(f"TaskManager {self.taskmanager_id} sent unknown message {kind!r}")

    def _collect(self, deployment: TaskDeployment, execution_id: str, message: Message) -> None:
        """A collect sink's message (``weir.operators.collect``): handed to the job's collect channel by a
        task of their own (a client that reads slowly holds back no other message of this
        TaskManager), then acknowledged; the sink sends its next batch after the ack."""
        node = message.get("node", int, f"TaskManager {self.taskmanager_id}")
        channel = deployment.collect_channels.get(node)
        if channel is None:
            raise ProtocolViolation(
                f"TaskManager {self.taskmanager_id} sent records of node {node} for {execution_id}, "
                f"which collects none (collect nodes: {sorted(deployment.collect_channels) or 'none'})"
            )
        collected = check_message(message.load(), f"TaskManager {self.taskmanager_id}")
        if self.nursery is not None:
            self.nursery.start_soon(self._forward, channel, execution_id, node, collected)

    async def _forward(self, channel: Any, execution_id: str, node: int, collected: tuple[Any, ...]) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await channel.send(collected)  # else the collecting client is gone: its job is cancelled
        self.send({"type": "collect_ack", "execution_id": execution_id, "node": node})


class JobManagerEndpoint:
    """Accepts TaskManager processes, keeps their gateways in ``task_executors`` (the list the
    JobMasters deploy through) and registers them with the ResourceManager."""

    def __init__(
        self,
        secret: bytes,
        resource_manager: Any,
        task_executors: list[Any],
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.secret = secret
        self.rm = resource_manager
        self.task_executors = task_executors
        self.host = host
        self.port = port
        self.gateways: dict[str, RemoteTaskExecutor] = {
            te.taskmanager_id: te for te in task_executors if isinstance(te, RemoteTaskExecutor)
        }
        self.registrations = 0
        self.registered_changed = trio.Event()
        self.violations: list[str] = []  # what peers sent that closed their connection
        self.handlers: dict[str, Callable[[RpcConnection, Message], Any]] = {}  # other roles (clients)
        self.on_silent: Callable[[str], None] | None = None  # a TaskManager missed its heartbeats

    async def serve(self, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled; ``task_status.started(port)``. Cancellation: every connection closes."""
        listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        self.port = listeners[0].socket.getsockname()[1]
        self.rm.add_listener(self._on_taskmanager_lost)
        try:
            async with trio.open_nursery() as nursery:
                task_status.started(self.port)
                await trio.serve_listeners(self._serve_connection, listeners, handler_nursery=nursery)
        finally:
            self.rm.remove_listener(self._on_taskmanager_lost)

    def _on_taskmanager_lost(self, tm_id: str, lost: Any) -> None:
        gateway = self.gateways.get(tm_id)
        if gateway is not None and gateway.connection is not None:
            connection = gateway.connection
            gateway.detach(f"no heartbeat within {self.rm.heartbeat_timeout_ms:.0f} ms")
            connection.closed = True
            self._announce_peers()  # the others forget its address
            trio.lowlevel.spawn_system_task(connection.aclose)
            if self.on_silent is not None:
                self.on_silent(tm_id)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        connection = RpcConnection(stream, self.secret, name="a peer")
        try:
            with trio.fail_after(30):
                role = await connection.handshake("server")
            if role == "taskmanager":
                await self._serve_taskmanager(connection)
            else:
                first = await connection.receive()
                if first is None:
                    return
                handler = self.handlers.get(first.type)
                if handler is None:
                    raise ProtocolViolation(f"a {role!r} peer sent {first.type!r}; expected a request")
                await handler(connection, first)
        except (ProtocolViolation, EOFError, trio.TooSlowError, OSError, trio.BrokenResourceError) as exc:
            self.violations.append(str(exc))
        except Exception as exc:  # one bad request must not take the JobManager down
            self.violations.append(f"{type(exc).__name__}: {exc}")
        finally:
            await connection.aclose()

    async def _serve_taskmanager(self, connection: RpcConnection) -> None:
        first = await connection.receive()
        if first is None:
            return
        if first.type != "register":
            raise ProtocolViolation(f"a TaskManager sent {first.type!r} first; expected 'register'")
        tm_id = first.get("taskmanager_id", str, "a TaskManager")
        slots = first.get("slots", int, "a TaskManager")
        pid = first.header.get("pid")
        gateway = self.gateways.get(tm_id)
        if gateway is None:
            gateway = RemoteTaskExecutor(tm_id, slots)
            self.gateways[tm_id] = gateway
            self.task_executors.append(gateway)
        elif gateway.connection is not None:
            raise ProtocolViolation(f"TaskManager {tm_id!r} registered twice")
        gateway.num_slots = slots
        gateway.attach(connection, pid if isinstance(pid, int) else None, first.header.get("data_address"))
        connection.name = f"TaskManager {tm_id}"
        reason = "its connection closed (the process died or exited)"
        async with trio.open_nursery() as nursery:
            gateway.nursery = nursery
            nursery.start_soon(connection.run_sender)
            nursery.start_soon(gateway.run_outbox, connection)
            connection.send_nowait(
                {"type": "registered", "heartbeat_interval_ms": self.rm.heartbeat_interval_ms}
            )
            # peers first, through the outboxes: a deployment the new slots trigger reaches every
            # TaskManager after the address of the newcomer (one queue per connection keeps order)
            self._announce_peers()
            self.rm.register_task_executor(tm_id, slots)
            self.registrations += 1
            self.registered_changed.set()
            self.registered_changed = trio.Event()
            try:
                while True:
                    message = await connection.receive()
                    if message is None or gateway.connection is not connection:
                        break
                    if message.type == "heartbeat":
                        if gateway.heartbeats_enabled and self.rm.slot_manager.is_registered(tm_id):
                            self.rm.heartbeat_from_task_executor(tm_id)
                        continue
                    gateway.on_message(message)
            except ProtocolViolation as exc:  # recorded here: inside the nursery it would be grouped
                reason = f"it sent something malformed ({exc})"
                self.violations.append(f"TaskManager {tm_id}: {exc}")
            finally:
                nursery.cancel_scope.cancel()
                if gateway.connection is connection:
                    gateway.detach(reason)  # its tasks fail with the reason, then its slots go
                    self._announce_peers()  # the others forget its address: no connect to a dead port
                    if self.rm.slot_manager.is_registered(tm_id):
                        self.rm.unregister_task_executor(tm_id)

    def _announce_peers(self) -> None:
        """Tell every connected TaskManager where all of them serve their partitions (TCP): the
        whole set, so a TaskManager that is gone is forgotten (``entrypoint._set_peers``)."""
        addresses = {
            tm_id: list(g.data_address)
            for tm_id, g in self.gateways.items()
            if g.connection is not None and g.data_address
        }
        for gateway in self.gateways.values():
            if gateway.connection is not None:
                gateway.send({"type": "peers", "addresses": addresses})

    async def wait_for_taskmanagers(self, n: int) -> None:
        """Until ``n`` TaskManagers are connected. Cancellation: stops waiting."""
        while sum(1 for g in self.gateways.values() if g.connection is not None) < n:
            await self.registered_changed.wait()

"""Process entry points: ``python -m weir.cluster.entrypoint taskmanager|jobmanager ...``.

The role is the first argument, so ``ps`` tells the processes apart (as Flink's
``TaskManagerRunner`` and ``StandaloneSessionClusterEntrypoint``).

Theory of operation (TaskManager)
---------------------------------
A TaskManager process runs a ``TaskExecutor`` with its own ``NetworkEnvironment``. It
connects to the JobManager's RPC endpoint, proves it holds the cluster's secret (read
from its stdin when a parent started it, or from ``$WEIR_HOME/cluster/secret``), sends
``register`` (id, slots, pid) and waits for ``registered``. Then it heartbeats every
interval and serves messages:

- ``submit``: a signed deployment payload; it is loaded (only after its MAC verified),
  given this process's processing-time clock and callbacks that send ``checkpoint_ack``,
  ``checkpoint_metrics``, ``checkpoint_decline`` and ``recovery_note`` back, and run;
  the task's events go back as ``task_event`` (a failure with the exception as payload,
  an end with the task's statistics);
- ``collect_ack``: the JobManager handed a ``collect`` message (a message of a collect
  sink of ``execute_and_collect``, see ``RemoteCollectChannel``) to the job's collect
  channel; the sink sends its next one;
- ``cancel``, ``trigger_checkpoint``, ``notify_checkpoint``, ``release_partition`` act on
  tasks and partitions of this process; unknown execution ids are ignored (an attempt
  that ended meanwhile);
- ``crash`` cancels every task and deletes its local state (failure injection).

A deployment may carry a copy of its job's failure injector: the process keeps one per job
for all its tasks (``_injector_for``). A failure it fires is first reported as
``injected_failure``; a ``lose-taskmanager`` fault then cancels every task, deletes their
local state, and SIGKILLs the process once the report is written: the JobManager notices
the lost connection, as for any process that dies.

Every ``STATISTICS_INTERVAL_S`` the process sends each running task's statistics
(``task_statistics``: records in/out, back pressure, busy time, user metrics), so the
dashboard and ``weir run``'s live view follow a job on TaskManager processes as one in the
caller's process. User metrics travel as JSON-safe values (a gauge holding another object
travels as its ``str``): nothing of the user's but its functions is pickled on the way back.

When the connection to the JobManager ends, the process exits: a JobManager that dies
takes its jobs with it (no high availability), and the process holds no other work.

The process runs Trio on ``weir.loop.busy_poll.BusyPollClock``, as ``execute()`` runs a
job in one process: its loop polls while it is loaded (``--busy-poll-min-load``, from
``execution.busy-poll.*``; 0: never), its ticker (the output flusher's and the sources'
timer) is driven by the loop, and its 1 ms ticks fall on the same instants of
``CLOCK_MONOTONIC`` in every TaskManager process.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
from typing import Any

import trio

from weir.cluster import rpc
from weir.cluster.gateway import pack_exception
from weir.errors import ProtocolViolation, UsageError


def _injector_for(
    deployment: Any, executor: Any, connection: rpc.RpcConnection, injectors: dict[str, Any]
) -> Any:
    """This process's failure injector of the deployment's job (None if it injects none):
    the first copy that arrives, wired to report over RPC, or that one updated with what a
    newer copy knows."""
    shipped = deployment.failure_injector
    if shipped is None:
        return None
    local = injectors.get(deployment.job_id)
    if local is not None:
        local.absorb(shipped)
        return local

    def report(execution_id: str, index: int, attempt: int, what: str) -> None:
        connection.send_nowait(
            {"type": "injected_failure", "execution_id": execution_id, "fault": index, "attempt": attempt,
             "what": what}
        )  # fmt: skip

    def die() -> None:
        executor.crash()  # tasks stop now; their local state is gone with the "machine"
        if connection.closed:
            _kill_self()
        connection.send_last_nowait(_kill_self)

    shipped.on_fire = report
    shipped.lose = die
    shipped.process_name = f"TaskManager {executor.taskmanager_id} (pid {os.getpid()})"
    injectors[deployment.job_id] = shipped
    return shipped


#: how often a TaskManager process reports its tasks' statistics to the JobManager
STATISTICS_INTERVAL_S = 1.0


def json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON would hold it: numbers, strings, booleans, None, lists and string-keyed
    dicts as they are; anything else (and anything nested deeper than 8) as its ``str``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth < 8 and isinstance(value, dict):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if depth < 8 and isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    try:
        return str(value)
    except Exception as exc:  # a user's __str__ that raises
        return f"<{type(value).__name__}: str() failed: {type(exc).__name__}>"


def statistics_payload(task: Any) -> bytes:
    """A task's statistics, pickled, with its user metrics made JSON-safe; b"" if they fail."""
    try:
        stats = task.statistics()
        now = trio.current_time()  # a wait going on is counted here: the clocks of processes differ
        partitions = [
            p
            if p.backpressured_since is None
            else dataclasses.replace(
                p, backpressured_time_s=p.backpressured_time_s + max(0.0, now - p.backpressured_since),
                backpressured_since=None,
            )
            for p in stats.partitions
        ]  # fmt: skip
        return rpc.dumps(
            dataclasses.replace(stats, user_metrics=json_safe(stats.user_metrics), partitions=partitions)
        )
    except Exception:
        return b""  # statistics are for people: a task does not depend on them


async def _report_statistics(executor: Any, connection: rpc.RpcConnection, interval_s: float) -> None:
    """Send every running task's statistics each ``interval_s``. Cancellation: stops."""
    while True:
        await trio.sleep(interval_s)
        _send_statistics(executor, connection)


def _send_statistics(executor: Any, connection: rpc.RpcConnection) -> None:
    """One round of statistics. A function of its own: a loop variable of the coroutine would
    hold the last task it saw, with all its operators and state, through the next sleep -- past
    the task's end and into the next job's start."""
    for execution_id, handle in list(executor.tasks.items()):
        if handle.task is None:
            continue
        blob = statistics_payload(handle.task)
        if blob:
            connection.send_nowait({"type": "task_statistics", "execution_id": execution_id}, blob=blob)


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class RemoteCollectChannel:
    """A collect sink's channel in a TaskManager process: each of its messages (a batch of
    records, a commit, a restart: ``weir.operators.collect``) goes to the JobManager as a
    ``collect`` message, and ``send`` returns when the JobManager acknowledged
    that the job's collect channel took it. One message in flight per sink subtask, as the
    channel in one process holds none: a client that reads slowly backpressures the job, and
    a task that finishes has delivered every record it collected."""

    def __init__(self, connection: rpc.RpcConnection, execution_id: str, node: int) -> None:
        self.connection = connection
        self.execution_id = execution_id
        self.node = node
        self._acked: trio.Event | None = None

    async def send(self, message: tuple[Any, ...]) -> None:
        self._acked = acked = trio.Event()
        self.connection.send_nowait(
            {"type": "collect", "execution_id": self.execution_id, "node": self.node}, message
        )
        await acked.wait()

    def on_ack(self) -> None:
        if self._acked is None:
            raise ProtocolViolation(
                f"the JobManager acknowledged a collect message of node {self.node} of "
                f"{self.execution_id}, which has none in flight"
            )
        self._acked.set()
        self._acked = None


def _deployment_with_callbacks(
    deployment: Any, connection: rpc.RpcConnection, now_ms: Any, collectors: dict[tuple[str, int], Any]
) -> Any:
    """The loaded deployment, with this process's clock and callbacks that report over RPC."""
    checkpointing = deployment.checkpoint_storage is not None
    collect = {}
    for node in deployment.collect_channels:
        channel = RemoteCollectChannel(connection, deployment.execution_id, node)
        collect[node] = collectors[(deployment.execution_id, node)] = channel

    def ack(execution_id: str, checkpoint_id: int, acks: Any, size: int) -> None:
        connection.send_nowait(
            {"type": "checkpoint_ack", "execution_id": execution_id, "checkpoint_id": checkpoint_id,
             "size": int(size)},
            acks,
        )  # fmt: skip

    def metrics(execution_id: str, checkpoint_id: int, values: Any) -> None:
        connection.send_nowait(
            {"type": "checkpoint_metrics", "execution_id": execution_id, "checkpoint_id": checkpoint_id},
            values,
        )

    def decline(execution_id: str, checkpoint_id: int, reason: str, counts: bool = True) -> None:
        connection.send_nowait(
            {"type": "checkpoint_decline", "execution_id": execution_id, "checkpoint_id": checkpoint_id,
             "reason": str(reason), "counts": bool(counts)}
        )  # fmt: skip

    def note(line: str) -> None:
        connection.send_nowait(
            {"type": "recovery_note", "execution_id": deployment.execution_id, "line": str(line)}
        )

    return dataclasses.replace(
        deployment,
        processing_time_ms=now_ms,
        on_checkpoint_ack=ack if checkpointing else None,
        on_checkpoint_metrics=metrics if checkpointing else None,
        on_checkpoint_decline=decline if checkpointing else None,
        on_recovery_note=note,
        collect_channels=collect,
    )


async def run_taskmanager(
    host: str,
    port: int,
    taskmanager_id: str,
    slots: int,
    secret: bytes,
    network_options: dict[str, int] | None = None,
    bind_host: str = "127.0.0.1",
    data_port: int = 0,
) -> None:
    """Serve as TaskManager ``taskmanager_id`` until the JobManager goes away."""
    from weir.cluster.client import processing_time_source
    from weir.cluster.task_executor import TaskExecutor
    from weir.network.environment import NetworkEnvironment
    from weir.network.tcp import TcpNetwork

    connection = await rpc.connect(host, port, secret, "taskmanager")
    # remote channels reach the other TaskManager processes over TCP, authenticated with the
    # cluster's secret; the JobManager tells each where the others listen ("peers")
    tcp = TcpNetwork(secret, host=bind_host, port=data_port)
    network = NetworkEnvironment(taskmanager_id, tcp, **(network_options or {}))
    executor = TaskExecutor(taskmanager_id, slots, network, None, collect_when_idle=True)
    now_ms = processing_time_source()
    injectors: dict[str, Any] = {}  # failure injectors by job id
    collectors: dict[tuple[str, int], RemoteCollectChannel] = {}  # by execution id and node
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.run_sender)
            await nursery.start(executor.run)
            data_host, data_port = network.listen_address or (bind_host, 0)
            connection.send_nowait(
                {"type": "register", "taskmanager_id": taskmanager_id, "slots": slots, "pid": os.getpid(),
                 "data_address": [data_host, data_port]}
            )  # fmt: skip
            reply = await connection.receive()
            if reply is None:
                raise EOFError("the JobManager closed the connection before accepting this TaskManager")
            if reply.type != "registered":
                raise ProtocolViolation(f"the JobManager answered {reply.type!r}; expected 'registered'")
            interval_ms = reply.get("heartbeat_interval_ms", (int, float), "the JobManager")
            nursery.start_soon(_heartbeat, connection, interval_ms / 1000)
            nursery.start_soon(_report_statistics, executor, connection, STATISTICS_INTERVAL_S)
            while True:
                message = await connection.receive()
                if message is None:
                    break
                if message.type == "peers":
                    _set_peers(tcp, taskmanager_id, message)
                    continue
                _serve(message, executor, connection, now_ms, injectors, collectors)
            nursery.cancel_scope.cancel()
    finally:
        await connection.aclose()


def _set_peers(tcp: Any, own_id: str, message: rpc.Message) -> None:
    """Where the other TaskManagers serve their partitions: {id: [host, port]}, all of them: a
    TaskManager missing from the message is gone, and its address is forgotten (a consumer
    deployed later fails with "no address" rather than connecting to a dead process's port)."""
    addresses = message.get("addresses", dict, "the JobManager")
    for tm_id in set(tcp.addresses) - set(addresses) - {own_id}:
        tcp.forget_address(tm_id)
    for tm_id, address in addresses.items():
        if tm_id == own_id:
            continue
        if (
            not isinstance(address, list) or len(address) != 2 or not isinstance(address[0], str)
            or not isinstance(address[1], int) or isinstance(address[1], bool)
        ):  # fmt: skip
            raise ProtocolViolation(
                f"the JobManager sent address {address!r} for {tm_id!r}; expected [host, port]"
            )
        tcp.set_address(tm_id, address[0], address[1])


async def _heartbeat(connection: rpc.RpcConnection, interval_s: float) -> None:
    while True:
        connection.send_nowait({"type": "heartbeat"})
        await trio.sleep(interval_s)


def _serve(
    message: rpc.Message,
    executor: Any,
    connection: rpc.RpcConnection,
    now_ms: Any,
    injectors: dict[str, Any],
    collectors: dict[tuple[str, int], RemoteCollectChannel],
) -> None:
    from weir.network.events import CheckpointBarrier

    kind = message.type
    if kind == "submit":
        execution_id = message.get("execution_id", str, "the JobManager")
        try:
            loaded = message.load()
        except Exception as exc:  # e.g. a module of the job that this process cannot import
            from weir.errors import JobExecutionError

            failure = JobExecutionError(
                f"TaskManager {executor.taskmanager_id} could not load the task {execution_id}: "
                f"{type(exc).__name__}: {exc}"
            )
            connection.send_nowait(
                {"type": "task_event", "execution_id": execution_id, "event": "fail"},
                blob=pack_exception(failure),
            )
            return
        deployment = _deployment_with_callbacks(loaded, connection, now_ms, collectors)
        deployment.failure_injector = _injector_for(deployment, executor, connection, injectors)
        executor.submit_task(deployment, _reporter(executor, connection, collectors))
    elif kind == "collect_ack":
        key = (message.get("execution_id", str, "the JobManager"), message.get("node", int, "the JobManager"))
        collector = collectors.get(key)
        if collector is not None:  # else: an attempt that ended meanwhile
            collector.on_ack()
    elif kind == "cancel":
        handle = executor.tasks.get(message.get("execution_id", str, "the JobManager"))
        if handle is not None:
            handle.cancel()
    elif kind == "trigger_checkpoint":
        handle = executor.tasks.get(message.get("execution_id", str, "the JobManager"))
        if handle is not None and handle.task is not None:
            barrier = CheckpointBarrier(
                message.get("checkpoint_id", int), message.get("timestamp", int),
                message.get("is_savepoint", bool), message.get("unaligned", bool),
                message.get("native", bool),
            )  # fmt: skip
            stop = message.header.get("stop")
            if stop not in (None, "drain", "no_drain"):
                raise ProtocolViolation(f"the JobManager sent stop mode {stop!r}")
            handle.task.trigger_checkpoint(barrier, stop)
    elif kind == "notify_checkpoint":
        handle = executor.tasks.get(message.get("execution_id", str, "the JobManager"))
        if handle is not None and handle.task is not None:
            checkpoint_id = message.get("checkpoint_id", int)
            if message.get("aborted", bool):
                handle.task.notify_checkpoint_aborted(checkpoint_id)
            else:
                handle.task.notify_checkpoint_complete(checkpoint_id)
    elif kind == "release_partition":
        executor.network.release_partition(message.get("partition_id", str, "the JobManager"))
    elif kind == "crash":
        executor.crash()
    else:
        raise ProtocolViolation(f"the JobManager sent unknown message {kind!r}")


def _reporter(
    executor: Any, connection: rpc.RpcConnection, collectors: dict[tuple[str, int], RemoteCollectChannel]
) -> Any:
    def report(execution_id: str, event: str, exc: BaseException | None) -> None:
        header = {"type": "task_event", "execution_id": execution_id, "event": event}
        if event in ("finish", "fail", "canceled"):
            for key in [k for k in collectors if k[0] == execution_id]:
                del collectors[key]
        if event == "fail":
            connection.send_nowait(header, blob=pack_exception(exc))
            return
        blob = b""
        handle = executor.tasks.get(execution_id)
        if event in ("finish", "canceled") and handle is not None and handle.task is not None:
            blob = statistics_payload(handle.task)
        connection.send_nowait(header, blob=blob)

    return report


def taskmanager_clock(busy_poll_min_load: float) -> trio.abc.Clock:
    """The clock of a TaskManager process's loop: polling while at least ``busy_poll_min_load``
    of it is busy (0: never polling; the ticker is still driven by the loop)."""
    from weir.loop.busy_poll import BusyPollClock, BusyPollPolicy

    if busy_poll_min_load == 0:
        return BusyPollClock(None)
    return BusyPollClock(BusyPollPolicy(busy_poll_min_load))


def _prepare_taskmanager_process() -> None:
    """What ``env.execute()`` does for the embedded cluster, once for this process: load the
    compiled kernels before the first task needs them, freeze the heap as it is then, so
    full collections walk only what the tasks create, and collect less often
    (``weir.loop.gc_pauses``), and keep freed memory for the next batches
    (``weir.loop.heap_memory``)."""
    import gc

    from weir.loop.gc_pauses import use_job_thresholds
    from weir.loop.heap_memory import keep_freed_memory
    from weir.loop.warmup import warm_up

    warm_up()
    gc.collect()
    gc.freeze()
    use_job_thresholds()
    keep_freed_memory()


# -- command line ------------------------------------------------------------------------------------


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"address {text!r} is not HOST:PORT")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m weir.cluster.entrypoint")
    roles = parser.add_subparsers(dest="role", required=True)
    tm = roles.add_parser("taskmanager", help="run a TaskManager that registers with a JobManager")
    tm.add_argument("--jobmanager", required=True, help="HOST:PORT of the JobManager's RPC endpoint")
    tm.add_argument("--id", required=True, help="this TaskManager's id")
    tm.add_argument("--slots", type=int, default=1)
    tm.add_argument("--secret-stdin", action="store_true", help="read the cluster secret from stdin")
    tm.add_argument("--network-memory", type=int, default=64 << 20)
    tm.add_argument("--segment-size", type=int, default=32 * 1024)
    tm.add_argument("--buffers-per-channel", type=int, default=2)
    tm.add_argument("--floating-buffers-per-gate", type=int, default=8)
    tm.add_argument(
        "--bind-host", default="127.0.0.1", help="taskmanager.bind-host: where to serve partitions"
    )
    tm.add_argument("--data-port", type=int, default=0, help="taskmanager.data.port (0: any free port)")
    tm.add_argument(
        "--busy-poll-min-load", type=float, default=0.5,
        help="execution.busy-poll.min-load: the loop polls while this share of it is busy (0: never)",
    )  # fmt: skip
    jm = roles.add_parser("jobmanager", help="run a standalone JobManager")
    jm.add_argument("--config", default=None, help="a JSON file of Flink keys")
    args = parser.parse_args(argv)
    try:
        if args.role == "taskmanager":
            host, port = _address(args.jobmanager)
            secret = rpc.secret_from_env_fd(0) if args.secret_stdin else rpc.read_cluster_secret()
            if not 0 <= args.busy_poll_min_load <= 1:
                raise UsageError(
                    f"--busy-poll-min-load: expected 0 (never poll) or a share within (0, 1], "
                    f"got {args.busy_poll_min_load}"
                )
            network = {
                "total_bytes": args.network_memory,
                "segment_size": args.segment_size,
                "buffers_per_channel": args.buffers_per_channel,
                "floating_buffers_per_gate": args.floating_buffers_per_gate,
            }
            _prepare_taskmanager_process()
            trio.run(
                run_taskmanager,
                host,
                port,
                args.id,
                args.slots,
                secret,
                network,
                args.bind_host,
                args.data_port,
                clock=taskmanager_clock(args.busy_poll_min_load),
            )
            return 0
        from weir.cluster.standalone import run_jobmanager_process

        return run_jobmanager_process(args.config)
    except (UsageError, ProtocolViolation, EOFError, OSError) as exc:
        print(f"weir {args.role}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""``NetworkEnvironment``: the network stack of one TaskManager; ``NetworkRegistry``: the in-process network.

A TaskManager's environment (Flink's ShuffleEnvironment) owns its
``NetworkBufferPool``, creates the ``ResultPartition`` of every task it runs and the
``InputGate`` of every task input, and runs the connection tasks to other TaskManagers.

Sizes follow Flink's network stack: a partition's pool has at most
``num_subpartitions × buffers_per_channel + floating_buffers_per_gate`` buffers and at
least ``num_subpartitions + 1`` (one buffer being written per subpartition plus one, so
the writer can always make progress, as in Flink); a gate's pool has the remote channels'
exclusive buffers as its required part and ``floating_buffers_per_gate`` more at most.

Channels are local when the producer runs on this TaskManager and remote otherwise,
through the one ``Connection`` per (consumer TaskManager, producer TaskManager) pair. A
consumer may be created before its producer: the request waits (without polling) until
the partition is registered, and for a blocking partition until it has finished.

How remote channels travel is the environment's *network*, given at construction:

- ``NetworkRegistry`` (the default of the embedded cluster): the in-process network of one
  cluster, mapping TaskManager ids to their environments; a connection is a pair of
  in-process queues (``transport.Connection``).
- ``weir.network.tcp.TcpNetwork``: each environment serves its partitions on a TCP listener
  (``listen_address`` once running) and reaches others by the addresses the network knows
  (its own environments' and those given with ``set_address``); every connection
  authenticates with the cluster's secret.

Both run the same client and server cores (``transport.py``); a ``Network`` has
``register``/``unregister``, ``connect`` (a ``PartitionRequestClient`` to a producer
TaskManager), ``serve`` (run while the environment runs) and ``connections``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import trio

from weir.errors import UsageError, WeirError
from weir.loop.ticker import Ticker
from weir.network.buffer_pool import NetworkBufferPool, NetworkBufferPoolStatistics
from weir.network.flusher import SharedFlusher
from weir.network.gate import (
    InputChannel,
    InputGate,
    InputGateStatistics,
    LocalInputChannel,
    RemoteInputChannel,
)
from weir.network.partition import ResultPartition, ResultPartitionStatistics, SubpartitionView
from weir.network.transport import (
    Connection,
    ConnectionBase,
    ConnectionStatistics,
    PartitionRequestClient,
    PartitionRequestServer,
)

__all__ = [
    "ChannelSpec",
    "Network",
    "NetworkEnvironment",
    "NetworkEnvironmentStatistics",
    "NetworkRegistry",
]

DEFAULT_NETWORK_MEMORY_BYTES = 64 << 20
DEFAULT_SEGMENT_SIZE = 32 << 10


@dataclass(frozen=True)
class ChannelSpec:
    """Where one input channel reads from: a subpartition of a partition on some TaskManager."""

    partition_id: str
    subpartition_index: int
    producer_taskmanager: str


@dataclass(frozen=True)
class NetworkEnvironmentStatistics:
    taskmanager_id: str
    buffer_pool: NetworkBufferPoolStatistics
    partitions: tuple[ResultPartitionStatistics, ...]
    gates: tuple[InputGateStatistics, ...]
    connections: tuple[
        ConnectionStatistics, ...
    ]  # where this TaskManager is the client or the server (TCP: its ends)


class Network(Protocol):
    """How an environment's remote channels travel: in-process (``NetworkRegistry``) or TCP (``TcpNetwork``)."""

    def register(self, environment: NetworkEnvironment) -> None: ...

    def unregister(self, taskmanager_id: str) -> None: ...

    def connect(self, environment: NetworkEnvironment, server_taskmanager: str) -> PartitionRequestClient:
        """A client on a new connection from ``environment`` to the producers of ``server_taskmanager``."""
        ...

    async def serve(self, environment: NetworkEnvironment, *, task_status: Any = ...) -> None:
        """Serve ``environment``'s partitions to other TaskManagers while it runs."""
        ...

    def connections(self) -> Sequence[ConnectionBase]: ...


class NetworkRegistry:
    """The in-process network of one cluster: TaskManager id → environment, and the connections."""

    def __init__(self) -> None:
        self._environments: dict[str, NetworkEnvironment] = {}
        self._connections: dict[tuple[str, str], Connection] = {}

    def register(self, environment: NetworkEnvironment) -> None:
        tm = environment.taskmanager_id
        if tm in self._environments:
            raise UsageError(f"network registry: taskmanager {tm!r} is already registered")
        for other in self._environments.values():
            if other.segment_size != environment.segment_size:
                raise UsageError(
                    f"network registry: taskmanager {tm!r} uses segments of {environment.segment_size} bytes "
                    f"but {other.taskmanager_id!r} uses {other.segment_size} (all must be equal)"
                )
        self._environments[tm] = environment

    def unregister(self, taskmanager_id: str) -> None:
        self._environments.pop(taskmanager_id, None)

    def environment(self, taskmanager_id: str) -> NetworkEnvironment:
        try:
            return self._environments[taskmanager_id]
        except KeyError:
            known = ", ".join(repr(k) for k in sorted(self._environments)) or "none"
            raise UsageError(
                f"network registry: no taskmanager {taskmanager_id!r} (registered: {known})"
            ) from None

    @property
    def taskmanagers(self) -> tuple[str, ...]:
        return tuple(self._environments)

    def connection(self, client_taskmanager: str, server_taskmanager: str) -> Connection:
        """The open connection from consumers on ``client_taskmanager`` to producers on ``server_taskmanager``."""
        key = (client_taskmanager, server_taskmanager)
        connection = self._connections.get(key)
        if connection is None or connection.closed:
            server = self.environment(server_taskmanager)
            self.environment(client_taskmanager)
            connection = Connection(client_taskmanager, server_taskmanager)
            self._connections[key] = connection
            server._serve(connection)
        return connection

    def connections(self) -> tuple[Connection, ...]:
        return tuple(self._connections.values())

    def connect(self, environment: NetworkEnvironment, server_taskmanager: str) -> PartitionRequestClient:
        connection = self.connection(environment.taskmanager_id, server_taskmanager)
        client = PartitionRequestClient(connection)
        environment._spawn(client.run, f"network client {environment.taskmanager_id}<-{server_taskmanager}")
        return client

    async def serve(
        self,
        environment: NetworkEnvironment,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Nothing to listen on: ``connection`` hands the server its connections."""
        task_status.started()


class _PendingViewRequest:
    __slots__ = ("environment", "on_error", "on_view", "partition_id", "subpartition_index")

    def __init__(
        self,
        environment: NetworkEnvironment,
        partition_id: str,
        subpartition_index: int,
        on_view: Callable[[SubpartitionView], None],
        on_error: Callable[[Exception], None],
    ) -> None:
        self.environment = environment
        self.partition_id = partition_id
        self.subpartition_index = subpartition_index
        self.on_view = on_view
        self.on_error = on_error

    def cancel(self) -> None:
        pending = self.environment._pending_views.get(self.partition_id)
        if pending is not None and self in pending:
            pending.remove(self)


class NetworkEnvironment:
    """The network stack of one TaskManager (partitions, gates, buffer pool, connections)."""

    def __init__(
        self,
        taskmanager_id: str,
        registry: Network,
        total_bytes: int = DEFAULT_NETWORK_MEMORY_BYTES,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        buffers_per_channel: int = 2,
        floating_buffers_per_gate: int = 8,
    ) -> None:
        if buffers_per_channel < 1:
            raise UsageError(
                "taskmanager.network.memory.buffers-per-channel: credit-based flow control needs at least "
                f"1 exclusive buffer per channel, got {buffers_per_channel}"
            )
        if floating_buffers_per_gate < 0:
            raise UsageError(
                "taskmanager.network.memory.floating-buffers-per-gate must not be negative, "
                f"got {floating_buffers_per_gate}"
            )
        self.taskmanager_id = taskmanager_id
        self.registry = registry
        self.network_buffer_pool = NetworkBufferPool(total_bytes, segment_size)
        self.segment_size = segment_size
        self.buffers_per_channel = buffers_per_channel
        self.floating_buffers_per_gate = floating_buffers_per_gate
        self._partitions: dict[str, ResultPartition] = {}
        self._pending_views: dict[str, list[_PendingViewRequest]] = {}
        self._clients: dict[str, PartitionRequestClient] = {}
        self._servers: list[PartitionRequestServer] = []
        self._gates: list[InputGate] = []
        self._nursery: trio.Nursery | None = None
        self._to_start: list[tuple[Callable[[], Awaitable[None]], str]] = []
        self._stopped = False
        #: where this environment serves its partitions over TCP while it runs (TcpNetwork), else None
        self.listen_address: tuple[str, int] | None = None
        #: The one timer of this TaskManager's sleepers (flusher, sources), running with ``run``
        self.ticker = Ticker()
        #: The output flusher of this TaskManager's partitions (``flush_by_timer``)
        self.output_flusher = SharedFlusher(self._spawn, ticker=self.ticker)
        registry.register(self)

    # --- partitions -------------------------------------------------------------------

    def create_result_partition(
        self, partition_id: str, num_subpartitions: int, blocking: bool = False
    ) -> ResultPartition:
        """A partition with its own pool, registered so that consumers can find it."""
        self._check_running()
        if partition_id in self._partitions:
            raise UsageError(
                f"taskmanager {self.taskmanager_id!r}: result partition {partition_id!r} already exists"
            )
        if num_subpartitions < 1:
            raise UsageError(
                f"result partition {partition_id!r}: num_subpartitions must be at least 1, got {num_subpartitions}"
            )
        required = num_subpartitions + 1
        maximum = max(required, num_subpartitions * self.buffers_per_channel + self.floating_buffers_per_gate)
        pool = self.network_buffer_pool.create_buffer_pool(
            required, maximum, name=f"result partition {partition_id!r}"
        )
        partition = ResultPartition(partition_id, num_subpartitions, pool, blocking=blocking)
        self._partitions[partition_id] = partition
        if blocking:
            partition.add_finish_listener(lambda: self._resolve_pending(partition_id))
        else:
            self._resolve_pending(partition_id)
        return partition

    def result_partition(self, partition_id: str) -> ResultPartition | None:
        return self._partitions.get(partition_id)

    def release_partition(self, partition_id: str) -> bool:
        """Drop the partition's data and pool; its readers get ``PartitionReleased``.

        Returns whether this TaskManager had the partition: releasing an unknown (or
        already released) partition is a no-op, so a JobMaster may release every
        partition of a job on every TaskManager.
        """
        partition = self._partitions.pop(partition_id, None)
        if partition is None:
            return False
        partition.release()
        partition.buffer_pool.destroy()
        return True

    def request_subpartition_view(
        self,
        partition_id: str,
        subpartition_index: int,
        on_view: Callable[[SubpartitionView], None],
        on_error: Callable[[Exception], None],
    ) -> Callable[[], None]:
        """``on_view(view)`` once the partition is registered (blocking: finished); returns a cancel function."""
        partition = self._partitions.get(partition_id)
        if partition is not None and (not partition.blocking or partition.is_finished):
            self._create_view(partition, subpartition_index, on_view, on_error)
            return _no_op
        request = _PendingViewRequest(self, partition_id, subpartition_index, on_view, on_error)
        self._pending_views.setdefault(partition_id, []).append(request)
        return request.cancel

    def _create_view(
        self,
        partition: ResultPartition,
        subpartition_index: int,
        on_view: Callable[[SubpartitionView], None],
        on_error: Callable[[Exception], None],
    ) -> None:
        try:
            view = partition.create_subpartition_view(subpartition_index)
        except WeirError as error:  # released, out of range, already consumed
            on_error(error)
            return
        on_view(view)

    def _resolve_pending(self, partition_id: str) -> None:
        partition = self._partitions.get(partition_id)
        pending = self._pending_views.pop(partition_id, [])
        if partition is None:
            return
        for request in pending:
            self._create_view(partition, request.subpartition_index, request.on_view, request.on_error)

    # --- gates ------------------------------------------------------------------------

    def create_input_gate(self, gate_index: int, channels: Sequence[ChannelSpec]) -> InputGate:
        """A gate reading ``channels`` (in order); requests every subpartition at once."""
        self._check_running()
        self._gates = [g for g in self._gates if not g.is_closed]
        num_remote = sum(1 for spec in channels if spec.producer_taskmanager != self.taskmanager_id)
        pool = None
        if num_remote:
            exclusive = num_remote * self.buffers_per_channel
            pool = self.network_buffer_pool.create_buffer_pool(
                exclusive, exclusive + self.floating_buffers_per_gate, name=f"input gate {gate_index}"
            )
        built: list[InputChannel] = []
        try:
            for index, spec in enumerate(channels):
                if spec.producer_taskmanager == self.taskmanager_id:
                    built.append(
                        LocalInputChannel(index, spec.partition_id, spec.subpartition_index, provider=self)
                    )
                else:
                    client = self._client_for(spec.producer_taskmanager)
                    built.append(
                        RemoteInputChannel(
                            index,
                            spec.partition_id,
                            spec.subpartition_index,
                            client,
                            self.buffers_per_channel,
                        )
                    )
        except BaseException:
            if pool is not None:
                pool.destroy()
            raise
        gate = InputGate(gate_index, built, pool)
        self._gates.append(gate)
        gate.request_partitions()
        return gate

    # --- connections ------------------------------------------------------------------

    def _client_for(self, server_taskmanager: str) -> PartitionRequestClient:
        client = self._clients.get(server_taskmanager)
        if client is None or client.connection.closed:
            client = self.registry.connect(self, server_taskmanager)
            self._clients[server_taskmanager] = client
        return client

    def _serve(self, connection: Connection) -> None:
        """Serve an in-process connection (``NetworkRegistry``)."""
        server = PartitionRequestServer(connection, self)
        self._adopt_server(server)
        if self._stopped:
            connection.close()
            return
        self._spawn(
            server.run, f"network server {connection.server_taskmanager}->{connection.client_taskmanager}"
        )

    def _adopt_server(self, server: PartitionRequestServer) -> None:
        """Track ``server`` (its connection closes when this environment stops)."""
        self._servers = [s for s in self._servers if not s.connection.closed]
        self._servers.append(server)

    def flush_by_timer(self, partition: ResultPartition, buffer_timeout_ms: int) -> bool:
        """Have this TaskManager's shared output flusher flush ``partition`` every
        ``buffer_timeout_ms``; False (and nothing registered) while the environment is not
        running, when the caller has to run its own timer (``run_output_flusher``)."""
        if self._nursery is None:
            return False
        self.output_flusher.register(partition, buffer_timeout_ms)
        return True

    def _spawn(self, fn: Callable[[], Awaitable[None]], name: str) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(fn, name=name)
        else:
            self._to_start.append((fn, name))

    def _check_running(self) -> None:
        if self._stopped:
            raise UsageError(f"taskmanager {self.taskmanager_id!r}: the network environment has stopped")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run this TaskManager's connection tasks until cancelled (``await nursery.start(env.run)``).

        Connections opened before ``run`` start with it; later ones start at once.
        Cancellation: every connection task ends; their connections close, so consumers on
        other TaskManagers fail with ``ConnectionClosed`` unless they had finished, and
        producers here stop serving them. The environment cannot be restarted.
        """
        if self._nursery is not None or self._stopped:
            raise UsageError(
                f"taskmanager {self.taskmanager_id!r}: the network environment is already running"
            )
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self.ticker.run, name=f"ticker {self.taskmanager_id}")
                await nursery.start(partial(self.registry.serve, self))
                to_start, self._to_start = self._to_start, []
                for fn, name in to_start:
                    nursery.start_soon(fn, name=name)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self._stopped = True
            for client in self._clients.values():
                client.connection.close()
            for server in self._servers:
                server.connection.close()

    # --- metrics ----------------------------------------------------------------------

    def statistics(self) -> NetworkEnvironmentStatistics:
        tm = self.taskmanager_id
        connections = tuple(c.statistics() for c in self.registry.connections() if c.owned_by(tm))
        return NetworkEnvironmentStatistics(
            taskmanager_id=tm,
            buffer_pool=self.network_buffer_pool.statistics(),
            partitions=tuple(p.statistics() for p in self._partitions.values()),
            gates=tuple(g.statistics() for g in self._gates if not g.is_closed),
            connections=connections,
        )

    def __repr__(self) -> str:
        return f"NetworkEnvironment({self.taskmanager_id!r})"


def _no_op() -> None:
    pass

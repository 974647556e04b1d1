"""The configuration keys weir understands, with Flink's names, types and defaults.

Values arrive as strings (from files and the CLI) or as Python values (from the API);
``ConfigOption.parse`` turns either into the typed value or raises one UsageError naming
the key, the value and what would be valid. Durations use Flink's syntax ("100 ms",
"10 s", "1 min"); memory sizes use Flink's ("32 kb", "64 mb").
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from weir.errors import UsageError

_DURATION_UNITS = {
    "ns": 1e-6, "nano": 1e-6, "nanos": 1e-6, "nanosecond": 1e-6, "nanoseconds": 1e-6,
    "us": 1e-3, "µs": 1e-3, "micro": 1e-3, "micros": 1e-3, "microsecond": 1e-3, "microseconds": 1e-3,
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "min": 60_000, "m": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}  # fmt: skip

_MEMORY_UNITS = {
    "b": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gibibytes": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tebibytes": 1 << 40,
}  # fmt: skip

_NUMBER_UNIT = re.compile(r"^\s*(-?\d+)\s*([a-zµ]*)\s*$", re.IGNORECASE)


def parse_duration_ms(key: str, value: Any) -> int:
    """Flink's duration syntax; a bare number is milliseconds."""
    if isinstance(value, bool):
        raise UsageError(f"{key}: expected a duration such as '100 ms' or '10 s', got {value!r}")
    if isinstance(value, int):
        return value
    if hasattr(value, "to_milliseconds"):
        return int(value.to_milliseconds())
    m = _NUMBER_UNIT.match(str(value))
    unit = m.group(2).lower() if m else ""
    if not m or (unit and unit not in _DURATION_UNITS):
        raise UsageError(f"{key}: expected a duration such as '100 ms', '10 s' or '1 min', got {value!r}")
    return int(int(m.group(1)) * _DURATION_UNITS.get(unit, 1))


def parse_memory_bytes(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise UsageError(f"{key}: expected a memory size such as '32 kb' or '64 mb', got {value!r}")
    if isinstance(value, int):
        return value
    m = _NUMBER_UNIT.match(str(value))
    unit = m.group(2).lower() if m else ""
    if not m or (unit and unit not in _MEMORY_UNITS) or int(m.group(1)) < 0:
        raise UsageError(f"{key}: expected a memory size such as '32 kb' or '64 mb', got {value!r}")
    return int(m.group(1)) * _MEMORY_UNITS.get(unit, 1)


def _parse_int(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise UsageError(f"{key}: expected an integer, got {value!r}")
    try:
        return int(str(value).strip())
    except ValueError:
        raise UsageError(f"{key}: expected an integer, got {value!r}") from None


def _parse_float(key: str, value: Any) -> float:
    try:
        return float(str(value).strip())
    except ValueError:
        raise UsageError(f"{key}: expected a number, got {value!r}") from None


_URI_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):(//)?")


def local_path(what: str, value: Any) -> str:
    """A directory or file on the local file system, given as a path or as a ``file://`` URI
    (the form Flink's documentation uses: ``file:///data/checkpoints``); ``file:`` URIs become
    plain paths. weir stores checkpoints and savepoints locally only, so another scheme
    (``s3://``, ``hdfs://``) is an error naming ``what``."""
    text = str(value)
    m = _URI_SCHEME.match(text)
    if m is None or (m.group(2) is None and m.group(1).lower() != "file"):
        return text  # a plain path (also one like 'runs:2', which is no URI)
    if m.group(1).lower() != "file":
        raise UsageError(
            f"{what}: weir keeps checkpoints and savepoints on the local file system, so the "
            f"scheme '{m.group(1)}://' is not supported, got {text!r}; give a path or a file:// URI "
            f"such as 'file:///data/checkpoints'"
        )
    uri = urllib.parse.urlsplit(text)
    if uri.netloc not in ("", "localhost") or not uri.path.startswith("/") or uri.query or uri.fragment:
        raise UsageError(
            f"{what}: a file URI names an absolute local path, such as 'file:///data/checkpoints', "
            f"got {text!r}"
        )
    return urllib.parse.unquote(uri.path)


def _parse_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise UsageError(f"{key}: expected true or false, got {value!r}")


@dataclass(frozen=True)
class ConfigOption:
    key: str
    kind: str  # int | float | bool | str | path | duration | memory | enum
    default: Any
    description: str
    choices: tuple[str, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)
    fallback_keys: tuple[str, ...] = ()
    check: Callable[[Any], str | None] | None = None

    def parse(self, value: Any) -> Any:
        if value is None:
            return None
        parsed: Any
        if self.kind == "int":
            parsed = _parse_int(self.key, value)
        elif self.kind == "float":
            parsed = _parse_float(self.key, value)
        elif self.kind == "bool":
            parsed = _parse_bool(self.key, value)
        elif self.kind == "duration":
            parsed = parse_duration_ms(self.key, value)
        elif self.kind == "memory":
            parsed = parse_memory_bytes(self.key, value)
        elif self.kind == "path":
            parsed = local_path(self.key, value)
        elif self.kind == "enum":
            text = str(getattr(value, "name", value)).strip()
            norm = self.aliases.get(text.lower(), text.lower())
            lowered = {c.lower(): c for c in self.choices}
            if norm not in lowered:
                raise UsageError(f"{self.key}: expected one of {', '.join(self.choices)}, got {value!r}")
            parsed = lowered[norm]
        else:
            parsed = str(value)
        if self.check is not None:
            problem = self.check(parsed)
            if problem:
                raise UsageError(f"{self.key}: {problem}, got {value!r}")
        return parsed


def _positive(v: Any) -> str | None:
    return None if v > 0 else "must be positive"


def _non_negative(v: Any) -> str | None:
    return None if v >= 0 else "must not be negative"


def _buffer_timeout(v: Any) -> str | None:
    return None if v >= -1 else "must be -1 (flush only when full), 0 (flush every record) or positive"


def _max_parallelism(v: Any) -> str | None:
    return None if v == -1 or 1 <= v <= 32768 else "must be -1 (derive it) or within 1..32768"


OPTIONS: dict[str, ConfigOption] = {}


def _opt(*args: Any, **kwargs: Any) -> ConfigOption:
    option = ConfigOption(*args, **kwargs)
    OPTIONS[option.key] = option
    for old in option.fallback_keys:
        OPTIONS[old] = option
    return option


PARALLELISM_DEFAULT = _opt(
    "parallelism.default", "int", 1, "Default parallelism of operators.", check=_positive
)
MAX_PARALLELISM = _opt(
    "pipeline.max-parallelism", "int", -1,
    "Max parallelism (number of key groups); -1 derives it from the parallelism.", check=_max_parallelism,
)  # fmt: skip
OPERATOR_CHAINING = _opt(
    "pipeline.operator-chaining.enabled", "bool", True, "Whether operators are chained.",
    fallback_keys=("pipeline.operator-chaining",),
)  # fmt: skip
CHAIN_DIFFERENT_MAX_PARALLELISM = _opt(
    "pipeline.operator-chaining.chain-operators-with-different-max-parallelism", "bool", True,
    "Whether operators with different max parallelism may be chained (Flink's default: true).",
)  # fmt: skip
AUTO_WATERMARK_INTERVAL = _opt(
    "pipeline.auto-watermark-interval", "duration", 200, "Periodic watermark emission interval.",
    check=_non_negative,
)  # fmt: skip
PIPELINE_NAME = _opt("pipeline.name", "str", None, "The job name.")
AGG_PHASE_STRATEGY = _opt(
    "table.optimizer.agg-phase-strategy", "enum", "AUTO",
    "Window aggregation in one or two phases: AUTO and TWO_PHASE combine the records of an "
    "eligible weir.columnar Aggregates window into partial aggregates before the shuffle "
    "(weir.operators.window.two_phase); ONE_PHASE never does.",
    choices=("AUTO", "ONE_PHASE", "TWO_PHASE"),
)  # fmt: skip
LOCAL_AGG_ADAPTIVE = _opt(
    "table.exec.local-hash-agg.adaptive.enabled", "bool", True,
    "The local phase of a two-phase window aggregation (AUTO) stops combining once its first "
    "records show it does not reduce them: every record then travels as a partial row of its own.",
)  # fmt: skip
LOCAL_AGG_SAMPLING = _opt(
    "table.exec.local-hash-agg.adaptive.sampling-threshold", "int", 500_000,
    "Records a local phase folds before it decides whether combining pays (adaptive local aggregation).",
    check=_positive,
)  # fmt: skip
LOCAL_AGG_DISTINCT_RATE = _opt(
    "table.exec.local-hash-agg.adaptive.distinct-value-rate-threshold", "float", 0.5,
    "A local phase whose sampled records made more partial rows than this fraction of them stops combining.",
)  # fmt: skip
RUNTIME_MODE = _opt(
    "execution.runtime-mode", "enum", "STREAMING", "STREAMING, BATCH or AUTOMATIC.",
    choices=("STREAMING", "BATCH", "AUTOMATIC"),
)  # fmt: skip
EXECUTION_TARGET = _opt(
    "execution.target", "str", "local",
    "The executor env.execute() hands the job to (weir.core.execution; entry point group weir.executors).",
)  # fmt: skip
BUFFER_TIMEOUT = _opt(
    "execution.buffer-timeout.interval", "duration", 100,
    "Output flusher interval: 0 flushes after every record, -1 only when buffers are full.",
    fallback_keys=("execution.buffer-timeout",), check=_buffer_timeout,
)  # fmt: skip
BUFFER_TIMEOUT_ENABLED = _opt(
    "execution.buffer-timeout.enabled", "bool", True, "false disables the flusher (same as interval -1)."
)
CHECKPOINTING_INTERVAL = _opt(
    "execution.checkpointing.interval", "duration", None, "Checkpoint interval; unset disables checkpointing.",
    check=_positive,
)  # fmt: skip
CHECKPOINTING_MODE = _opt(
    "execution.checkpointing.mode", "enum", "EXACTLY_ONCE", "EXACTLY_ONCE or AT_LEAST_ONCE.",
    choices=("EXACTLY_ONCE", "AT_LEAST_ONCE"),
)  # fmt: skip
CHECKPOINTING_TIMEOUT = _opt(
    "execution.checkpointing.timeout", "duration", 600_000, "Checkpoint timeout.", check=_positive
)
CHECKPOINTING_MIN_PAUSE = _opt(
    "execution.checkpointing.min-pause",
    "duration",
    0,
    "Minimal pause between checkpoints.",
    check=_non_negative,
)
CHECKPOINTING_MAX_CONCURRENT = _opt(
    "execution.checkpointing.max-concurrent-checkpoints", "int", 1, "Concurrent checkpoints.", check=_positive
)
CHECKPOINTING_TOLERABLE_FAILURES = _opt(
    "execution.checkpointing.tolerable-failed-checkpoints", "int", 0, "Tolerated failed checkpoints.",
    check=_non_negative,
)  # fmt: skip
CHECKPOINTING_RETAINED = _opt(
    "execution.checkpointing.num-retained", "int", 1, "Completed checkpoints to retain.", check=_positive,
    fallback_keys=("state.checkpoints.num-retained",),
)  # fmt: skip
CHECKPOINTING_UNALIGNED = _opt(
    "execution.checkpointing.unaligned.enabled", "bool", False, "Unaligned checkpoints.",
    fallback_keys=("execution.checkpointing.unaligned",),
)  # fmt: skip
CHECKPOINTING_ALIGNED_TIMEOUT = _opt(
    "execution.checkpointing.aligned-checkpoint-timeout", "duration", 0,
    "Switch to unaligned when alignment takes longer; 0 never switches.", check=_non_negative,
)  # fmt: skip
CHECKPOINTS_DIRECTORY = _opt(
    "execution.checkpointing.dir", "path", None, "Checkpoint storage directory.",
    fallback_keys=("state.checkpoints.dir",),
)  # fmt: skip
CHECKPOINTING_RETENTION = _opt(
    "execution.checkpointing.externalized-checkpoint-retention", "enum", "NO_EXTERNALIZED_CHECKPOINTS",
    "What happens to a job's checkpoints when it ends: NO_EXTERNALIZED_CHECKPOINTS deletes them on "
    "FINISHED, CANCELED and FAILED; DELETE_ON_CANCELLATION keeps them when it FAILED; "
    "RETAIN_ON_CANCELLATION keeps them when it was CANCELED or FAILED.",
    choices=("NO_EXTERNALIZED_CHECKPOINTS", "DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION"),
)  # fmt: skip
ASYNC_SNAPSHOT = _opt(
    "weir.checkpointing.async-snapshot", "enum", "AUTO",
    "Where a task writes its checkpoint files while the job goes on: PROCESS, a forked child with its own "
    "core and GIL (POSIX; LMDB's pinned view is still read in the job's process); THREAD, a worker thread of the "
    "job's process; AUTO, a child for snapshots of 20,000 entries or more, else a thread.",
    choices=("AUTO", "PROCESS", "THREAD"),
)  # fmt: skip
SAVEPOINT_DIRECTORY = _opt(
    "execution.checkpointing.savepoint-dir", "path", None, "Default savepoint directory.",
    fallback_keys=("state.savepoints.dir",),
)  # fmt: skip
SAVEPOINT_PATH = _opt(
    "execution.savepoint.path", "path", None, "Savepoint to restore the job from.",
)  # fmt: skip
SAVEPOINT_ALLOW_UNTRUSTED_PICKLE = _opt(
    "weir.savepoint.allow-untrusted-pickle", "bool", False,
    "Restore pickled values from a savepoint or checkpoint that your weir did not sign (made by another user "
    "or machine, or edited): unpickling runs code from the files, so only for state of trusted origin.",
)  # fmt: skip
SAVEPOINT_IGNORE_UNCLAIMED_STATE = _opt(
    "execution.savepoint.ignore-unclaimed-state", "bool", False,
    "Allow state of the savepoint that no operator of the job claims (allow_non_restored_state).",
)  # fmt: skip
STATE_BACKEND = _opt(
    "state.backend.type", "enum", "hashmap", "hashmap or lmdb (weir's embedded, on-disk backend).",
    choices=("hashmap", "lmdb"), aliases={"heap": "hashmap", "rocksdb": "lmdb"},
)  # fmt: skip
CHECKPOINTING_INCREMENTAL = _opt(
    "execution.checkpointing.incremental", "bool", False,
    "Incremental checkpoints for backends that support them (lmdb); hashmap always checkpoints in full.",
    fallback_keys=("state.backend.incremental",),
)  # fmt: skip
LMDB_INCREMENTAL_MAX_CHAIN_LENGTH = _opt(
    "state.backend.lmdb.incremental.max-chain-length", "int", 10,
    "Files in an incremental chain (full base included) before the next checkpoint writes a new full base.",
    check=_positive,
)  # fmt: skip
#: ``state.backend.lmdb.memory.window-panes``: a window subtask's live accumulators in memory
DEFAULT_WINDOW_PANE_MEMORY_BYTES = 256 << 20
LMDB_WINDOW_PANE_MEMORY = _opt(
    "state.backend.lmdb.memory.window-panes", "memory", DEFAULT_WINDOW_PANE_MEMORY_BYTES,
    "Memory an LMDB-backed window operator subtask keeps its live accumulators in before it writes "
    "them to LMDB (the window's write cache; weir's counterpart of RocksDB's managed write buffers).",
    check=_positive,
)  # fmt: skip
FAILOVER_STRATEGY = _opt(
    "jobmanager.execution.failover-strategy", "enum", "region",
    "full: a failure restarts every task; region: only the pipelined region of the failed task.",
    choices=("full", "region"),
)  # fmt: skip
RESTART_STRATEGY = _opt(
    "restart-strategy.type", "enum", "none", "none, fixed-delay, exponential-delay or failure-rate.",
    choices=("none", "fixed-delay", "exponential-delay", "failure-rate"),
    aliases={"off": "none", "disable": "none", "fixeddelay": "fixed-delay",
             "exponentialdelay": "exponential-delay", "failurerate": "failure-rate"},
)  # fmt: skip
FIXED_DELAY_ATTEMPTS = _opt(
    "restart-strategy.fixed-delay.attempts", "int", 1, "Restart attempts.", check=_non_negative
)
FIXED_DELAY_DELAY = _opt(
    "restart-strategy.fixed-delay.delay", "duration", 1000, "Delay between restarts.", check=_non_negative
)
EXP_INITIAL_BACKOFF = _opt(
    "restart-strategy.exponential-delay.initial-backoff",
    "duration",
    1000,
    "First backoff.",
    check=_non_negative,
)
EXP_MAX_BACKOFF = _opt(
    "restart-strategy.exponential-delay.max-backoff", "duration", 60_000, "Backoff cap.", check=_non_negative
)
EXP_MULTIPLIER = _opt(
    "restart-strategy.exponential-delay.backoff-multiplier", "float", 1.5, "Backoff multiplier."
)
EXP_RESET_THRESHOLD = _opt(
    "restart-strategy.exponential-delay.reset-backoff-threshold", "duration", 3_600_000,
    "Quiet time after which the backoff resets.",
)  # fmt: skip
EXP_ATTEMPTS = _opt(
    "restart-strategy.exponential-delay.attempts-before-reset-backoff", "int", 2**31 - 1,
    "Attempts before the job fails.", check=_non_negative,
)  # fmt: skip
FAILURE_RATE_MAX = _opt(
    "restart-strategy.failure-rate.max-failures-per-interval", "int", 1, "Failures per interval.",
    check=_positive,
)  # fmt: skip
FAILURE_RATE_INTERVAL = _opt(
    "restart-strategy.failure-rate.failure-rate-interval", "duration", 60_000, "Measuring interval.",
    check=_positive,
)  # fmt: skip
FAILURE_RATE_DELAY = _opt(
    "restart-strategy.failure-rate.delay", "duration", 1000, "Delay between restarts.", check=_non_negative
)
HEARTBEAT_INTERVAL = _opt(
    "heartbeat.interval", "duration", 10_000, "Heartbeat interval between TaskManagers and the ResourceManager.",
    check=_positive,
)  # fmt: skip
HEARTBEAT_TIMEOUT = _opt(
    "heartbeat.timeout",
    "duration",
    50_000,
    "A TaskManager silent this long is declared dead.",
    check=_positive,
)
BUSY_POLL_ENABLED = _opt(
    "execution.busy-poll.enabled", "bool", True,
    "env.execute(): the event loop polls instead of blocking while it is loaded (weir; see busy-poll.min-load).",
)  # fmt: skip
BUSY_POLL_MIN_LOAD = _opt(
    "execution.busy-poll.min-load", "float", 0.5,
    "Share of the event loop's thread busy with work above which it polls rather than blocks (weir).",
    check=lambda v: None if 0 < v <= 1 else "must be within (0, 1]",
)  # fmt: skip
WORKING_DIR = _opt(
    "process.working-dir", "str", None, "Working directory of the embedded cluster (default: a temp dir)."
)
NUMBER_OF_TASKMANAGERS = _opt(
    "local.number-taskmanager", "int", 1, "TaskManagers of the embedded cluster.", check=_positive
)
JOBMANAGER_RPC_ADDRESS = _opt(
    "jobmanager.rpc.address", "str", "127.0.0.1",
    "Where the standalone JobManager's RPC endpoint listens, and where clients reach it.",
)  # fmt: skip
JOBMANAGER_RPC_PORT = _opt(
    "jobmanager.rpc.port", "int", 6123, "Port of the standalone JobManager's RPC endpoint."
)
TASKMANAGER_PROCESSES = _opt(
    "weir.taskmanager.processes", "bool", False,
    "The embedded cluster starts its TaskManagers as child processes (weir; docs/cluster.md).",
)  # fmt: skip
REPLACE_LOST_TASKMANAGERS = _opt(
    "weir.taskmanager.replace-lost", "bool", True,
    "A TaskManager process that dies is replaced by a new one with its id (weir; docs/cluster.md).",
)  # fmt: skip
SLOTS_PER_TASKMANAGER = _opt(
    "taskmanager.numberOfTaskSlots", "int", None, "Slots per TaskManager (default: enough for the job).",
    check=_positive,
)  # fmt: skip
SEGMENT_SIZE = _opt(
    "taskmanager.memory.segment-size", "memory", 32 * 1024, "Network buffer size.", check=_positive
)
NETWORK_MEMORY = _opt(
    "taskmanager.memory.network.max", "memory", 64 << 20, "Network memory per TaskManager (weir: a fixed budget).",
    check=_positive,
)  # fmt: skip
BUFFERS_PER_CHANNEL = _opt(
    "taskmanager.network.memory.buffers-per-channel", "int", 2, "Exclusive buffers per channel.",
    check=_non_negative,
)  # fmt: skip
FLOATING_BUFFERS_PER_GATE = _opt(
    "taskmanager.network.memory.floating-buffers-per-gate", "int", 8, "Floating buffers per gate.",
    check=_non_negative,
)  # fmt: skip
# the transport between the TaskManagers of the embedded cluster (weir; docs/network.md)
NETWORK_TRANSPORT = _opt(
    "taskmanager.network.transport", "enum", "local",
    "How remote channels travel between TaskManagers: local (in-process queues) or tcp (loopback sockets, "
    "authenticated with the cluster's secret) (weir).",
    choices=("local", "tcp"),
)  # fmt: skip
DATA_PORT = _opt(
    "taskmanager.data.port", "int", 0,
    "Port a TaskManager serves its partitions on over TCP; 0 picks a free one.",
    check=lambda v: None if 0 <= v <= 65535 else "must be a TCP port (0..65535, 0 = any free port)",
)  # fmt: skip
BIND_HOST = _opt(
    "taskmanager.bind-host", "str", "127.0.0.1",
    "Address the TaskManagers' TCP listeners bind to (loopback unless configured otherwise).",
)  # fmt: skip
# buffer debloating (Flink's keys; weir sizes source batches by them, see engine/network/debloat.py)
BUFFER_DEBLOAT_ENABLED = _opt(
    "taskmanager.network.memory.buffer-debloat.enabled", "bool", True,
    "Size source batches from the measured processing rate (weir: on by default).",
)  # fmt: skip
BUFFER_DEBLOAT_TARGET = _opt(
    "taskmanager.network.memory.buffer-debloat.target", "duration", 1000,
    "Processing time a barrier may wait behind in a task; a batch takes 1/20 of it at most.",
    check=_positive,
)  # fmt: skip
BUFFER_DEBLOAT_PERIOD = _opt(
    "taskmanager.network.memory.buffer-debloat.period", "duration", 200,
    "How often the processing rate is sampled and the batch size recalculated.", check=_positive,
)  # fmt: skip
BUFFER_DEBLOAT_SAMPLES = _opt(
    "taskmanager.network.memory.buffer-debloat.samples", "int", 20,
    "Samples the moving average of the processing rate spans.", check=_positive,
)  # fmt: skip
BUFFER_DEBLOAT_THRESHOLD = _opt(
    "taskmanager.network.memory.buffer-debloat.threshold-percentages", "int", 25,
    "A new batch size closer than this to the current one is not applied.", check=_positive,
)  # fmt: skip
# failure injection (weir's own, for recovery tests; grammar in engine/cluster/failure_injector.py)
FAILURE_INJECTION_SPEC = _opt(
    "weir.failure-injection.spec", "str", None,
    "Faults to inject, e.g. 'raise:operator=Map,after=500;lose-taskmanager:operator=Window,after=200..900'.",
)  # fmt: skip
FAILURE_INJECTION_SEED = _opt(
    "weir.failure-injection.seed", "int", 0, "Seed of every random choice of the failure injector."
)
FAILURE_INJECTION_MAX_FAILURES = _opt(
    "weir.failure-injection.max-failures", "int", -1,
    "Injected failures over the job's life at most; -1: only each fault's own times= bounds them.",
    check=lambda v: None if v >= -1 else "must be -1 (no overall bound) or >= 0",
)  # fmt: skip

# the dashboard (REST API and web page: weir.cluster.web; `weir run --web`)
REST_PORT = _opt(
    "rest.port", "int", 8081, "Port of the dashboard's REST API and web page; 0 picks a free one.",
    check=lambda v: None if 0 <= v <= 65535 else "must be a TCP port within 0..65535 (0: any free port)",
)  # fmt: skip
REST_BIND_ADDRESS = _opt(
    "rest.bind-address", "str", "127.0.0.1", "Address the dashboard's server binds to (loopback by default)."
)
REST_ADDRESS = _opt(
    "rest.address", "str", None, "Address clients use to reach the dashboard (default: the bind address)."
)


def option_for(key: str) -> ConfigOption | None:
    return OPTIONS.get(key)


class ConfigOptions:
    """Builds a ``ConfigOption`` for a user's own key, as ``pyflink.common.ConfigOptions``:
    ``ConfigOptions.key("my.size").int_type().default_value(4)``. ``Configuration.get_option``
    reads it typed (the default when the key is unset)."""

    def __init__(self) -> None:
        raise TypeError("ConfigOptions is used through ConfigOptions.key(...)")

    @staticmethod
    def key(key: str) -> ConfigOptions.OptionBuilder:
        if not isinstance(key, str) or not key.strip():
            raise UsageError(f"ConfigOptions.key needs a non-empty string key, got {key!r}")
        return ConfigOptions.OptionBuilder(key)

    class OptionBuilder:
        def __init__(self, key: str) -> None:
            self._key = key

        def boolean_type(self) -> ConfigOptions.TypedConfigOptionBuilder:
            return ConfigOptions.TypedConfigOptionBuilder(self._key, "bool")

        def int_type(self) -> ConfigOptions.TypedConfigOptionBuilder:
            return ConfigOptions.TypedConfigOptionBuilder(self._key, "int")

        def long_type(self) -> ConfigOptions.TypedConfigOptionBuilder:
            return ConfigOptions.TypedConfigOptionBuilder(self._key, "int")

        def float_type(self) -> ConfigOptions.TypedConfigOptionBuilder:
            return ConfigOptions.TypedConfigOptionBuilder(self._key, "float")

        def double_type(self) -> ConfigOptions.TypedConfigOptionBuilder:
            return ConfigOptions.TypedConfigOptionBuilder(self._key, "float")

        def string_type(self) -> ConfigOptions.TypedConfigOptionBuilder:
            return ConfigOptions.TypedConfigOptionBuilder(self._key, "str")

    class TypedConfigOptionBuilder:
        def __init__(self, key: str, kind: str) -> None:
            self._key, self._kind = key, kind

        def default_value(self, value: Any) -> ConfigOption:
            probe = ConfigOption(self._key, self._kind, None, "")
            return ConfigOption(self._key, self._kind, probe.parse(value), "")

        def no_default_value(self) -> ConfigOption:
            return ConfigOption(self._key, self._kind, None, "")

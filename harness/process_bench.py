"""``weir bench processes``: the same jobs on TaskManagers in one process and in several, in one run.

Each job runs at parallelism P twice: on an embedded cluster with one TaskManager of P slots
in this process (one event loop, one core), and on P TaskManager processes of one slot each
(``weir.taskmanager.processes``), whose keyed shuffle crosses them over the TCP transport.
Each cluster is opened once and runs every job twice, a short untimed warm-up (the first job
of a process loads weir's numba kernels) and the measured run; events/s are N over the
job's net runtime, and the report prints the ratio processes / one process.

Jobs:

- ``columnar`` and ``per_record``: the shared window query of ``weir bench query`` (count and
  sum per key and 1 s tumbling window), written with ``weir.columnar`` and with per-record
  PyFlink functions; the sinks discard (the answers are checked by ``weir bench query`` and
  by the tests; a sink that collected across processes would measure the collection);
- ``keyed_shuffle``: a number sequence, a per-record map to (key, value), ``key_by``, a
  running sum per key: the shape of the harness's keyed jobs, every record crossing the
  shuffle.

``--timeouts`` (``run_timeout_bench``) measures, on the P TaskManager processes only, the
issue's two targets that need processes: the keyed-shuffle query of the harness (source ->
map -> key_by -> map -> sink, string keys) at its maximum throughput with a buffer timeout
of 100 ms and of 1 ms (ratio 1 ms / 100 ms), and, at each timeout, its latency percentiles
at a fraction (default 0.5) of that timeout's maximum. The paced source is the data
generator's reader whose records end with the time its schedule meant to emit them
(``CLOCK_MONOTONIC``, which every process of the machine shares), so a source that falls
behind its schedule shows up as latency; the sink, in the TaskManager processes, records
each record's latency into an HdrHistogram and writes it, encoded, to a private directory of
the run, where the bench reads it back (a file of numbers, never unpickled). This is not
``weir bench suite``'s open-loop replay: the replay's data sets and its latency sink live in
the job's own process, so the suite cannot run on TaskManager processes.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import trio

from weir import columnar as col
from weir.codec.batch import Batch
from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.functions import SinkFunction
from weir.errors import UsageError
from weir.harness.latency import LatencyHistogram
from weir.harness.query_bench import build_columnar, build_per_record
from weir.operators.sources import DataGeneratorReader
from weir.private_files import private_dir, read_private, write_private

WAYS = ("columnar", "per_record", "keyed_shuffle")
WARM_UP_EVENTS = 100_000


class _Discard(SinkFunction):
    def invoke(self, value: Any, context: Any) -> None:
        pass


class _DiscardBatches(col.BatchSinkFunction):
    def invoke_batch(self, columns: Any, timestamps: Any) -> None:
        pass

    def invoke(self, value: Any, context: Any) -> None:
        pass


def _build(env: StreamExecutionEnvironment, way: str, events: int, keys: int) -> None:
    if way == "keyed_shuffle":
        pair = Types.TUPLE([Types.LONG(), Types.LONG()])
        numbers = env.from_source(
            NumberSequenceSource(0, events - 1), WatermarkStrategy.no_watermarks(), "numbers"
        )
        (
            numbers.map(lambda i: (i % keys, i), output_type=pair)
            .key_by(lambda p: p[0], key_type=Types.LONG())
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
            .add_sink(_Discard())
        )
    elif way == "columnar":
        build_columnar(env, events, keys, "bench", sink=_DiscardBatches())
    else:
        build_per_record(env, events, keys, "bench", sink=_Discard())


def _environment(parallelism: int, processes: bool) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", parallelism if processes else 1)
    conf.set_integer("taskmanager.numberOfTaskSlots", 1 if processes else parallelism)
    conf.set_string("weir.taskmanager.processes", str(processes).lower())
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    return env


async def _run_on_one_cluster(
    ways: tuple[str, ...], events: int, keys: int, parallelism: int, processes: bool
) -> dict[str, float]:
    from weir.cluster.client import cluster_config_for, run_job_graph
    from weir.cluster.minicluster import open_minicluster
    from weir.graph.job_graph import generate_job_graph

    def job(way: str, n: int) -> tuple[Any, Any]:
        env = _environment(parallelism, processes)
        _build(env, way, n, keys)
        return env, generate_job_graph(
            env.get_stream_graph(f"{way} ({'processes' if processes else 'one process'})")
        )

    env, graph = job(ways[0], WARM_UP_EVENTS)
    rates: dict[str, float] = {}
    async with open_minicluster(cluster_config_for(env, graph)) as cluster:
        for way in ways:
            env, graph = job(way, WARM_UP_EVENTS)
            await run_job_graph(env, graph, cluster=cluster)
            env, graph = job(way, events)
            result = await run_job_graph(env, graph, cluster=cluster)
            rates[way] = events / (max(result.get_net_runtime(), 1) / 1000)
    return rates


def run_process_bench(
    events: int, keys: int, parallelism: int, ways: tuple[str, ...] = WAYS, echo: Any = None
) -> dict[str, Any]:
    """Every job in one process, then on ``parallelism`` TaskManager processes; one report."""
    report: dict[str, Any] = {
        "parameters": {"events": events, "keys": keys, "parallelism": parallelism, "ways": list(ways)},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    for processes in (False, True):
        label = "processes" if processes else "one_process"
        if echo is not None:
            echo(
                f"running {', '.join(ways)} on {'TaskManager processes' if processes else 'one process'} ..."
            )
        report[label] = trio.run(_run_on_one_cluster, ways, events, keys, parallelism, processes)
    report["ratio"] = {w: report["processes"][w] / report["one_process"][w] for w in ways}
    return report


def format_process_report(report: dict[str, Any]) -> str:
    p = report["parameters"]
    lines = [
        f"events {p['events']:,}, keys {p['keys']:,}, parallelism {p['parallelism']} "
        f"({report['machine']['cpus']} CPUs, Python {report['machine']['python']})",
        f"{'job':<15}{'one process':>16}{'TM processes':>16}{'ratio':>8}",
    ]
    for way in p["ways"]:
        lines.append(
            f"{way:<15}{report['one_process'][way]:>12,.0f} e/s{report['processes'][way]:>12,.0f} e/s"
            f"{report['ratio'][way]:>7.2f}x"
        )
    return "\n".join(lines)


# -- buffer timeouts and latency on TaskManager processes (--timeouts) -------------------------
TIMEOUTS_MS = (100, 1)  # the pair: the 1 ms timeout against the 100 ms one
BATCH_WAIT_MS = 3.0  # a due record waits at most this long for its batch (the suite's batch_wait_ms)
WARMUP_S = 0.5  # the first part of a latency run is not measured (as the suite's sweeps' warmup_s)
LATENCY_FILE_MAX_BYTES = 1 << 20  # an encoded histogram is a few KiB


class _PacedReader(DataGeneratorReader):
    """The data generator's reader (its pacing and splits) making keyed-shuffle records
    ``(key, value, event_time, intended_ns)``: ``intended_ns`` is when the schedule meant to
    emit the record, on CLOCK_MONOTONIC, and ``event_time`` its place in the schedule in ms
    (unpaced: ``event_time`` 0, ``intended_ns`` the batch's making). Paced, a batch holds the records due within
    ``BATCH_WAIT_MS`` and leaves when the last of them is due: the wait of the earlier ones
    counts in their latency, as the suite's open-loop batches do."""

    def __init__(self, keys: int, count: int, rate: float | None, subtask: int, parallelism: int) -> None:
        super().__init__(None, count, rate, subtask, parallelism)
        self.keys = keys
        self.anchor_ns: int | None = None
        if self.rate is not None:  # a batch spans BATCH_WAIT_MS of the schedule at most
            self.batch_size = max(1, min(self.batch_size or 1, int(self.rate * BATCH_WAIT_MS / 1000)))

    async def next_batch(self) -> Batch | None:
        """The next batch once its last record is due, so no record leaves before its time
        (the parent waits for the first). Cancellation: while waiting, nothing is read."""
        if self.rate is not None and self.splits:
            if self.started_at is None:
                self.started_at = trio.current_time()
            start, stop, _ = self.splits[0]
            n = min(self.batch_size or 1, stop - start)  # the parent's batch (the task may shrink it)
            if n > 0:
                await trio.sleep_until(self.started_at + (self.emitted + n - 1) / self.rate)
        return await super().next_batch()

    def _generate(self, indexes: range) -> Batch:
        keys = self.keys
        if self.rate is None:  # stamped when made: the sink's work is the same as in a paced run
            now = time.monotonic_ns()
            return Batch([(f"k{i % keys}", i, 0, now) for i in indexes])
        if self.anchor_ns is None:  # the schedule's start, moved from the Trio clock to CLOCK_MONOTONIC
            assert self.started_at is not None
            self.anchor_ns = time.monotonic_ns() - int((trio.current_time() - self.started_at) * 1e9)
        first, ns_per_record = self.emitted, 1e9 / self.rate
        anchor = self.anchor_ns
        offsets = [int((first + j) * ns_per_record) for j in range(len(indexes))]
        return Batch(
            [
                (f"k{i % keys}", i, at // 1_000_000, anchor + at)
                for i, at in zip(indexes, offsets, strict=True)
            ]
        )


class _PacedSource(DataGeneratorSource):
    """``count`` keyed-shuffle records over ``keys`` keys, at ``rate`` records/s in all (None:
    as fast as possible)."""

    def __init__(self, keys: int, count: int, rate: float | None) -> None:
        record = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()])
        super().__init__(lambda i: i, count, rate, type_info=record)
        self.keys = keys

    def create_reader(self, subtask: int, parallelism: int) -> _PacedReader:
        return _PacedReader(self.keys, self.count or 0, self.rate_limit, subtask, parallelism)


class _LatencyToFile(col.BatchSinkFunction):
    """Records the latency of each record after the warm-up (now minus its ``intended_ns``,
    µs; the warm-up: an ``event_time`` below ``warmup_ms``) and, when closed, writes the
    encoded histogram to ``directory/latency-<subtask>.hdr`` (mode 0600). Records one at a
    time (behind a per-record operator) are recorded ``FLUSH_RECORDS`` at a time."""

    FLUSH_RECORDS = 8192

    def __init__(self, directory: str, warmup_ms: int) -> None:
        self.directory = directory
        self.warmup_ms = warmup_ms

    def open(self, runtime_context: Any) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.histogram = LatencyHistogram()
        self.pending_us: list[int] = []

    def invoke_batch(self, columns: tuple[Any, ...], timestamps: Any) -> None:
        now = time.monotonic_ns()
        measured = np.asarray(columns[2], dtype=np.int64) >= self.warmup_ms
        intended = np.asarray(columns[3], dtype=np.int64)[measured]
        self.histogram.record_array((now - intended) // 1000)

    def invoke(self, value: Any, context: Any) -> None:
        if value[2] >= self.warmup_ms:
            self.pending_us.append((time.monotonic_ns() - value[3]) // 1000)
            if len(self.pending_us) >= self.FLUSH_RECORDS:
                self.histogram.record_array(self.pending_us)
                self.pending_us = []

    def close(self) -> None:
        if getattr(self, "histogram", None) is None:
            return  # closed before it opened: the task failed first, and the run reports the failure
        self.histogram.record_array(self.pending_us)
        self.pending_us = []
        encoded = self.histogram.encode().encode()
        write_private(Path(self.directory) / f"latency-{self.subtask}.hdr", encoded)


def _keyed_shuffle_query(
    env: StreamExecutionEnvironment, events: int, keys: int, rate: float | None, sink: Any
) -> None:
    """The harness's ``keyed-shuffle`` query (harness/portable_queries.py) over a paced source."""
    record = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG()])
    (
        env.from_source(_PacedSource(keys, events, rate), WatermarkStrategy.no_watermarks(), "events")
        .map(lambda e: e, output_type=record)
        .key_by(lambda e: e[0], key_type=Types.STRING())
        .map(lambda e: e, output_type=record)
        .name("keyed map")
        .add_sink(sink)
    )


def _read_latencies(directory: Path, parallelism: int) -> LatencyHistogram:
    """The histograms the sink subtasks wrote, merged; one missing is an error naming it."""
    merged = LatencyHistogram()
    for subtask in range(parallelism):
        path = directory / f"latency-{subtask}.hdr"
        if not path.exists():
            raise UsageError(f"the latency sink's subtask {subtask} wrote no histogram ({path} is missing)")
        merged.add(LatencyHistogram.decode(read_private(path, max_bytes=LATENCY_FILE_MAX_BYTES).decode()))
    return merged


async def _run_timeouts(
    events: int, keys: int, parallelism: int, seconds: float, fraction: float, work: Path
) -> dict[str, Any]:
    from weir.cluster.client import cluster_config_for, run_job_graph
    from weir.cluster.minicluster import open_minicluster
    from weir.graph.job_graph import generate_job_graph

    def job(n: int, timeout_ms: int, rate: float | None, sink: Any, name: str) -> tuple[Any, Any]:
        env = _environment(parallelism, True)
        env.set_buffer_timeout(timeout_ms)
        _keyed_shuffle_query(env, n, keys, rate, sink)
        return env, generate_job_graph(env.get_stream_graph(name))

    out: dict[str, Any] = {"max_eps": {}, "latency": {}}
    unmeasured = _LatencyToFile(str(private_dir(work / "max")), warmup_ms=0)  # the same sink's work
    env, graph = job(WARM_UP_EVENTS, TIMEOUTS_MS[0], None, unmeasured, "warm-up")
    async with open_minicluster(cluster_config_for(env, graph)) as cluster:
        await run_job_graph(env, graph, cluster=cluster)
        for timeout_ms in TIMEOUTS_MS:
            env, graph = job(events, timeout_ms, None, unmeasured, f"keyed-shuffle max, {timeout_ms} ms")
            result = await run_job_graph(env, graph, cluster=cluster)
            out["max_eps"][str(timeout_ms)] = events / (max(result.get_net_runtime(), 1) / 1000)
        for timeout_ms in TIMEOUTS_MS:
            rate = fraction * out["max_eps"][str(timeout_ms)]
            directory = private_dir(work / f"latency-{timeout_ms}ms")
            sink = _LatencyToFile(str(directory), int(WARMUP_S * 1000))
            n = max(parallelism, int(rate * seconds))
            env, graph = job(
                n, timeout_ms, rate, sink, f"keyed-shuffle at {fraction:g} of max, {timeout_ms} ms"
            )
            result = await run_job_graph(env, graph, cluster=cluster)
            histogram = _read_latencies(directory, parallelism)
            percentiles = histogram.percentiles_us()
            out["latency"][str(timeout_ms)] = {
                "rate_eps": rate,
                "events": n,
                "records_measured": histogram.total_count,
                "achieved_eps": n / (max(result.get_net_runtime(), 1) / 1000),
                **{f"{k}_ms": v / 1000 for k, v in percentiles.items()},
            }
    return out


def run_timeout_bench(
    events: int, keys: int, parallelism: int, seconds: float = 5.0, fraction: float = 0.5, echo: Any = None
) -> dict[str, Any]:
    """The keyed-shuffle query on ``parallelism`` TaskManager processes: max throughput at
    buffer timeouts 100 and 1 ms, then latency at ``fraction`` of each maximum for ``seconds`` (the first ``WARMUP_S`` not measured)."""
    if not seconds > WARMUP_S:
        raise UsageError(f"a latency run must last longer than its {WARMUP_S} s warm-up, got {seconds!r} s")
    if not 0 < fraction <= 1:
        raise UsageError(f"the latency run's fraction of the maximum must be within (0, 1], got {fraction!r}")
    if echo is not None:
        echo(f"running the keyed-shuffle query on {parallelism} TaskManager processes at buffer timeouts "
             f"{' and '.join(f'{t} ms' for t in TIMEOUTS_MS)} ...")  # fmt: skip
    load_before = list(os.getloadavg())  # the machine is shared: what else ran, before and after
    with tempfile.TemporaryDirectory(prefix="weir-bench-timeouts-") as work:
        measured = trio.run(_run_timeouts, events, keys, parallelism, seconds, fraction, Path(work))
    fast, slow = (measured["max_eps"][str(t)] for t in (TIMEOUTS_MS[1], TIMEOUTS_MS[0]))
    return {
        "parameters": {"events": events, "keys": keys, "parallelism": parallelism, "seconds": seconds, "warmup_s": WARMUP_S,
                       "fraction": fraction, "buffer_timeouts_ms": list(TIMEOUTS_MS),
                       "query": "keyed-shuffle (source -> map -> key_by -> map -> sink)",
                       "taskmanagers": parallelism, "slots_per_taskmanager": 1},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_before": load_before,
                    "load_average": list(os.getloadavg())},
        **measured,
        "ratio_1ms_to_100ms": fast / slow,
    }  # fmt: skip


def format_timeout_report(report: dict[str, Any]) -> str:
    p = report["parameters"]
    lines = [
        f"keyed-shuffle on {p['taskmanagers']} TaskManager processes: events {p['events']:,}, keys "
        f"{p['keys']:,} ({report['machine']['cpus']} CPUs, load average "
        f"{report['machine']['load_average_before'][0]:.1f} before, "
        f"{report['machine']['load_average'][0]:.1f} after)",
        f"{'buffer timeout':<16}{'max e/s':>12}{'latency at':>14}{'p50':>9}{'p99':>9}{'p99.9':>9}{'max':>9}",
    ]
    for t in p["buffer_timeouts_ms"]:
        lat = report["latency"][str(t)]
        lines.append(
            f"{f'{t} ms':<16}{report['max_eps'][str(t)]:>12,.0f}{lat['rate_eps']:>10,.0f} e/s"
            f"{lat['p50_ms']:>7.1f}ms{lat['p99_ms']:>7.1f}ms{lat['p99.9_ms']:>7.1f}ms{lat['max_ms']:>7.1f}ms"
        )
    lines.append(f"1 ms / 100 ms max throughput: {report['ratio_1ms_to_100ms']:.2f}x "
                 f"(latency at {p['fraction']:g} of each maximum, {p['seconds']:g} s "
                 f"runs, the first {p['warmup_s']:g} s not measured)")  # fmt: skip
    return "\n".join(lines)

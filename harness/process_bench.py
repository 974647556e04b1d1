"""``weir bench processes``: the same jobs on TaskManagers in one process and in several, in one run.

Each job runs at parallelism P twice: on an embedded cluster with one TaskManager of P slots
in this process (one event loop, one core), and on P TaskManager processes of one slot each
(``weir.taskmanager.processes``), whose keyed shuffle crosses them over the TCP transport.
Each cluster is opened once and runs every job three times: a short untimed warm-up (the
first job of a process loads weir's numba kernels), the same job at full size untimed (its
first run in a process grows the pane tables and buffers into fresh memory), and the
measured run; events/s are N over the job's net runtime, and the report prints the ratio
processes / one process.

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
at a fraction (default 0.5) of that timeout's maximum. The paced source is paced as the
suite's open-loop readers (shared batch points every 3 ms, catch-up batches when far behind;
see ``_PacedReader``) and its records end with the time its schedule meant to emit them
(``CLOCK_MONOTONIC``, which every process of the machine shares), so a source that falls
behind its schedule shows up as latency; the sink, in the TaskManager processes, records
each record's latency (a batch's records arrive when the batch reaches the sink, as in the
suite's latency sink) into an HdrHistogram and writes it, encoded, to a private directory of
the run, where the bench reads it back (a file of numbers, never unpickled). This is not
``weir bench suite``'s open-loop replay: the replay's data sets and its latency sink live in
the job's own process, so the suite cannot run on TaskManager processes.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import statistics
import tempfile
import time
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import trio

from weir import columnar as col
from weir.codec.batch import Batch
from weir.columnar.functions import columns_of
from weir.common import Configuration, Types, WatermarkStrategy
from weir.core.connectors import Sink
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.functions import SinkFunction
from weir.errors import UsageError
from weir.harness import steadiness
from weir.harness.latency import LatencyHistogram
from weir.harness.query_bench import build_columnar, build_per_record
from weir.harness.steadiness import HostProbe
from weir.loop.ticker import sleep_until
from weir.operators.sinks import SinkOperator
from weir.operators.sources import DEFAULT_BATCH_SIZE, DataGeneratorReader
from weir.private_files import private_dir, read_private, write_private

WAYS = ("columnar", "per_record", "keyed_shuffle")
WARM_UP_EVENTS = 100_000
#: the machine's steadiness is probed this long before and after the runs (as the suite's)
STEADINESS_SECONDS = 3.0


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
            # then once at full size, untimed: a process's first run of a job grows its pane
            # tables and buffers into fresh memory, whose first touch cost the kernel ~0.4 s per
            # 120 MiB here, and every round starts fresh TaskManager processes
            env, graph = job(way, events)
            await run_job_graph(env, graph, cluster=cluster)
            env, graph = job(way, events)
            result = await run_job_graph(env, graph, cluster=cluster)
            rates[way] = events / (max(result.get_net_runtime(), 1) / 1000)
    return rates


def run_process_bench(
    events: int,
    keys: int,
    parallelism: int,
    ways: tuple[str, ...] = WAYS,
    echo: Any = None,
    repeat: int = 1,
    steadiness_seconds: float = STEADINESS_SECONDS,
) -> dict[str, Any]:
    """Every job in one process, then on ``parallelism`` TaskManager processes, ``repeat``
    rounds of both (a slow spell of the machine falls on both); a figure is the median of a
    job's runs. One report, with every run's rate and the machine's steadiness before and
    after the runs (``steadiness.probe`` for ``steadiness_seconds``)."""
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")
    steady_start = steadiness.probe(steadiness_seconds)
    report: dict[str, Any] = {
        "parameters": {"events": events, "keys": keys, "parallelism": parallelism, "ways": list(ways),
                       "repeat": repeat},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }  # fmt: skip
    runs: dict[str, dict[str, list[float]]] = {"one_process": {}, "processes": {}}
    for round_ in range(repeat):
        for processes in (False, True):
            label = "processes" if processes else "one_process"
            if echo is not None:
                where = "TaskManager processes" if processes else "one process"
                echo(f"running {', '.join(ways)} on {where} ({round_ + 1}/{repeat}) ...")
            rates = trio.run(_run_on_one_cluster, ways, events, keys, parallelism, processes)
            for way, rate in rates.items():
                runs[label].setdefault(way, []).append(rate)
    for label, by_way in runs.items():
        report[label] = {way: statistics.median(rates) for way, rates in by_way.items()}
        report[f"{label}_runs"] = by_way
    report["ratio"] = {w: report["processes"][w] / report["one_process"][w] for w in ways}
    report["machine"]["steadiness"] = {"start": steady_start, "end": steadiness.probe(steadiness_seconds)}
    return report


def _steadiness_line(report: dict[str, Any]) -> str:
    steady = report["machine"]["steadiness"]
    return (
        f"machine steadiness (a fixed loop timed back to back): at start {steadiness.describe(steady['start'])}; "
        f"at end {steadiness.describe(steady['end'])}"
    )


def format_process_report(report: dict[str, Any]) -> str:
    p = report["parameters"]
    lines = [
        f"events {p['events']:,}, keys {p['keys']:,}, parallelism {p['parallelism']}, "
        f"median of {p.get('repeat', 1)} rounds ({report['machine']['cpus']} CPUs, Python {report['machine']['python']})",
        f"{'job':<15}{'one process':>16}{'TM processes':>16}{'ratio':>8}",
    ]
    for way in p["ways"]:
        lines.append(
            f"{way:<15}{report['one_process'][way]:>12,.0f} e/s{report['processes'][way]:>12,.0f} e/s"
            f"{report['ratio'][way]:>7.2f}x"
        )
    if p.get("repeat", 1) > 1:  # how far the rounds moved: each round's two runs side by side
        for way in p["ways"]:
            pairs = zip(report["one_process_runs"][way], report["processes_runs"][way], strict=True)
            lines.append(f"{way} by round: " + ", ".join(f"{tm / one:.2f}x" for one, tm in pairs))
    if "steadiness" in report["machine"]:  # reports of older builds have none
        lines.append(_steadiness_line(report))
    return "\n".join(lines)


# -- buffer timeouts and latency on TaskManager processes (--timeouts) -------------------------
TIMEOUTS_MS = (100, 1)  # the pair: the 1 ms timeout against the 100 ms one
BATCH_WAIT_MS = 3.0  # a due record waits at most this long for its batch (the suite's batch_wait_ms)
#: the most records of one paced batch, and how far behind (ms) a reader goes back to full
#: batches: the suite's open-loop readers' OPEN_LOOP_BATCH_ROWS and CATCH_UP_BEHIND_MS
#: (harness/replay.py, where they were measured)
OPEN_LOOP_BATCH_ROWS = 1_024
CATCH_UP_BEHIND_MS = 50.0
WARMUP_S = 0.5  # the first part of a latency run is not measured (as the suite's sweeps' warmup_s)
LATENCY_FILE_MAX_BYTES = 1 << 20  # an encoded histogram is a few KiB


class _PacedReader(DataGeneratorReader):
    """The data generator's splits, paced as the suite's open-loop readers, making
    keyed-shuffle records ``(key, value, event_time, intended_ns)``: ``intended_ns`` is when
    the schedule meant to emit the record, on CLOCK_MONOTONIC, and ``event_time`` its place
    in the schedule in ms (unpaced: ``event_time`` 0, ``intended_ns`` the batch's making).

    Paced, a reader emits at the multiples of ``BATCH_WAIT_MS`` on CLOCK_MONOTONIC, which
    every process of the machine shares: at each such point, every record due by then
    (at most ``OPEN_LOOP_BATCH_ROWS``), so a due record waits at most ``BATCH_WAIT_MS`` for
    its batch and the wait counts in its latency. All readers of a run, in every
    TaskManager process, emit at the same points, which lie on the TaskManagers' 1 ms
    ticks: a batch leaves with the flush of the tick it was emitted at, and a consumer finds
    both producers' batches at once. The wait is a sleep on the TaskManager's ticker. A
    reader more than ``CATCH_UP_BEHIND_MS`` behind emits what is due in the source's full
    batches (a source that is behind reads its largest batches, as the suite's do)."""

    def __init__(self, keys: int, count: int, rate: float | None, subtask: int, parallelism: int) -> None:
        super().__init__(None, count, rate, subtask, parallelism)
        self.keys = keys
        self.names = [f"k{k}" for k in range(keys)]
        self.anchor_ns: int | None = None

    async def next_batch(self) -> Batch | None:
        """The next batch at its batch point; no record leaves before its time.
        Cancellation: while waiting, nothing is read."""
        while self.splits and self.splits[0][0] >= self.splits[0][1]:
            self.splits.pop(0)
        if not self.splits:
            return None
        split = self.splits[0]
        start, stop = split[0], split[1]
        if self.rate is None:  # stamped when made: the sink's work is the same as in a paced run
            hi = min(start + (self.batch_size or DEFAULT_BATCH_SIZE), stop)  # the task may size it
            now, names, keys = time.monotonic_ns(), self.names, self.keys
            batch = Batch([(names[i % keys], i, 0, now) for i in range(start, hi)])
        else:
            n = await self._wait_for_due(stop - start)
            batch = self._paced(start, n)
            hi = start + n
        split[0] = hi
        self.emitted += hi - start
        return batch

    async def _wait_for_due(self, left: int) -> int:
        """Sleep until the next batch point (or the last record of a full batch is due, if that
        comes first); how many records are due then."""
        assert self.rate is not None
        if self.started_at is None:  # the schedule's start, on the Trio clock and CLOCK_MONOTONIC
            self.started_at = trio.current_time()
            self.anchor_ns = time.monotonic_ns()
        assert self.anchor_ns is not None
        ns_per_record, anchor, emitted = 1e9 / self.rate, self.anchor_ns, self.emitted
        period = int(BATCH_WAIT_MS * 1e6)
        now = anchor + int((trio.current_time() - self.started_at) * 1e9)  # on CLOCK_MONOTONIC
        due_first = anchor + int(emitted * ns_per_record)
        cap = min(
            left, DEFAULT_BATCH_SIZE if now - due_first > CATCH_UP_BEHIND_MS * 1e6 else OPEN_LOOP_BATCH_ROWS
        )
        wake = min(-(-due_first // period) * period, anchor + int((emitted + cap - 1) * ns_per_record))
        if wake > now:
            await sleep_until(self.started_at + (wake - anchor) / 1e9)
            now = anchor + int((trio.current_time() - self.started_at) * 1e9)
        due = int((now - anchor) / ns_per_record) + 1 - emitted  # records due by now
        while due > 1 and anchor + int((emitted + due - 1) * ns_per_record) > now:
            due -= 1  # the float division rounded up past a record not yet due
        return max(1, min(cap, due))

    def _paced(self, start: int, n: int) -> Batch:
        assert self.rate is not None and self.anchor_ns is not None
        at = (np.arange(self.emitted, self.emitted + n, dtype=np.float64) * (1e9 / self.rate)).astype(
            np.int64
        )
        names, keys = self.names, self.keys
        indexes = range(start, start + n)
        return Batch(
            list(
                zip(
                    [names[i % keys] for i in indexes],
                    indexes,
                    (at // 1_000_000).tolist(),
                    (at + self.anchor_ns).tolist(),
                    strict=True,
                )
            )
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


class _LatencyToFile(Sink):
    """``sink_to``: records the latency of each record after the warm-up (its arrival minus
    its ``intended_ns``, µs; the warm-up: an ``event_time`` below ``warmup_ms``) and, when
    closed, writes the encoded histogram to ``directory/latency-<subtask>.hdr`` (mode 0600).
    As the suite's latency sink, a batch's records arrive when the batch reaches the sink
    (one clock reading for them all), and are recorded ``FLUSH_RECORDS`` at a time.

    ``probe_host``: the sink also probes the host in its TaskManager's event loop, as the
    suite's open-loop runs do (``HostProbe``: a short loop timed every 2 ms in the thread
    that runs the job), from the first measured record on, and writes the probe's summary
    to ``directory/host-<subtask>.json`` (mode 0600) when closed. A p99 then comes with the
    share of 20 ms windows in which the host ran that TaskManager slow."""

    def __init__(self, directory: str, warmup_ms: int, probe_host: bool = False) -> None:
        self.directory = directory
        self.warmup_ms = warmup_ms
        self.probe_host = probe_host

    def create_operator(self, name: str) -> _LatencyToFileOperator:
        return _LatencyToFileOperator(name, self)


_EVENT_TIME, _INTENDED = itemgetter(2), itemgetter(3)


class _LatencyToFileOperator(SinkOperator):
    FLUSH_RECORDS = 8192

    def __init__(self, name: str, sink: _LatencyToFile) -> None:
        super().__init__(name)
        self.sink = sink
        self.histogram: LatencyHistogram | None = None
        self._arrivals: list[int] = []
        self._event_times: list[np.ndarray] = []
        self._intended: list[np.ndarray] = []
        self._pending = 0
        self.probe: HostProbe | None = None

    def open(self) -> None:
        self.histogram = LatencyHistogram()
        if self.sink.probe_host:  # open runs on the TaskManager's event loop: the probe joins it
            self.probe = HostProbe()
            trio.lowlevel.add_instrument(self.probe)

    def process_batch(self, batch: Batch) -> None:
        n = len(batch)
        if not n:
            return
        now = time.monotonic_ns()
        self.metrics.records_in += n
        columns = columns_of(batch.values)
        if columns is not None:
            event_times = np.asarray(columns[2], dtype=np.int64)
            intended = np.asarray(columns[3], dtype=np.int64)
        else:
            rows = batch.as_list()
            event_times = np.fromiter(map(_EVENT_TIME, rows), dtype=np.int64, count=n)
            intended = np.fromiter(map(_INTENDED, rows), dtype=np.int64, count=n)
        probe = self.probe
        if probe is not None and probe.started is None and int(event_times.max()) >= self.sink.warmup_ms:
            probe.start()  # the first measured record: the probe covers what the histogram does
        self._arrivals.append(now)
        self._event_times.append(event_times)
        self._intended.append(intended)
        self._pending += n
        if self._pending >= self.FLUSH_RECORDS:
            self.flush()

    def flush(self) -> None:
        if not self._pending or self.histogram is None:
            return
        counts = [len(a) for a in self._intended]
        now = np.repeat(np.array(self._arrivals, dtype=np.int64), counts)
        measured = np.concatenate(self._event_times) >= self.sink.warmup_ms
        latency_us = (now - np.concatenate(self._intended))[measured] // 1000
        self._arrivals, self._event_times, self._intended, self._pending = [], [], [], 0
        self.histogram.record_array(latency_us)

    def close(self) -> None:
        if self.histogram is None:
            return  # closed before it opened: the task failed first, and the run reports the failure
        self.flush()
        encoded = self.histogram.encode().encode()
        directory, subtask = Path(self.sink.directory), self.context.subtask_index
        write_private(directory / f"latency-{subtask}.hdr", encoded)
        if self.probe is not None:
            with contextlib.suppress(KeyError, RuntimeError):  # closed off the loop, or removed already
                trio.lowlevel.remove_instrument(self.probe)
            write_private(directory / f"host-{subtask}.json", json.dumps(self.probe.summary()).encode())
            self.probe = None


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
        .sink_to(sink)
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


#: what a probe's summary holds: ``steadiness.HostProbe.summary``
_HOST_NUMBERS = ("seconds", "loop_us", "slow_share", "longest_slow_ms")


def _read_host(directory: Path, parallelism: int) -> list[dict[str, Any]]:
    """The host probes' summaries the sink subtasks wrote, by subtask; a file missing or
    not a probe's summary is an error naming it (JSON numbers and a string, never code)."""
    summaries = []
    for subtask in range(parallelism):
        path = directory / f"host-{subtask}.json"
        if not path.exists():
            raise UsageError(f"the latency sink's subtask {subtask} wrote no host probe ({path} is missing)")
        try:
            summary = json.loads(read_private(path, max_bytes=LATENCY_FILE_MAX_BYTES))
        except ValueError as e:
            raise UsageError(f"{path} is not JSON: {e}") from None
        valid = (
            isinstance(summary, dict)
            and set(summary) == {*_HOST_NUMBERS, "windows_us"}
            and all(_number_or_none(summary[k]) for k in _HOST_NUMBERS)
            and isinstance(summary["windows_us"], str)
            and all(_is_number_text(w) for w in summary["windows_us"].split())
        )
        if not valid:
            raise UsageError(
                f"{path} is not a host probe's summary: expected an object of {', '.join(_HOST_NUMBERS)} "
                "(numbers or null) and windows_us (a string)"
            )
        summaries.append(summary)
    return summaries


def _number_or_none(value: Any) -> bool:
    return value is None or (type(value) in (int, float) and math.isfinite(value))


def _is_number_text(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


async def _run_timeouts(
    events: int, keys: int, parallelism: int, seconds: float, fraction: float, work: Path, processes: bool
) -> dict[str, Any]:
    from weir.cluster.client import cluster_config_for, run_job_graph
    from weir.cluster.minicluster import open_minicluster
    from weir.graph.job_graph import generate_job_graph

    def job(n: int, timeout_ms: int, rate: float | None, sink: Any, name: str) -> tuple[Any, Any]:
        env = _environment(parallelism, processes)
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
            sink = _LatencyToFile(str(directory), int(WARMUP_S * 1000), probe_host=True)
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
                "host": _read_host(directory, parallelism),
            }
    return out


def run_timeout_bench(
    events: int,
    keys: int,
    parallelism: int,
    seconds: float = 5.0,
    fraction: float = 0.5,
    echo: Any = None,
    processes: bool = True,
    steadiness_seconds: float = STEADINESS_SECONDS,
) -> dict[str, Any]:
    """The keyed-shuffle query on ``parallelism`` TaskManager processes: max throughput at
    buffer timeouts 100 and 1 ms, then latency at ``fraction`` of each maximum for ``seconds``
    (the first ``WARMUP_S`` not measured). ``processes`` False: the same on one TaskManager
    of ``parallelism`` slots in this process, on the clock ``execute()`` uses (busy polling).
    Each latency run comes with its sink subtasks' host probes (``_LatencyToFile``), and the
    report with the machine's steadiness before and after the runs."""
    if not seconds > WARMUP_S:
        raise UsageError(f"a latency run must last longer than its {WARMUP_S} s warm-up, got {seconds!r} s")
    if not 0 < fraction <= 1:
        raise UsageError(f"the latency run's fraction of the maximum must be within (0, 1], got {fraction!r}")
    where = f"{parallelism} TaskManager processes" if processes else "one process"
    if echo is not None:
        echo(f"running the keyed-shuffle query on {where} at buffer timeouts "
             f"{' and '.join(f'{t} ms' for t in TIMEOUTS_MS)} ...")  # fmt: skip
    from weir.cluster.client import loop_clock

    load_before = list(os.getloadavg())  # the machine is shared: what else ran, before and after
    steady_start = steadiness.probe(steadiness_seconds)
    clock = None if processes else loop_clock(_environment(parallelism, False))
    with tempfile.TemporaryDirectory(prefix="weir-bench-timeouts-") as work:
        measured = trio.run(
            _run_timeouts, events, keys, parallelism, seconds, fraction, Path(work), processes, clock=clock
        )
    fast, slow = (measured["max_eps"][str(t)] for t in (TIMEOUTS_MS[1], TIMEOUTS_MS[0]))
    return {
        "parameters": {"events": events, "keys": keys, "parallelism": parallelism, "seconds": seconds, "warmup_s": WARMUP_S,
                       "fraction": fraction, "buffer_timeouts_ms": list(TIMEOUTS_MS),
                       "query": "keyed-shuffle (source -> map -> key_by -> map -> sink)",
                       "taskmanagers": parallelism if processes else 1,
                       "slots_per_taskmanager": 1 if processes else parallelism, "processes": processes},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_before": load_before,
                    "load_average": list(os.getloadavg()),
                    "steadiness": {"start": steady_start, "end": steadiness.probe(steadiness_seconds)}},
        **measured,
        "ratio_1ms_to_100ms": fast / slow,
    }  # fmt: skip


def format_timeout_report(report: dict[str, Any]) -> str:
    p = report["parameters"]
    where = (
        f"{p['taskmanagers']} TaskManager processes"
        if p.get("processes", True)
        else f"one process (1 TaskManager, {p['slots_per_taskmanager']} slots)"
    )
    lines = [
        f"keyed-shuffle on {where}: events {p['events']:,}, keys "
        f"{p['keys']:,} ({report['machine']['cpus']} CPUs, load average "
        f"{report['machine']['load_average_before'][0]:.1f} before, "
        f"{report['machine']['load_average'][0]:.1f} after)",
        f"{'buffer timeout':<16}{'max e/s':>12}{'latency at':>14}{'p50':>9}{'p99':>9}{'p99.9':>9}{'max':>9}"
        f"  {'loop':>13}  slow",
    ]
    calm = host_calm_us(report)
    for t in p["buffer_timeouts_ms"]:
        lat = report["latency"][str(t)]
        lines.append(
            f"{f'{t} ms':<16}{report['max_eps'][str(t)]:>12,.0f}{lat['rate_eps']:>10,.0f} e/s"
            f"{lat['p50_ms']:>7.1f}ms{lat['p99_ms']:>7.1f}ms{lat['p99.9_ms']:>7.1f}ms{lat['max_ms']:>7.1f}ms"
            f"  {host_loop_label(lat.get('host')):>13}  {host_slow_label(lat.get('host'), calm)}"
        )
    lines.append(f"1 ms / 100 ms max throughput: {report['ratio_1ms_to_100ms']:.2f}x "
                 f"(latency at {p['fraction']:g} of each maximum, {p['seconds']:g} s "
                 f"runs, the first {p['warmup_s']:g} s not measured)")  # fmt: skip
    if calm is not None:
        lines.append(
            "loop, slow: by sink subtask, the median 20 ms window of a loop timed every 2 ms in its "
            "TaskManager's thread during the latency run, and the share of windows in which the host ran "
            f"that thread slow (the window's fastest loop over {steadiness.SLOW_FACTOR}x the calmer run's "
            f"median, {calm:.1f} us)"
        )
    if "steadiness" in report["machine"]:
        lines.append(_steadiness_line(report))
    return "\n".join(lines)


def host_calm_us(report: dict[str, Any]) -> float | None:
    """The loop time of the calmest host probe of the report's latency runs (None when none
    was probed): what a slow window is measured against, as in the suite's reports."""
    return steadiness.calm_loop_us([h for lat in report["latency"].values() for h in lat.get("host") or []])


def host_loop_label(hosts: list[dict[str, Any]] | None) -> str:
    """Each sink subtask's median window in one latency run: '8.4 / 9.1 us', or '–'."""
    loops = [h.get("loop_us") for h in hosts or []]
    if not loops or None in loops:
        return "–"
    return " / ".join(f"{loop:.1f}" for loop in loops) + " us"


def host_slow_label(hosts: list[dict[str, Any]] | None, calm_us: float | None) -> str:
    """Each sink subtask's share of slow windows in one latency run: '3% / 41%', or '–'."""
    if not hosts:
        return "–"
    return " / ".join(steadiness.slow_label(h, calm_us).removesuffix(" slow") for h in hosts)

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
"""

from __future__ import annotations

import os
import platform
from typing import Any

import trio

from weir import columnar as col
from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.functions import SinkFunction
from weir.harness.query_bench import build_columnar, build_per_record

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

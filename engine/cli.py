"""The ``weir`` command line. Parses options and calls into the package; no logic here."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from weir import __version__, cli_harness
from weir.common import config_options as opts
from weir.common.configuration import Configuration
from weir.errors import WeirError


def _conf(
    parallelism: int | None,
    taskmanagers: int | None = None,
    slots: int | None = None,
    buffer_timeout_ms: int | None = None,
) -> Configuration:
    conf = Configuration()
    if parallelism is not None:
        conf.set_integer(opts.PARALLELISM_DEFAULT.key, parallelism)
    if taskmanagers is not None:
        conf.set_integer(opts.NUMBER_OF_TASKMANAGERS.key, taskmanagers)
    if slots is not None:
        conf.set_integer(opts.SLOTS_PER_TASKMANAGER.key, slots)
    if buffer_timeout_ms is not None:
        conf.set_string(opts.BUFFER_TIMEOUT.key, f"{buffer_timeout_ms} ms")
    return conf


class _WeirGroup(click.Group):
    """Turns WeirError into one clear line on stderr and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except WeirError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)


@click.group(cls=_WeirGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="weir")
def main() -> None:
    """weir: Apache Flink's runtime re-created in Python on one machine."""


@main.command()
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--level",
    type=click.Choice(["stream", "job", "execution"]),
    default="job",
    show_default=True,
    help="Graph level: StreamGraph, JobGraph (chained) or ExecutionGraph (subtasks in slots).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "dot"]), default="text", show_default=True
)
@click.option("--parallelism", "-p", type=click.IntRange(min=1), help="Default parallelism of the job.")
@click.option("--taskmanagers", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--slots", type=click.IntRange(min=1), help="Slots per TaskManager (default: as many as the job needs)."
)
@click.option(
    "--target",
    type=click.Choice(["weir", "flink"]),
    default="weir",
    show_default=True,
    help="flink: print Apache Flink's execution plan JSON beside weir's, and their differences (needs PyFlink).",
)
def plan(
    job_file: Path,
    level: str,
    fmt: str,
    parallelism: int | None,
    taskmanagers: int,
    slots: int | None,
    target: str = "weir",
) -> None:
    """Print the plan of JOB_FILE at one graph level without running it."""
    if target == "flink":
        _plan_on_flink(job_file, parallelism, fmt)
        return
    from weir.graph import plan as render
    from weir.jobfile import load_job_file
    from weir.operators.explain import explain_graph

    stream_graph = load_job_file(job_file, _conf(parallelism))
    notes = explain_graph(stream_graph)  # which operators run vectorized, and why the others do not
    if level == "stream":
        out = {
            "json": lambda: json.dumps(render.stream_graph_to_json(stream_graph, notes), indent=2),
            "text": lambda: render.stream_graph_to_text(stream_graph, notes),
            "dot": lambda: render.stream_graph_to_dot(stream_graph),
        }[fmt]()
    elif level == "job":
        from weir.graph.job_graph import generate_job_graph

        job_graph = generate_job_graph(stream_graph)
        out = {
            "json": lambda: json.dumps(render.job_graph_to_json(job_graph, notes), indent=2),
            "text": lambda: render.job_graph_to_text(job_graph, notes),
            "dot": lambda: render.job_graph_to_dot(job_graph),
        }[fmt]()
    else:
        from weir.graph import execution_plan

        out = execution_plan.render(stream_graph, fmt, taskmanagers, slots)
    click.echo(out)


@main.command()
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--parallelism", "-p", type=click.IntRange(min=1), help="Default parallelism of the job.")
@click.option(
    "--taskmanagers", type=click.IntRange(min=1), help="TaskManagers of the embedded cluster (default 1)."
)
@click.option(
    "--slots", type=click.IntRange(min=1), help="Slots per TaskManager (default: as many as the job needs)."
)
@click.option(
    "--buffer-timeout",
    "buffer_timeout_ms",
    type=click.IntRange(min=-1),
    help="Output flusher interval in ms: 0 flushes every record, -1 only full buffers (default 100).",
)
@click.option(
    "--live/--no-live", default=None, help="Live table of records/s per task (default: on a terminal)."
)
@click.option(
    "--from-savepoint",
    "-s",
    "from_savepoint",
    type=click.Path(exists=True, path_type=Path),
    help="Start the job from this savepoint or retained checkpoint: a savepoint directory, "
    "<checkpoint dir>/<job id>/chk-<N> (or its _metadata), or <checkpoint dir>/<job id> for its "
    "latest complete checkpoint. `weir checkpoints DIR` prints the path to use.",
)
@click.option(
    "--allow-non-restored-state",
    "-n",
    is_flag=True,
    help="Skip savepoint state that no operator of the job claims instead of failing.",
)
@click.option(
    "--allow-untrusted-pickle",
    is_flag=True,
    help="Restore pickled Python values from a savepoint that your weir did not sign (another user's or "
    "machine's, or edited). Unpickling runs code from its files: use only for state you trust.",
)
@click.option(
    "--inject-failures",
    "inject_failures",
    metavar="SPEC",
    help="Seeded failure injection, e.g. 'raise:operator=Map,after=500;crash-before-metadata:probability=0.3' "
    "(grammar: docs/exactly-once.md).",
)
@click.option("--failure-seed", type=int, help="Seed of the failure injector (default 0).")
@click.option(
    "--jobmanager",
    "-m",
    metavar="HOST:PORT",
    help="Submit to the standalone cluster at HOST:PORT (`weir cluster start`) and wait for the job.",
)
@click.option(
    "--taskmanager-processes/--no-taskmanager-processes",
    default=None,
    help="The embedded cluster starts its TaskManagers as child processes (weir.taskmanager.processes).",
)
@click.option(
    "--web",
    is_flag=True,
    help="Serve the dashboard (Flink's REST API and a web page) while the job runs; prints its URL.",
)
@click.option(
    "--web-port",
    type=click.IntRange(min=0, max=65535),
    help="Port of the dashboard (rest.port, default 8081; 0: any free port). Implies --web.",
)
@click.option(
    "--target",
    type=click.Choice(["weir", "flink"]),
    default="weir",
    show_default=True,
    help="flink: run the job file on Apache Flink's local MiniCluster (PyFlink) with the prefix swapped.",
)
def run(
    job_file: Path,
    parallelism: int | None,
    taskmanagers: int | None,
    slots: int | None,
    buffer_timeout_ms: int | None,
    live: bool | None,
    from_savepoint: Path | None,
    allow_non_restored_state: bool,
    allow_untrusted_pickle: bool = False,
    inject_failures: str | None = None,
    failure_seed: int | None = None,
    jobmanager: str | None = None,
    taskmanager_processes: bool | None = None,
    web: bool = False,
    web_port: int | None = None,
    target: str = "weir",
) -> None:
    """Run JOB_FILE on an embedded cluster (or with --jobmanager on a standalone one) and print
    a summary. Ctrl-C cancels an embedded job. While it runs, `weir list`, `weir savepoint`,
    `weir stop` and `weir cancel` reach it, and with --web its dashboard is at
    http://127.0.0.1:8081/."""
    from rich.console import Console

    from weir.jobfile import run_job_file

    console = Console(stderr=True)
    if target == "flink":
        weir_only = {
            "--taskmanagers": taskmanagers is not None,
            "--slots": slots is not None,
            "--live": live is True,
            "--allow-untrusted-pickle": allow_untrusted_pickle,
            "--inject-failures": inject_failures is not None,
            "--failure-seed": failure_seed is not None,
            "--web/--web-port": web or web_port is not None,
        }
        used = [flag for flag, on in weir_only.items() if on]
        if used:
            raise click.UsageError(f"{', '.join(used)}: weir-only, not available with --target flink")
        from weir.flink_bridge import run_on_flink

        conf = _conf(parallelism, buffer_timeout_ms=buffer_timeout_ms)
        if from_savepoint is not None:
            conf.set_string(opts.SAVEPOINT_PATH.key, str(from_savepoint))
            conf.set_string(opts.SAVEPOINT_IGNORE_UNCLAIMED_STATE.key, str(allow_non_restored_state).lower())
        sys.exit(run_on_flink(job_file, conf.to_dict()))
    show_live = console.is_terminal if live is None else live
    conf = _conf(parallelism, taskmanagers, slots, buffer_timeout_ms)
    if from_savepoint is not None:
        conf.set_string(opts.SAVEPOINT_PATH.key, str(from_savepoint))
        conf.set_string(opts.SAVEPOINT_IGNORE_UNCLAIMED_STATE.key, str(allow_non_restored_state).lower())
        conf.set_string(opts.SAVEPOINT_ALLOW_UNTRUSTED_PICKLE.key, str(allow_untrusted_pickle).lower())
    elif allow_non_restored_state or allow_untrusted_pickle:
        flag = "--allow-non-restored-state" if allow_non_restored_state else "--allow-untrusted-pickle"
        raise click.UsageError(f"{flag} goes with --from-savepoint PATH")
    if inject_failures is not None:
        from weir.cluster.failure_injector import parse_spec

        parse_spec(inject_failures)  # a malformed SPEC is reported before the job starts
        conf.set_string(opts.FAILURE_INJECTION_SPEC.key, inject_failures)
    if failure_seed is not None:
        conf.set_integer(opts.FAILURE_INJECTION_SEED.key, failure_seed)
    if taskmanager_processes is not None:
        conf.set_string(opts.TASKMANAGER_PROCESSES.key, str(taskmanager_processes).lower())
    if jobmanager is not None:
        from weir.cluster.standalone import parse_address

        host, port = parse_address(jobmanager)
        conf.set_string(opts.EXECUTION_TARGET.key, "remote")
        conf.set_string(opts.JOBMANAGER_RPC_ADDRESS.key, host)
        conf.set_integer(opts.JOBMANAGER_RPC_PORT.key, port)
    if web_port is not None:
        conf.set_integer(opts.REST_PORT.key, web_port)
    summary = run_job_file(job_file, conf, console, show_live, web=web or web_port is not None)
    console.print(summary)


def _plan_on_flink(job_file: Path, parallelism: int | None, fmt: str) -> None:
    """Flink's plan (PyFlink's get_execution_plan and chained JobGraph) beside weir's."""
    from weir.flink_bridge import flink_plan, plan_differences
    from weir.graph import plan as render
    from weir.graph.job_graph import generate_job_graph
    from weir.jobfile import load_job_file

    conf = _conf(parallelism)
    stream_graph = load_job_file(job_file, conf)
    weir_plan = render.stream_graph_to_json(stream_graph)
    weir_vertices = [
        {"name": v.name, "parallelism": v.parallelism, "operators": len(v.operators)}
        for v in generate_job_graph(stream_graph).vertices
    ]
    flink = flink_plan(job_file, conf.to_dict())
    if fmt == "json":
        both = {"weir": {"plan": weir_plan, "job_vertices": weir_vertices}, "flink": flink}
        click.echo(json.dumps(both, indent=2))
        return
    for note in flink["notes"]:
        click.echo(f"weir: {note}", err=True)
    click.echo("== weir execution plan ==")
    click.echo(json.dumps(weir_plan, indent=2))
    click.echo("== Apache Flink execution plan ==")
    click.echo(json.dumps(flink["plan"], indent=2))
    click.echo("== differences ==")
    click.echo(plan_differences(weir_plan, weir_vertices, flink))


def _local_dir(what: str, value: str) -> str:
    """An absolute path from a path or a file:// URI (the job may run in another directory).
    Absolute but not resolved: the job's process follows only links it may trust (control.py)."""
    return os.path.abspath(opts.local_path(what, value))


_JOBMANAGER = click.option(
    "--jobmanager",
    "-m",
    metavar="HOST:PORT",
    help="The standalone cluster's JobManager (default: the one `weir cluster start` started, if any).",
)


def _cluster_address(jobmanager: str | None, job_id: str | None = None) -> tuple[str, int] | None:
    """Where a control request goes: the named JobManager; else the running standalone cluster
    unless ``job_id`` runs in a `weir run` process of this user; else None (that process)."""
    from weir.cluster import standalone
    from weir.cluster.control import jobs_dir

    if jobmanager is not None:
        return standalone.parse_address(jobmanager)
    if job_id is not None and (jobs_dir() / job_id).is_dir():
        return None
    address = standalone.read_address()
    return None if address is None else (str(address["host"]), int(address["port"]))


@main.command("list")
@_JOBMANAGER
def list_jobs(jobmanager: str | None) -> None:
    """Jobs running in `weir run` processes of this user (under $WEIR_HOME) and on the cluster."""
    import datetime

    from weir.cluster.control import jobs_dir, running_jobs

    address = _cluster_address(jobmanager)
    jobs = [] if jobmanager is not None else running_jobs()
    if not jobs and address is None:
        click.echo(f"no running jobs (under {jobs_dir()})")
    for job in jobs:
        started = datetime.datetime.fromtimestamp(job["started"]).isoformat(timespec="seconds")
        click.echo(f"{job['job_id']}  {job['name']}  pid {job['pid']}  since {started}")
    if address is not None:
        from weir.cluster.standalone import request

        (reply,) = request({"type": "list_jobs"}, address=address)
        for job in reply.header.get("jobs", []):
            click.echo(f"{job['job_id']}  {job['name']}  {job['status']}  on {address[0]}:{address[1]}")


_FORMAT = click.option(
    "--type",
    "fmt",
    type=click.Choice(["canonical", "native"]),
    default="canonical",
    show_default=True,
    help="canonical: restores on any state backend; native: the backend's own form.",
)


@main.command()
@click.argument("job_id")
@click.argument("target_directory", required=False)
@_FORMAT
@click.option(
    "--timeout", type=click.FloatRange(min=1), default=600, show_default=True, help="Seconds to wait."
)
@_JOBMANAGER
def savepoint(
    job_id: str, target_directory: str | None, fmt: str, timeout: float, jobmanager: str | None
) -> None:
    """Take a savepoint of running job JOB_ID into TARGET_DIRECTORY (default: the job's
    execution.checkpointing.savepoint-dir); prints the savepoint's path. The job goes on."""
    from weir.cluster.control import send_request

    target = None if target_directory is None else _local_dir("TARGET_DIRECTORY", target_directory)
    address = _cluster_address(jobmanager, job_id)
    if address is not None:
        click.echo(_remote_savepoint(address, job_id, target, fmt, None))
        return
    result = send_request(job_id, {"action": "savepoint", "target": target, "format": fmt}, timeout)
    click.echo(result["savepoint"])


@main.command()
@click.argument("job_id")
@click.option("--savepoint-path", "-p", "target", help="Directory for the final savepoint.")
@click.option(
    "--drain",
    "-d",
    is_flag=True,
    help="End event time first (every window and timer fires) before the savepoint.",
)
@_FORMAT
@click.option(
    "--timeout", type=click.FloatRange(min=1), default=600, show_default=True, help="Seconds to wait."
)
@_JOBMANAGER
def stop(
    job_id: str, target: str | None, drain: bool, fmt: str, timeout: float, jobmanager: str | None
) -> None:
    """Stop running job JOB_ID with a savepoint (the job FINISHES); prints the savepoint's path."""
    from weir.cluster.control import send_request

    target = None if target is None else _local_dir("--savepoint-path", target)
    address = _cluster_address(jobmanager, job_id)
    if address is not None:
        click.echo(_remote_savepoint(address, job_id, target, fmt, "drain" if drain else "no_drain"))
        return
    request = {"action": "stop", "target": target, "drain": drain, "format": fmt}
    click.echo(send_request(job_id, request, timeout)["savepoint"])


def _remote_savepoint(
    address: tuple[str, int], job_id: str, target: str | None, fmt: str, stop: str | None
) -> str:
    from weir.cluster.standalone import request

    header = {"type": "savepoint", "job_id": job_id, "target": target, "format": fmt, "stop": stop}
    (reply,) = request(header, address=address)
    return str(reply.header["path"])


@main.command()
@click.argument("job_id")
@_JOBMANAGER
def cancel(job_id: str, jobmanager: str | None) -> None:
    """Cancel running job JOB_ID (no savepoint)."""
    from weir.cluster.control import send_request

    address = _cluster_address(jobmanager, job_id)
    if address is not None:
        from weir.cluster.standalone import request

        request({"type": "cancel_job", "job_id": job_id}, address=address)
    else:
        send_request(job_id, {"action": "cancel"}, 60)
    click.echo(f"cancelling job {job_id}")


@main.group()
def cluster() -> None:
    """A standalone cluster: a JobManager process and TaskManager processes in the background."""


@cluster.command("start")
@click.option("--taskmanagers", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--slots",
    type=click.IntRange(min=1),
    help="Slots per TaskManager (taskmanager.numberOfTaskSlots, default 1).",
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    help="jobmanager.rpc.port (default 6123; 0: any free port).",
)
@click.option("--address", help="jobmanager.rpc.address to bind (default 127.0.0.1).")
@click.option(
    "--rest-port", type=click.IntRange(min=0, max=65535),
    help="rest.port: where the JobManager serves the dashboard (default 8081; 0: any free port).",
)  # fmt: skip
@click.option("-D", "dynamic", multiple=True, metavar="KEY=VALUE", help="Any other Flink key.")
def cluster_start(
    taskmanagers: int, slots: int | None, port: int | None, address: str | None,
    rest_port: int | None, dynamic: tuple[str, ...],
) -> None:  # fmt: skip
    """Start a JobManager and TASKMANAGERS TaskManager processes; returns once they registered."""
    from weir.cluster.standalone import start_cluster

    keys: dict[str, str] = {}
    for item in dynamic:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.UsageError(f"-D {item!r} is not KEY=VALUE")
        keys[key.strip()] = value.strip()
    keys[opts.NUMBER_OF_TASKMANAGERS.key] = str(taskmanagers)
    given: dict[str, object] = {
        opts.SLOTS_PER_TASKMANAGER.key: slots, opts.JOBMANAGER_RPC_PORT.key: port,
        opts.JOBMANAGER_RPC_ADDRESS.key: address, "rest.port": rest_port,
    }  # fmt: skip
    keys.update({key: str(value) for key, value in given.items() if value is not None})
    started = start_cluster(keys)
    click.echo(
        f"cluster started: JobManager pid {started['pid']} at {started['host']}:{started['port']} "
        f"with {taskmanagers} TaskManager(s)"
        + (f"; dashboard: {started['dashboard']}" if started.get("dashboard") else "")
    )


@cluster.command("add-taskmanager")
@click.option(
    "--slots",
    type=click.IntRange(min=1),
    help="Its slots (default: the cluster's taskmanager.numberOfTaskSlots).",
)
def cluster_add_taskmanager(slots: int | None) -> None:
    """Start one more TaskManager process for the running cluster (Flink's `taskmanager.sh
    start`); returns once it registered. The next job counts its slots; it stops with the
    cluster."""
    from weir.cluster.standalone import add_taskmanager

    added = add_taskmanager(slots)
    click.echo(
        f"TaskManager {added['id']} registered: pid {added['pid']}, "
        f"{added['slots']} slot{'s' if added['slots'] != 1 else ''}"
    )


@cluster.command("stop")
def cluster_stop() -> None:
    """Stop the standalone cluster (its running jobs end with it)."""
    from weir.cluster.standalone import stop_cluster

    stopped = stop_cluster()
    click.echo(
        "no cluster is running" if stopped is None else f"cluster stopped (JobManager pid {stopped['pid']})"
    )


@main.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--verify/--no-verify", default=False, help="Check every state file's checksum.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def checkpoints(directory: Path, verify: bool, fmt: str) -> None:
    """List the checkpoints and savepoints under DIRECTORY: id, kind, time, size, validity."""
    from rich.console import Console
    from rich.table import Table

    from weir.checkpoint.storage import describe
    from weir.cluster.checkpoint_stats import HISTORY_FILE_NAME, read_history
    from weir.cluster.savepoints import resume_paths

    entries = describe(directory, verify_checksums=verify)
    histories = {p.parent.name: read_history(p) for p in sorted(directory.rglob(HISTORY_FILE_NAME))}
    resume = resume_paths(entries)
    if fmt == "json":
        listing = {"checkpoints": entries, "history": histories, "resume": resume}
        click.echo(json.dumps(listing, indent=2, default=str))
        return
    for job_id, records in histories.items():
        history = Table(title=f"checkpoint history of job {job_id[:8]}")
        for column in (
            "id", "kind", "status", "duration ms", "alignment ms", "sync ms", "async ms",
            "full bytes", "checkpointed bytes", "in-flight bytes", "failure",
        ):  # fmt: skip
            history.add_column(column)
        for r in records:
            kind = r["kind"] + (" (unaligned)" if r.get("unaligned") else "")
            history.add_row(
                str(r["checkpoint_id"]), kind, r["status"], str(r.get("duration_ms")),
                f"{r['alignment_ms']:.0f}", f"{r['sync_ms']:.1f}", f"{r['async_ms']:.1f}",
                f"{r['full_size_bytes']:,}", f"{r['checkpointed_size_bytes']:,}",
                f"{r['persisted_in_flight_bytes']:,}", str(r.get("failure") or ""),
            )  # fmt: skip
        Console().print(history)
    if not entries:
        click.echo(f"no checkpoints or savepoints under {directory}")
        return
    table = Table(title=f"checkpoints under {directory}")
    for column in ("job", "id", "kind", "timestamp ms", "size bytes", "files", "status", "reason"):
        table.add_column(column)
    for e in entries:
        table.add_row(
            str(e.get("job_id", ""))[:8], str(e.get("id", "")), str(e.get("kind", "")), str(e.get("timestamp_ms", "")),
            f"{e.get('size_bytes', 0):,}", str(e.get("files", "")), str(e.get("status", "")), str(e.get("reason") or ""),
        )  # fmt: skip
    Console().print(table)
    for job_id, path in resume.items():
        click.echo(f"resume job {job_id} from its latest checkpoint: weir run JOB_FILE -s {path}")


@main.group(invoke_without_command=True)
@cli_harness.group_suite_options
@click.pass_context
def bench(ctx: click.Context, **options: Any) -> None:
    """Benchmarks that print ratios measured in one run; `suite` sweeps latency against throughput.

    `weir bench --suite NAME [OPTIONS]` (or `--spec FILE`) is `weir bench suite NAME [OPTIONS]`."""
    given = [
        name for name in cli_harness.GROUP_SUITE_PARAMS
        if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)
    ]  # fmt: skip
    if ctx.invoked_subcommand is not None:
        if given:
            flags = [p.opts[0] for p in ctx.command.params if p.name in given]
            raise click.UsageError(
                f"{' '.join(flags)} {'is an option' if len(flags) == 1 else 'are options'} of the suite, not of "
                f"`weir bench {ctx.invoked_subcommand}`: write `weir bench suite NAME {flags[0]} ...` "
                f"or `weir bench --suite NAME {flags[0]} ...`"
            )
        return
    if not given:
        click.echo(ctx.get_help())
        return
    cli_harness.run_bench_suite(group_form=True, **options)


@bench.command("suite")
@cli_harness.suite_options
def bench_suite(**options: Any) -> None:
    """A latency/throughput sweep (run = make run, quick, full, or --spec FILE), checked against Spark's
    answers, with a report under results/. Needs the lab: pip install 'weir[bench]'."""
    cli_harness.run_bench_suite(**options)


@bench.command("network")
@click.option("--records", type=click.IntRange(min=1000), default=2_000_000, show_default=True)
@click.option(
    "--parallelism",
    "parallelisms",
    type=click.IntRange(min=1),
    multiple=True,
    help="Repeatable; default 1 and 2.",
)
@click.option(
    "--buffer-timeout",
    "timeouts",
    type=click.IntRange(min=-1),
    multiple=True,
    help="Repeatable; default 0, 1, 10, 100.",
)
@click.option(
    "--exchange",
    "exchanges",
    type=click.Choice(["local", "inprocess", "tcp"]),
    multiple=True,
    help="Repeatable; default local. local: 1 TaskManager; inprocess / tcp: 2 TaskManagers, "
    "the shuffle between them in-process / over loopback TCP.",
)
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Runs of every configuration, interleaved; the median is reported.",
)
@click.option("--memory/--no-memory", default=True, help="Measure peak RSS at two sizes in subprocesses.")
@click.option("--output", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_network(
    records: int,
    parallelisms: tuple[int, ...],
    timeouts: tuple[int, ...],
    exchanges: tuple[str, ...],
    rounds: int,
    memory: bool,
    output: str | None,
) -> None:
    """Records/s through source -> key_by -> discarding sink, typed and untyped, next to a Python loop."""
    import json as _json

    from weir.harness.network_bench import run_suite

    report = run_suite(
        records,
        parallelisms or (1, 2),
        timeouts or (0, 1, 10, 100),
        memory,
        echo=click.echo,
        exchanges=exchanges or ("local",),
        rounds=rounds,
    )
    if output:
        Path(output).write_text(_json.dumps(report, indent=2))
        click.echo(f"results written to {output}")


@bench.command("checkpoint")
@click.option("--records", type=click.IntRange(min=1000), default=2_000_000, show_default=True,
              help="Records of the throughput-cost runs (a few seconds each).")  # fmt: skip
@click.option("--parallelism", "-p", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--interval", "interval_ms", type=click.IntRange(min=10), default=1000, show_default=True,
              help="Checkpoint interval (ms) for the throughput-cost runs.")  # fmt: skip
@click.option("--sink-rate", type=click.FloatRange(min=100), default=50_000.0, show_default=True,
              help="Records/s each slow-sink subtask accepts (the backpressure runs).")  # fmt: skip
@click.option("--backpressure-seconds", type=click.FloatRange(min=0.1), default=3.0, show_default=True,
              help="How long each backpressure run lasts at the sink's pace.")  # fmt: skip
@click.option("--state-sizes", default="10000,100000,1000000", show_default=True,
              help="Keys of each point of the state-size sweep, comma-separated.")  # fmt: skip
@click.option("--backend", "backends", multiple=True, type=click.Choice(["hashmap", "lmdb", "lmdb-incremental"]),
              help="Backends of the sweep (repeatable; default all three).")  # fmt: skip
@click.option("--records-per-key", type=click.IntRange(min=1), default=3, show_default=True,
              help="Records of each sweep run per key.")  # fmt: skip
@click.option("--sweep-records", type=click.IntRange(min=0), default=1_000_000, show_default=True,
              help="Records of each sweep run at least, whatever the state size.")  # fmt: skip
@click.option("--sweep-job", type=click.Choice(["reduce", "window"]), default="reduce", show_default=True,
              help="The sweep's job: keyed rolling reduce, or a 1 s tumbling event-time window reduce.")  # fmt: skip
@click.option("--sweep-repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Runs of each sweep point with and without checkpoints, alternating; each keeps its "
                   "fastest.")  # fmt: skip
@click.option("--sweep/--no-sweep", default=True, show_default=True, help="Run the state-size sweep.")
@click.option("--sweep-only", is_flag=True, help="Run only the state-size sweep.")
@click.option("--output", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_checkpoint(
    records: int,
    parallelism: int,
    interval_ms: int,
    sink_rate: float,
    backpressure_seconds: float,
    state_sizes: str,
    backends: tuple[str, ...],
    records_per_key: int,
    sweep_records: int,
    sweep_job: str,
    sweep_repeat: int,
    sweep: bool,
    sweep_only: bool,
    output: str | None,
) -> None:
    """Checkpoint duration under backpressure, aligned vs unaligned, the throughput cost of
    checkpointing vs none, and a state-size sweep (sync/async phase, duration and size per
    checkpoint beside the throughput with and without checkpoints): ratios from one run."""
    from weir.harness.checkpoint_bench import (
        SWEEP_BACKENDS,
        format_report,
        format_sweep,
        run_checkpoint_bench,
        run_state_size_sweep,
        write_report,
    )

    try:
        sizes = tuple(int(size) for size in state_sizes.split(",") if size.strip())
    except ValueError:
        raise click.BadParameter(
            f"expected keys like 10000,100000, got {state_sizes!r}", param_hint="--state-sizes"
        ) from None
    if (sweep or sweep_only) and (not sizes or min(sizes) < 1):
        raise click.BadParameter(
            f"every state size must be at least 1 key, got {state_sizes!r}", param_hint="--state-sizes"
        )
    report: dict[str, Any] = {}
    if not sweep_only:
        report = run_checkpoint_bench(
            records, parallelism, interval_ms, sink_rate, backpressure_seconds=backpressure_seconds
        )
        click.echo(format_report(report))
    if sweep or sweep_only:
        click.echo(f"checkpoint cost by state size ({sweep_job} job, checkpoint every {interval_ms} ms):")
        try:
            points = run_state_size_sweep(
                sizes,
                backends or SWEEP_BACKENDS,
                records_per_key,
                parallelism,
                interval_ms,
                sweep_job,
                click.echo,
                sweep_records,
                sweep_repeat,
            )
        except WeirError as e:
            raise click.ClickException(str(e)) from None
        report["state_size_sweep"] = {
            "parameters": {"state_sizes": list(sizes), "records_per_key": records_per_key, "min_records": sweep_records,
                           "parallelism": parallelism, "interval_ms": interval_ms, "job": sweep_job,
                           "repeats": sweep_repeat},
            "points": points,
            "text": format_sweep(points, interval_ms),
        }  # fmt: skip
    if output:
        write_report(report, output)


@bench.command("processes")
@click.option(
    "--keys", "-k", type=click.IntRange(min=1), default=10_000, show_default=True, help="Distinct keys K."
)
@click.option("--parallelism", "-p", type=click.IntRange(min=2), default=2, show_default=True)
@click.option("--events", type=click.IntRange(min=10_000), default=2_000_000, show_default=True)
@click.option(
    "--job", "jobs", multiple=True, type=click.Choice(["columnar", "per_record", "keyed_shuffle"]),
    help="Jobs to run (default: all).",
)  # fmt: skip
@click.option(
    "--timeouts", is_flag=True,
    help="Instead: the keyed-shuffle query on the P TaskManager processes at buffer timeouts 100 and "
    "1 ms (max throughput, then latency at --fraction of each maximum).",
)  # fmt: skip
@click.option("--seconds", type=click.FloatRange(min=0.5, min_open=True), default=5.0, show_default=True,
              help="--timeouts: length of each latency run (its first 0.5 s not measured).")  # fmt: skip
@click.option("--fraction", type=click.FloatRange(min=0, max=1, min_open=True), default=0.5, show_default=True,
              help="--timeouts: the latency runs' rate as a fraction of the maximum.")  # fmt: skip
@click.option("--one-process", is_flag=True,
              help="--timeouts: the same runs on one process (one TaskManager of P slots), to compare.")  # fmt: skip
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Rounds of one process and TaskManager processes; the figures are medians.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line instead of the table.")
def bench_processes(
    keys: int,
    parallelism: int,
    events: int,
    jobs: tuple[str, ...],
    timeouts: bool,
    seconds: float,
    fraction: float,
    one_process: bool,
    repeat: int,
    as_json: bool,
) -> None:
    """The window query and a keyed shuffle at parallelism P on one process and on P TaskManager
    processes (TCP between them), timed in one run; prints events/s and the ratio. With
    --timeouts: buffer timeouts and latency on the TaskManager processes."""
    from weir.harness.process_bench import (
        WAYS,
        format_process_report,
        format_timeout_report,
        run_process_bench,
        run_timeout_bench,
    )

    echo = None if as_json else click.echo
    if timeouts:
        if jobs:
            raise click.UsageError(
                "--job chooses the jobs of the comparison; --timeouts runs the keyed-shuffle query"
            )
        report = run_timeout_bench(events, keys, parallelism, seconds, fraction, echo, not one_process)
        click.echo(json.dumps(report, sort_keys=True) if as_json else format_timeout_report(report))
        return
    if one_process:
        raise click.UsageError("--one-process goes with --timeouts")
    report = run_process_bench(events, keys, parallelism, jobs or WAYS, echo, repeat)
    click.echo(json.dumps(report, sort_keys=True) if as_json else format_process_report(report))


@bench.command("query")
@click.option(
    "--keys", "-k", type=click.IntRange(min=1), default=10_000, show_default=True, help="Distinct keys K."
)
@click.option("--parallelism", "-p", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--events", type=click.IntRange(min=10_000), default=2_000_000, show_default=True)
@click.option("--checkpointing", type=click.Choice(["off", "aligned"]), default="off", show_default=True,
              help="aligned: a checkpoint every second (the columnar way also runs without, in "
                   "the same rounds, for the ratio).")  # fmt: skip
@click.option("--backend", type=click.Choice(["heap", "lmdb"]), default="heap", show_default=True,
              help="State backend (with --checkpointing aligned).")  # fmt: skip
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs of each way; the figure is the median.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line instead of the table.")
def bench_query(
    keys: int, parallelism: int, events: int, checkpointing: str, backend: str, repeat: int, as_json: bool
) -> None:
    """The shared count-and-sum window query written four ways (weir.columnar, per-record
    PyFlink functions, a numba loop, a Python loop), timed in one run and checked against the
    exact answer."""
    from weir.harness.query_bench import format_query_report, run_query_bench

    try:
        report = run_query_bench(
            keys, parallelism, events, checkpointing, backend, None if as_json else click.echo, repeat
        )
    except WeirError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        keep = (
            "columnar_eps",
            "per_record_eps",
            "numba_eps",
            "python_eps",
            "checksum_ok",
            "checkpoints_completed",
            "columnar_off_eps",
            "columnar_checkpoint_ratio",
            "parameters",
        )
        click.echo(json.dumps({k: report[k] for k in keep if k in report}, sort_keys=True))
    else:
        click.echo(format_query_report(report))
    if not report["checksum_ok"]:
        raise click.ClickException("a way of writing the query gave a wrong answer (see checksum above)")


@bench.command("state")
@click.option("--records", type=click.IntRange(min=1000), default=1_000_000, show_default=True)
@click.option(
    "--rounds", type=click.IntRange(min=1), default=3, show_default=True, help="Medians over rounds."
)
@click.option("--output", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_state(records: int, rounds: int, output: str | None) -> None:
    """Keyed tumbling window count+sum over 10,000 keys: reduce and built-ins, heap and LMDB."""
    import json as _json

    from weir.harness.state_bench import run_suite

    report = run_suite(records, rounds, echo=click.echo)
    if output:
        Path(output).write_text(_json.dumps(report, indent=2))
        click.echo(f"results written to {output}")


cli_harness.register(main)  # weir gen, weir report, weir compare


if __name__ == "__main__":  # pragma: no cover
    main()

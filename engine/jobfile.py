"""Loading a job file: run it with environments in capture mode and keep its StreamGraph.

A job file is a plain Python script that builds its pipeline against
``StreamExecutionEnvironment.get_execution_environment()`` and calls ``execute()``.
``load_job_file`` runs it as ``__main__`` under ``capture_programs``, so ``execute()``
records the StreamGraph and stops the script instead of running the job.
"""

from __future__ import annotations

import contextlib
import runpy
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from weir.common.configuration import Configuration
from weir.datastream.stream_execution_environment import ProgramCaptured, capture_programs
from weir.errors import UsageError, WeirError
from weir.graph.stream_graph import StreamGraph


def load_job_file(path: str | Path, configuration: Configuration | None = None) -> StreamGraph:
    job_path = Path(path)
    if not job_path.exists():
        raise UsageError(
            f"job file '{path}' does not exist; give the path of a Python file that builds a job"
        )
    if not job_path.is_file() or job_path.suffix != ".py":
        raise UsageError(f"job file '{path}' is not a Python file (.py)")
    saved_argv = sys.argv
    sys.argv = [str(job_path)]
    sys.path.insert(0, str(job_path.parent.resolve()))
    try:
        with capture_programs(configuration) as capture:
            try:
                runpy.run_path(str(job_path), run_name="__main__")
            except ProgramCaptured as captured:
                return captured.stream_graph
            except WeirError:
                raise
            except SystemExit as exit_:
                if exit_.code not in (None, 0):
                    raise UsageError(
                        f"job file '{path}' exited with status {exit_.code} before building its job"
                    ) from None
            except Exception as exc:
                raise _raised(path, job_path, exc, " while building its job") from exc
            built = [env for env in capture.environments if env.get_transformations()]
            if built:
                return built[-1].get_stream_graph()
    finally:
        sys.argv = saved_argv
        sys.path.remove(str(job_path.parent.resolve()))
    raise UsageError(
        f"job file '{path}' builds no job: it must get StreamExecutionEnvironment.get_execution_environment(), "
        f"add sources, operators and a sink, and call env.execute()"
    )


def _raised(path: str | Path, job_path: Path, exc: BaseException, when: str) -> UsageError:
    """One line for an exception the job file's own code raised (a traceback helps nobody here)."""
    line = _last_frame_in(job_path, exc)
    where = f" at line {line}" if line else ""
    detail = exc.msg if isinstance(exc, SyntaxError) else exc
    return UsageError(f"job file '{path}' raised {type(exc).__name__}{where}{when}: {detail}")


def _last_frame_in(job_path: Path, exc: BaseException) -> int | None:
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename).resolve() == job_path.resolve():
        return exc.lineno
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == job_path.resolve():
            line = frame.lineno
    return line


_SUBMITTERS = ("submit_stream_graph", "execute_and_collect")


def run_job_file(
    path: str | Path, configuration: Configuration, console: Any, live: bool, web: bool = False
) -> Any:
    """Run a job file for real (``weir run``); returns a short summary of every job it ran.
    ``web``: serve the dashboard while each job runs (rest.port, rest.bind-address)."""
    from weir.cluster import client
    from weir.datastream.stream_execution_environment import default_configuration

    job_path = Path(path)
    if not job_path.exists():
        raise UsageError(
            f"job file '{path}' does not exist; give the path of a Python file that builds a job"
        )
    results: list[Any] = []
    submitted: list[str] = []  # every way a job file may run a job, not only execute()
    original = client.execute_stream_graph
    originals = {name: getattr(client, name) for name in _SUBMITTERS}

    def recording(env: Any, graph: StreamGraph) -> Any:
        submitted.append(graph.job_name)
        result = original(env, graph)
        results.append((graph, result))
        return result

    def counting(name: str) -> Any:
        def submit(*args: Any, **kwargs: Any) -> Any:
            submitted.append(name)
            return originals[name](*args, **kwargs)

        return submit

    from weir.cluster.control import combine_observers, job_control_observer

    live_observer = None
    if live:
        from weir.cluster.live_view import make_live_observer

        live_observer = make_live_observer(console)
    # `weir savepoint` etc. reach the job (a weir home that is not private is refused before it
    # starts); restarts are said on stderr
    web_observer = None
    if web:
        from weir.cluster.web.server import web_observer as make_web_observer
        from weir.common import config_options as opts

        def announce(line: str) -> None:
            console.print(line, markup=False, highlight=False, soft_wrap=True)

        web_observer = make_web_observer(
            configuration.get_option(opts.REST_BIND_ADDRESS),
            configuration.get_option(opts.REST_PORT),
            announce,
            configuration.get_option(opts.REST_ADDRESS),
        )
    observer = combine_observers(
        live_observer, web_observer, job_control_observer(), restart_announcer(console)
    )
    saved_argv = sys.argv
    sys.argv = [str(job_path)]
    sys.path.insert(0, str(job_path.parent.resolve()))
    try:
        client.execute_stream_graph = recording
        for name in _SUBMITTERS:
            setattr(client, name, counting(name))
        with default_configuration(configuration), client.observe_jobs(observer):
            try:
                runpy.run_path(str(job_path), run_name="__main__")
            except KeyboardInterrupt:
                return "job cancelled (Ctrl-C)"
            except WeirError:
                raise
            except SystemExit as exit_:
                if exit_.code not in (None, 0):
                    raise UsageError(f"job file '{path}' exited with status {exit_.code}") from None
            except Exception as exc:
                raise _raised(path, job_path, exc, "" if submitted else " while building its job") from exc
    finally:
        client.execute_stream_graph = original
        for name, function in originals.items():
            setattr(client, name, function)
        sys.argv = saved_argv
        sys.path.remove(str(job_path.parent.resolve()))
    if not submitted:  # Flink's `flink run`: "The program didn't contain a Flink job."
        raise UsageError(
            f"job file '{path}' didn't contain a job: it never called env.execute() "
            f"(or execute_async(), execute_and_collect()); add one at the end"
        )
    if not results:
        return f"job file '{path}' submitted its job without waiting for it (execute_async)"
    return summary_tables(results)


def restart_announcer(console: Any) -> Any:
    """An observer that prints each restart of the job and its cause (live view or not)."""

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False, soft_wrap=True)

    async def observe(cluster: Any, handle: Any) -> None:
        master = handle.job_master
        for line in master.restart_log:  # any that came before the observer started
            say(line)
        master.restart_listeners.append(say)

    return observe


def summary_tables(results: list[Any]) -> Any:
    """One rich table per job: records in/out and records/s of every operator of every subtask."""
    from rich.console import Group
    from rich.table import Table

    tables = []
    for graph, result in results:
        seconds = max(result.get_net_runtime(), 1) / 1000
        table = Table(
            title=f"job '{graph.job_name}' {result.get_job_status().name} in {seconds:.2f} s (id {result.get_job_id()})"
        )
        table.add_column("operator", max_width=30, no_wrap=True, overflow="ellipsis")
        table.add_column("subtask", no_wrap=True)
        for column in ("records in", "records out", "records/s"):
            table.add_column(column, justify="right", no_wrap=True)
        for stats in result.statistics:
            subtask = stats.name.rsplit(" (", 1)[-1].rstrip(")")
            for name, (records_in, records_out) in stats.operators.items():
                rate = max(records_in, records_out) / seconds
                table.add_row(name, subtask, f"{records_in:,}", f"{records_out:,}", f"{rate:,.0f}")
        tables.append(table)
        metrics = result.get_user_metrics() if hasattr(result, "get_user_metrics") else {}
        if metrics:
            user = Table(title=f"job '{graph.job_name}': user metrics")
            for column in ("subtask", "operator", "metric", "value"):
                user.add_column(column, no_wrap=column != "value")
            for task, operators in metrics.items():
                for operator, values in operators.items():
                    for metric, value in values.items():
                        user.add_row(task, operator, metric, str(value))
            tables.append(user)
    return Group(*tables)


@contextlib.contextmanager
def _null() -> Iterator[None]:
    yield

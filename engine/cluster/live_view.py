"""The live view of ``weir run``: records/s per task, backpressure and job status (rich)."""

from __future__ import annotations

from typing import Any

import trio
from rich.console import Console
from rich.live import Live
from rich.table import Table

from weir.cluster.minicluster import JobHandle, MiniCluster


def task_table(handle: JobHandle, previous: dict[str, int], interval_s: float, elapsed_s: float) -> Table:
    master = handle.job_master
    table = Table(title=f"job {master.job_graph.job_name} — {master.job_status.name} — {elapsed_s:.1f} s")
    for column in ("task", "records in", "records out", "out/s", "backpressured"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for stats in master.statistics():
        out = stats.records_out or sum(o for _, o in stats.operators.values())
        rate = (out - previous.get(stats.name, 0)) / interval_s if interval_s > 0 else 0.0
        previous[stats.name] = out
        busy = 100.0 * stats.backpressured_fraction
        records_in = stats.records_in or sum(i for i, _ in stats.operators.values())
        table.add_row(stats.name, f"{records_in:,}", f"{out:,}", f"{rate:,.0f}", f"{busy:.0f}%")
    return table


def make_live_observer(console: Console, interval_s: float = 0.5) -> Any:
    async def observe(cluster: MiniCluster, handle: JobHandle) -> None:
        """Refresh the table until the job ends. Cancellation: the view stops."""
        previous: dict[str, int] = {}
        started = trio.current_time()
        with Live(console=console, auto_refresh=False, transient=False) as live:
            while not handle.done.is_set():
                with trio.move_on_after(interval_s):
                    await handle.done.wait()
                live.update(
                    task_table(handle, previous, interval_s, trio.current_time() - started), refresh=True
                )

    return observe

"""The job the dashboard's end-to-end tests run with ``weir run --web`` (not a test module).

A rate-limited source (2,000 records/s) -> rebalance -> a collect sink at parallelism 2, whose
records this file reads back. While the file named by $WEIR_DASHBOARD_HOLD exists the reader
stops reading, so the sink waits, the small (4 KiB) buffers behind it fill, and the source
becomes back-pressured; without it the source idles on its rate limit. Checkpoints every 200 ms.
Runs until interrupted (Ctrl-C / SIGINT).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource

HOLD = Path(os.environ.get("WEIR_DASHBOARD_HOLD", "/nonexistent/weir-dashboard-hold"))

conf = Configuration()
conf.set_string("taskmanager.memory.segment-size", "4096")
conf.set_string("execution.checkpointing.interval", "200 ms")
env = StreamExecutionEnvironment.get_execution_environment(conf)
env.set_parallelism(1)
records = (
    env.from_source(
        DataGeneratorSource(lambda i: i, None, rate_limit=2000.0, type_info=Types.LONG()),
        WatermarkStrategy.no_watermarks(),
        "numbers",
    )
    .rebalance()
    .map(lambda n: n * 2, output_type=Types.LONG())
    .name("double")
    .set_parallelism(2)
)
with records.execute_and_collect("dashboard demo") as results:
    for _ in results:
        while HOLD.exists():
            time.sleep(0.05)  # the job's slow reader, not a test waiting for something

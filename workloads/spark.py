"""Starting Spark cheaply, and saying clearly why it cannot start.

Theory of operation: PySpark needs a Java runtime (17 or newer) on ``PATH`` or under
``JAVA_HOME``; ``check_java`` looks for it before a JVM is started, so a missing Java is
one line naming the fix instead of a Py4J traceback. ``spark_session`` builds (or reuses:
one JVM per process) a session tuned for start-up cost, not for big jobs: the UI is off,
shuffles use few partitions, logs are quiet. ``track_stages`` polls Spark's status
tracker from a thread so a progress bar can follow the running stages.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from weir.errors import WeirError

MIN_JAVA = 17
DEFAULT_MASTER = "local[*]"


class SparkUnavailable(WeirError):
    """Spark cannot run here (no suitable Java); the message names the fix."""


def _java_executable() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def java_version(java: str) -> int | None:
    """The major version ``java -version`` reports (``1.8`` counts as 8), or None if unreadable."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> str:
    """The java executable PySpark will use; SparkUnavailable naming the fix if there is none."""
    java = _java_executable()
    if java is None:
        raise SparkUnavailable(
            f"Java not found: PySpark needs Java {MIN_JAVA} or newer on PATH or under JAVA_HOME "
            f"(Debian/Ubuntu: apt-get install openjdk-{MIN_JAVA}-jre-headless)"
        )
    version = java_version(java)
    if version is None or version < MIN_JAVA:
        found = "an unreadable version" if version is None else f"Java {version}"
        raise SparkUnavailable(
            f"{java} is {found}; PySpark needs Java {MIN_JAVA} or newer "
            f"(Debian/Ubuntu: apt-get install openjdk-{MIN_JAVA}-jre-headless, then put it first on PATH)"
        )
    return java


_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_log4j_config() -> str:
    """A log4j2 configuration that prints errors only (Spark's default prints warnings at start)."""
    path = os.path.join(tempfile.gettempdir(), "weir-spark-log4j2.properties")
    target = Path(path)
    if not target.exists() or target.read_text() != _LOG4J:
        target.write_text(_LOG4J)
    return path


def spark_session(master: str = DEFAULT_MASTER, app_name: str = "weir-workloads") -> Any:
    """A SparkSession on ``master`` (reused if this process already has one)."""
    check_java()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver binds to loopback only
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.adaptive.enabled", "false")  # fixed plans: same files for the same seed
        .config("spark.sql.parquet.compression.codec", "snappy")
        .config("spark.driver.memory", "1g")
        .config("spark.log.level", "ERROR")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_quiet_log4j_config()}")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def track_stages(
    spark: Any, on_progress: Callable[[int, int], None], interval_s: float = 0.25
) -> Iterator[None]:
    """Within this block, call ``on_progress(done_tasks, total_tasks)`` for Spark's active stages."""
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(interval_s):
            done = total = 0
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
            if total:
                with contextlib.suppress(Exception):
                    on_progress(done, total)

    thread = threading.Thread(target=poll, daemon=True, name="weir-spark-progress")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()

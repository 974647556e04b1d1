"""The standalone cluster from the command line: `weir cluster start/stop`, `weir run
--jobmanager`, `execution.target: remote`, and `weir list/savepoint/cancel` over the RPC.

Real processes talk here, so the waits are on the wall clock, each a poll of a real event
(a file, a process's exit, a job's status) with a generous deadline."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

HELPER = """
def label(n):
    return f"n={n}"
"""

BOUNDED = """
from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.number_seq import NumberSequenceSource
from weir.datastream.functions import SinkFunction

from helper import label  # a module next to the job file: it travels by value


class Lines(SinkFunction):  # defined in the job file (__main__): by value too
    def __init__(self, path):
        self.path = path

    def open(self, runtime_context):
        self.file = open(self.path, "a")

    def invoke(self, value, context):
        self.file.write(value + "\\n")

    def close(self):
        self.file.close()


env = StreamExecutionEnvironment.get_execution_environment({conf})
env.set_parallelism(1)
env.from_source(NumberSequenceSource(1, 100), WatermarkStrategy.no_watermarks(), "numbers").map(
    label, output_type=Types.STRING()
).add_sink(Lines({out!r}))
env.execute("bounded")
"""

ENDLESS = """
from weir.common import Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource

env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(200)
(
    env.from_source(
        DataGeneratorSource(lambda i: i, 10_000_000, rate_limit=500.0, type_info=Types.LONG()),
        WatermarkStrategy.no_watermarks(),
        "numbers",
    )
    .key_by(lambda n: n % 3)
    .reduce(lambda a, b: a + b)
    .uid("sum")
    .add_sink(lambda n: None)
)
env.execute("endless")
"""


def poll(condition: Callable[[], object], what: str, seconds: float = 120) -> object:
    deadline = time.monotonic() + seconds
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting: {what}")
        time.sleep(0.1)
    return value


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def children(pid: int) -> list[int]:
    return [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and (p / "stat").exists() and _ppid(p) == pid
    ]


def _processes_of(home: Path) -> list[int]:
    """Live weir cluster processes started with ``WEIR_HOME=home``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and b"weir.cluster.entrypoint" in (proc / "cmdline").read_bytes()
                and f"WEIR_HOME={home}".encode() in (proc / "environ").read_bytes().split(b"\0")
                and alive(int(proc.name))
            ):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _ppid(proc: Path) -> int:
    try:
        return int((proc / "stat").read_text().split(") ", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def test_a_standalone_cluster_runs_jobs_from_weir_run_and_remote_scripts_and_answers_control(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "WEIR_HOME": str(home)}

    def weir(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "weir.cli", *args], capture_output=True, text=True, env=env, timeout=300
        )
        assert not check or done.returncode == 0, done.stderr
        return done

    started = weir("cluster", "start", "--port", "0", "--slots", "2", "--rest-port", "0")
    assert "cluster started" in started.stdout
    directory = home / "cluster"
    address = json.loads((directory / "jobmanager.json").read_text())
    try:
        # the JobManager serves the dashboard's REST API (rest.port)
        assert f"dashboard: {address['dashboard']}" in started.stdout
        with urllib.request.urlopen(address["dashboard"] + "overview", timeout=30) as response:
            assert json.loads(response.read())["taskmanagers"] == 1
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        assert stat.S_IMODE((directory / "secret").stat().st_mode) == 0o600
        jobmanager = address["pid"]
        assert "weir.cluster.entrypoint jobmanager" in cmdline(jobmanager)
        (taskmanager,) = children(jobmanager)
        assert "weir.cluster.entrypoint taskmanager" in cmdline(taskmanager)
        where = f"{address['host']}:{address['port']}"

        # weir run --jobmanager: user code of the job file and of a module beside it
        jobs = tmp_path / "jobs"
        jobs.mkdir()
        (jobs / "helper.py").write_text(HELPER)
        out = tmp_path / "out.txt"
        (jobs / "bounded.py").write_text(BOUNDED.format(conf="", out=str(out)))
        ran = weir("run", "--jobmanager", where, "--no-live", str(jobs / "bounded.py"))
        assert "FINISHED" in ran.stderr + ran.stdout
        assert sorted(out.read_text().split()) == sorted(f"n={n}" for n in range(1, 101))

        # a job wider than the cluster waits for slots (Flink's slot.request.timeout) until one
        # more TaskManager joins (Flink's taskmanager.sh start), then runs on both
        out.unlink()
        (jobs / "wide.py").write_text(
            BOUNDED.format(conf="", out=str(out)).replace("env.set_parallelism(1)", "env.set_parallelism(3)")
        )
        wide = subprocess.Popen(
            [sys.executable, "-m", "weir.cli", "run", "--jobmanager", where, "--no-live", str(jobs / "wide.py")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            poll(
                lambda: any(
                    "bounded" in line and "CREATED" in line for line in weir("list").stdout.splitlines()
                ),
                "the 3-slot job waiting for slots on a cluster of 2",
            )
            added = weir("cluster", "add-taskmanager", "--slots", "1")
            (pid,) = re.findall(
                r"^TaskManager taskmanager-1 registered: pid (\d+), 1 slot$", added.stdout, re.M
            )
            extra = int(pid)
            assert "weir.cluster.entrypoint taskmanager --jobmanager" in cmdline(extra)
            assert "--id taskmanager-1 --slots 1" in cmdline(extra)
            printed, stderr = wide.communicate(timeout=120)
        finally:
            if wide.poll() is None:
                wide.kill()
        assert wide.returncode == 0 and "FINISHED" in printed + stderr, stderr
        assert sorted(out.read_text().split()) == sorted(f"n={n}" for n in range(1, 101))
        with urllib.request.urlopen(address["dashboard"] + "taskmanagers", timeout=30) as response:
            listed = json.loads(response.read())["taskmanagers"]
        assert sorted((tm["id"], tm["slotsNumber"]) for tm in listed) == [
            ("taskmanager-0", 2),
            ("taskmanager-1", 1),
        ]

        # a plain script whose configuration says execution.target: remote (PyFlink's remote env)
        out.unlink()
        conf = (
            "__import__('weir.common', fromlist=['Configuration']).Configuration()"
            ".set_string('execution.target', 'remote')"
            f".set_string('jobmanager.rpc.address', {address['host']!r})"
            f".set_string('jobmanager.rpc.port', '{address['port']}')"
        )
        (jobs / "remote.py").write_text(BOUNDED.format(conf=conf, out=str(out)))
        script = subprocess.run(
            [sys.executable, str(jobs / "remote.py")], capture_output=True, text=True, env=env, timeout=300
        )
        assert script.returncode == 0, script.stderr
        assert len(out.read_text().split()) == 100

        # control over the RPC: list, savepoint, cancel a running job
        (jobs / "endless.py").write_text(ENDLESS)
        runner = subprocess.Popen(
            [sys.executable, "-m", "weir.cli", "run", "--jobmanager", where, "--no-live", str(jobs / "endless.py")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:

            def running_job() -> str | None:
                for line in weir("list").stdout.splitlines():
                    if "endless" in line and "RUNNING" in line:
                        return line.split()[0]
                return None

            job_id = str(poll(running_job, "the endless job RUNNING in `weir list`"))
            savepoints = tmp_path / "savepoints"
            taken = poll(
                lambda: (
                    (r := weir("savepoint", job_id, str(savepoints), check=False)).returncode == 0
                    and r.stdout.strip()
                ),
                "a savepoint (tasks may still be starting)",
            )
            assert (Path(str(taken)) / "_metadata").is_file()
            weir("cancel", job_id)
            assert runner.wait(timeout=120) == 0
            assert "CANCELED" in runner.stderr.read()  # type: ignore[union-attr]
        finally:
            if runner.poll() is None:
                runner.kill()
        unknown = weir("cancel", "0" * 32, check=False)
        assert unknown.returncode == 2 and f"no job {'0' * 32} on this cluster" in unknown.stderr
    finally:
        stopped = weir("cluster", "stop", check=False)
    assert "cluster stopped" in stopped.stdout, stopped.stderr
    poll(lambda: not any(map(alive, (jobmanager, taskmanager, extra))), "the cluster's processes to exit", 60)
    assert not (directory / "jobmanager.json").exists()
    lonely = weir("cluster", "add-taskmanager", check=False)
    assert lonely.returncode == 2 and "no standalone cluster is running" in lonely.stderr


@pytest.mark.slow
def test_a_jobmanager_that_dies_takes_its_jobs_along_and_weir_run_s_resumes_them(tmp_path: Path) -> None:
    from tests.e2e.test_cli_resume import EVENTS, JOB, _wait_for_checkpoint, committed_lines, expected_lines

    job = tmp_path / "job.py"
    slower = JOB.replace("rate_limit=1500.0", "rate_limit=300.0")  # 10 s: startup on a busy machine
    assert slower != JOB
    job.write_text(slower)
    checkpoints, out = tmp_path / "checkpoints", tmp_path / "out"
    env = {
        **os.environ,
        "WEIR_HOME": str(tmp_path / "home"),
        "CHECKPOINTS": str(checkpoints),
        "OUT": str(out),
    }

    def weir(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "weir.cli", *args], capture_output=True, text=True, env=env, timeout=300
        )

    started = weir("cluster", "start", "--port", "0", "--slots", "2", "--rest-port", "0")
    assert started.returncode == 0, started.stderr
    address = json.loads((tmp_path / "home" / "cluster" / "jobmanager.json").read_text())
    jobmanager = address["pid"]
    (taskmanager,) = children(jobmanager)
    running = subprocess.Popen(
        [sys.executable, "-m", "weir.cli", "run", "--jobmanager", f"{address['host']}:{address['port']}",
         "--no-live", str(job)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        _wait_for_checkpoint(checkpoints, running, checkpoint_id=2)
        os.kill(jobmanager, signal.SIGKILL)
        _, stderr = running.communicate(timeout=120)
    finally:
        running.kill()
        weir("cluster", "stop")
    assert running.returncode == 2 and "closed the connection" in stderr, stderr
    poll(lambda: not alive(taskmanager), "the orphaned TaskManager to exit", 60)
    assert sum(committed_lines(out).values()) < EVENTS  # it died in the middle

    listing = weir("checkpoints", str(checkpoints))
    (path,) = re.findall(r"weir run JOB_FILE -s (\S+)", listing.stdout)
    resumed = weir("run", str(job), "--no-live", "-s", path)
    assert resumed.returncode == 0, resumed.stderr
    assert committed_lines(out) == expected_lines()


def test_a_cluster_whose_dashboard_port_is_taken_does_not_start_and_says_which_port(tmp_path: Path) -> None:
    import socket

    from weir.cluster.standalone import rest_port_of

    assert rest_port_of({}) == 8081  # Flink's rest.port, served unless set otherwise
    home = tmp_path / "home"
    env = {**os.environ, "WEIR_HOME": str(home)}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "weir.cli", "cluster", "start", "--port", "0", "--rest-port", str(port)],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
    assert done.returncode != 0
    assert f"the dashboard's address 127.0.0.1:{port} is in use" in done.stderr, done.stderr
    assert "--rest-port N" in done.stderr and "Traceback" not in done.stderr
    assert not (home / "cluster" / "jobmanager.json").exists()
    poll(lambda: not _processes_of(home), "the cluster's processes to exit with their JobManager", 60)
    bad = subprocess.run(
        [sys.executable, "-m", "weir.cli", "cluster", "start", "--port", "0", "-D", "rest.port=web"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert bad.returncode != 0 and "rest.port: expected an integer, got 'web'" in bad.stderr, bad.stderr


CLIENT = """
import json, sys, time
from weir.common import Configuration, Types, WatermarkStrategy
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.datagen import DataGeneratorSource

conf = Configuration()
conf.set_string("execution.target", "remote")
conf.set_string("jobmanager.rpc.address", {host!r})
conf.set_string("jobmanager.rpc.port", "{port}")
env = StreamExecutionEnvironment.get_execution_environment(conf)
env.set_parallelism(2)
seen = {{}}
pair = Types.TUPLE([Types.LONG(), Types.LONG()])


def numbers(n):
    return env.from_collection(list(range(n)), type_info=Types.LONG())


def endless(name):
    source = DataGeneratorSource(lambda i: i, 10_000_000, rate_limit=200.0, type_info=Types.LONG())
    return env.from_source(source, WatermarkStrategy.no_watermarks(), name)


sums = numbers(3_000).map(lambda x: (x % 7, x), output_type=pair).key_by(lambda t: t[0])
seen["sums"] = sorted(sums.reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect("sums"))
seen["first"] = endless("endless collect").execute_and_collect("endless collect", limit=3)
checkpointed = StreamExecutionEnvironment.get_execution_environment(conf)
checkpointed.enable_checkpointing(100)  # exactly once: records come with the commits
seen["committed"] = sorted(
    checkpointed.from_collection(list(range(500)), type_info=Types.LONG()).execute_and_collect("committed")
)


def bad(x):
    if x == 13:
        raise ValueError("bad record 13")
    return x


try:
    list(numbers(100).map(bad, output_type=Types.LONG()).execute_and_collect("failing"))
except Exception as exc:
    seen["failure"] = f"{{type(exc).__name__}}: {{exc}}"

numbers(1_000).map(lambda x: x, output_type=Types.LONG()).add_sink(lambda x: None)
bounded = env.execute_async("async bounded")
result = bounded.get_job_execution_result().result(120)
seen["bounded"] = [str(bounded.get_job_id()), result.get_job_status().name, bounded.get_job_status().result().name]

endless("async endless").map(lambda x: x, output_type=Types.LONG()).add_sink(lambda x: None)
running = env.execute_async("async endless")
deadline = time.monotonic() + 120
savepoint = None
while savepoint is None:  # a poll of the other process: its tasks may still be starting
    try:
        savepoint = running.trigger_savepoint({savepoints!r}).result()
    except Exception:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
seen["savepoint"] = savepoint
seen["running"] = running.get_job_status().result().name
running.cancel()
try:
    running.get_job_execution_result().result(120)
except Exception as exc:
    seen["cancelled"] = f"{{type(exc).__name__}}: {{exc}}"
print(json.dumps(seen))
"""


def test_remote_scripts_collect_results_and_drive_jobs_they_submitted_without_waiting(tmp_path: Path) -> None:
    """execute_and_collect() and execute_async() of a script whose target is the standalone
    cluster, as PyFlink's remote environment runs them: the records of a job on two
    TaskManager processes stream back to the script; a closed iterator cancels its job; a
    failure reaches the script; a JobClient asks the JobManager for status, result,
    savepoint and cancellation."""
    home = tmp_path / "home"
    env = {**os.environ, "WEIR_HOME": str(home)}

    def weir(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "weir.cli", *args], capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, done.stderr
        return done

    weir("cluster", "start", "--port", "0", "--taskmanagers", "2", "--rest-port", "0")
    address = json.loads((home / "cluster" / "jobmanager.json").read_text())
    try:
        script = tmp_path / "client.py"
        savepoints = tmp_path / "savepoints"
        script.write_text(
            CLIENT.format(host=address["host"], port=address["port"], savepoints=str(savepoints))
        )
        ran = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
        )
        assert ran.returncode == 0, ran.stderr
        seen = json.loads(ran.stdout.splitlines()[-1])
        # a running sum per key, one record per input record; the order of the two sources'
        # records differs from run to run, the last sum of a key and the count do not
        counts: dict[int, int] = {}
        last: dict[int, int] = {}
        for key, total in seen["sums"]:
            counts[key] = counts.get(key, 0) + 1
            last[key] = max(last.get(key, 0), total)
        assert counts == {k: len(range(k, 3_000, 7)) for k in range(7)}
        assert last == {k: sum(range(k, 3_000, 7)) for k in range(7)}
        assert len(seen["first"]) == 3 and all(isinstance(n, int) for n in seen["first"])
        assert seen["committed"] == list(range(500))
        assert seen["failure"].startswith("JobExecutionError") and "bad record 13" in seen["failure"]
        job_id, status, status_after = seen["bounded"]
        assert re.fullmatch(r"[0-9a-f]{32}", job_id) and status == status_after == "FINISHED"
        assert (Path(seen["savepoint"]) / "_metadata").is_file() and seen["running"] == "RUNNING"
        listing = weir("list").stdout
        (endless_id,) = re.findall(r"^([0-9a-f]{32})\s+async endless\s+CANCELED", listing, re.MULTILINE)
        assert seen["cancelled"] == f"JobExecutionError: job 'async endless' ({endless_id}) was cancelled"
        assert re.search(r"endless collect\s+CANCELED", listing), listing  # closing the iterator cancelled it
        assert re.search(r"sums\s+FINISHED", listing) and re.search(r"failing\s+FAILED", listing), listing
    finally:
        weir("cluster", "stop")
    poll(lambda: not _processes_of(home), "the cluster's processes to exit", 60)

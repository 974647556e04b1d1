"""``weir run --web``: the dashboard of a job run from the command line, in a real process."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from weir.cli import main


def test_weir_run_web_serves_the_running_job(running_job: Any) -> None:
    assert running_job.url.startswith("http://127.0.0.1:")
    (job,) = running_job.get("/jobs/overview")["jobs"]
    assert job["name"] == "dashboard demo" and job["state"] in ("CREATED", "RUNNING")
    details = running_job.get(f"/jobs/{job['jid']}")
    assert [(v["name"], v["parallelism"]) for v in details["vertices"]] == [
        ("Source: numbers", 1),
        ("double", 2),
        ("Sink: Collect Stream Sink", 1),
    ]
    overview = running_job.get("/overview")
    assert overview["taskmanagers"] == 1 and overview["slots-total"] == 2
    status, stderr = running_job.interrupt()
    assert status == 0, stderr
    assert "Traceback" not in stderr


def test_a_taken_port_is_one_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        job = tmp_path / "job.py"
        job.write_text(
            "from weir.datastream import StreamExecutionEnvironment\n"
            "env = StreamExecutionEnvironment.get_execution_environment()\n"
            "env.from_collection([1, 2, 3]).print()\n"
            "env.execute('tiny')\n"
        )
        result = CliRunner().invoke(
            main, ["run", str(job), "--web-port", str(port), "--no-live"], env={"WEIR_HOME": str(tmp_path)}
        )
    assert result.exit_code == 2, result.output
    assert f"127.0.0.1:{port} is in use" in result.stderr and "--web-port" in result.stderr
    assert "Traceback" not in result.stderr

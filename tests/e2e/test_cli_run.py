"""``weir run`` and ``weir bench`` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from weir.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_run_the_reference_job_checks_its_answer() -> None:
    result = CliRunner().invoke(
        main, ["run", str(EXAMPLES / "my_job.py"), "--taskmanagers", "2", "--no-live"]
    )
    assert result.exit_code == 0, result.output
    assert "matches the Python oracle" in result.stdout
    assert "job 'MyJob' FINISHED" in result.stderr
    assert "Sink: Unnamed" in result.stderr


def test_run_flags_reach_the_job(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(
        "from weir.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "seen = []\n"
        "env.from_collection(list(range(100))).rebalance().map(lambda x: x * 2).add_sink(seen.append)\n"
        "result = env.execute('flags')\n"
        "print('parallelism', env.get_parallelism(), 'timeout', env.get_buffer_timeout(), 'sum', sum(seen))\n"
    )
    result = CliRunner().invoke(main, ["run", str(job), "-p", "3", "--buffer-timeout", "0", "--no-live"])
    assert result.exit_code == 0, result.output
    assert "parallelism 3 timeout 0 sum 9900" in result.stdout
    assert "3/3" in result.stderr  # the map runs as 3 subtasks


def test_a_failing_job_gives_one_clear_error(tmp_path: Path) -> None:
    job = tmp_path / "fail.py"
    job.write_text(
        "from weir.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_collection([1, 0]).map(lambda x: 1 // x).name('divide').print()\n"
        "env.execute('fails')\n"
    )
    result = CliRunner().invoke(main, ["run", str(job), "--no-live"])
    assert result.exit_code == 2
    assert (
        "error: job 'fails' failed: operator 'divide' (subtask 1/1) failed: ZeroDivisionError"
        in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_run_a_missing_file() -> None:
    result = CliRunner().invoke(main, ["run", "no/such/job.py"])
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_bench_network_prints_ratios_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(
        main,
        ["bench", "network", "--records", "20000", "--parallelism", "2", "--buffer-timeout", "1",
         "--buffer-timeout", "100", "--exchange", "local", "--exchange", "tcp", "--no-memory",
         "--output", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "throughput at 1 ms is" in result.stdout and "plain-Python loop" in result.stdout
    assert "tcp p=2 typed: throughput at 1 ms is" in result.stdout and "tcp is" in result.stdout
    report = json.loads(out.read_text())
    assert report["parameters"]["records"] == 20000
    assert len(report["results"]) == 8 and all(r["records_per_s"] > 0 for r in report["results"])
    assert {r["exchange"] for r in report["results"]} == {"local", "tcp"}
    assert report["summary"]["tcp_over_local_p2_typed_100ms"] > 0


def test_checkpoints_lists_valid_and_corrupt_checkpoints(tmp_path: Path) -> None:
    from weir.checkpoint.metadata import CheckpointMetadata
    from weir.checkpoint.storage import CheckpointStorage

    storage = CheckpointStorage(tmp_path, "a" * 32)
    for cid in (1, 2):
        storage.write_metadata(
            cid, CheckpointMetadata(job_id="a" * 32, checkpoint_id=cid, timestamp_ms=1000 * cid, operators=())
        )
    (storage.checkpoint_dir(3)).mkdir(parents=True, exist_ok=True)  # never committed: no _metadata
    result = CliRunner().invoke(main, ["checkpoints", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    entries = json.loads(result.stdout)["checkpoints"]
    by_id = {e["id"]: e for e in entries}
    assert by_id[1]["status"] == by_id[2]["status"] == "valid"
    assert by_id[3]["status"] == "incomplete"
    text = CliRunner().invoke(main, ["checkpoints", str(tmp_path)])
    assert text.exit_code == 0 and "valid" in text.stdout


def test_checkpoints_shows_the_history_a_job_left(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(
        "from weir.common import Types, WatermarkStrategy\n"
        "from weir.datastream import StreamExecutionEnvironment\n"
        "from weir.datastream.connectors.datagen import DataGeneratorSource\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        f"env.get_configuration().set_string('execution.checkpointing.dir', {str(tmp_path / 'chk')!r})\n"
        "env.set_parallelism(2)\n"
        "env.enable_checkpointing(100)\n"
        "env.get_checkpoint_config().enable_unaligned_checkpoints()\n"
        "src = DataGeneratorSource(lambda i: i, 6000, rate_limit=6000.0, type_info=Types.LONG())\n"
        "env.from_source(src, WatermarkStrategy.no_watermarks(), 'n').key_by(lambda n: n % 3)"
        ".reduce(lambda a, b: a + b).add_sink(lambda v: None)\n"
        "env.execute('history')\n"
    )
    result = CliRunner().invoke(main, ["run", str(job), "--no-live"])
    assert result.exit_code == 0, result.output
    listing = CliRunner().invoke(main, ["checkpoints", str(tmp_path / "chk"), "--format", "json"])
    assert listing.exit_code == 0, listing.output
    (records,) = json.loads(listing.stdout)["history"].values()
    completed = [r for r in records if r["status"] == "COMPLETED"]
    assert completed and all(r["kind"] == "checkpoint" and r["unaligned"] for r in completed)
    assert all(
        r["full_size_bytes"] > 0 and r["duration_ms"] >= 0 and r["acknowledged"] > 0 for r in completed
    )
    text = CliRunner().invoke(main, ["checkpoints", str(tmp_path / "chk")])
    assert text.exit_code == 0 and "checkpoint history of job" in text.stdout


def test_bench_checkpoint_prints_ratios_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "checkpoint.json"
    result = CliRunner().invoke(
        main,
        ["bench", "checkpoint", "--records", "100000", "--interval", "100", "--sink-rate", "50000",
         "--backpressure-seconds", "1.5", "--no-sweep", "--output", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "aligned checkpoints take" in result.stdout and "of the throughput" in result.stdout
    report = json.loads(out.read_text())
    aligned, unaligned = report["runs"][0], report["runs"][1]
    assert aligned["mode"] == "aligned" and unaligned["mode"] == "unaligned"
    assert unaligned["checkpoints_completed"] > 0 and unaligned["persisted_in_flight_bytes"] > 0
    assert report["parameters"]["backpressure_seconds"] == 1.5


def test_bench_checkpoint_sweeps_state_sizes_and_prints_the_phases(tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    result = CliRunner().invoke(
        main,
        ["bench", "checkpoint", "--sweep-only", "--state-sizes", "2000", "--backend", "hashmap",
         "--backend", "lmdb-incremental", "--interval", "100", "--records-per-key", "60", "--sweep-records", "0", "--output", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "checkpoint cost by state size" in result.stdout and "records/s without" in result.stdout
    points = json.loads(out.read_text())["state_size_sweep"]["points"]
    assert [(p["keys"], p["backend"]) for p in points] == [(2000, "hashmap"), (2000, "lmdb-incremental")]
    for p in points:
        assert p["checkpoints_completed"] > 0 and p["throughput_ratio"] > 0
        assert {"median", "max"} <= p["sync_ms"].keys() and p["full_size_bytes"]["max"] > 0


def test_bench_checkpoint_sweep_that_measured_nothing_is_an_error() -> None:
    result = CliRunner().invoke(
        main,
        ["bench", "checkpoint", "--sweep-only", "--state-sizes", "1000", "--backend", "hashmap",
         "--interval", "60000", "--records-per-key", "1", "--sweep-records", "0"],
    )  # fmt: skip
    assert result.exit_code != 0
    assert "measured nothing" in result.output and "1,000 keys on hashmap" in result.output


def test_run_a_two_input_job_prices_every_order() -> None:
    """examples/currency_join.py: connect + key_by + KeyedCoProcessFunction, run by the CLI."""
    result = CliRunner().invoke(main, ["run", str(EXAMPLES / "currency_join.py"), "-p", "2", "--no-live"])
    assert result.exit_code == 0, result.output
    assert "job 'currency join' FINISHED" in result.stderr
    # every 250th order is printed; each came out priced in euro, whichever input came first
    printed = sorted(
        line for line in result.stdout.splitlines() if line.strip().startswith(("1>", "2>", "("))
    )
    assert len(printed) == 4, result.stdout


def test_the_two_input_example_against_its_oracle() -> None:
    import runpy

    from weir.datastream import StreamExecutionEnvironment

    module = runpy.run_path(str(EXAMPLES / "currency_join.py"))
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    out: list = []
    module["build"](env, out.append, n=400)
    env.execute("currency join")
    rates = dict(module["RATES"])
    expected = [(i, c, round(a / rates[c], 2)) for i, c, a in module["orders"](400)]
    assert sorted(out) == sorted(expected)


def test_run_a_job_file_with_a_syntax_error_gives_one_line(tmp_path: Path) -> None:
    job = tmp_path / "syntax.py"
    job.write_text("from weir.datastream import StreamExecutionEnvironment\nx = (\n")
    result = CliRunner().invoke(main, ["run", str(job), "--no-live"])
    assert result.exit_code == 2
    assert f"error: job file '{job}' raised SyntaxError at line 2 while building its job" in result.stderr
    assert "Traceback" not in result.output


def test_run_a_job_file_that_raises_while_building_gives_one_line(tmp_path: Path) -> None:
    job = tmp_path / "raises.py"
    job.write_text(
        "from weir.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "raise RuntimeError('no input configured')\n"
    )
    result = CliRunner().invoke(main, ["run", str(job), "--no-live"])
    assert result.exit_code == 2
    assert (
        f"error: job file '{job}' raised RuntimeError at line 3 while building its job: no input configured"
        in result.stderr
    )
    assert "Traceback" not in result.output


def test_run_a_job_file_that_never_executes_fails_like_flink_run(tmp_path: Path) -> None:
    job = tmp_path / "no_execute.py"
    job.write_text(
        "from weir.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_collection([1, 2]).print()\n"
    )
    result = CliRunner().invoke(main, ["run", str(job), "--no-live"])
    assert result.exit_code == 2
    assert f"error: job file '{job}' didn't contain a job: it never called env.execute()" in result.stderr


def test_run_a_job_file_that_only_collects_is_a_job(tmp_path: Path) -> None:
    job = tmp_path / "collects.py"
    job.write_text(
        "from weir.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "print('collected', sorted(env.from_collection([3, 1, 2]).execute_and_collect(limit=3)))\n"
    )
    result = CliRunner().invoke(main, ["run", str(job), "--no-live"])
    assert result.exit_code == 0, result.output
    assert "collected [1, 2, 3]" in result.stdout


def test_run_says_each_restart_and_its_cause(tmp_path: Path) -> None:
    job = tmp_path / "restarts.py"
    job.write_text(
        "from weir.common import Configuration\n"
        "from weir.datastream import StreamExecutionEnvironment\n"
        "conf = Configuration()\n"
        "conf.set_string('restart-strategy.type', 'fixed-delay')\n"
        "conf.set_string('restart-strategy.fixed-delay.attempts', '2')\n"
        "conf.set_string('restart-strategy.fixed-delay.delay', '0 ms')\n"
        "env = StreamExecutionEnvironment.get_execution_environment(conf)\n"
        "env.from_collection([1, 0]).map(lambda x: 1 // x).name('divide').print()\n"
        "env.execute('always fails')\n"
    )
    result = CliRunner().invoke(main, ["run", str(job), "--no-live"])
    assert result.exit_code == 2
    cause = "operator 'divide' (subtask 1/1) failed: ZeroDivisionError: integer division or modulo by zero"
    lines = result.stderr.splitlines()
    assert [line for line in lines if " restart " in line] == [
        f"job 'always fails' restart {n} (the job, in 0 ms) after: {cause}" for n in (1, 2)
    ]
    assert lines[-1] == f"error: job 'always fails' failed: {cause}"

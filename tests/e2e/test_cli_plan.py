"""``weir plan`` as a user runs it: job files on disk, click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from weir.cli import main
from weir.datastream import StreamExecutionEnvironment

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_job_level_text_shows_the_chains() -> None:
    code, out, _ = run("plan", str(EXAMPLES / "my_job.py"))
    assert code == 0
    assert "JobGraph 'MyJob' (STREAMING), 3 vertices" in out
    assert "Source: Events -> Map  parallelism=2" in out


def test_job_level_json_schema() -> None:
    code, out, _ = run("plan", str(EXAMPLES / "my_job.py"), "--level", "job", "--format", "json")
    assert code == 0
    plan = json.loads(out)
    assert [v["parallelism"] for v in plan["vertices"]] == [2, 2, 1]
    assert [op["name"] for op in plan["vertices"][0]["operators"]] == ["Source: Events", "Map"]
    assert set(plan["vertices"][0]) == {
        "id",
        "name",
        "parallelism",
        "max_parallelism",
        "slot_sharing_group",
        "operators",
    }
    assert plan["edges"][0]["partitioner"] == "HASH"
    assert plan["edges"][0]["result_partition_type"] == "PIPELINED_BOUNDED"
    assert {e["source"] for e in plan["edges"]} <= {v["id"] for v in plan["vertices"]}


def test_stream_level_json_equals_get_execution_plan() -> None:
    import runpy

    code, out, _ = run("plan", str(EXAMPLES / "my_job.py"), "--level", "stream", "--format", "json")
    assert code == 0
    module = runpy.run_path(str(EXAMPLES / "my_job.py"))
    env = StreamExecutionEnvironment.get_execution_environment()
    module["build"](env, [].append)
    from_api = json.loads(env.get_execution_plan())
    from_cli = json.loads(out)
    # the CLI adds how each operator runs (the API's plan is Flink's, without it)
    executions = [node.pop("execution") for node in from_cli["nodes"]]
    assert all(e.startswith(("vectorized: ", "per-record: ")) for e in executions)
    assert from_cli["nodes"] == from_api["nodes"]


def test_the_plan_says_which_operators_run_vectorized_and_why_not() -> None:
    code, out, _ = run("plan", str(EXAMPLES / "columnar_query.py"), "--level", "stream", "--format", "json")
    assert code == 0
    notes = {node["type"]: node["execution"] for node in json.loads(out)["nodes"]}
    assert notes["Map"].startswith("vectorized: batch_map")
    assert notes["Timestamps/Watermarks"].startswith("vectorized: ")
    assert notes["count and sum"].startswith("vectorized: Aggregates(")
    code, out, _ = run("plan", str(EXAMPLES / "my_job.py"))
    assert code == 0
    assert "per-record: a Python function per record" in out  # my_job's map is a lambda


def test_dot_output_is_graphviz() -> None:
    code, out, _ = run("plan", str(EXAMPLES / "window_word_count.py"), "--format", "dot")
    assert code == 0
    assert out.startswith('digraph "WindowWordCount" {') and out.rstrip().endswith("}")
    import re

    assert len(re.findall(r"^  v\d+ -> v\d+ ", out, re.MULTILINE)) == 2
    assert "\\\\n" not in out


def test_parallelism_flag_sets_the_default(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(
        "from weir.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_sequence = None\n"
        "env.from_collection([1, 2]).map(lambda x: x).print()\n"
        "env.execute('p')\n"
    )
    code, out, _ = run("plan", str(job), "-p", "3", "--level", "stream")
    assert code == 0
    assert "[2] Map  parallelism=3" in out


def test_missing_job_file(tmp_path: Path) -> None:
    code, _, err = run("plan", str(tmp_path / "nope.py"))
    assert code == 2
    assert "error: job file" in err and "does not exist" in err


def test_job_file_that_builds_nothing(tmp_path: Path) -> None:
    job = tmp_path / "empty.py"
    job.write_text("x = 1\n")
    code, _, err = run("plan", str(job))
    assert code == 2
    assert "builds no job" in err


def test_job_file_that_raises_names_the_line(tmp_path: Path) -> None:
    job = tmp_path / "broken.py"
    job.write_text("from weir.datastream import StreamExecutionEnvironment\n\nraise KeyError('oops')\n")
    code, _, err = run("plan", str(job))
    assert code == 2
    assert "raised KeyError at line 3" in err


def test_job_file_with_a_usage_error_reports_it(tmp_path: Path) -> None:
    job = tmp_path / "bad.py"
    job.write_text(
        "from weir.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_collection([1]).window(None)\n"
    )
    code, _, err = run("plan", str(job))
    assert code == 2
    assert "window() needs a KeyedStream" in err
    assert "Traceback" not in err


def test_job_built_without_execute_is_still_planned(tmp_path: Path) -> None:
    job = tmp_path / "noexec.py"
    job.write_text(
        "from weir.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_collection([1]).map(lambda x: x).print()\n"
    )
    code, out, _ = run("plan", str(job))
    assert code == 0 and "Map" in out


def test_unknown_option_is_a_usage_error() -> None:
    code, _, err = run("plan", str(EXAMPLES / "my_job.py"), "--colour", "red")
    assert code == 2
    assert "No such option '--colour'" in err


def test_bad_choice_names_the_valid_ones() -> None:
    code, _, err = run("plan", str(EXAMPLES / "my_job.py"), "--level", "physical")
    assert code == 2
    assert "'stream', 'job', 'execution'" in err


def test_execution_level_json_places_every_subtask() -> None:
    code, out, _ = run(
        "plan",
        str(EXAMPLES / "my_job.py"),
        "--level",
        "execution",
        "--format",
        "json",
        "--taskmanagers",
        "2",
        "--slots",
        "1",
    )
    assert code == 0
    plan = json.loads(out)
    assert (plan["slots_used"], plan["slots_offered"], plan["regions"]) == (2, 2, 1)
    by_name = {(s["vertex"].split(" ")[0], s["subtask"]): s for s in plan["subtasks"]}
    assert len(plan["subtasks"]) == 5
    assert by_name[("Source:", 0)]["subpartitions"] == [2]
    assert by_name[("Window(TumblingEventTimeWindows(10000,", 1)]["input_channels"] == [2]
    assert by_name[("Sink:", 0)]["input_channels"] == [2]
    assert {s["taskmanager"] for s in plan["subtasks"]} == {0, 1}
    assert all(s["state"] == "CREATED" and s["attempt"] == 0 for s in plan["subtasks"])


def test_execution_level_with_too_few_slots_names_the_need() -> None:
    code, _, err = run(
        "plan",
        str(EXAMPLES / "window_word_count.py"),
        "--level",
        "execution",
        "--taskmanagers",
        "2",
        "--slots",
        "3",
    )
    assert code == 2
    assert "needs 8 slots" in err and "offers 6 (2 TaskManagers × 3 slots)" in err

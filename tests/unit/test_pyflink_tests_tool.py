"""tools/pyflink_tests.py runs PyFlink-style test files on weir through its stand-ins."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "pyflink_tests.py"

# weir's own file, written the way PyFlink's DataStream tests are (imports, base class, sink)
PYFLINK_STYLE_TESTS = """
from pyflink.common import Configuration, Row
from pyflink.common.typeinfo import Types
from pyflink.datastream.functions import MapFunction
from pyflink.datastream.tests.test_util import DataStreamTestSinkFunction
from pyflink.java_gateway import get_gateway
from pyflink.testing.test_case_utils import PyFlinkStreamingTestCase
from pyflink.util.java_utils import get_j_env_configuration


class Double(MapFunction):
    def map(self, value):
        return value[0], value[1] * 2


class StyleTests(PyFlinkStreamingTestCase):
    def setUp(self):
        super().setUp()
        self.test_sink = DataStreamTestSinkFunction()

    def test_typed_records_come_back_as_java_strings(self):
        self.env.from_collection([("a", 1), ("b", 2)]).map(
            Double(), Types.TUPLE([Types.STRING(), Types.INT()])
        ).add_sink(self.test_sink)
        self.env.execute("typed")
        self.assert_equals(self.test_sink.get_results(), ["(a,2)", "(b,4)"])

    def test_untyped_records_come_back_as_python_strings(self):
        self.env.from_collection([Row("a", 1)]).add_sink(self.test_sink)
        self.env.execute("untyped")
        self.assertEqual(self.test_sink.get_results(True), ["<Row('a', 1)>"])

    def test_a_wrong_expectation_fails(self):
        self.env.from_collection([1, 2]).add_sink(self.test_sink)
        self.env.execute("wrong")
        self.assert_equals(self.test_sink.get_results(True), ["1", "3"])

    def test_the_jvm_is_not_there(self):
        get_gateway().jvm.java.lang.System.currentTimeMillis()

    def test_the_environment_is_configured_through_the_java_handle(self):
        get_j_env_configuration(self.env._j_stream_execution_environment).setString("k1", "v1")
        config = Configuration(j_configuration=get_j_env_configuration(
            self.env._j_stream_execution_environment))
        config.set_integer("k2", 7)
        self.assertEqual(self.env.get_configuration().get_string("k1"), "v1")
        self.assertEqual(self.env.get_configuration().get_integer("k2"), 7)
"""


def test_pyflink_style_tests_run_on_weir_and_failures_count(tmp_path: Path) -> None:
    (tmp_path / "test_style.py").write_text(textwrap.dedent(PYFLINK_STYLE_TESTS))
    done = subprocess.run(
        [sys.executable, str(TOOL), str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.stdout.splitlines() == [
        "test_style.py: 3 of 4 passed; 1 need the JVM",
        "  needs the JVM: StyleTests.test_the_jvm_is_not_there",
        "passed/total: 3/4",
    ], done.stderr
    assert done.returncode == 1
    assert "test_a_wrong_expectation_fails" in done.stderr


def test_the_jvm_stand_in_raises_for_a_test_the_rule_does_not_catch(tmp_path: Path) -> None:
    (tmp_path / "test_hidden.py").write_text(
        textwrap.dedent(
            """
            import unittest
            from pyflink.java_gateway import get_gateway

            def gateway_in_a_helper():
                return get_gateway()

            class HiddenTests(unittest.TestCase):
                def test_reaches_the_jvm_through_a_helper(self):
                    gateway_in_a_helper().jvm
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(TOOL), str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.splitlines() == ["test_hidden.py: 0 of 1 passed; 0 need the JVM", "passed/total: 0/1"]
    assert "weir has no JVM" in done.stderr


def test_a_directory_without_test_files_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert f"'{tmp_path}' holds no test_*.py file" in done.stderr

"""Run PyFlink's own DataStream tests on weir through a stand-in for their JVM test base.

Usage::

    .venv/bin/python tools/pyflink_tests.py DIR [-k SUBSTRING] [-v]

DIR holds test files of Flink's ``flink-python/pyflink/datastream/tests`` (``test_data_stream.py``,
``test_window.py``; they are not in the PyFlink wheel or sdist, fetch them from Flink's
repository). The script prints one line per file and ``passed/total`` for all of them.

Theory of operation: the test files import ``pyflink.*``. An import hook placed first on
``sys.meta_path`` answers every ``pyflink.X`` with the module ``weir.X`` (the same object, so
classes compare equal), except for the few modules that in PyFlink reach the JVM; those are
replaced by stand-ins built here:

- ``pyflink.testing.test_case_utils``: ``PyFlinkTestCase`` and its streaming/batch subclasses.
  Flink's versions start a MiniCluster in a JVM; the stand-ins give each test a fresh
  ``StreamExecutionEnvironment`` (parallelism 2, the runtime mode of the class) on weir's
  embedded cluster, and keep ``assert_equals`` (sorted comparison) and ``tempdir``.
- ``pyflink.datastream.tests.test_util``: ``DataStreamTestSinkFunction``, Flink's collecting
  sink. It records the type of the stream it is added to; ``get_results()`` returns Java's
  ``toString`` of each typed record (what Flink's Java sink returns), ``get_results(True)``
  Python's ``str`` of each record (``stringify=False``: the records themselves).
- ``pyflink.java_gateway``: ``get_gateway()`` raises, so a test that drives the JVM directly
  fails as "needs the JVM" rather than passing by accident.
- ``pyflink.util.java_utils``: ``get_j_env_configuration(env._j_stream_execution_environment)``
  gives the environment's own ``Configuration`` with Java's setter names (``setString``, ...),
  and ``pyflink.common.Configuration(j_configuration=...)`` is a view of it: the test files
  configure their environment that way (``python.execution-mode``, bundle sizes, ask
  timeouts; keys weir keeps but does not act on). ``_j_stream_execution_environment`` is a
  handle added to the environment class here, nothing else.

Which tests count: a test needs the JVM, and is left out of ``passed/total``, when its own
body calls ``get_gateway()``, imports ``py4j``, or reaches the Java objects behind the Python
API (``._j_data_stream``, ``.getStreamGraph(``). Configuring the environment through
``get_j_env_configuration`` does not count (the stand-in above answers it). The script lists
the tests it leaves out and prints how many.

The collected records live in a dictionary of this process, keyed by the sink's token: weir's
embedded cluster runs every task in this process, so the sink's copies in the tasks append to
the same list. The test files are loaded as ``pyflink.datastream.tests.<name>``, importable by
name, so their functions travel to tasks like any job's. Nothing here is committed from Flink.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.util
import inspect
import shutil
import sys
import tempfile
import threading
import types
import unittest
import uuid
from pathlib import Path
from typing import Any

_RESULTS: dict[str, list[Any]] = {}
_LOCK = threading.Lock()

_STAND_INS = (
    "pyflink",
    "pyflink.common",
    "pyflink.util",
    "pyflink.util.java_utils",
    "pyflink.testing",
    "pyflink.testing.test_case_utils",
    "pyflink.datastream.tests",
    "pyflink.datastream.tests.test_util",
    "pyflink.java_gateway",
)


class _Alias(importlib.abc.Loader):
    def __init__(self, module: types.ModuleType) -> None:
        self.module = module

    def create_module(self, spec: Any) -> types.ModuleType:
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _PyFlinkOnWeir(importlib.abc.MetaPathFinder):
    """Answers ``pyflink.X`` with ``weir.X`` or a stand-in."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "pyflink" and not fullname.startswith("pyflink."):
            return None
        if fullname in _STAND_INS:
            module = _stand_in(fullname)
        else:
            if fullname.startswith("pyflink.datastream.tests."):
                return None  # a test file: loaded by path below
            try:
                module = importlib.import_module("weir" + fullname[len("pyflink") :])
            except ModuleNotFoundError:
                return None
        return importlib.util.spec_from_loader(fullname, _Alias(module), is_package=True)


def _stand_in(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []
    if name == "pyflink.testing.test_case_utils":
        _fill_test_case_utils(module)
    elif name == "pyflink.datastream.tests.test_util":
        _fill_test_util(module)
    elif name == "pyflink.common":
        _fill_common(module)
    elif name == "pyflink.util.java_utils":
        _fill_java_utils(module)
    elif name == "pyflink.java_gateway":

        def get_gateway() -> Any:
            raise RuntimeError("this test drives the JVM through py4j; weir has no JVM")

        module.get_gateway = get_gateway  # type: ignore[attr-defined]
    return module


def _fill_common(module: types.ModuleType) -> None:
    """``weir.common``'s names, with a ``Configuration`` that also takes ``j_configuration``."""
    import weir.common as common

    module.__dict__.update({k: v for k, v in vars(common).items() if not k.startswith("__")})
    module.__all__ = list(getattr(common, "__all__", []))  # type: ignore[attr-defined]

    class Configuration(common.Configuration):
        def __init__(self, other: Any = None, j_configuration: Any = None) -> None:
            super().__init__(other)
            if j_configuration is not None:  # a view of the environment's configuration
                self._data = j_configuration._data

    Configuration.__module__ = module.__name__
    Configuration.__qualname__ = "Configuration"
    module.Configuration = Configuration  # type: ignore[attr-defined]


def _fill_java_utils(module: types.ModuleType) -> None:
    from weir.common import Configuration
    from weir.datastream import StreamExecutionEnvironment

    class JavaConfiguration(Configuration):
        """The environment's configuration under Java's setter and getter names."""

        def __init__(self, shared: Configuration) -> None:
            super().__init__()
            self._data = shared._data

        def setString(self, key: str, value: str) -> None:  # Java's name
            self.set_string(key, value)

        def setInteger(self, key: str, value: int) -> None:
            self.set_integer(key, value)

        def setBoolean(self, key: str, value: bool) -> None:
            self.set_boolean(key, value)

        def getString(self, key: str, default: str | None = None) -> str | None:
            return self.get_string(key, default)

    def get_j_env_configuration(j_env: Any) -> JavaConfiguration:
        if not isinstance(j_env, StreamExecutionEnvironment):
            raise TypeError(f"get_j_env_configuration needs an environment's handle, got {j_env!r}")
        return JavaConfiguration(j_env.get_configuration())

    # the handle the test files pass to get_j_env_configuration
    StreamExecutionEnvironment._j_stream_execution_environment = property(lambda self: self)  # type: ignore[attr-defined]
    module.get_j_env_configuration = get_j_env_configuration  # type: ignore[attr-defined]


def _fill_test_case_utils(module: types.ModuleType) -> None:
    from weir.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

    class PyFlinkTestCase(unittest.TestCase):
        runtime_mode = RuntimeExecutionMode.STREAMING

        @classmethod
        def setUpClass(cls) -> None:
            cls.tempdir = tempfile.mkdtemp()
            cls.env = cls._fresh_env()

        @classmethod
        def tearDownClass(cls) -> None:
            shutil.rmtree(cls.tempdir, ignore_errors=True)

        @classmethod
        def _fresh_env(cls) -> Any:
            env = StreamExecutionEnvironment.get_execution_environment()
            env.set_parallelism(2)
            env.set_runtime_mode(cls.runtime_mode)
            return env

        def setUp(self) -> None:
            self.env = self._fresh_env()

        @classmethod
        def assert_equals(cls, actual: list[Any], expected: list[Any]) -> None:
            actual.sort()
            expected.sort()
            assert len(actual) == len(expected), (actual, expected)
            assert all(x == y for x, y in zip(actual, expected)), (actual, expected)

    class PyFlinkStreamingTestCase(PyFlinkTestCase):
        pass

    class PyFlinkBatchTestCase(PyFlinkTestCase):
        runtime_mode = RuntimeExecutionMode.BATCH

    for cls in (PyFlinkTestCase, PyFlinkStreamingTestCase, PyFlinkBatchTestCase):
        cls.__module__ = module.__name__
        setattr(module, cls.__name__, cls)
    module.PyFlinkITTestCase = PyFlinkTestCase  # type: ignore[attr-defined]
    module.PyFlinkUTTestCase = PyFlinkTestCase  # type: ignore[attr-defined]


def _fill_test_util(module: types.ModuleType) -> None:
    from weir.common.watermark_strategy import TimestampAssigner
    from weir.datastream.functions import SinkFunction
    from weir.operators.printing import java_string

    class DataStreamTestSinkFunction(SinkFunction):
        """Collects a stream's records in this process (Flink's collects them in the JVM)."""

        def __init__(self) -> None:
            self.token = uuid.uuid4().hex
            self.type_info: Any = None
            _RESULTS[self.token] = []

        def invoke(self, value: Any, context: Any) -> None:
            with _LOCK:
                _RESULTS.setdefault(self.token, []).append(value)

        def get_results(self, is_python_object: bool = False, stringify: bool = True) -> list[Any]:
            with _LOCK:
                values = list(_RESULTS.get(self.token, []))
                _RESULTS[self.token] = []
            if is_python_object:
                return [str(v) for v in values] if stringify else values
            return [java_string(v, self.type_info) for v in values]

        def clear(self) -> None:
            with _LOCK:
                _RESULTS[self.token] = []

    class SecondColumnTimestampAssigner(TimestampAssigner):
        def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
            return int(value[1])

    for cls in (DataStreamTestSinkFunction, SecondColumnTimestampAssigner):
        cls.__module__ = module.__name__
        setattr(module, cls.__name__, cls)
    _record_sink_types(DataStreamTestSinkFunction)


def _record_sink_types(sink_class: type) -> None:
    """``add_sink`` of the collecting sink remembers the stream's type (Flink's sink sees it)."""
    from weir.datastream.data_stream import DataStream

    original = DataStream.add_sink

    def add_sink(self: Any, sink_func: Any) -> Any:
        if isinstance(sink_func, sink_class):
            sink_func.type_info = self.get_type()
        return original(self, sink_func)

    DataStream.add_sink = add_sink  # type: ignore[method-assign]


def load_tests_from(directory: Path) -> dict[str, unittest.TestSuite]:
    """One suite per ``test_*.py`` of ``directory``, each loaded as ``pyflink.datastream.tests.<name>``."""
    sys.meta_path.insert(0, _PyFlinkOnWeir())
    suites: dict[str, unittest.TestSuite] = {}
    for path in sorted(directory.glob("test_*.py")):
        name = f"pyflink.datastream.tests.{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # an import the file needs that weir lacks: the file counts as one failure
            suites[path.name] = unittest.TestSuite([_ImportFailed(path.name, e)])
            continue
        suites[path.name] = unittest.defaultTestLoader.loadTestsFromModule(module)
    return suites


class _ImportFailed(unittest.TestCase):
    def __init__(self, file: str, error: Exception) -> None:
        super().__init__("runTest")
        self.file, self.error = file, error

    def runTest(self) -> None:
        raise AssertionError(f"{self.file} does not import on weir: {self.error!r}")


_NEEDS_THE_JVM = ("get_gateway(", "py4j", "._j_data_stream", ".getStreamGraph(")


def needs_the_jvm(test: unittest.TestCase) -> bool:
    """True when the test's own body drives the JVM (the rule in the module's docstring)."""
    method = getattr(test, getattr(test, "_testMethodName", ""), None)
    try:
        source = inspect.getsource(method) if method is not None else ""
    except (OSError, TypeError):
        return False
    return any(marker in source for marker in _NEEDS_THE_JVM)


def _filtered(suite: unittest.TestSuite, pattern: str | None, left_out: list[str]) -> unittest.TestSuite:
    out = unittest.TestSuite()
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            out.addTests(_filtered(test, pattern, left_out))
        elif pattern is not None and pattern not in test.id():
            continue
        elif needs_the_jvm(test):
            left_out.append(test.id())
        else:
            out.addTest(test)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, help="directory holding Flink's test_*.py files")
    parser.add_argument("-k", dest="pattern", help="run only tests whose id contains this")
    parser.add_argument("-v", dest="verbose", action="store_true", help="name each test and its error")
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        parser.error(f"'{args.directory}' is not a directory; give the one holding test_data_stream.py")
    suites = load_tests_from(args.directory)
    if not suites:
        parser.error(f"'{args.directory}' holds no test_*.py file")
    passed = total = 0
    for file, suite in suites.items():
        left_out: list[str] = []
        selected = _filtered(suite, args.pattern, left_out)
        result = unittest.TextTestRunner(verbosity=2 if args.verbose else 0, stream=sys.stderr).run(selected)
        failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
        print(f"{file}: {result.testsRun - failed} of {result.testsRun} passed; {len(left_out)} need the JVM")
        for test_id in left_out:
            print(f"  needs the JVM: {test_id.rsplit('.', 2)[-2]}.{test_id.rsplit('.', 1)[-1]}")
        passed += result.testsRun - failed
        total += result.testsRun
    print(f"passed/total: {passed}/{total}")
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())

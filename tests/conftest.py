"""Shared fixtures for weir's own tests."""

from __future__ import annotations

import pytest

from engine.datastream import StreamExecutionEnvironment


@pytest.fixture
def env() -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment()

"""Fixtures of the network integration tests."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import pytest
from network_cluster import open_cluster as _open_cluster

from weir.network.environment import NetworkEnvironment


@pytest.fixture(params=["local", "tcp"])
def open_cluster(
    request: pytest.FixtureRequest,
) -> Callable[..., AbstractAsyncContextManager[list[NetworkEnvironment]]]:
    """Every network integration test runs over in-process connections and over TCP."""
    return functools.partial(_open_cluster, transport=request.param)

"""Fixtures of the network integration tests."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import pytest
from network_cluster import open_cluster as _open_cluster

from weir.network.environment import NetworkEnvironment


@pytest.fixture
def open_cluster() -> Callable[..., AbstractAsyncContextManager[list[NetworkEnvironment]]]:
    return _open_cluster

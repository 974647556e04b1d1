"""The dashboard's HTTP server: a small ASGI app served by hypercorn's Trio worker.

``run_web_monitor`` serves a cluster's REST API (``weir.cluster.web.rest``) and the web page
(``static/``: HTML, plain JS and CSS shipped as package data, nothing fetched from elsewhere)
until it is cancelled, and samples every task's back pressure once per interval. It binds to
127.0.0.1 unless told otherwise. Only GET and HEAD are served: any other method is a 405, an
unknown path a 404, both with Flink's ``{"errors": [...]}`` body.

A server bound to loopback answers only requests whose Host header names a loopback address
or ``localhost``, so that a web page from elsewhere cannot read it through a DNS name that
rebinds to 127.0.0.1.
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import json
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import trio

from weir.cluster.web.rest import BackPressureSampler, ClusterView, RestApi, backpressure_sample
from weir.errors import UsageError

DEFAULT_PORT = 8081  # rest.port
DEFAULT_BIND_ADDRESS = "127.0.0.1"  # rest.bind-address
SAMPLE_INTERVAL_S = 1.0

_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}
_PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_of(header: str) -> str:
    """The host part of a Host header (``[::1]:8081`` -> ``::1``, ``localhost:80`` -> ``localhost``)."""
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class DashboardApp:
    """The ASGI application: static page files and the read-only REST API."""

    def __init__(self, api: RestApi, loopback_only: bool) -> None:
        self.api = api
        self.loopback_only = loopback_only
        package = resources.files("weir.cluster.web") / "static"
        self._files = {path: (package / name).read_bytes() for path, (name, _) in _STATIC.items()}

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        status, headers, body = self.respond(scope["method"], scope["path"], _header(scope, b"host"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})

    def respond(
        self, method: str, path: str, host: str | None
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """(status, headers, body) of one request."""
        if self.loopback_only and (host is None or not _is_loopback(_host_of(host))):
            return _json(403, {"errors": [
                f"Host {host!r} is not a loopback name; this dashboard serves only "
                "127.0.0.1, ::1 and localhost (set rest.bind-address to serve other hosts)"
            ]})  # fmt: skip
        if method not in ("GET", "HEAD"):
            status, headers, body = _json(
                405,
                {"errors": [f"method {method} is not allowed on {path}: the REST API is read-only (GET)"]},
            )
            return status, [*headers, (b"allow", b"GET, HEAD")], body
        if path in _STATIC:
            content_type = _STATIC[path][1].encode()
            headers = [(b"content-type", content_type), (b"cache-control", b"no-cache"),
                       (b"x-content-type-options", b"nosniff")]  # fmt: skip
            if path in ("/", "/index.html"):
                headers += [
                    (b"content-security-policy", _PAGE_POLICY.encode()),
                    (b"referrer-policy", b"no-referrer"),
                ]
            return 200, headers, self._files[path]
        return _json(*self.api.get(path))


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _json(status: int, body: dict[str, Any]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    headers = [(b"content-type", b"application/json; charset=utf-8"), (b"cache-control", b"no-store"),
               (b"x-content-type-options", b"nosniff")]  # fmt: skip
    return status, headers, json.dumps(body).encode()


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _run_sampler(cluster: ClusterView, sampler: BackPressureSampler, interval_s: float) -> None:
    """Sample every task's back pressure once per interval. Cancellation: sampling stops."""
    while True:
        now_s = trio.current_time()
        samples = {
            execution_id: backpressure_sample(stats, now_s)
            for handle in list(cluster.jobs.values())
            for execution_id, stats in handle.job_master.task_statistics().items()
        }
        sampler.on_sample(_now_ms(), samples)
        await trio.sleep(interval_s)


def _os_error(exc: BaseException) -> OSError | None:
    """The OSError inside ``exc`` (hypercorn raises binding errors from within its nurseries)."""
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _os_error(inner)
            if found is not None:
                return found
    return None


def check_port(port: int) -> int:
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise UsageError(f"rest.port must be a TCP port within 0..65535 (0: any free port), got {port!r}")
    return port


async def run_web_monitor(
    cluster: ClusterView,
    bind_address: str = DEFAULT_BIND_ADDRESS,
    port: int = DEFAULT_PORT,
    *,
    sample_interval_s: float = SAMPLE_INTERVAL_S,
    address: str | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the dashboard of ``cluster`` until cancelled; ``task_status.started`` gets its URL
    (``http://HOST:PORT/``, the port the system chose when ``port`` is 0; HOST is ``address``,
    rest.address, when given, else the bound address). Raises UsageError
    when the address cannot be bound. Cancellation: the server closes its sockets and stops."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    check_port(port)
    config = Config()
    host = f"[{bind_address}]" if ":" in bind_address else bind_address
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.loglevel = "WARNING"
    config.graceful_timeout = 1.0
    # a connection's idle timer runs from accept to its first request: a job that holds the event
    # loop for seconds (a long batch in a user function) must not cost the page its answer
    config.keep_alive_timeout = 60.0
    sampler = BackPressureSampler()
    api = RestApi(cluster, _now_ms, trio.current_time, sampler)
    loopback_only = _is_loopback(bind_address)
    app = DashboardApp(api, loopback_only)
    async with trio.open_nursery() as nursery:
        try:
            binds: list[str] = await nursery.start(serve, app, config)
        except (OSError, BaseExceptionGroup) as exc:
            error = _os_error(exc)
            if error is None:
                raise
            reason = "is in use" if error.errno == errno.EADDRINUSE else f"cannot be bound ({error.strerror})"
            raise UsageError(
                f"the dashboard's address {bind_address}:{port} {reason}; choose another rest.port "
                "(weir run --web-port N or weir cluster start --rest-port N; 0 for any free port)"
            ) from None
        nursery.start_soon(_run_sampler, cluster, sampler, sample_interval_s)
        bound_port = binds[0].rstrip("/").rsplit(":", 1)[1]
        host = address or {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(bind_address, bind_address)
        task_status.started(f"http://{f'[{host}]' if ':' in host else host}:{bound_port}/")


def web_observer(
    bind_address: str, port: int, announce: Callable[[str], None], address: str | None = None
) -> Any:
    """An observer for ``client.observe_jobs``: serves the dashboard of the job's cluster while the
    job runs and announces its URL once it listens (``weir run --web``)."""
    check_port(port)

    async def observe(cluster: ClusterView, handle: Any) -> None:
        """Serve until the job ends. Cancellation: the server stops."""
        async with trio.open_nursery() as nursery:
            url = await nursery.start(
                functools.partial(run_web_monitor, cluster, bind_address, port, address=address)
            )
            announce(f"dashboard: {url} (job {handle.job_id})")

    return observe

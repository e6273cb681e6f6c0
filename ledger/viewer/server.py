"""The viewer's HTTP server: standard library only, read-only, on the loopback interface.

>>> viewer = serve("sqlite:///ledger.db")           # doctest: +SKIP
>>> viewer.url                                      # doctest: +SKIP
'http://127.0.0.1:40613/'
>>> viewer.close()                                  # doctest: +SKIP

:func:`serve` opens the ledger with :func:`~ledger.sinks.open_reader` (which never
writes), binds a :class:`~http.server.ThreadingHTTPServer` and serves it on a background
thread. What it promises:

* **Loopback only.** It binds 127.0.0.1 by default and refuses any address that is not a
  loopback one unless ``allow_remote=True``: the viewer has no accounts, so anyone who
  can reach the port can read the whole ledger, arguments and results included. Requests
  whose ``Host`` header names another host are refused (403), so a web page cannot
  reach the viewer through DNS rebinding.
* **No writes.** GET and HEAD only; every other method is answered 405 with
  ``Allow: GET, HEAD``, and no page calls anything but the reader's read methods.
* **Strict headers.** ``Content-Security-Policy: default-src 'none'; style-src
  'unsafe-inline'; ...`` (no script, no font, no image, no frame runs or loads),
  ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer``,
  ``X-Frame-Options: DENY``, ``Cache-Control: no-store``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Self

from ledger.errors import ValidationError
from ledger.viewer.pages.event import event_page, value_page
from ledger.viewer.pages.integrity import integrity_page
from ledger.viewer.pages.report import report_html_page, report_page
from ledger.viewer.pages.run import run_page
from ledger.viewer.pages.runs import runs_page
from ledger.viewer.pages.why import why_page
from ledger.viewer.routing import Context, Handler, Request, Response, dispatch, error_page
from ledger.viewer.source import LedgerSource

__all__ = ["HEADERS", "ROUTES", "Viewer", "is_loopback", "serve"]

log = logging.getLogger(__name__)

ROUTES: dict[str, Handler] = {
    "/": runs_page,
    "/run": run_page,
    "/why": why_page,
    "/report": report_page,
    "/report.html": report_html_page,
    "/integrity": integrity_page,
    "/event": event_page,
    "/value": value_page,
}

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
)
"""Sent with every response (a plain-text value adds ``sandbox`` to the policy)."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1).

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], source: LedgerSource, check_host: bool) -> None:
        self.source = source
        self.check_host = check_host
        family_v6 = ":" in address[0]
        if family_v6:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def allowed_hosts(self) -> frozenset[str]:
        port = self.server_address[1]
        names = {"127.0.0.1", "localhost", "[::1]", str(self.server_address[0])}
        return frozenset({f"{n}:{port}" for n in names} | names)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "ledger-ui"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    _ALLOWED: ClassVar[frozenset[str]] = frozenset({"GET", "HEAD"})

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without this, Nagle's algorithm and the
        # client's delayed ACK hold the body back ~40 ms on a kept-alive connection
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def __getattr__(self, name: str) -> Any:
        # Any method but GET and HEAD (POST, PUT, DELETE, PATCH, PROPFIND...) is a 405.
        if name.startswith("do_"):
            return self._refuse
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)

    def _context(self) -> Context:
        return Context(reader=self.server.source.reader(), ledger=self.server.source.shown)

    def _send(self, response: Response, *, body: bool = True) -> None:
        self.send_response(response.status)
        csp = CSP + ("; sandbox" if not response.content_type.startswith("text/html") else "")
        for name, text in HEADERS:
            self.send_header(name, csp if name == "Content-Security-Policy" else text)
        for name, text in response.headers:
            self.send_header(name, text)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if body:
            try:
                self.wfile.write(response.body)
            except (BrokenPipeError, ConnectionResetError):
                log.info("the client went away before the page was sent")

    def _host_ok(self) -> bool:
        if not self.server.check_host:
            return True
        host = (self.headers.get("Host") or "").strip().lower()
        return not host or host in self.server.allowed_hosts()

    def _answer(self, *, body: bool) -> None:
        ctx = Context(reader=None, ledger=self.server.source.shown)
        if not self._host_ok():
            message = (
                f"Host {self.headers.get('Host', '')!r} is not this viewer's address: the "
                "viewer answers only requests addressed to the loopback host it listens on"
            )
            self._send(error_page(403, message, ctx), body=body)
            return
        try:
            ctx = self._context()
        except Exception as exc:  # the ledger could not be opened again (a JSONL file)
            log.warning("ledger: %s", exc)
            self._send(error_page(500, f"the ledger cannot be read: {exc}", ctx), body=body)
            return
        self._send(dispatch(ROUTES, Request.of(self.path), ctx), body=body)

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _refuse(self) -> None:
        length = self.headers.get("Content-Length", "")
        if length.isdigit() and int(length) <= 1 << 20:
            self.rfile.read(int(length))  # drain a small body so the connection stays sane
        else:
            self.close_connection = True
        ctx = Context(reader=None, ledger=self.server.source.shown)
        page = error_page(
            405, f"{self.command} is not allowed: the viewer is read-only (GET, HEAD)", ctx
        )
        self._send(
            Response(status=405, body=page.body, headers=(("Allow", "GET, HEAD"),)),
            body=self.command != "HEAD",
        )


class Viewer:
    """A running viewer: ``url``, ``close()``, ``wait()``; a context manager."""

    def __init__(self, server: _Server, source: LedgerSource) -> None:
        self._server = server
        self._source = source
        self._closed = threading.Event()
        self._thread = threading.Thread(
            target=server.serve_forever,
            name="ledger-ui",
            kwargs={"poll_interval": 0.2},
            daemon=True,
        )
        self._thread.start()

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The address to open, e.g. ``http://127.0.0.1:8765/``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the viewer is closed (or ``timeout`` seconds); True when closed."""
        return self._closed.wait(timeout)

    def close(self) -> None:
        """Stop serving, close the socket and the ledger; idempotent."""
        if self._closed.is_set():
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
        self._source.close()
        self._closed.set()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def serve(
    url: str, *, host: str = "127.0.0.1", port: int = 0, allow_remote: bool = False
) -> Viewer:
    """Serve the ledger at ``url`` read-only on ``host:port`` (port 0: any free port) and
    return the running :class:`Viewer`.

    A ``host`` that is not a loopback address is refused with ``ValidationError`` unless
    ``allow_remote`` is true (there are no accounts: whoever reaches the port reads the
    whole ledger). A ledger that cannot be opened raises what ``open_reader`` raises;
    a port in use raises ``OSError``.
    """
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ValidationError(f"port: {port!r} is not a TCP port (0-65535; 0 picks a free one)")
    if not isinstance(host, str) or not host:
        raise ValidationError("host: give an address to listen on, e.g. 127.0.0.1")
    if not is_loopback(host) and not allow_remote:
        raise ValidationError(
            f"host {host!r} is not a loopback address: the viewer has no accounts, so anyone "
            "who can reach the port could read the whole ledger (arguments and results "
            "included); keep 127.0.0.1 and tunnel (ssh -L), or pass --allow-remote if every "
            "machine that can reach it may read the ledger"
        )
    source = LedgerSource(url)
    try:
        server = _Server((host.strip("[]"), port), source, check_host=not allow_remote)
    except BaseException:
        source.close()
        raise
    viewer = Viewer(server, source)
    log.info("ledger ui: serving %s at %s", source.shown, viewer.url)
    return viewer

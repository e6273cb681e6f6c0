"""Requests to pages: the routes, the parsed request, the response, the error pages.

>>> request = Request.of("/run?id=r1&id=r2")
>>> request.path, request.params["id"]                 # the first value counts
('/run', 'r1')

Routes (every one answers GET and HEAD only; the server refuses other methods):

==================  ======================================================
``/``               the runs list (filters, paging)
``/run?id=``        one run: its chain as a timeline
``/why?run=&call=`` why one action happened (``&format=json``: its ``to_dict()``)
``/report``         the compliance report for a window (``since``, ``until``)
``/report.html``    the report's own self-contained page
``/integrity``      the tamper-evident log's status
``/event?id=``      one stored event, as recorded
``/value?event=&field=``  one field of an event whole, as plain text
==================  ======================================================

A page that raises ``ValidationError`` becomes a 400 page, a ``LedgerError`` that is a
``LookupError`` (``EventNotFound``, ``CallNotFound``, an unknown run) a 404 page, any
other ``LedgerError`` a 500 page with its one-line message; an unexpected exception a
500 page that names only its type (the details go to the log).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from ledger.errors import CallNotFound, EventNotFound, LedgerError, ValidationError
from ledger.viewer.html import esc, link, page

__all__ = [
    "Context",
    "NotFound",
    "Request",
    "Response",
    "error_page",
    "html_response",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """A GET request: its path and its query parameters (the first value of each)."""

    path: str
    params: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, target: str) -> Request:
        """Parse a request target (``/path?query``); undecodable bytes are replaced."""
        parts = urlsplit(target)
        params: dict[str, str] = {}
        for k, v in parse_qsl(parts.query, keep_blank_values=True, errors="replace"):
            params.setdefault(k, v)
        return cls(path=parts.path or "/", params=params)


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """What the server sends: status, content type and the body."""

    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


class NotFound(LedgerError, LookupError):
    """The page's subject (a run, a route) does not exist."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """What every page is given: the reader and how to name the ledger."""

    reader: object  # a ledger.sinks.Reader (typed loosely so tests may pass any reader)
    ledger: str


def html_response(status: int, title: str, body: str, ctx: Context, here: str = "") -> Response:
    """A page in the viewer's layout."""
    text = page(title, body, here=here, ledger=ctx.ledger)
    return Response(status=status, body=text.encode("utf-8", "replace"))


_TITLES = {400: "Bad request", 404: "Not found", 500: "Could not read the ledger"}


def error_page(status: int, message: str, ctx: Context) -> Response:
    """An error page: what went wrong, in one paragraph, and the way back."""
    title = _TITLES.get(status, "Error")
    body = (
        f'<div class="crumbs">{link("/", "Runs")}</div><h1 id="error-title">{esc(title)}</h1>'
        f'<div class="note bad" id="error">{esc(message)}</div>'
        f"<p>{link('/', 'Back to the runs list')}</p>"
    )
    return html_response(status, title, body, ctx)


Handler = Callable[[Request, Context], Response]


def dispatch(routes: dict[str, Handler], request: Request, ctx: Context) -> Response:
    """Run the page for ``request.path``; errors become error pages (see above)."""
    handler = routes.get(request.path)
    if handler is None:
        return error_page(404, f"no page at {request.path!r}; start from the runs list", ctx)
    try:
        return handler(request, ctx)
    except ValidationError as exc:
        return error_page(400, str(exc), ctx)
    except LedgerError as exc:
        if isinstance(exc, NotFound | EventNotFound | CallNotFound | LookupError):
            return error_page(404, str(exc), ctx)  # RunNotFound too, where it exists
        log.warning("page %s: %s", request.path, exc)
        return error_page(500, str(exc), ctx)
    except Exception as exc:
        log.exception("page %s failed", request.path)
        return error_page(500, f"internal error ({type(exc).__name__}); see the server log", ctx)

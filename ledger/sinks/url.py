"""``open_sink(url)``: a sink from a URL.

>>> open_sink("discard:")                          # DiscardSink
DiscardSink()
>>> open_sink("jsonl:///var/log/agent.jsonl")      # doctest: +SKIP
>>> open_sink("sqlite:///ledger.db")               # doctest: +SKIP
>>> open_sink("postgresql://ledger@db/ledger")     # doctest: +SKIP

``sqlite:///rel.db`` is a path relative to the working directory and
``sqlite:////abs/ledger.db`` an absolute one (SQLAlchemy's convention); ``jsonl:`` URLs
take the same form, and ``jsonl:///path?fsync=1`` asks for an fsync per line. The
PostgreSQL URL accepts ``?ledger_schema=NAME`` for the sink's ``schema=`` (the rest is
passed to psycopg).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ledger.errors import ValidationError
from ledger.sinks.base import Sink
from ledger.sinks.discard import DiscardSink
from ledger.sinks.jsonl import JSONLSink

__all__ = ["open_sink"]

_TRUE = {"1", "true", "yes", "on"}


def open_sink(url: str) -> Sink:
    """Open the sink named by ``url``: ``sqlite:///``, ``postgresql://``, ``jsonl:///``
    or ``discard:``. The caller closes it (every sink is a context manager)."""
    if not isinstance(url, str):
        raise ValidationError(f"sink URL: expected a string, got {type(url).__name__}")
    scheme = url.split(":", 1)[0].lower()
    if scheme == "discard":
        return DiscardSink()
    if scheme == "jsonl":
        return _jsonl(url)
    if scheme in ("sqlite", "sqlite+pysqlite"):
        from ledger.sinks.sqlite import SQLiteSink, path_from_url

        return SQLiteSink(path_from_url(url))
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        return _postgres(url)
    raise ValidationError(
        f"sink URL {url!r}: unknown scheme {scheme!r}; use sqlite:///path, "
        "postgresql://..., jsonl:///path or discard:"
    )


def _jsonl(url: str) -> Sink:
    parts = urlsplit(url)
    if not parts.path or parts.netloc:
        raise ValidationError(f"sink URL {url!r}: write jsonl:///relative or jsonl:////absolute")
    query = dict(parse_qsl(parts.query))
    return JSONLSink(parts.path[1:], fsync=query.get("fsync", "").lower() in _TRUE)


def split_schema(url: str) -> tuple[str, str | None]:
    """``postgresql://...?ledger_schema=S`` -> (the URL without it, ``S``); any other
    URL comes back as it is, with ``None``."""
    if not url.startswith("postgres"):
        return url, None
    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    schema = next((v for k, v in query if k == "ledger_schema"), None)
    rest = urlencode([(k, v) for k, v in query if k != "ledger_schema"])
    return urlunsplit(parts._replace(query=rest)), schema


def _postgres(url: str) -> Sink:
    from ledger.sinks.postgres import PostgresSink

    dsn, schema = split_schema(url)
    return PostgresSink.open(dsn, schema=schema)

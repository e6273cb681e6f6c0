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

__all__ = ["open_sink", "shown_url", "split_schema"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def open_sink(url: str) -> Sink:
    """Open the sink named by ``url``: ``sqlite:///``, ``postgresql://``, ``jsonl:///``
    or ``discard:``. The caller closes it (every sink is a context manager)."""
    if not isinstance(url, str):
        raise ValidationError(f"sink URL: expected a string, got {type(url).__name__}")
    scheme = url.split(":", 1)[0].lower()
    url = scheme + url[len(scheme) :]  # schemes are case-insensitive (RFC 3986)
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
        f"sink URL {shown_url(url)!r}: unknown scheme {scheme!r}; use sqlite:///path, "
        "postgresql://..., jsonl:///path or discard:"
    )


def shown_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, for messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "<unparsable URL>"


def _jsonl(url: str) -> Sink:
    parts = urlsplit(url)
    if not url[len(parts.scheme) :].startswith(":///") or not parts.path[1:]:
        raise ValidationError(
            f"sink URL {url!r}: write jsonl:///relative/file.jsonl or jsonl:////absolute/file.jsonl"
        )
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(query) - {"fsync"})
    if unknown:
        raise ValidationError(f"sink URL {url!r}: unknown parameter {unknown[0]!r} (only fsync)")
    fsync = query.get("fsync", "0").lower()
    if fsync not in _TRUE | _FALSE:
        raise ValidationError(f"sink URL {url!r}: fsync={fsync!r}; use fsync=1 or fsync=0")
    return JSONLSink(parts.path[1:], fsync=fsync in _TRUE)


def split_schema(url: str) -> tuple[str, str | None]:
    """``postgresql://...?ledger_schema=S`` -> (the URL without it, ``S``); any other
    URL comes back as it is, with ``None``. Only the query is touched, so
    ``postgresql:///db`` (a local socket) keeps its form."""
    if not url.startswith("postgres"):
        return url, None
    base, sep, query = url.partition("?")
    pairs = parse_qsl(query)
    schema = next((v for k, v in pairs if k == "ledger_schema"), None)
    if not sep or schema is None:
        return url, None
    rest = urlencode([(k, v) for k, v in pairs if k != "ledger_schema"])
    return (f"{base}?{rest}" if rest else base), schema


def _postgres(url: str) -> Sink:
    from ledger.sinks.postgres import PostgresSink

    dsn, schema = split_schema(url)
    return PostgresSink.open(dsn, schema=schema)

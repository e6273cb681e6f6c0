"""Opening a ledger by URL: for writing (:func:`open_sink`), for reading
(:func:`open_reader`), and bringing its schema up to date (:func:`upgrade`).

>>> open_sink("discard:")
DiscardSink()
>>> with open_sink("sqlite:///ledger.db") as sink:           # doctest: +SKIP
...     sink.commit_action(action)
>>> with open_reader("jsonl:///runs/today.jsonl") as reader:   # doctest: +SKIP
...     summaries = list(reader.runs())
>>> upgrade("postgresql://ledger@db/prod?ledger_schema=agents")  # doctest: +SKIP
'0001_events'

Every URL goes through :func:`~ledger.sinks.url.parse_url` (its forms are listed there).
Opening for reading never creates or migrates anything: a missing SQLite or JSONL file,
a PostgreSQL schema with no ``events`` table, and a schema that is not current are
refused with :class:`~ledger.errors.StorageError` (or ``SchemaVersionError``) saying what
to do, so a typo cannot hide behind an empty database. A locked SQLite file is waited for
``LEDGER_LOCK_TIMEOUT`` seconds (default 10) by readers, then refused.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger.errors import StorageError, ValidationError
from ledger.sinks.base import Reader, Sink
from ledger.sinks.discard import DiscardSink
from ledger.sinks.jsonl import JSONLReader, JSONLSink
from ledger.sinks.url import LedgerURL, parse_url

if TYPE_CHECKING:
    from ledger.sinks.shred import KeyWrapper

__all__ = ["DEFAULT_LOCK_TIMEOUT", "lock_timeout", "open_reader", "open_sink", "upgrade"]

DEFAULT_LOCK_TIMEOUT = 10.0


def open_sink(
    url: str, *, payload_key: KeyWrapper | None = None, lock_wait: float | None = None
) -> Sink:
    """Open the sink named by ``url`` for writing (created when absent; SQL schemas are
    migrated to the newest revision). The caller closes it (every sink is a context
    manager). ``payload_key`` (SQL ledgers; else ``$LEDGER_PAYLOAD_KEY``) is the
    operator's key of a crypto-shredding ledger (:mod:`ledger.sinks.shred`).
    ``lock_wait``: the seconds a SQLite write waits for a file another process keeps
    locked before it fails (``SQLiteSink``'s own default when None)."""
    if payload_key is not None and parse_url(url).scheme not in ("sqlite", "postgresql"):
        raise ValidationError(
            "payload_key: only SQL ledgers (sqlite:///, postgresql://) encrypt payloads"
        )
    parsed = parse_url(url)
    if parsed.scheme == "discard":
        return DiscardSink()
    if parsed.scheme == "jsonl":
        assert parsed.path is not None
        return JSONLSink(parsed.path, fsync=parsed.fsync)
    if parsed.scheme == "sqlite":
        from ledger.sinks.sqlite import SQLiteSink

        assert parsed.path is not None
        if lock_wait is None:
            return SQLiteSink(parsed.path, payload_key=payload_key)
        return SQLiteSink(
            parsed.path,
            payload_key=payload_key,
            busy_timeout=min(lock_wait, 5.0),
            lock_wait=lock_wait,
        )
    from ledger.sinks.postgres import PostgresSink

    return PostgresSink.open(parsed.url, payload_key=payload_key)


def lock_timeout() -> float:
    """Seconds a reader waits for a locked SQLite file: ``LEDGER_LOCK_TIMEOUT``, default
    10."""
    raw = os.environ.get("LEDGER_LOCK_TIMEOUT", "")
    try:
        value = float(raw) if raw else DEFAULT_LOCK_TIMEOUT
    except ValueError:
        raise ValidationError(f"LEDGER_LOCK_TIMEOUT={raw!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise ValidationError(f"LEDGER_LOCK_TIMEOUT={raw!r}: give a finite number of seconds >= 0")
    return value


def open_reader(url: str) -> Reader:
    """Open the ledger at ``url`` for reading; the result is a context manager."""
    parsed = parse_url(url)
    if parsed.scheme == "discard":
        raise ValidationError("discard: keeps nothing, so there is nothing to read; give a ledger")
    if parsed.path is not None:
        _require_file(parsed)
    if parsed.scheme == "jsonl":
        assert parsed.path is not None
        return JSONLReader(parsed.path)
    if parsed.scheme == "sqlite":
        from ledger.sinks.sqlite import SQLiteSink

        assert parsed.path is not None
        wait = lock_timeout()
        return SQLiteSink(parsed.path, busy_timeout=min(wait, 5.0), lock_wait=wait, migrate=False)
    from ledger.sinks.postgres import PostgresSink

    return PostgresSink.open(parsed.url, migrate=False, pool_size=2, max_overflow=2)


def _require_file(parsed: LedgerURL) -> None:
    assert parsed.path is not None
    if parsed.path.is_dir():
        raise StorageError(f"{parsed.path} is a directory, not a ledger file")
    if not parsed.path.is_file():
        raise StorageError(
            f"no ledger at {parsed.path}: the file does not exist "
            "(run `ledger demo` to create one, or give another URL)"
        )


def upgrade(url: str, *, schema: str | None = None) -> str:
    """Bring the database at ``url`` (a ``sqlite:///`` or ``postgresql://`` URL, which may
    carry ``?ledger_schema=NAME``) to the newest schema revision and return it."""
    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        from ledger.sinks.sqlite import SQLiteSink

        if schema is not None:
            raise ValidationError("schema: only a PostgreSQL ledger has a schema; drop it")
        assert parsed.path is not None
        SQLiteSink(parsed.path).close()
    elif parsed.scheme == "postgresql":
        from ledger.sinks.postgres import PostgresSink

        PostgresSink.open(parsed.url, schema=schema).close()
    else:
        raise ValidationError(
            f"upgrade: {parsed.shown!r} has no schema to upgrade; give a sqlite:/// or "
            "postgresql:// URL"
        )
    from ledger.sinks.schema import head_revision

    return head_revision()

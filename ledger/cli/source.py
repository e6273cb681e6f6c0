"""Opening a ledger for reading by URL, including JSONL files (which have no Reader).

>>> with open_reader("sqlite:///ledger.db") as reader:        # doctest: +SKIP
...     chain = reader.chain(run_id)
>>> with open_reader("jsonl:///runs/today.jsonl") as reader:  # doctest: +SKIP
...     summaries = list(reader.runs())

URLs follow SQLAlchemy's convention: ``sqlite:///ledger.db`` is the file ``ledger.db``
relative to the current directory, ``sqlite:////var/lib/ledger.db`` an absolute path, and
``jsonl:///...`` reads the same way. ``postgresql://...`` (or ``postgresql+psycopg://``)
names a server. A locked SQLite file is waited for ``LEDGER_LOCK_TIMEOUT`` seconds
(default 10), then refused. Opening for reading never creates anything: a missing SQLite
or JSONL file, and a PostgreSQL schema (``?ledger_schema=NAME``, else the default schema)
with no ``events`` table, are refused with :class:`~ledger.errors.StorageError`, so a
typo cannot hide behind an empty database. PostgreSQL is opened without migrating
(``PostgresSink(engine, migrate=False)``); ``ledger db upgrade`` creates the schema.

:class:`JSONLReader` is a small in-memory :class:`~ledger.sinks.Reader` over
:func:`~ledger.sinks.read_jsonl` and :func:`~ledger.chain.assemble_chain`: the whole file is
read once; its filters and run summaries follow the SQL readers' documented semantics.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from ulid import ULID

from ledger.chain.assemble import Chain, assemble_chain
from ledger.errors import EventNotFound, StorageError, ValidationError
from ledger.model.event import Event, Kind, Verdict
from ledger.sinks import Reader, RunSummary, read_jsonl
from ledger.sinks.base import Closing

__all__ = ["JSONLReader", "LedgerURL", "open_reader", "parse_url"]

log = logging.getLogger(__name__)

_SCHEMES = ("sqlite", "jsonl", "postgresql", "postgres")
DEFAULT_LOCK_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class LedgerURL:
    """A parsed ledger URL: ``scheme`` (sqlite, jsonl, postgresql) and, for files, ``path``."""

    url: str
    scheme: str
    path: Path | None = None


def parse_url(url: str) -> LedgerURL:
    """Split ``url`` into its scheme and file path; ``ValidationError`` when unusable."""
    scheme, sep, rest = url.partition("://")
    base = scheme.split("+", 1)[0].lower()
    if not sep or base not in _SCHEMES:
        raise ValidationError(
            f"unsupported ledger URL {url!r}: use sqlite:///FILE, postgresql://HOST/DB "
            "or jsonl:///FILE"
        )
    if base in ("postgresql", "postgres"):
        return LedgerURL(url, "postgresql")
    if not rest.startswith("/") or rest in ("/", "//"):
        raise ValidationError(
            f"ledger URL {url!r} names no file: write {base}:///relative.db or "
            f"{base}:////absolute/path"
        )
    path = rest[1:].split("?", 1)[0]  # sqlite:///x.db -> x.db ; sqlite:////abs -> /abs
    if path == ":memory:":
        raise ValidationError(f"{url!r}: an in-memory database holds no ledger to read")
    return LedgerURL(url, base, Path(path))


def lock_timeout() -> float:
    """Seconds to wait for a locked SQLite file: ``LEDGER_LOCK_TIMEOUT``, default 10."""
    raw = os.environ.get("LEDGER_LOCK_TIMEOUT", "")
    try:
        value = float(raw) if raw else DEFAULT_LOCK_TIMEOUT
    except ValueError:
        raise ValidationError(f"LEDGER_LOCK_TIMEOUT={raw!r} is not a number of seconds") from None
    return max(value, 0.0)


def open_reader(url: str) -> Reader:
    """Open the ledger at ``url`` for reading; the result is a context manager."""
    parsed = parse_url(url)
    if parsed.path is not None and parsed.path.is_dir():
        raise StorageError(f"{parsed.path} is a directory, not a ledger file (pass --db)")
    if parsed.path is not None and not parsed.path.is_file():
        raise StorageError(
            f"no ledger at {parsed.path}: the file does not exist "
            "(run `ledger demo` to create one, or pass --db)"
        )
    if parsed.scheme == "jsonl":
        assert parsed.path is not None
        return JSONLReader(parsed.path)
    if parsed.scheme == "sqlite":
        from ledger.sinks import SQLiteSink

        assert parsed.path is not None
        wait = lock_timeout()
        return SQLiteSink(parsed.path, busy_timeout=min(wait, 5.0), lock_wait=wait)
    return _open_postgres(url)


def _open_postgres(url: str) -> Reader:
    """A PostgreSQL ledger opened without migrating: a schema or database with no
    ``events`` table is refused (a typo must not create an empty ledger)."""
    import shlex

    import sqlalchemy as sa

    from ledger.sinks.postgres import engine_url
    from ledger.sinks.schema import current_revision, head_revision
    from ledger.sinks.url import shown_url, split_schema

    dsn, schema = split_schema(url)
    where = shown_url(url)
    try:
        engine = sa.create_engine(engine_url(dsn))
    except sa.exc.ArgumentError as exc:
        raise ValidationError(f"ledger URL {where!r} refused: {exc}") from None
    try:
        sink = _read_only_postgres()(engine, schema=schema, migrate=False)  # checks the name
        try:
            with engine.connect() as conn:
                inspector = sa.inspect(conn)
                present = inspector.has_table("events", schema=schema)
                revision = current_revision(conn, schema) if present else None
                place = f"schema {schema or inspector.default_schema_name!r}"
        except sa.exc.DBAPIError as exc:
            raise StorageError(
                f"cannot open the PostgreSQL ledger at {where}: {exc.orig}"
            ) from None
        if not present:
            raise StorageError(
                f"no ledger at {where}: {place} has no events table; create it with "
                f"`ledger db upgrade {shlex.quote(where)}`"
            )
        head = head_revision()
        if revision is not None and revision != head:
            raise StorageError(
                f"the ledger at {where} is at schema revision {revision!r}, this code reads "
                f"{head!r}; run `ledger db upgrade {shlex.quote(where)}` (or upgrade "
                "agentledger if the database is newer)"
            )
    except BaseException:
        engine.dispose()
        raise
    sink.owned_engine = engine
    return cast(Reader, sink)


@functools.cache
def _read_only_postgres() -> type[Any]:
    """``PostgresSink`` that disposes of the engine it was given when closed (the plain
    sink leaves a caller's engine alone); made on first use, so SQLAlchemy loads late."""
    from ledger.sinks.postgres import PostgresSink

    class ReadOnlyPostgres(PostgresSink):
        owned_engine: Any = None

        def close(self) -> None:
            try:
                super().close()
            finally:
                if self.owned_engine is not None:
                    self.owned_engine.dispose()

    return ReadOnlyPostgres


def _match(
    e: Event,
    run_id: str | None,
    kind: Kind | None,
    tool: str | None,
    verdict: Verdict | None,
    since: datetime | None,
    until: datetime | None,
) -> bool:
    return (
        (run_id is None or e.run_id == run_id)
        and (kind is None or e.kind is kind)
        and (tool is None or e.tool == tool)
        and (verdict is None or e.verdict is verdict)
        and (since is None or e.time >= since)
        and (until is None or e.time < until)
    )


@dataclass(slots=True)
class _RunAcc:
    first: datetime
    last: datetime
    events: int = 0
    actions: int = 0
    denied_calls: set[str] = field(default_factory=set)
    denied_plain: int = 0
    errors: int = 0
    ended: bool = False

    def add(self, e: Event) -> None:
        self.first = min(self.first, e.time)
        self.last = max(self.last, e.time)
        self.events += 1
        self.actions += e.kind is Kind.ACTION
        if e.verdict is Verdict.DENIED:
            if e.call_id:
                self.denied_calls.add(e.call_id)
            else:
                self.denied_plain += 1
        self.errors += bool(e.err)
        self.ended = self.ended or e.kind in (Kind.RUN_END, Kind.ABORT)

    def summary(self, run_id: str) -> RunSummary:
        return RunSummary(
            run_id=run_id,
            first_time=self.first,
            last_time=self.last,
            events=self.events,
            actions=self.actions,
            denials=len(self.denied_calls) + self.denied_plain,
            errors=self.errors,
            ended=self.ended,
        )


class JSONLReader(Closing):
    """A read-only :class:`~ledger.sinks.Reader` over one JSONL ledger file.

    A cut last line or corrupt lines are logged (``read_jsonl`` reports them in
    :attr:`truncated_tail` and :attr:`corrupt_lines`) and skipped.
    """

    def __init__(self, path: str | Path) -> None:
        contents = read_jsonl(path)
        self.path = Path(path)
        self.truncated_tail = contents.truncated_tail
        self.corrupt_lines = tuple(contents.corrupt_lines)
        self._events = contents.events
        self._by_id = {str(e.event_id): e for e in self._events}

    def get(self, event_id: ULID | str) -> Event:
        """The event with this id; ``EventNotFound`` when absent."""
        found = self._by_id.get(str(event_id))
        if found is None:
            raise EventNotFound(f"no event {str(event_id)!r} in {self.path}")
        return found

    def chain(self, run_id: str) -> Chain:
        """The run's events in file order, assembled."""
        return assemble_chain(e for e in self._events if e.run_id == run_id)

    def events(
        self,
        *,
        run_id: str | None = None,
        kind: Kind | str | None = None,
        tool: str | None = None,
        verdict: Verdict | str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: ULID | str | None = None,
        limit: int | None = None,
    ) -> Iterator[Event]:
        """Matching events in file order; ``after`` skips up to and including that id."""
        k = Kind(kind) if kind is not None else None
        v = Verdict(verdict) if verdict is not None else None
        start = 0
        if after is not None:
            self.get(after)  # EventNotFound for an unknown id, as the SQL readers do
            ids = [str(e.event_id) for e in self._events]
            start = ids.index(str(after)) + 1
        sent = 0
        for e in self._events[start:]:
            if limit is not None and sent >= limit:
                return
            if _match(e, run_id, k, tool, v, since, until):
                sent += 1
                yield e

    def runs(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
    ) -> Iterator[RunSummary]:
        """One summary per run with an event in the window, oldest first."""
        acc: dict[str, _RunAcc] = {}
        for e in self._events:
            if e.run_id and _match(e, None, None, None, None, since, until):
                acc.setdefault(e.run_id, _RunAcc(e.time, e.time)).add(e)
        ordered = sorted(acc.items(), key=lambda item: item[1].first)
        for i, (run_id, run) in enumerate(ordered):
            if limit is not None and i >= limit:
                return
            yield run.summary(run_id)

    def close(self) -> None:
        """Nothing to release: the file was read at construction."""

"""The SQL sinks' shared SQLAlchemy Core schema and read queries (rows: :mod:`.rows`).

One table, ``events`` (changed only through the Alembic revisions in
``ledger/sinks/migrations``)::

    seq           integer primary key   insertion sequence == commit order (see below)
    event_id      text, unique          the ULID, 26 characters
    run_id        text                  '' when the event has none
    call_id       text                  '' when the event has none
    kind, tool    text                  tool '' when unset
    verdict       text, nullable
    time_us       bigint                event time, Unix microseconds (UTC)
    has_err       boolean               the event carries a non-empty ``err``
    event_json    text                  ``event.to_json()`` exactly as written: the truth
    content_hash  text, nullable        ``sha256:`` of the RFC 8785 form of that JSON
    leaf_index    bigint, unique        the event's leaf in the Merkle log (:mod:`.tree`)
    nodes         bytea, nullable       the tree nodes that leaf completes (:mod:`.tree`)

Indexes: ``(run_id, seq)`` for ``chain``/``events(run_id=)``/``runs``, ``(time_us)``
for time-ranged reports, ``(tool, time_us)`` and ``(kind, time_us)`` for lookups.

Reading: ``chain`` orders a run's rows by event id (ULIDs minted as the events were made:
the order things happened), ``events`` by ``seq`` (commit order, so tailing is safe);
never by producer time (the reference's ``ts``-then-id order could disagree with what
happened, its defect 7).
Rows decode through :func:`ledger.sinks.rows.parse_row`: a row that does not parse (or
names another event id than its column) raises ``CorruptRecord`` naming it; one whose
filter columns disagree with its JSON is returned as its JSON says, with a warning
naming the row and each column.
Every sink guarantees that ``seq`` order is commit order, so a reader tailing with
``events(after=...)`` never skips a row that committed late.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from datetime import datetime
from operator import itemgetter
from typing import Any

import sqlalchemy as sa
from ulid import ULID

from ledger.chain import Chain, assemble_chain
from ledger.errors import CorruptRecord, EventNotFound, RunNotFound
from ledger.ids import coerce_event_id
from ledger.model.event import Event
from ledger.model.values import Kind, Verdict
from ledger.sinks.base import (
    Closing,
    RunSummary,
    StoredRow,
    check_limit,
    check_member,
    check_text,
)
from ledger.sinks.rows import (
    COLUMNS,
    FILTER_COLUMNS,
    READ_COLUMNS,
    content_hash,  # noqa: F401 - still importable from here, as before
    event_row,  # noqa: F401 - still importable from here, as before
    from_micros,
    is_micros,
    parse_row,
    to_micros,
)
from ledger.sinks.shred import shows_sealed

__all__ = [
    "COLUMNS",
    "PAGE_SIZE",
    "READ_COLUMNS",
    "SQLReader",
    "events_table",
    "fetch_all",
]

log = logging.getLogger(__name__)

PAGE_SIZE = 500


def events_table(schema: str | None = None) -> sa.Table:
    """The ``events`` table as Core metadata (in ``schema`` when given)."""
    md = sa.MetaData(schema=schema)
    return sa.Table(
        "events",
        md,
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("event_id", sa.String(26), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("call_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("verdict", sa.Text(), nullable=True),
        sa.Column("time_us", sa.BigInteger(), nullable=False),
        sa.Column("has_err", sa.Boolean(), nullable=False),
        sa.Column("event_json", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.Text(), nullable=True),
        sa.Column("leaf_index", sa.BigInteger(), nullable=True),
        sa.Column("nodes", sa.LargeBinary(), nullable=True),
        # the largest time_us of this row and every row before it (in seq order): where
        # a query for events since a time may start (SQLReader._first_since)
        sa.Column("time_hi_us", sa.BigInteger(), nullable=True),
        sa.UniqueConstraint("event_id", name="uq_events_event_id"),
        sa.Index("ix_events_run_seq", "run_id", "seq"),
        sa.Index("ix_events_time", "time_us"),
        sa.Index("ix_events_tool_seq", "tool", "seq"),  # a tool's events in commit order
        sa.Index("ix_events_kind_time", "kind", "time_us"),
        sa.Index("ux_events_leaf_index", "leaf_index", unique=True),
    )


def stored_json(t: sa.Table, dialect: str) -> sa.ColumnElement[Any]:
    """The ``event_json`` column as reads fetch it. On SQLite it comes as bytes (``CAST
    AS BLOB``, no copy): a row whose text is not valid UTF-8 (written around the ledger)
    then reaches :func:`parse_row`, which names it, instead of failing the whole fetch
    in the driver. PostgreSQL cannot hold such text."""
    column = t.c.event_json
    return sa.cast(column, sa.LargeBinary).label("event_json") if dialect == "sqlite" else column


def _read(t: sa.Table, dialect: str) -> list[sa.ColumnElement[Any]]:
    """The columns every read fetches, in :data:`READ_COLUMNS` order."""
    return [t.c[name] for name in READ_COLUMNS[:-1]] + [stored_json(t, dialect)]


_by_event_id = itemgetter(1)  # a row's event id (text)
_BEFORE_ANY_SEQ = -(2**63)  # below every bigint: the cursor of a read from the start


def fetch_all(
    conn: sa.Connection, query: sa.Executable, params: dict[str, Any] | None = None
) -> list[Any]:
    """Every row of ``query`` as the driver's own tuples. The query runs through
    SQLAlchemy as any other (its errors wrapped, a lost connection invalidated); the rows
    are taken from the DB-API cursor, without a ``Row`` object each (a ``chain()`` of
    1,000 events spends about 4 % of its time making them). Values are the driver's:
    ``has_err`` may be 0/1 on SQLite (:func:`parse_row` reads it with ``bool``)."""
    result = conn.execute(query, params)
    try:
        return list(result.cursor.fetchall())
    except conn.dialect.loaded_dbapi.Error as exc:  # as SQLAlchemy wraps a failed fetch
        raise sa.exc.DBAPIError.instance(None, None, exc, conn.dialect.loaded_dbapi.Error) from exc
    finally:
        result.close()


class _BadTime(Exception):
    """A run's first or last ``time_us`` (``values``) is no time: :meth:`SQLReader.runs`
    names the row that holds it."""

    def __init__(self, run_id: str, values: tuple[Any, Any]) -> None:
        super().__init__(run_id, values)
        self.run_id, self.values = run_id, values


def _summary(row: Any) -> RunSummary:
    if type(row.run_id) is not str:  # SQLite keeps whatever type an UPDATE gave
        raise CorruptRecord(
            f"events rows of run {row.run_id!r}: the run_id column holds a "
            f"{type(row.run_id).__name__}, not text; the rows were changed outside the "
            "ledger. Run `ledger db check`"
        )
    try:
        first, last = from_micros(row.first_us), from_micros(row.last_us)
    except (TypeError, ValueError, OverflowError):
        raise _BadTime(row.run_id, (row.first_us, row.last_us)) from None
    return RunSummary(
        run_id=row.run_id,
        first_time=first,
        last_time=last,
        events=int(row.events),
        actions=int(row.actions or 0),
        denials=int(row.denials or 0),
        errors=int(row.errors or 0),
        ended=bool(row.ended),
    )


class SQLReader(Closing):
    """The read path shared by the SQL sinks.

    Subclasses set ``_table`` and implement ``_reading()`` (a context manager giving a
    connection for one query) and may override ``_page_guard(conn)``.
    """

    _table: sa.Table
    _engine: sa.Engine
    _payloads: Any = None  # ledger.sinks.shred.Payloads in crypto-shredding mode
    # a writer without the key of a ledger whose payload mode was open when it opened:
    # its first write checks that no writer with a key made it shredding meanwhile
    _mode_open: bool = False
    _decode = staticmethod(parse_row)  # a stored row to its event (shred.attach_payloads)

    @property
    def _dialect(self) -> str:
        return self._engine.dialect.name

    def _reading(self) -> AbstractContextManager[sa.Connection]:
        raise NotImplementedError

    def _page_guard(self, conn: sa.Connection) -> AbstractContextManager[None]:
        """Held around each ``events`` page query; PostgreSQL waits for writers."""
        return nullcontext()

    def shows_sealed_payloads(self) -> bool:
        """True when this ledger is read with its encrypted payloads left as stored (a
        crypto-shredding ledger opened without the payload key): a result's hash cannot
        be checked then (:class:`ledger.drift.EventResolver` asks)."""
        return shows_sealed(self)

    def _borrowed(self) -> bool:
        """True when reads go through a connection the caller owns (never held across
        a ``yield``, so the caller can use it between two items)."""
        return False

    def _check_open(self) -> None:
        """Raise ``SinkClosed`` now (``_reading`` does) when the sink was closed."""
        if getattr(self, "_closed", False):
            with self._reading():
                pass

    def get(self, event_id: ULID | str) -> Event:
        """The event with ``event_id``; ``EventNotFound`` when none is stored.

        >>> sink.get("01J0000000000000000000000")   # doctest: +SKIP
        """
        key = str(coerce_event_id(event_id))
        t = self._table
        query = sa.select(*_read(t, self._dialect)).where(t.c.event_id == key)
        with self._reading() as conn:
            row = conn.execute(query).first()
        if row is None:
            raise EventNotFound(f"no event with id {key} is stored")
        return self._decode(row)

    def chain(self, run_id: str) -> Chain:
        """The run ``run_id`` assembled from its events ordered by event id;
        ``RunNotFound`` when no event of it is stored.

        Event ids are ULIDs minted when each event was made, strictly increasing within
        a process, so id order is the order things happened in the run even when a
        best-effort event (a gate decision) was committed after the action it preceded.
        """
        check_text(run_id, "run_id")  # "" is the events recorded outside any run
        t = self._table
        query = (
            sa.select(*_read(t, self._dialect))
            .where(t.c.run_id == run_id)
            .order_by(t.c.seq)  # served by the (run_id, seq) index; sorted by id below
        )
        with self._reading() as conn:
            fetched = fetch_all(conn, query)
        if not fetched:
            raise RunNotFound(f"no events of run {run_id!r} are stored (see `ledger runs`)")
        try:
            rows = sorted(fetched, key=_by_event_id)  # Crockford text sorts as the ULID does
        except TypeError:  # an id column SQL made a BLOB: parse_row names its row
            rows = sorted(fetched, key=lambda row: str(row[1]))
        chain = assemble_chain(map(self._decode, rows))
        return chain if chain.run_id else replace(chain, run_id=run_id)

    def events(
        self,
        *,
        run_id: str | None = None,
        kind: Kind | str | None = None,
        tool: str | None = None,
        verdict: Verdict | str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: ULID | str | int | None = None,
        limit: int | None = None,
    ) -> Iterator[Event]:
        """Matching events in commit order, fetched ``PAGE_SIZE`` rows at a time.

        ``since`` is inclusive and ``until`` exclusive (event time). ``after`` is an event
        id (or a ``seq`` number): only events committed after it are returned, so a tailer
        passes the last id it saw. No connection is held between pages.

        >>> for ev in sink.events(run_id="r1", kind="action"):   # doctest: +SKIP
        ...     print(ev.tool)
        """
        t = self._table
        where = self._filters(run_id, kind, tool, verdict, since, until)
        self._check_open()
        since_us = None if since is None else to_micros(since, "since")
        return self._pages(where, self._cursor(after), check_limit(limit), t, since_us)

    def _first_since(self, conn: sa.Connection, since_us: int) -> int | None:
        """A ``seq`` such that no row before it has ``time_us >= since_us``: the first
        row whose ``time_hi_us`` (the running maximum of the time in commit order)
        reaches it, found by a binary search over the leaf indexes in one statement
        (about 3 log2(n) index lookups), or one past the last row when none reaches it.
        None (no bound) when the search meets a row without ``time_hi_us`` or a missing
        leaf index, a row without a leaf index is stored, or the first row by ``seq``
        is not leaf 0 (rows the search cannot see or would misplace: written or changed
        outside the ledger, which ``ledger verify`` reports), and in an empty ledger.

        Event times are stated by the writers and need not rise with the commit order,
        so without it a query since a time read the table from its start (PostgreSQL
        walked 700,000 rows of 10^6 for a first page of 500)."""
        sqlite = self._dialect == "sqlite"
        name = f'"{self._table.schema}".events' if self._table.schema else "events"
        mark = ":s" if sqlite else "%(s)s"
        at_mid = f"(SELECT time_hi_us FROM {name} WHERE leaf_index = (lo + hi) / 2)"
        sql = (
            "WITH RECURSIVE probe(lo, hi, bad) AS ("
            f"SELECT CAST(0 AS BIGINT), (SELECT max(leaf_index) FROM {name}), 0 "
            "UNION ALL "
            f"SELECT CASE WHEN {at_mid} >= {mark} THEN lo ELSE (lo + hi) / 2 + 1 END, "
            f"CASE WHEN {at_mid} >= {mark} THEN (lo + hi) / 2 ELSE hi END, "
            f"CASE WHEN {at_mid} IS NULL THEN 1 ELSE 0 END "
            "FROM probe WHERE lo < hi AND bad = 0) "
            f"SELECT bad, (SELECT seq FROM {name} WHERE leaf_index = lo), "
            f"(SELECT time_hi_us FROM {name} WHERE leaf_index = lo), "
            f"EXISTS (SELECT 1 FROM {name} WHERE leaf_index IS NULL), "
            f"CASE WHEN (SELECT min(seq) FROM {name}) = "
            f"(SELECT seq FROM {name} WHERE leaf_index = 0) THEN 0 ELSE 1 END "
            "FROM probe WHERE lo >= hi OR bad = 1"
        )
        found = conn.exec_driver_sql(sql, {"s": since_us}).first()
        if found is None:  # an empty ledger
            return None
        bad, seq, high, unnumbered, moved = found
        if bad or unnumbered or moved or type(seq) is not int or type(high) is not int:
            return None
        return seq if high >= since_us else seq + 1

    def _pages(
        self,
        where: list[Any],
        cursor: int,
        limit: int | None,
        t: sa.Table,
        since_us: int | None = None,
    ) -> Iterator[Event]:
        """The events matching ``where`` after ``cursor``, page by page; with
        ``since_us`` (the filter's ``since``) the first page starts no earlier than
        :meth:`_first_since` (found on the first page's connection)."""
        remaining = limit
        while remaining is None or remaining > 0:
            size = PAGE_SIZE if remaining is None else min(PAGE_SIZE, remaining)
            with self._reading() as conn, self._page_guard(conn):
                if since_us is not None:  # no row before the first to reach it can match
                    first = self._first_since(conn, since_us)
                    cursor = cursor if first is None else max(cursor, first - 1)
                    since_us = None
                query = (
                    sa.select(*_read(t, self._dialect))
                    .where(*where, t.c.seq > cursor)
                    .order_by(t.c.seq)
                    .limit(size)
                )
                rows = fetch_all(conn, query)
            for row in rows:
                yield self._decode(row)
            if len(rows) < size:
                return
            cursor = rows[-1][0]
            if remaining is not None:
                remaining -= len(rows)

    def _cursor(self, after: ULID | str | int | None) -> int:
        if after is None:  # from the first row: seq numbers start at 1, but a seq SQL
            return _BEFORE_ANY_SEQ  # set to 0 or below must not hide the row
        if isinstance(after, int) and not isinstance(after, bool):
            if after < 0:  # a seq SQL set below the first: a reader stepping over its row
                return max(after, _BEFORE_ANY_SEQ)  # resumes after it
            return check_limit(after, "after") or 0
        key = str(coerce_event_id(after, field="after"))
        t = self._table
        with self._reading() as conn:
            seq = conn.execute(sa.select(t.c.seq).where(t.c.event_id == key)).scalar()
        if seq is None:
            raise EventNotFound(f"after: no event with id {key} is stored")
        return int(seq)

    def _filters(
        self,
        run_id: str | None,
        kind: Kind | str | None,
        tool: str | None,
        verdict: Verdict | str | None,
        since: datetime | None,
        until: datetime | None,
    ) -> list[Any]:
        t = self._table
        where: list[Any] = []
        if check_text(run_id, "run_id", optional=True) is not None:
            where.append(t.c.run_id == run_id)
        if kind is not None:
            where.append(t.c.kind == check_member(Kind, kind, "kind"))
        if check_text(tool, "tool", optional=True) is not None:
            where.append(t.c.tool == tool)
        if verdict is not None:
            where.append(t.c.verdict == check_member(Verdict, verdict, "verdict"))
        where.extend(self._window(since, until))
        return where

    def _window(self, since: datetime | None, until: datetime | None) -> list[Any]:
        t = self._table
        where: list[Any] = []
        if since is not None:
            where.append(t.c.time_us >= to_micros(since, "since"))
        if until is not None:
            where.append(t.c.time_us < to_micros(until, "until"))
        return where

    def stored_rows(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        run_id: str | None = None,
        kind: str | None = None,
    ) -> Iterator[StoredRow]:
        """Every row in ``[since, until)`` exactly as stored, in commit order (see
        :func:`stored_rows`), with its ``time_hi_us``: in a window too, no row's value
        may be below the largest time of the window's rows up to it (the running maximum
        of every row up to it is at least that), so a value lowered to hide rows from
        a query since a time is found by a check of the window's rows alone. ``run_id``
        and ``kind`` keep the rows whose columns say so (then without ``time_hi_us``:
        its check is of a window's every row)."""
        self._check_open()
        return stored_rows(
            self._reading,
            self._table,
            since=since,
            until=until,
            high_water=run_id is None and kind is None,
            run_id=run_id,
            kind=kind,
        )

    def runs(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> Iterator[RunSummary]:
        """One :class:`RunSummary` per run with events in ``[since, until)``, oldest
        first (newest first with ``newest=True``, so ``limit`` keeps the latest runs);
        the counts cover the run's events inside that window.

        >>> [r.run_id for r in sink.runs(since=last_month)]   # doctest: +SKIP

        The arguments are checked when ``runs`` is called, not at the first ``next()``.
        """
        query = self._runs_query(self._window(since, until), check_limit(limit), newest)
        self._check_open()
        return self._summaries(query)

    def _summaries(self, query: sa.Select[Any]) -> Iterator[RunSummary]:
        try:
            if self._borrowed():  # the caller's connection: read, end the read, then yield
                with self._reading() as conn:
                    rows = conn.execute(query).all()
                yield from map(_summary, rows)
                return
            with self._reading() as conn:  # a connection of our own, streamed
                yield from map(_summary, self._streamed(conn, query))
        except _BadTime as bad:
            raise self._bad_time(bad) from None

    def _bad_time(self, bad: _BadTime) -> CorruptRecord:
        """The error naming the row of run ``bad.run_id`` whose ``time_us`` column holds
        a value that is no time (changed by SQL)."""
        t = self._table
        value = next(v for v in bad.values if not is_micros(v))
        with self._reading() as conn:
            found = conn.execute(
                sa.select(t.c.seq, t.c.event_id)
                .where(t.c.run_id == bad.run_id, t.c.time_us == value)
                .order_by(t.c.seq)
                .limit(1)
            ).first()
        where = (
            f"an events row of run {bad.run_id!r}"
            if found is None
            else f"events row seq={found[0]} (event_id {found[1]}, run {bad.run_id!r})"
        )
        return CorruptRecord(
            f"{where}: its time_us column holds {value!r}, not a time in microseconds; the "
            "row was changed outside the ledger (`ledger db check` lists such rows)",
            seq=None if found is None else int(found[0]),
            event_id="" if found is None else str(found[1]),
        )

    def _streamed(self, conn: sa.Connection, query: sa.Select[Any]) -> Iterator[Any]:
        """The rows of ``query`` (attribute access by label), streamed in pages of
        ``PAGE_SIZE`` (a server-side cursor where the driver has one); a row that
        raises, or a caller that stops, leaves no cursor open."""
        result = conn.execute(query.execution_options(yield_per=PAGE_SIZE))
        try:
            yield from result
        finally:
            result.close()

    def _runs_query(
        self, where: list[Any], limit: int | None, newest: bool = False
    ) -> sa.Select[Any]:
        t = self._table
        call = sa.func.coalesce(sa.func.nullif(t.c.call_id, ""), t.c.event_id)
        denied_call = sa.case((t.c.verdict == "denied", call))
        ended = sa.case((t.c.kind.in_(("run_end", "abort")), 1), else_=0)
        first_us = sa.func.min(t.c.time_us).label("first_us")
        # runs that start at the same microsecond in code point order, as every reader
        # orders them (MemoryReader, JSONLReader: Python's str order), whatever the
        # database's collation: an en_US one puts "a" before "B", and runs(limit=) would
        # keep other runs than the other readers
        run_id = sa.collate(t.c.run_id, "BINARY" if self._dialect == "sqlite" else "C")
        query = (
            sa.select(
                t.c.run_id,
                first_us,
                sa.func.max(t.c.time_us).label("last_us"),
                sa.func.count().label("events"),
                sa.func.sum(sa.case((t.c.kind == "action", 1), else_=0)).label("actions"),
                sa.func.count(sa.distinct(denied_call)).label("denials"),
                sa.func.sum(sa.case((t.c.has_err, 1), else_=0)).label("errors"),
                sa.func.max(ended).label("ended"),
            )
            .where(*where)
            .group_by(t.c.run_id)
            .order_by(*((first_us.desc(), run_id.desc()) if newest else (first_us, run_id)))
        )
        return query if limit is None else query.limit(limit)


_STORED_PAGE = 2000


def stored_rows(
    reading: Callable[[], AbstractContextManager[sa.Connection]],
    table: sa.Table,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    high_water: bool = False,
    run_id: str | None = None,
    kind: str | None = None,
) -> Iterator[StoredRow]:
    """``(event_id, run_id, event_json, content_hash, filter columns)`` of each row of
    the ``events`` ``table`` in the window (of ``run_id`` and ``kind`` by their columns,
    when given), in commit order, paged (no connection is held between pages);
    ``reading()`` gives a connection. The filter columns are ``{name: value}`` for
    ``FILTER_COLUMNS``, and ``time_hi_us`` too with ``high_water`` (for a check of every
    row: :func:`ledger.report.hashes.check_rows` then checks it). ``has_err`` is the
    stored value, not read through the Boolean type."""
    t = table
    where: list[Any] = []
    if run_id is not None:
        where.append(t.c.run_id == run_id)
    if kind is not None:
        where.append(t.c.kind == kind)
    if since is not None:
        where.append(t.c.time_us >= to_micros(since, "since"))
    if until is not None:
        where.append(t.c.time_us < to_micros(until, "until"))
    cursor = _BEFORE_ANY_SEQ
    names = (*FILTER_COLUMNS, "time_hi_us") if high_water else FILTER_COLUMNS
    # has_err as stored, not through the Boolean type (which takes a 'yes' for true)
    columns = [
        sa.type_coerce(t.c[name], sa.Integer).label(name) if name == "has_err" else t.c[name]
        for name in names
    ]
    while True:
        with reading() as conn:
            text = stored_json(t, conn.dialect.name)
            query = (
                sa.select(t.c.seq, t.c.event_id, text, t.c.content_hash, *columns)
                .where(*where, t.c.seq > cursor)
                .order_by(t.c.seq)
                .limit(_STORED_PAGE)
            )
            rows = conn.execute(query).all()
        for _seq, event_id, raw, stored, *values in rows:
            found = dict(zip(names, values, strict=True))
            yield event_id, found["run_id"], raw, stored, found
        if len(rows) < _STORED_PAGE:
            return
        cursor = rows[-1][0]

"""``PostgresSink``: a durable sink and reader on PostgreSQL (psycopg 3 via SQLAlchemy).

>>> with PostgresSink.open("postgresql://ledger@db/ledger") as sink:     # doctest: +SKIP
...     sink.commit_action(action)

Ownership. ``PostgresSink.open(dsn)`` creates its engine and disposes of it on
``close()``. ``PostgresSink(engine)`` uses the caller's engine, and
``PostgresSink(connection)`` the caller's connection; neither is ever closed, committed
or disposed of by the sink. With a connection, ledger writes join the caller's
transaction, each in a SAVEPOINT (so a refused duplicate does not poison it)::

    with engine.connect() as conn:
        ledger = PostgresSink(conn)
        conn.execute(jobs.insert(), {...})     # the caller's own work
        ledger.commit_action(action)           # the same transaction
        conn.commit()                          # both become durable together, or neither

In that mode ``commit_action`` returns before the record is durable: it is durable when
the caller commits, and lost if the caller rolls back.

Durability. With an engine, each write is its own transaction and returns after
PostgreSQL acknowledged the ``COMMIT``. With the server's defaults
(``synchronous_commit=on``, ``fsync=on``) the commit record is flushed to the WAL on disk
first, so an acknowledged record survives a crash of either process and a power loss; a
server configured with ``synchronous_commit=off`` or ``fsync=off`` weakens that, and a
synchronous standby strengthens it. A connection lost during a write raises
``StorageError`` and leaves no partial row (one transaction per write); it is never
retried behind the caller's back. An engine made by ``open`` pings a pooled connection
that sat idle in the pool for over a second before lending it, so one that died while
idle is replaced first (a connection in steady use is lent without that round trip).

Commit order and the Merkle log. Every write also appends its events to the ledger's
RFC 9162 tree (:mod:`ledger.sinks.tree`) in the same transaction: it locks the tree head
row (``SELECT ... FOR UPDATE``), numbers the rows from the head's size, and writes the
nodes they complete and the new head. Writers of every process and host on one schema
therefore commit one transaction at a time, in leaf order, with no two leaves sharing an
index and no gap; inside one sink the group commit batches the callers waiting at that
moment into one such transaction (usually one statement: the head is checked against the
sink's cached one, and the rows, nodes and head are written together). A writer waits
for a caller's open transaction that holds a ledger write (``PostgresSink(connection)``)
until that transaction ends, so keep such transactions short. Writers also take a
shared transaction-level advisory lock before inserting, and each page of ``events(...)``
takes it exclusively, which waits for the writers in flight: a tailer never sees row
``n`` while a row below ``n`` can still commit, and ``events(after=...)`` never skips a
late commit. A thread must not read ``events(...)`` through an engine-owning sink while
it holds a ledger write open on another connection (it would wait for itself).

``schema=`` keeps the table in that PostgreSQL schema (created if absent).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.pool import ConnectionPoolEntry

from ledger.errors import (
    DuplicateEvent,
    IntegrityError,
    SinkClosed,
    StorageError,
    ValidationError,
)
from ledger.integrity.merkle import Frontier
from ledger.model.event import Event
from ledger.sinks.base import KeyLimits
from ledger.sinks.groupcommit import GroupCommitter
from ledger.sinks.rows import COLUMNS, event_row
from ledger.sinks.schema import (
    HEAD,
    advisory_key,
    current_revision,
    ensure_schema,
    require_readable,
    schema_state,
)
from ledger.sinks.shred import (
    KeyWrapper,
    attach_payloads,
    check_still_clear,
    refusal,
    sealed_row,
    without_erased,
    writer_events,
)
from ledger.sinks.sql import SQLReader, events_table
from ledger.sinks.tree import (
    LEAF_COLUMN,
    NODES_COLUMN,
    TIME_HI_COLUMN,
    TIME_HI_POSTGRES,
    TreeAppender,
    TreeReading,
    TreeTables,
    fetch_nodes,
    head_values,
    number_rows,
)
from ledger.sinks.url import parse_url
from ledger.sinks.writing import Row, Writing

__all__ = ["PostgresSink"]


_EXCLUSIVE = sa.text("SELECT pg_advisory_xact_lock(:k)")
_SESSION_LOCK = sa.text("SELECT pg_advisory_lock(:k)")
_SESSION_UNLOCK = sa.text("SELECT pg_advisory_unlock(:k)")
_MAX_NAME = 63  # PostgreSQL's identifier length, in bytes
_JSON = COLUMNS.index("event_json")


KEY_LIMITS = KeyLimits(nul=False, max_bytes=2048)
"""What PostgreSQL holds in the key columns: no NUL (text cannot hold it; the event JSON
escapes it), and what a writer should keep under: 2048 bytes (a B-tree entry holds about
2,700; the indexes on run_id and tool refuse a longer value unless it compresses)."""


def _pg_row(event: Event) -> Row:
    """``event_row(event)``, refusing a NUL in a key column (:data:`KEY_LIMITS`) by naming
    the field, before anything is sent; a length the index cannot hold is the server's to
    refuse (``StorageError``), since a longer value that compresses is stored."""
    row = event_row(event)
    KEY_LIMITS.check(event, sizes=False)
    return row


class PostgresSink(Writing, TreeReading, SQLReader):
    """A ``DurableSink`` and ``Reader`` on PostgreSQL; see the module notes."""

    key_limits = KEY_LIMITS  # what the key columns hold (read by writers such as the gate)

    def __init__(
        self,
        bind: sa.Engine | sa.Connection,
        *,
        schema: str | None = None,
        migrate: bool = True,
        payload_key: KeyWrapper | None = None,
    ) -> None:
        self._conn: sa.Connection | None = None
        if isinstance(bind, sa.Connection):
            self._engine, self._conn = bind.engine, bind
        elif isinstance(bind, sa.Engine):
            self._engine = bind
        else:
            raise ValidationError(f"expected an Engine or Connection, got {type(bind).__name__}")
        if self._engine.dialect.name != "postgresql":
            raise ValidationError(f"PostgresSink needs PostgreSQL, got {self._engine.dialect.name}")
        if self._engine.dialect.driver != "psycopg":
            raise ValidationError(
                f"PostgresSink needs the psycopg 3 driver, got {self._engine.dialect.driver}; "
                "create the engine with a postgresql+psycopg:// URL"
            )
        if schema is not None and (
            not isinstance(schema, str)
            or not schema.replace("_", "").isalnum()
            or len(schema.encode()) > _MAX_NAME
        ):
            raise ValidationError(
                f"schema: {schema!r} must be a name of letters, digits and '_', at most "
                f"{_MAX_NAME} bytes (PostgreSQL's limit)"
            )
        self.schema = schema
        self._table = events_table(schema)
        self._key = advisory_key(f"events:{schema or ''}")
        self._insert_sql = _insert_statement(self._table)
        self._tree_sql = _TreeSQL(schema)
        self._trees = TreeTables(schema)
        self._appender = TreeAppender()
        self._owns = False
        self._closed = False
        self._close_lock = threading.Lock()
        self._held = threading.local()  # a thread's snapshot connection (snapshot())
        self._committer: GroupCommitter[list[Row]] = GroupCommitter(self._write_batch)
        if migrate:
            self._migrate()
        attach_payloads(self, payload_key, writer=migrate)  # crypto-shredding mode

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        schema: str | None = None,
        migrate: bool = True,
        payload_key: KeyWrapper | None = None,
        **engine_options: Any,
    ) -> PostgresSink:
        """A sink that owns a new engine for ``dsn`` (closed with the sink).
        ``payload_key`` is as for the constructor (crypto-shredding,
        :mod:`ledger.sinks.shred`).

        ``dsn`` is any PostgreSQL URL :func:`~ledger.sinks.open_sink` takes, including
        ``?ledger_schema=NAME`` (which must then agree with ``schema=``). With
        ``migrate=False`` the schema is only checked: a database whose ledger schema is
        not current is refused, saying what to do, and nothing is created."""
        if not isinstance(dsn, str):
            raise ValidationError(
                f"dsn: expected a postgresql:// URL string, got {type(dsn).__name__}"
            )
        try:
            parsed = parse_url(dsn)
        except ValidationError as exc:
            raise ValidationError(f"dsn: {exc}") from None
        if parsed.dsn is None:
            raise ValidationError(f"dsn: {parsed.shown!r} is not a postgresql:// URL")
        if schema is not None and parsed.schema is not None and schema != parsed.schema:
            raise ValidationError(
                f"schema: {schema!r} disagrees with ledger_schema={parsed.schema!r} in the "
                "URL; give one of them"
            )
        schema = schema if schema is not None else parsed.schema
        options: dict[str, Any] = {"pool_size": 10, "max_overflow": 20}
        options.update(engine_options)
        try:
            engine = sa.create_engine(parsed.dsn, **options)
        except (sa.exc.ArgumentError, TypeError, ValueError) as exc:
            raise ValidationError(
                f"PostgresSink.open: dsn or engine options refused: {exc}"
            ) from None
        if not options.get("pool_pre_ping"):
            _ping_when_idle(engine)
        try:
            sink = cls(engine, schema=schema, migrate=migrate, payload_key=payload_key)
            if not migrate:
                sink._require_readable(parsed.shown)
        except BaseException:
            engine.dispose()
            raise
        sink._owns = True
        return sink

    def _require_readable(self, where: str) -> None:
        """Refuse (without changing anything) a schema that is not current."""
        try:
            with self._engine.connect() as conn:
                revision, state = schema_state(conn, self.schema)
                place = f"schema {self.schema or sa.inspect(conn).default_schema_name!r}"
        except sa.exc.DBAPIError as exc:
            raise StorageError(f"cannot open the PostgreSQL ledger at {where}: {exc.orig}") from exc
        require_readable(revision, state, where, place)

    def _migrate(self) -> None:
        """Bring the schema up to date in a short transaction of its own. With the
        caller's connection, an up-to-date schema is seen on that connection (reads
        only), so no second connection is taken from the caller's pool."""
        where = self._engine.url.render_as_string(hide_password=True)
        try:
            if self._conn is not None and self._callers_revision() == HEAD:
                return
            with self._engine.begin() as conn:
                ensure_schema(conn, self.schema)
        except sa.exc.DBAPIError as exc:
            raise StorageError(f"cannot open the PostgreSQL ledger at {where}: {exc.orig}") from exc
        except sa.exc.SQLAlchemyError as exc:  # the caller's pool exhausted, say
            raise StorageError(f"cannot open the PostgreSQL ledger at {where}: {exc}") from exc

    # --- the write path -------------------------------------------------------------

    def _row(self, event: Event) -> Row:
        return _pg_row(event if self._payloads is None else self._payloads.seal(event))

    def _write(self, make: Callable[[], list[Row]]) -> None:
        self._check_writable()
        if self._conn is None:
            self._committer.submit(make)
            return
        rows = make()
        conn = self._callers_conn()
        try:
            with conn.begin_nested():
                after = self._tree_begin(conn).copy()
                if self._mode_open:  # every time: the caller may roll the events back
                    check_still_clear(
                        lambda q, p: conn.exec_driver_sql(q, tuple(p)).fetchall(), self.schema
                    )
                self._insert(conn, number_rows(after, rows))
                root = self._tree_finish(conn, after)
        except sa.exc.DBAPIError as exc:
            self._appender.forget()
            if exc.connection_invalidated:
                raise _not_acknowledged(exc) from exc
            raise self._refused(rows, exc) from None
        except sa.exc.SQLAlchemyError as exc:  # the caller's connection in a bad state
            self._appender.forget()
            raise StorageError(f"PostgreSQL ledger write refused: {exc}") from exc
        except BaseException:
            self._appender.forget()
            raise
        # The caller may still roll back: the cache is keyed by the head it extends, so
        # a head that went back is another head, and the range is rebuilt from nodes.
        self._appender.committed(after, root)

    def _callers_revision(self) -> str | None:
        """The schema revision read on the caller's connection, leaving it as it was."""
        with self._borrowed_read() as conn:
            return current_revision(conn, self.schema)

    @contextmanager
    def _borrowed_read(self) -> Iterator[sa.Connection]:
        """The caller's connection for one read, left as it was found: a transaction
        begun only for this read (SQLAlchemy begins one at the first statement) is
        ended, so the caller's ``conn.begin()`` still works afterwards."""
        conn = self._callers_conn()
        began = not conn.in_transaction()
        try:
            yield conn
        finally:
            if began and conn.in_transaction():
                conn.rollback()

    def _borrowed(self) -> bool:
        return self._conn is not None

    @property
    def joins_caller_transaction(self) -> bool:
        """True for ``PostgresSink(connection)``: writes join the caller's transaction,
        so ``commit_action`` returns before the record is durable (it is once the caller
        commits). A :class:`~ledger.Gate` treats such a sink as not durable."""
        return self._conn is not None

    def _callers_conn(self) -> sa.Connection:
        conn = self._conn
        assert conn is not None
        if conn.closed:
            raise StorageError(
                "the connection given to PostgresSink(connection) was closed by its owner; "
                "make a new sink with an open connection"
            )
        return conn

    def _insert(self, conn: sa.Connection, numbered: list[Row]) -> None:
        """Insert rows numbered by :func:`_numbered` after taking the writers' shared
        lock, in one statement per row: the MATERIALIZED CTE runs (and locks) before
        ``seq`` is drawn. The row tuples go to the driver as they are (positional
        parameters, no dict per row), inside the connection's transaction."""
        key = self._key
        if len(numbered) == 1:
            conn.exec_driver_sql(self._insert_sql, (key, *numbered[0]))
        else:
            conn.exec_driver_sql(self._insert_sql, [(key, *row) for row in numbered])

    def _tree_begin(self, conn: sa.Connection) -> Frontier:
        """Lock the head row (``FOR UPDATE``: writers of every process and host take
        leaf indexes one transaction at a time) and return its compact range (the
        appender's cached one; the caller extends a copy)."""
        head = conn.exec_driver_sql(self._tree_sql.lock_head).first()
        if head is None:
            raise IntegrityError(
                "the PostgreSQL ledger has no tree head (the tree_head row was deleted "
                "outside the ledger); nothing was written. Run `ledger verify`"
            )

        def fetch(keys: list[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
            return fetch_nodes(conn, self._trees, keys)

        return self._appender.begin(*head_values(head[0], head[1]), fetch)

    def _tree_finish(self, conn: sa.Connection, after: Frontier) -> bytes:
        """Write the new head of the tree ``after`` (its rows inserted just before, each
        with its nodes); return the new root."""
        root = after.root()
        conn.exec_driver_sql(self._tree_sql.write, (after.size, root))
        return root

    def _write_batch(self, items: list[list[Row]]) -> list[BaseException | None]:
        """Group commit: every waiting caller's rows in one transaction, with one tree
        update. When the server refuses it for a row's sake (a duplicate id, a value it
        cannot store), the batch is redone with each caller in a savepoint, so only that
        caller fails; a lost connection fails the whole batch (nothing of it
        committed)."""
        rows = [row for item in items for row in item]
        try:
            try:
                self._insert_all(rows)
                return [None] * len(items)
            except _ErasedRuns as erased:  # a run erased since its rows were sealed
                return without_erased(items, erased.gone, self._write_batch)
            except sa.exc.DBAPIError as exc:
                self._appender.forget()
                if exc.connection_invalidated:
                    raise
                if len(items) == 1:
                    return [self._refused(items[0], exc)]
            return self._write_each(items)
        except sa.exc.DBAPIError as exc:
            self._appender.forget()
            raise _not_acknowledged(exc) from exc
        except BaseException:
            self._appender.forget()
            raise

    def _insert_all(self, rows: list[Row]) -> None:
        """One transaction. A connection lost on the way raises (nothing is retried: the
        caller hears of it, and the transaction that did not commit left no row); the
        engines the sink opens check a pooled connection that sat idle before lending
        it, so one that died idle (a server restart, say) is replaced without a failed
        write.

        The common case is one round trip: the statement of :meth:`_insert_at_once`,
        run in autocommit mode, is a transaction of its own (PostgreSQL commits it,
        flushing its WAL, before it answers)."""
        cached = None if self._mode_open else self._appender.cached()
        if cached is not None:
            with self._engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT")
                if self._insert_at_once(conn, rows, cached):
                    return
        # the head moved (another writer: an erasure moves it too), no cache, or a
        # sealed row's run may have been erased: the long way, in a transaction
        with self._engine.connect() as conn:
            after = self._tree_begin(conn).copy()
            if self._mode_open:  # no event yet when opened without the key
                check_still_clear(
                    lambda q, p: conn.exec_driver_sql(q, tuple(p)).fetchall(), self.schema
                )
            if self._payloads is not None and (
                gone := self._payloads.erased_runs(
                    lambda q, p: conn.exec_driver_sql(q, tuple(p)).fetchall(), "%s", rows
                )
            ):  # read under the head's lock: an erasure holds it to destroy a key
                conn.rollback()
                raise _ErasedRuns(gone)
            self._insert(conn, number_rows(after, rows))
            root = self._tree_finish(conn, after)
            conn.commit()
        if self._mode_open and writer_events(rows):
            self._mode_open = False  # it holds events now: in clear for good
        self._appender.committed(after, root)

    def _insert_at_once(self, conn: sa.Connection, rows: list[Row], frontier: Frontier) -> bool:
        """The common case in one statement: lock the head, and only if it is still
        the cached one, insert the rows (with their nodes) and the new head; every part
        of it hangs on the head's lock, so it writes all or nothing. False (nothing
        written) when the head moved."""
        size, before = frontier.size, self._appender.root()
        after = frontier.copy()
        batch = orjson.dumps([(*row[:-1], row[-1].hex()) for row in number_rows(after, rows)])
        root = after.root()
        if self._payloads is None:
            params: tuple[Any, ...] = (size, before, self._key, batch.decode(), after.size, root)
            statement = self._tree_sql.at_once
        else:  # nothing written (the long way says why) when a sealed row's run was erased
            sealed = sorted({row[1] for row in rows if sealed_row(row)})
            params = (size, before, sealed, self._key, batch.decode(), after.size, root)
            statement = self._tree_sql.at_once_sealed
        done = conn.exec_driver_sql(statement, params).first()
        if done is None:
            self._appender.forget()
            return False
        self._appender.committed(after, root)
        return True

    def _write_each(self, items: list[list[Row]]) -> list[BaseException | None]:
        errors: list[BaseException | None] = []
        with self._engine.begin() as conn:
            frontier = self._tree_begin(conn)
            if self._mode_open:
                check_still_clear(
                    lambda q, p: conn.exec_driver_sql(q, tuple(p)).fetchall(), self.schema
                )
            after = frontier.copy()
            gone = (
                {}
                if self._payloads is None
                else self._payloads.erased_runs(
                    lambda q, p: conn.exec_driver_sql(q, tuple(p)).fetchall(),
                    "%s",
                    [row for item in items for row in item],
                )
            )  # under the head's lock, as in _insert_all: an erasure may have come since
            for rows in items:
                refused = refusal(rows, gone)
                if refused is not None:
                    errors.append(refused)
                    continue
                trial = after.copy()
                numbered = number_rows(trial, rows)
                try:
                    with conn.begin_nested():
                        self._insert(conn, numbered)
                    errors.append(None)
                    after = trial
                except sa.exc.DBAPIError as exc:
                    if exc.connection_invalidated:
                        raise
                    errors.append(self._refused(rows, exc))
            root = self._tree_finish(conn, after) if after.size > frontier.size else None
        if root is not None:
            if self._mode_open and not any(errors) and writer_events([r for i in items for r in i]):
                self._mode_open = False  # it holds events now: in clear for good
            self._appender.committed(after, root)
        return errors

    @contextmanager
    def _tree_writing(self) -> Iterator[sa.Connection]:
        """A transaction holding the head row's lock, committed when the block ends (in
        a savepoint of the caller's transaction for ``PostgresSink(connection)``)."""
        self._check_writable()
        try:
            if self._conn is not None:
                conn = self._callers_conn()
                with conn.begin_nested():
                    conn.exec_driver_sql(self._tree_sql.lock_head).first()
                    yield conn
                return
            with self._engine.begin() as conn:
                conn.exec_driver_sql(self._tree_sql.lock_head).first()
                yield conn
        except sa.exc.DBAPIError as exc:
            raise StorageError(f"PostgreSQL ledger write failed: {exc.orig}") from exc

    def _refused(self, rows: list[Row], exc: sa.exc.DBAPIError) -> StorageError:
        """The error for one caller whose rows the server refused."""
        if isinstance(exc, sa.exc.IntegrityError):
            return self._duplicate(rows, exc)
        return StorageError(
            f"PostgreSQL ledger refused the write, nothing of it stored: {exc.orig}"
        )

    def _duplicate(self, rows: list[Row], exc: sa.exc.IntegrityError) -> StorageError:
        if getattr(exc.orig, "sqlstate", None) != "23505":
            return StorageError(f"PostgreSQL ledger refused the write: {exc.orig}")
        if len(rows) == 1:
            return DuplicateEvent(
                f"event {rows[0][0]} is already stored; the stored one is unchanged"
            )
        return DuplicateEvent(
            f"batch refused, nothing of it stored: an event id is already stored or repeated "
            f"({exc.orig})"
        )

    # --- the read path --------------------------------------------------------------

    @contextmanager
    def _reading(self) -> Iterator[sa.Connection]:
        if self._closed:
            raise SinkClosed("PostgreSQL sink is closed; open a new one to read")
        held: sa.Connection | None = getattr(self._held, "conn", None)
        if held is not None:  # inside snapshot(): every read of this thread on it
            yield held
            return
        try:
            if self._conn is not None:
                with self._borrowed_read() as conn:
                    yield conn
                return
            with self._engine.connect() as conn:
                yield conn
        except sa.exc.DBAPIError as exc:
            raise StorageError(f"PostgreSQL ledger read failed: {exc.orig}") from exc
        except sa.exc.SQLAlchemyError as exc:
            raise StorageError(f"PostgreSQL ledger read failed: {exc}") from exc
        except self._engine.dialect.loaded_dbapi.Error as exc:  # a driver-level pass
            raise StorageError(f"PostgreSQL ledger read failed: {exc}") from exc

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Within the block, every read this thread makes of the ledger sees one
        snapshot (a ``REPEATABLE READ, READ ONLY`` transaction on one connection): what
        :func:`~ledger.integrity.verify_ledger` reads (the stored head, then every row)
        is one state of the ledger, whatever writers commit meanwhile. On a caller's
        connection the reads are the caller's as always."""
        if self._conn is not None or getattr(self._held, "conn", None) is not None:
            yield
            return
        if self._closed:
            raise SinkClosed("PostgreSQL sink is closed; open a new one to read")
        try:
            with self._engine.connect() as conn:
                conn.exec_driver_sql("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                self._held.conn = conn
                try:
                    yield
                finally:
                    self._held.conn = None
                    conn.rollback()
        except sa.exc.DBAPIError as exc:
            raise StorageError(f"PostgreSQL ledger read failed: {exc.orig}") from exc

    def _streamed(self, conn: sa.Connection, query: sa.Select[Any]) -> Iterator[Any]:
        """The rows of ``query`` streamed one at a time by libpq's single-row mode
        (psycopg's ``Cursor.stream``), not through a server-side cursor: the statement
        runs as a plain query, which PostgreSQL may run in parallel (a cursor's never
        is: ``runs()`` over 10^7 events took twice the same SQL's time), and the client
        holds one row at a time. A caller that stops early has the rest cancelled."""
        from psycopg.rows import namedtuple_row

        compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
        statement, params = str(compiled), compiled.params
        error = conn.dialect.loaded_dbapi.Error
        try:
            with conn.connection.dbapi_connection.cursor(row_factory=namedtuple_row) as cur:  # type: ignore[union-attr]
                yield from cur.stream(statement, params)
        except error as exc:  # as SQLAlchemy wraps a failed statement (_reading: StorageError)
            raise sa.exc.DBAPIError.instance(statement, params, exc, error) from exc

    @contextmanager
    def _page_guard(self, conn: sa.Connection) -> Iterator[None]:
        """Hold the writers' lock exclusively while a page is read: every writer in
        flight has finished, and none can take a sequence number until the page's
        snapshot is taken."""
        if self._conn is None:
            conn.execute(_EXCLUSIVE, {"k": self._key})  # released when the read ends
            yield
            return
        conn.execute(_SESSION_LOCK, {"k": self._key})  # the caller's transaction lives on
        try:
            if conn.connection.dbapi_connection.autocommit:  # type: ignore[union-attr]
                # no transaction to keep alive (and none a savepoint could live in):
                # each statement is its own, the page's snapshot taken under the lock
                yield
                return
            # A failing page query rolls back to this savepoint only, so the unlock
            # below still runs: a session lock left behind would outlive the
            # transaction and block every writer for as long as the connection lives.
            with conn.begin_nested():
                yield
        finally:
            conn.execute(_SESSION_UNLOCK, {"k": self._key})

    # --- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        """Dispose of the engine when the sink owns it; never touches the caller's."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._committer.close()
        if self._owns:
            self._engine.dispose()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._closed

    def __repr__(self) -> str:
        schema = f", schema={self.schema!r}" if self.schema else ""
        return f"PostgresSink({self._engine.url.render_as_string(hide_password=True)!r}{schema})"


_IDLE_PING_S = 1.0  # a pooled connection idle longer than this is pinged before use
_IDLE_SINCE = "ledger_idle_since"


def _ping_when_idle(engine: sa.Engine) -> None:
    """Ping a pooled connection before lending it when it sat idle in the pool for over
    :data:`_IDLE_PING_S` (one that died meanwhile, a server restart say, is replaced
    before a write can fail on it). A connection in steady use is lent without the
    round trip ``pool_pre_ping`` would add to every write."""

    def checkin(dbapi_conn: Any, record: ConnectionPoolEntry) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    def checkout(dbapi_conn: Any, record: ConnectionPoolEntry, proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is None or time.monotonic() - since < _IDLE_PING_S:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_conn)
        except Exception:
            alive = False
        if not alive:
            raise sa.exc.DisconnectionError("the pooled connection died while idle")

    sa.event.listen(engine, "checkin", checkin)
    sa.event.listen(engine, "checkout", checkout)


def _not_acknowledged(exc: sa.exc.DBAPIError) -> StorageError:
    return StorageError(
        f"PostgreSQL ledger write failed; the record was not acknowledged and its "
        f"transaction did not commit: {exc.orig}"
    )


def _insert_statement(table: sa.Table) -> str:
    """The driver-level (psycopg ``%s``) insert: the lock key, then :data:`COLUMNS`,
    the leaf index, the batch's running maximum of the time (raised to the largest time
    stored: ``TIME_HI_POSTGRES``, evaluated once per statement) and the nodes."""
    name = f'"{table.schema}".events' if table.schema else "events"
    values = ", ".join(
        ["%s"] * (len(COLUMNS) + 1)
        + [TIME_HI_POSTGRES.format(value="%s::bigint", events=name), "%s"]
    )
    return (
        "WITH ledger_lock AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(%s)) "
        f"INSERT INTO {name} ({', '.join(COLUMNS)}, {LEAF_COLUMN}, {TIME_HI_COLUMN}, "
        f"{NODES_COLUMN}) SELECT {values} FROM ledger_lock"
    )


# the SQL types of COLUMNS, leaf_index and time_hi_us, in order, for the JSON rows of
# _TreeSQL.at_once
_ROW_CASTS = ("text",) * 6 + ("bigint", "boolean", "text", "text", "bigint", "bigint")
assert len(_ROW_CASTS) == len(COLUMNS) + 2, "a column without its cast"


class _ErasedRuns(Exception):
    """Runs of a batch's sealed rows were erased (their data keys destroyed) since the
    rows were sealed: nothing of the batch was written."""

    def __init__(self, gone: dict[str, str]) -> None:
        super().__init__(", ".join(gone))
        self.gone = gone


class _TreeSQL:
    """The driver-level statements of the tree's write path, for one schema."""

    __slots__ = ("at_once", "at_once_sealed", "lock_head", "write")

    def __init__(self, schema: str | None) -> None:
        prefix = f'"{schema}".' if schema else ""
        self.lock_head = f"SELECT size, root FROM {prefix}tree_head WHERE id = 1 FOR UPDATE"
        events = f"{prefix}events"
        # the batch's rows arrive as one JSON array of arrays (made by orjson in C; a
        # dozen array parameters cost psycopg a Python loop per value, a fifth of a
        # batch's time), unpacked by the server in the rows' order: text columns as
        # JSON strings (exact: JSON escapes every character it must), integers and
        # booleans as JSON values, the nodes as hex
        values = [f"(u.r->>{i})::{cast}" for i, cast in enumerate(_ROW_CASTS)]
        # time_hi_us: the batch's running maximum, raised to the largest time stored
        values[-1] = TIME_HI_POSTGRES.format(value=values[-1], events=events)
        values.append(f"decode(u.r->>{len(_ROW_CASTS)}, 'hex')")
        self.at_once = (
            f"WITH head AS MATERIALIZED (SELECT 1 FROM {prefix}tree_head WHERE id = 1 "
            "AND size = %s AND root = %s FOR UPDATE), "
            "lock AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(%s) FROM head), "
            f"ev AS (INSERT INTO {events} ({', '.join(COLUMNS)}, {LEAF_COLUMN}, "
            f"{TIME_HI_COLUMN}, {NODES_COLUMN}) SELECT {', '.join(values)} "
            "FROM lock, json_array_elements(%s::json) WITH ORDINALITY AS u(r, ord) "
            "ORDER BY u.ord) "
            f"UPDATE {prefix}tree_head SET size = %s, root = %s "
            "WHERE id = 1 AND EXISTS (SELECT 1 FROM lock) RETURNING 1"
        )
        self.write = f"UPDATE {prefix}tree_head SET size = %s, root = %s WHERE id = 1"
        # a crypto-shredding ledger's: the head is not taken (nothing is written) when a
        # run of the sealed rows (the third parameter) had its data key destroyed
        self.at_once_sealed = self.at_once.replace(
            "AND size = %s AND root = %s FOR UPDATE",
            f"AND size = %s AND root = %s AND NOT EXISTS (SELECT 1 FROM {prefix}run_keys k "
            "WHERE k.run_id = ANY(%s::text[]) AND (k.destroyed_us IS NOT NULL OR k.wrapped "
            "IS NULL)) FOR UPDATE",
        )
        assert self.at_once_sealed != self.at_once

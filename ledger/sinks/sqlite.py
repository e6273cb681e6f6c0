"""``SQLiteSink``: a durable sink and reader on one SQLite file.

>>> with SQLiteSink("ledger.db") as sink:                   # doctest: +SKIP
...     sink.commit_action(action)      # returns once the record is fsynced
...     sink.chain(action.run_id)

Durability: every connection is set up by a connect hook with ``journal_mode=WAL``,
``synchronous=FULL`` and a busy timeout, so a recycled connection cannot lose them.
``commit_action``, ``record`` and ``record_many`` return only after the ``COMMIT`` that
holds the record, and with ``synchronous=FULL`` SQLite fsyncs the WAL at every commit:
an acknowledged record survives a crash of the process (SIGKILL included) and a power
loss or OS crash, on storage that honours fsync. Nothing is acknowledged before that
fsync. (``record`` is durable too: it takes the same path, without the validation.)

Concurrency: concurrent writers in one process are group-committed by leader and
followers (:mod:`ledger.sinks.groupcommit`): the callers waiting at one moment share one
transaction and one fsync; each record is inserted in its own SAVEPOINT so a bad one
(a duplicate id) fails its own caller only. Several processes may write one file: each
write transaction starts with ``BEGIN IMMEDIATE`` and is retried while the database is
busy, so "database is locked" does not reach a caller (it becomes ``StorageError`` only
after ``lock_wait`` seconds). SQLite's single writer lock makes ``seq`` order equal
commit order, which ``events(after=...)`` relies on.

The Merkle log (:mod:`ledger.sinks.tree`): inside that ``BEGIN IMMEDIATE`` transaction the
batch's rows are numbered from the tree's size (one past the last stored leaf index) and
each is inserted with the nodes it completes, so a commit holds its events and their
leaves, or none of them (a SIGKILL at any point included), and writers in any number of
processes never share or skip a leaf index. The head is where the rows end; the
``tree_head`` row is a mark the log reached, written in the transaction of a sink's first
commit, every :data:`MARK_EVERY`-th one and at close (so most commits write no page for
it): rows cut off below the mark are found and refused; an open writer's newest commits
above it are covered by checkpoints alone (docs/integrity.md, "The head").
"""

from __future__ import annotations

import functools
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from ledger.errors import (
    DuplicateEvent,
    IntegrityError,
    SinkClosed,
    StorageError,
    ValidationError,
)
from ledger.integrity.merkle import Frontier
from ledger.model.event import Event
from ledger.sinks.base import check_path
from ledger.sinks.groupcommit import GroupCommitter
from ledger.sinks.rows import COLUMNS, event_row, sqlite_read_failed
from ledger.sinks.schema import (
    check_sqlite_file,
    current_revision,
    ensure_schema,
    head_revision,
    require_readable,
    schema_state,
)
from ledger.sinks.shred import (
    KeyWrapper,
    attach_payloads,
    check_still_clear,
    without_erased,
    writer_events,
)
from ledger.sinks.sql import SQLReader, events_table
from ledger.sinks.tree import (
    LEAF_COLUMN,
    NODES_COLUMN,
    TIME_HI_COLUMN,
    TreeAppender,
    TreeReading,
    TreeTables,
    head_values,
    number_rows,
    raised,
    read_nodes,
    size_after,
)
from ledger.sinks.writing import Row, Writing

__all__ = ["SQLiteSink", "require_sqlite_file"]

log = logging.getLogger(__name__)

_ROW_MARKS = "(" + ", ".join("?" * (len(COLUMNS) + 3)) + ")"
_INSERT = (
    f"INSERT INTO events ({', '.join(COLUMNS)}, {LEAF_COLUMN}, {TIME_HI_COLUMN}, "
    f"{NODES_COLUMN}) VALUES {_ROW_MARKS}"
)
_JSON = COLUMNS.index("event_json")
_WRITER_BUSY_MS = 5
_STATEMENT_ROWS = 2000  # rows per multi-row INSERT (26,000 parameters)
_READ_HEAD = "SELECT size, root FROM tree_head WHERE id = 1"
_MARK_HEAD = "UPDATE tree_head SET size = ?, root = ? WHERE id = 1 AND size < ?"
# the leaf_index index's last entry, and the head row's mark
_TOP_LEAF = (
    "SELECT (SELECT max(leaf_index) FROM events), (SELECT size FROM tree_head WHERE id = 1), "
    "(SELECT max(time_us) FROM events)"
)  # and the time_us index's last entry: what the new rows' time_hi_us is raised to
MARK_EVERY = 8  # the head row is written with every 8th commit (and the first, and at close)


@functools.lru_cache(maxsize=64)
def _insert_sql(rows: int) -> str:
    """``INSERT`` of ``rows`` rows in one statement."""
    return _INSERT + (", " + _ROW_MARKS) * (rows - 1)


def _flat(rows: list[Row]) -> list[Any]:
    return [value for row in rows for value in row]


def _seconds(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValidationError(f"{name}: expected a number of seconds >= 0, got {value!r}")
    return float(value)


def _stale(exc: BaseException | None) -> bool:
    """True for SQLite's refusal of a leaf index already stored: the rows were numbered
    on a range another writer extended."""
    return isinstance(exc, sqlite3.IntegrityError) and "leaf_index" in str(exc)


def _is_busy(exc: Exception) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def require_sqlite_file(path: Path, *, empty_ok: bool = False) -> None:
    """``StorageError`` unless ``path`` is an existing SQLite database file (checked on
    its header, before any connection could change it): what every command that must
    not create a ledger checks first. ``empty_ok``: a file of no bytes (an empty
    database to SQLite) passes too, for a caller that then says it holds no ledger.

    >>> import tempfile, pathlib
    >>> bad = pathlib.Path(tempfile.mkdtemp()) / "notes.db"
    >>> _ = bad.write_text("not a database")
    >>> require_sqlite_file(bad)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ledger.errors.StorageError: ...notes.db is not a SQLite database, so not a ledger
    """
    if path.is_dir():
        raise StorageError(f"{path} is a directory, not a ledger file")
    try:
        with open(path, "rb") as f:
            header = f.read(16)
    except FileNotFoundError:
        raise StorageError(f"no ledger at {path}: the file does not exist") from None
    except OSError as exc:
        raise StorageError(f"cannot read the SQLite ledger {path}: {exc}") from exc
    if header != b"SQLite format 3\x00" and not (empty_ok and header == b""):
        raise StorageError(f"{path} is not a SQLite database, so not a ledger")


class SQLiteSink(Writing, TreeReading, SQLReader):
    """A ``DurableSink`` and ``Reader`` on the SQLite file ``path`` (created if absent).

    ``busy_timeout`` (seconds) is SQLite's wait for a lock held by another connection;
    ``lock_wait`` bounds the total retrying of a busy write before ``StorageError``.
    With ``migrate=False`` (how readers open it) nothing is created or migrated: the file
    must exist and hold a current ledger schema, else it is refused saying what to do.
    """

    _merkle = True  # False only in benchmarks/integrity.py's baseline (no Merkle log)
    head_lags = True  # the head row is a mark the log reached; the head is where rows end

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float = 5.0,
        lock_wait: float = 120.0,
        migrate: bool = True,
        payload_key: KeyWrapper | None = None,
    ) -> None:
        self.path = check_path(path, "SQLiteSink")
        if path == ":memory:":
            raise ValidationError(
                "path: SQLiteSink needs a database file, got ':memory:' (an in-memory "
                "database is neither durable nor shared between connections)"
            )
        self._busy_ms = int(min(_seconds(busy_timeout, "busy_timeout"), 86400.0) * 1000)
        self._lock_wait = _seconds(lock_wait, "lock_wait")
        if migrate:
            check_sqlite_file(self.path)  # a newer database is refused before anything writes
        else:
            self._require_file()
        self._table = events_table()
        self._trees = TreeTables()
        self._appender = TreeAppender()
        self._unmarked = -1  # commits since the head row was last written (-1: never)
        # (the writer's PRAGMA data_version, the largest time stored) as this sink's
        # last commit left them: while the version stands, no other connection wrote
        self._since_last: tuple[int, object] | None = None
        self._engine = sa.create_engine(
            # built, not parsed: a "?" or "%20" in the file name stays in the file name
            sa.URL.create("sqlite+pysqlite", database=str(self.path)),
            connect_args={"check_same_thread": False, "timeout": self._busy_ms / 1000},
        )
        sa.event.listen(self._engine, "connect", self._on_connect)
        self._writer: PoolProxiedConnection | None = None
        self._committer: GroupCommitter[list[Row]] = GroupCommitter(self._write_batch)
        self._close_lock = threading.Lock()
        self._closed = False
        try:
            if migrate:
                self._migrate()
            else:
                self._require_readable()
            attach_payloads(self, payload_key, writer=migrate)  # crypto-shredding mode
        except sa.exc.DBAPIError as exc:
            self._engine.dispose()
            raise StorageError(
                f"cannot open the SQLite ledger {self.path}: {self._why(exc)}"
            ) from exc
        except BaseException:
            self._engine.dispose()
            raise

    def _require_file(self) -> None:
        """For a reader: the file exists and is a SQLite database."""
        require_sqlite_file(self.path)

    def _require_readable(self) -> None:
        """For a reader: the schema is current; nothing is created or migrated."""
        with self._engine.connect() as conn:
            revision, state = self._retry_busy(lambda: schema_state(conn, None))
        require_readable(revision, state, f"sqlite:///{self.path}")

    def _why(self, exc: sa.exc.DBAPIError) -> str:
        if self.path.is_dir():
            return "it is a directory; give a file path"
        if not self.path.parent.is_dir():
            return f"the folder {self.path.parent} does not exist; create it first"
        return str(exc.orig)

    # --- connections ----------------------------------------------------------------

    def _on_connect(self, dbapi_conn: Any, record: ConnectionPoolEntry) -> None:
        """Connect hook: every connection gets WAL, synchronous=FULL, busy timeout."""
        dbapi_conn.isolation_level = None  # we issue BEGIN IMMEDIATE ourselves
        dbapi_conn.execute(f"PRAGMA busy_timeout={self._busy_ms}")
        mode = self._retry_busy(lambda: dbapi_conn.execute("PRAGMA journal_mode=WAL").fetchone())
        if mode is None or str(mode[0]).lower() != "wal":
            log.warning("SQLite ledger %s: journal_mode is %s, not wal", self.path, mode)
        dbapi_conn.execute("PRAGMA synchronous=FULL")

    def _migrate(self) -> None:
        with self._engine.connect() as conn:
            if current_revision(conn, None) == head_revision():
                return
            self._retry_busy(lambda: conn.exec_driver_sql("BEGIN IMMEDIATE"))
            try:
                ensure_schema(conn, None)
                conn.commit()
            except BaseException:
                conn.rollback()
                raise

    @contextmanager
    def _reading(self) -> Iterator[sa.Connection]:
        if self._closed:
            raise SinkClosed(f"SQLite sink {self.path} is closed; open a new one to read")
        try:
            with self._engine.connect() as conn:
                yield conn
        except sa.exc.DBAPIError as exc:
            raise StorageError(sqlite_read_failed(self.path, exc.orig or exc)) from exc
        except sqlite3.Error as exc:  # a driver-level pass (the report's, say)
            raise StorageError(sqlite_read_failed(self.path, exc)) from exc

    def _writer_conn(self) -> sqlite3.Connection:
        if self._writer is None:
            self._writer = self._engine.raw_connection()
            # SQLite's own busy handler sleeps up to 100 ms between tries; the writer
            # waits briefly there and retries itself with short jittered sleeps.
            cast(sqlite3.Connection, self._writer.driver_connection).execute(
                f"PRAGMA busy_timeout={_WRITER_BUSY_MS}"
            )
        return cast(sqlite3.Connection, self._writer.driver_connection)

    def _retry_busy(self, step: Any) -> Any:
        """Run ``step()`` until SQLite stops answering "locked"/"busy" (``lock_wait``)."""
        deadline = time.monotonic() + self._lock_wait
        delay = 0.0005
        while True:
            try:
                return step()
            except (sqlite3.OperationalError, sa.exc.OperationalError) as exc:
                if not _is_busy(exc):
                    raise StorageError(f"SQLite ledger {self.path}: {exc}") from exc
                if time.monotonic() > deadline:
                    raise StorageError(
                        f"the SQLite ledger {self.path} is locked by another process (waited "
                        f"{self._lock_wait:g} s); try again once it is free, or wait longer "
                        "(lock_wait=, or LEDGER_LOCK_TIMEOUT for the ledger command)"
                    ) from exc
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.004)

    # --- the write path -------------------------------------------------------------

    def _row(self, event: Event) -> Row:
        return event_row(event if self._payloads is None else self._payloads.seal(event))

    def _write(self, make: Callable[[], list[Row]]) -> None:
        self._check_writable()
        self._committer.submit(make)

    def _write_batch(self, items: list[list[Row]]) -> list[BaseException | None]:
        """Write every waiting caller's rows, their leaves and the new tree head with
        one commit (one fsync).

        One ``BEGIN IMMEDIATE`` transaction (SQLite's writer lock: leaf indexes are
        drawn under it, so no two writers, threads or processes, can take one index):
        the head moves to the new one (:meth:`_begin_tree`), the rows go in as one
        multi-row ``INSERT`` numbered from the old head's size, each carrying the tree
        nodes it completes. When
        the insert fails on a duplicate id, each caller's rows are redone in a savepoint
        of the same transaction, so only the bad caller fails.
        """
        if not self._merkle:
            return self._write_batch_plain(items)
        conn = self._writer_conn()
        rows = [row for item in items for row in item]
        self._retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
        try:
            if self._mode_open:  # no event yet when opened without the key
                check_still_clear(lambda q, p: conn.execute(q, p).fetchall(), None)
            if self._payloads is not None and (
                gone := self._payloads.erased_runs(
                    lambda q, p: conn.execute(q, p).fetchall(), "?", rows
                )
            ):  # a run erased (its key destroyed) since its rows were sealed: refused
                conn.execute("ROLLBACK")
                return without_erased(items, gone, self._write_batch)
            version, frontier, after, numbered, latest = self._begin_tree(conn, rows)
            errors: list[BaseException | None]
            try:
                if len(rows) == 1:
                    conn.execute(_INSERT, numbered[0])
                else:  # in a savepoint: a failed statement may leave rows it wrote
                    conn.execute("SAVEPOINT ledger_batch")  # (a trigger's RAISE(FAIL))
                    self._insert_rows(conn, numbered)
                    conn.execute("RELEASE ledger_batch")
                errors = [None] * len(items)
            except sqlite3.IntegrityError as exc:
                if len(rows) > 1:
                    conn.execute("ROLLBACK TO ledger_batch")
                    conn.execute("RELEASE ledger_batch")
                if len(items) == 1:
                    errors = [self._duplicate(conn, items[0], exc)]
                else:
                    errors, after = self._insert_each(conn, items, frontier, latest)
                if any(_stale(e) for e in [exc, *(e.__cause__ for e in errors if e)]):
                    # numbered on a range another writer extended: nothing of the batch
                    # goes in, and the log is read afresh at the next write
                    conn.execute("ROLLBACK")
                    self._appender.forget()
                    self._since_last = None
                    return [self._refused(exc) for _ in items]
                if len(items) == 1:
                    conn.execute("ROLLBACK")
                    return errors
            if after.size == frontier.size:
                conn.execute("ROLLBACK")
                return errors
            marked = self._unmarked < 0 or self._unmarked + 1 >= MARK_EVERY
            if marked:
                conn.execute(_MARK_HEAD, (after.size, after.root(), after.size))
            self._retry_busy(lambda: conn.execute("COMMIT"))
        except BaseException as exc:
            self._appender.forget()
            self._since_last = None
            self._abandon(conn)
            if isinstance(exc, sqlite3.Error):
                raise StorageError(f"SQLite ledger {self.path}: write failed: {exc}") from exc
            raise
        self._unmarked = 0 if marked else self._unmarked + 1
        if self._mode_open and not any(errors) and writer_events(rows):
            self._mode_open = False  # it holds events now: in clear for good
        self._appender.committed(after, None)
        # the last row's time_hi_us is the largest time stored now (when every row went in)
        self._since_last = None if any(errors) else (version, numbered[-1][-2])
        return errors

    def _begin_tree(
        self, conn: sqlite3.Connection, rows: list[Row]
    ) -> tuple[int, Frontier, Frontier, list[Row], object]:
        """Inside the write transaction: the writer connection's ``data_version``, the
        committed tree, the tree after ``rows``, the rows numbered (their
        ``time_hi_us`` raised to the largest time stored), and that largest time (None
        in an empty ledger).

        When no other connection (thread, process or hand) has committed since this
        sink's last commit (SQLite's ``PRAGMA data_version``, read under the writers'
        lock, is what it was then), the database is as that commit left it: the cached
        range is the committed one and the largest time is the one it stored, so
        nothing else is read.

        Otherwise: the head is where the rows end; the head row is a mark the log
        reached, written with every :data:`MARK_EVERY`-th commit (so most commits write
        no page for it). The cached range is the committed one when the last stored
        leaf index is the one it ends at (one index lookup) and the mark is not past it
        (one read of the head row: else another writer's rows were cut off, and
        extending the cut rows would soon move the mark over the evidence); otherwise
        (another writer appended, or none is cached) it is rebuilt from the stored nodes
        and checked against the mark."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        cached, last = self._appender.cached(), self._since_last
        if cached is not None and last is not None and last[0] == version:
            after = cached.copy()
            return version, cached, after, raised(number_rows(after, rows), last[1]), last[1]
        top, mark, latest = conn.execute(_TOP_LEAF).fetchone()
        if (
            cached is not None
            and top == (cached.size - 1 if cached.size else None)
            # a mark past the cached range: another writer's rows were cut off the end
            and type(mark) is int
            and mark <= cached.size
        ):
            frontier = cached
        else:
            frontier = self._frontier(conn, top)
        after = frontier.copy()
        return version, frontier, after, raised(number_rows(after, rows), latest), latest

    def _frontier(self, conn: sqlite3.Connection, top: object) -> Frontier:
        """The compact range of the tree whose last leaf index is ``top``, rebuilt from
        its stored covering nodes inside the write transaction and checked against the
        head row: refused when the rows end before it (cut off) or the nodes lead to
        another root at its size (changed)."""
        head = conn.execute(_READ_HEAD).fetchone()
        if head is None:
            raise IntegrityError(
                f"SQLite ledger {self.path} has no tree head (the tree_head row was deleted "
                "outside the ledger); nothing was written. Run `ledger verify`"
            )
        mark, root = head_values(head[0], head[1])
        size = size_after(top)
        if size < mark:
            raise IntegrityError(
                f"SQLite ledger {self.path}: its tree head records {mark} leaves but its "
                f"rows end at {size}: rows were cut off the end, or an old backup was "
                "restored; nothing was written. Run `ledger verify`"
            )

        def fetch(keys: list[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
            return read_nodes(lambda q, p: conn.execute(q, p).fetchall(), "events", "sqlite", keys)

        marked = self._appender.begin(mark, root, fetch)  # checked against the mark's root
        return marked if size == mark else self._appender.rebuild(size, fetch)

    def _insert_rows(self, conn: sqlite3.Connection, numbered: list[Row]) -> None:
        """Insert numbered rows, ``_STATEMENT_ROWS`` per statement."""
        for first in range(0, len(numbered), _STATEMENT_ROWS):
            part = numbered[first : first + _STATEMENT_ROWS]
            if len(part) == 1:
                conn.execute(_INSERT, part[0])
            else:
                conn.execute(_insert_sql(len(part)), _flat(part))

    def _insert_each(
        self, conn: sqlite3.Connection, items: list[list[Row]], frontier: Frontier, latest: object
    ) -> tuple[list[BaseException | None], Frontier]:
        """Each caller's rows in a savepoint, numbered after the rows stored before them
        (``latest``: the largest time stored before the batch), so a bad caller fails
        alone and leaves no gap; returns the errors and the tree after the stored rows."""
        errors: list[BaseException | None] = []
        after = frontier.copy()
        for rows in items:
            trial = after.copy()
            numbered = raised(number_rows(trial, rows), latest)
            conn.execute("SAVEPOINT ledger_item")
            try:
                self._insert_rows(conn, numbered)
            except sqlite3.IntegrityError as exc:
                conn.execute("ROLLBACK TO ledger_item")
                conn.execute("RELEASE ledger_item")
                errors.append(self._duplicate(conn, rows, exc))
                continue
            conn.execute("RELEASE ledger_item")
            errors.append(None)
            after = trial
            latest = numbered[-1][-2] if numbered else latest
        return errors, after

    @contextmanager
    def _tree_writing(self) -> Iterator[sa.Connection]:
        """A connection in a ``BEGIN IMMEDIATE`` transaction (the writers' lock),
        committed when the block ends (checkpoints are written this way)."""
        if self._closed:
            raise SinkClosed(f"SQLite sink {self.path} is closed; open a new one")
        with self._engine.connect() as conn:
            self._retry_busy(lambda: conn.exec_driver_sql("BEGIN IMMEDIATE"))
            try:
                yield conn
                self._retry_busy(conn.commit)
            except BaseException:
                conn.rollback()
                raise

    # --- without the log: the benchmark's baseline only -------------------------------

    def _write_batch_plain(self, items: list[list[Row]]) -> list[BaseException | None]:
        """The write path without the Merkle log (``_merkle = False``): what the log
        costs is measured against it (benchmarks/integrity.py). Rows get no leaf index,
        so such a ledger does not verify; never used otherwise."""
        conn = self._writer_conn()
        rows = [(*row, None, None) for item in items for row in item]
        self._retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
        try:
            for first in range(0, len(rows), _STATEMENT_ROWS):
                part = rows[first : first + _STATEMENT_ROWS]
                if len(part) == 1:
                    conn.execute(_INSERT, part[0])
                else:
                    conn.execute(_insert_sql(len(part)), _flat(part))
            self._retry_busy(lambda: conn.execute("COMMIT"))
        except BaseException as exc:
            self._abandon(conn)
            if isinstance(exc, sqlite3.Error):
                raise StorageError(f"SQLite ledger {self.path}: write failed: {exc}") from exc
            raise
        return [None] * len(items)

    def _duplicate(
        self, conn: sqlite3.Connection, rows: list[Row], exc: sqlite3.IntegrityError
    ) -> BaseException:
        """The error of ``rows``, whose insert failed with ``exc``: ``DuplicateEvent``
        when one of their ids is stored already (or repeated among them), else the
        failure itself (:meth:`_refused`: no event of the ledger is that one)."""
        ids = [r[0] for r in rows]
        found: list[str] = []
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            query = f"SELECT event_id FROM events WHERE event_id IN ({','.join('?' * len(part))})"
            found += [r[0] for r in conn.execute(query, part)]
            if len(found) >= 5:
                break
        if found and len(rows) == 1:
            return DuplicateEvent(f"event {ids[0]} is already stored; the stored one is unchanged")
        if found or len(set(ids)) < len(ids):
            named = ", ".join(found[:5]) or "repeated inside the batch"
            return DuplicateEvent(
                f"batch refused, nothing of it stored: event ids already stored: {named} ({exc})"
            )
        return self._refused(exc)

    def _refused(self, exc: sqlite3.IntegrityError) -> StorageError:
        """The error of a write SQLite refused for another reason than a stored id (a
        constraint or trigger added to the table, a leaf index another writer took)."""
        error = StorageError(
            f"SQLite ledger {self.path}: the write was refused ({exc}) and nothing of it was "
            "stored; try again, and run `ledger verify` if it fails again"
        )
        error.__cause__ = exc
        return error

    def _abandon(self, conn: sqlite3.Connection) -> None:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            log.warning("SQLite ledger %s: rollback failed; reopening the writer", self.path)
            self._drop_writer()

    def _drop_writer(self) -> None:
        writer, self._writer = self._writer, None
        self._since_last = None  # a new connection counts its data_version anew
        if writer is not None:
            writer.invalidate()

    # --- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        """Finish the write in progress, then release every connection. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._committer.close()
        self._mark_head()
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        self._engine.dispose()

    def _mark_head(self) -> None:
        """At close: write the head row if commits since it was last written left it
        behind (one small transaction). A failure is logged: every commit is durable
        already; only the mark stays behind."""
        cached = self._appender.cached()
        if self._unmarked <= 0 or cached is None or self._writer is None:
            return
        conn = self._writer_conn()
        try:
            self._retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
            conn.execute(_MARK_HEAD, (cached.size, cached.root(), cached.size))
            self._retry_busy(lambda: conn.execute("COMMIT"))
            self._unmarked = 0
        except (sqlite3.Error, StorageError) as exc:
            log.warning(
                "SQLite ledger %s: the tree head was not written at close: %s", self.path, exc
            )
            self._abandon(conn)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._closed

    def __repr__(self) -> str:
        return f"SQLiteSink({str(self.path)!r})"

"""The compliance report computed in the database (SQLite, PostgreSQL).

>>> with SQLiteSink("ledger.db") as reader:                        # doctest: +SKIP
...     report = build_report(reader, since=start, until=end)      # comes here

:func:`~ledger.report.build.build_report` takes this path for a SQL reader. It reads:

* **by SQL aggregates** (``GROUP BY`` over the indexed ``kind``, ``tool`` and ``time_us``
  columns, nothing but the answer leaves the database): allowed actions and denials per
  tool, the timeline's buckets, the run summaries (``reader.runs``, the first
  :data:`~ledger.report.listing.MAX_LISTED` kept) and the oldest and newest record held;
* **one checking pass** over the window's rows in commit order (one streamed query): the
  per-row checks (the content hash recomputed from the stored JSON, the id and the
  filter columns against the JSON, :func:`~ledger.report.hashes.verify_row`), the
  events counted, and -- on a ledger with the tamper-evident log -- every leaf from the
  window's first row to its last recomputed with the nodes it completes and compared
  with the row's stored nodes (:mod:`ledger.report.logcheck`: the window's rows bound
  to the stored head and checkpoints, O(window), no pass over the rest of the ledger);
* **one pass over the window's calls run by run** (``ORDER BY run_id, seq``, the sort in
  the database): the per-call rules (:class:`~ledger.report.calls.CallPass`) fed with
  :class:`~ledger.report.calls.Fact` rows made from the columns (results) or the few
  JSON members the report reads (decisions, actions; never a whole ``Event``), each
  run's calls settled into the bounded :class:`~ledger.report.calls.Tally` when its
  rows end. Only the runs cut by the window's edges are kept, and read across them.

A row with a problem (found by the checking pass) is decoded as the readers decode it
(the JSON is the truth); one that does not read back as an event is left out and
listed, as the streaming build does. Memory holds one run's calls, the first
:data:`~ledger.report.listing.MAX_LISTED` of each listing and the counts, never the
events, the calls of the window or the tree.
"""

from __future__ import annotations

import logging
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from datetime import datetime, timedelta
from hashlib import sha256
from typing import Any

import orjson
import sqlalchemy as sa

from ledger.errors import CorruptRecord, ValidationError
from ledger.integrity.merkle import Frontier
from ledger.integrity.verify import LeafSource, VerifyResult, verify_stored
from ledger.model.erasure import Erasure
from ledger.model.values import OUTSIDE_RUN_PREFIX, Actor, Approval, Kind, Verdict, outside_any_run
from ledger.report.calls import CallPass, Fact, FactRef, Tally, look_across, tally_parts
from ledger.report.document import ComplianceReport
from ledger.report.hashes import HashTally, verify_row, with_unreadable
from ledger.report.listing import MAX_LISTED
from ledger.report.logcheck import LeafRange, LogScope, start_range, window_log_check
from ledger.report.model import TimeBucket
from ledger.report.timeline import buckets_of, layout, span_end
from ledger.sinks.base import Reader, RunSummary
from ledger.sinks.rows import (
    FILTER_COLUMNS,
    TimeHighWater,
    from_micros,
    is_micros,
    parse_row,
    stated_micros,
    to_micros,
)
from ledger.sinks.sql import SQLReader
from ledger.sinks.url import shown_url
from ledger.timefmt import utc_now

__all__ = ["PAGE", "in_database", "report_in_database", "stream_rows"]

log = logging.getLogger(__name__)

PAGE = 5000
_PROGRESS_EVERY = 5000
_KINDS: dict[str, Kind] = {k.value: k for k in Kind}
_VERDICTS: dict[str, Verdict] = {v.value: v for v in Verdict}
_CALL_KINDS = frozenset((Kind.ACTION, Kind.TOOL_RESULT, Kind.GATE_DECISION))


def in_database(reader: Reader) -> bool:
    """True when ``reader`` is a SQL sink, whose report is computed here."""
    return isinstance(reader, SQLReader)


def _window(t: sa.Table, since: datetime | None, until: datetime | None) -> list[Any]:
    where: list[Any] = []
    if since is not None:
        where.append(t.c.time_us >= to_micros(since, "since"))
    if until is not None:
        where.append(t.c.time_us < to_micros(until, "until"))
    return where


class _Actors:
    """Actor objects by their JSON members, made once each (a fleet has few)."""

    __slots__ = ("_made",)

    def __init__(self) -> None:
        self._made: dict[tuple[object, ...], Actor] = {}

    def get(self, value: object) -> Actor | None:
        if value is None:
            return None
        if type(value) is dict and len(value) <= 3:
            key = (value.get("principal"), value.get("agent_id"), value.get("agent_version"))
            if all(type(v) is str or v is None for v in key):
                found = self._made.get(key)
                if found is None:
                    found = self._made[key] = Actor.from_dict(value)
                return found
        return Actor.from_dict(value)


def _fact(row: Any, obj: dict[str, Any], actors: _Actors) -> Fact:
    """The :class:`Fact` of an intact row (its columns agree with its JSON ``obj``);
    ``ValidationError`` or ``TypeError`` when a member the report reads is malformed."""
    kind = _KINDS[row[_KIND]]
    verdict = row[_VERDICT]
    get = obj.get
    refs: tuple[FactRef, ...] = ()
    if kind is Kind.ACTION and (listed := get("refs")):
        refs = tuple(FactRef(_text(r.get("source", "")), _text(r.get("id", ""))) for r in listed)
    approval = get("approval")
    reason = _text(get("reason", ""))
    gone = get("erased")  # a tombstone: its erased parts read as erased (erased_text)
    erasure = None if gone is None else Erasure.from_dict(gone)
    return Fact(
        kind,
        row[1],
        row[2],
        row[3],
        row[_TOOL],
        None if verdict is None else _VERDICTS[verdict],
        from_micros(row[_TIME]),
        reason,
        _text(get("err", "")),
        _text(get("label", "")),
        _text(get("agent_path", "")),
        actors.get(get("actor")) if kind is Kind.ACTION else None,
        None if approval is None else Approval.from_dict(approval),
        refs,
        erasure,
    )


_RESULT = Kind.TOOL_RESULT.value


def _result_fact(row: Any) -> Fact:
    """The :class:`Fact` of an intact result: what the report reads of a result (its
    call, tool, time and whether it failed) is in its columns, which the check has just
    compared with its JSON."""
    verdict = row[_VERDICT]
    return Fact(
        Kind.TOOL_RESULT,
        row[1],
        row[2],
        row[3],
        row[_TOOL],
        None if verdict is None else _VERDICTS[verdict],
        from_micros(row[_TIME]),
        err="error" if row[8] else "",
    )


def _text(value: object) -> str:
    if type(value) is not str:
        raise ValidationError(f"expected a string, got {type(value).__name__}")
    return value


# positions in the rows both passes read: seq, event_id, the FILTER_COLUMNS, event_json
# (the READ_COLUMNS), then the first pass's content_hash, leaf_index and nodes
_KIND, _TOOL, _VERDICT, _TIME, _TEXT, _HASH, _LEAF, _NODES = 4, 5, 6, 7, 9, 10, 11, 12
_HIGH = -1  # time_hi_us: the last column of the pass's rows
_FILTERS = slice(2, 2 + len(FILTER_COLUMNS))
_READ = slice(0, _TEXT + 1)


def _table_name(t: sa.Table) -> str:
    return f'"{t.schema}".events' if t.schema else "events"


def stream_rows(reader: SQLReader, sql: str, params: tuple[Any, ...]) -> Iterator[Any]:
    """The rows of one driver-level query, streamed :data:`PAGE` at a time on one
    connection (one snapshot; a server-side cursor on PostgreSQL)."""
    with reader._reading() as conn:
        dbapi: Any = conn.connection.dbapi_connection
        if conn.dialect.name == "postgresql":  # a named (server-side) cursor: one page held
            # a cursor lives in a transaction: on a caller's connection in autocommit
            # mode (PostgresSink(connection)) the pass opens one of its own, read only
            held = dbapi.transaction() if dbapi.autocommit else nullcontext()
            with held, dbapi.cursor(name="ledger_report_pass") as cursor:
                cursor.itersize = PAGE
                cursor.execute(sql, params)
                while rows := cursor.fetchmany(PAGE):
                    yield from rows
            return
        cursor = dbapi.cursor()
        try:
            cursor.arraysize = PAGE
            cursor.execute(sql, params)
            while rows := cursor.fetchmany(PAGE):
                yield from rows
        finally:
            cursor.close()


_BYTES = (bytes, memoryview, bytearray)  # what a driver gives for a BLOB / bytea


class _Pass:
    """The one pass over the rows from the window's first to its last, in commit order.

    Each row of the window is checked (content hash, id, filter columns:
    :func:`~ledger.report.hashes.verify_row`) and counted; a call's row (decision,
    action, result) becomes a :class:`Fact` from its columns and the JSON the check has
    just parsed, fed to its run's :class:`CallPass`; at the run's last row in the window
    (``ends``, a bit per ``seq`` from one ``GROUP BY run_id``) the run's calls are
    settled into the :class:`Tally` and forgotten -- or kept, when the run is cut by the
    window's edges, to be read across them after the pass. Every row, in the window or
    between its rows, is fed to the log check (:class:`LeafRange`).

    A row with a problem is decoded as the readers decode it: one that does not read
    back is left out of the counts (what SQL counted for it by its columns is taken
    back: ``per_tool`` and the timeline's ``taken``), one that does is counted as its
    JSON says (``added``)."""

    def __init__(
        self,
        per_tool: dict[str, list[int]],
        tally: Tally,
        ends: _Ends,
        since: datetime | None,
        until: datetime | None,
    ) -> None:
        self.per_tool = per_tool
        self.tally = tally
        self.ends = ends
        self.since = since
        self.until = until
        self.hashes = HashTally()
        self.high = TimeHighWater()
        self.actors = _Actors()
        self.runs: dict[str, CallPass] = {}
        self.deferred: list[CallPass] = []
        self.events = 0
        self.first: int | None = None
        self.last: int | None = None
        self.taken: list[tuple[int, bool]] = []  # (time_us, allowed) counted by SQL
        self.added: list[tuple[int, bool]] = []  # (time_us, allowed) as the JSON says
        self.misfiled = ""  # a row whose JSON names another run than its run_id column

    def _seen(self, micros: int) -> None:
        self.events += 1
        if self.first is None or micros < self.first:
            self.first = micros
        if self.last is None or micros > self.last:
            self.last = micros

    def _state(self, run_id: str) -> CallPass:
        state = self.runs.get(run_id)
        if state is None:
            state = self.runs[run_id] = CallPass(counting=False, tally=self.tally)
        return state

    def one(self, row: Any, committed: bool = False) -> None:
        """A row of the window (``committed``: its bytes are its stored leaf)."""
        event_id, text, stored = row[1], row[_TEXT], row[_HASH]
        obj, computed, problem = verify_row(event_id, text, stored, row[_FILTERS], committed)
        # the window's rows' running maximum (check_rows' check of SQLReader.stored_rows)
        lowered = self.high.check(row[_TIME], obj, not problem, row[_HIGH])
        problem = problem or lowered
        if problem:
            self.hashes.add(event_id, row[2], stored, computed, problem)
        else:
            self.hashes.intact(stored)
        if not problem and stored is not None:  # the hash vouches for the JSON it was made of
            kind = row[_KIND]
            if kind not in _CALL_KIND_NAMES:
                # the run starts in the window when its first record there, of any kind,
                # is a request (CallPass.add, CallPass.cut_calls)
                state = self._state(row[2])
                if row[2] not in state.touched:
                    state.touched.add(row[2])
                    if kind == _REQUEST:
                        state.started.add(row[2])
                self._seen(row[_TIME])
                return
            try:
                fact = _result_fact(row) if kind == _RESULT else _fact(row, obj, self.actors)
            except (ValidationError, TypeError, AttributeError, KeyError):
                pass  # a malformed member: decoded as the readers decode it, below
            else:
                self._seen(row[_TIME])
                self._state(row[2]).add(fact)
                return
        self.take_back(row)
        try:
            event = parse_row(tuple(row[_READ]))
        except CorruptRecord as exc:
            self.tally.skipped.append(exc)
            return
        if event.run_id != row[2] and not self.misfiled:
            # its run was settled (or will be) by the column: the JSON is the truth
            self.misfiled = f"events row seq={row[0]} names run {event.run_id!r} in its JSON"
        micros = to_micros(event.time)
        self._seen(micros)
        if event.kind is Kind.ACTION and not outside_any_run(event.run_id):
            allowed = event.verdict is Verdict.ALLOWED
            self.per_tool.setdefault(event.tool, [0, 0])[0 if allowed else 1] += 1
            self.added.append((micros, allowed))
        self._state(event.run_id).add(event)  # a call's part, or what starts its run

    def beside(self, row: Any, low: int, high: int) -> None:
        """A row among the window's (by ``seq``) whose ``time_us`` column puts it
        outside the window: when its JSON time is inside, the column was moved (by SQL)
        to hide it from the window; that is listed as tampering (the window's counts,
        chosen by the column in both builds, leave it out)."""
        try:
            when = orjson.loads(row[_TEXT]).get("time")
        except (orjson.JSONDecodeError, AttributeError):
            when = None
        micros = stated_micros(when)
        if micros is not None and low <= micros < high:
            self.hashes.add(
                row[1], row[2], row[_HASH], None,
                f"time_us column {row[_TIME]} (outside the window) but the JSON time "
                f"{when} is inside it: the column was changed outside the ledger, and the "
                "row is not counted in this report",
            )  # fmt: skip
            self.hashes.checked -= 1  # listed, not a row of the window

    def end(self, run_id: str) -> None:
        """The run's last row in the window was read: settle its calls (or keep them,
        when the run is cut by the window's edges)."""
        state = self.runs.pop(run_id, None)
        if state is None:
            return
        if state.cut(self.since, self.until):
            self.deferred.append(state)
        else:
            state.finish()

    def take_back(self, row: Any) -> None:
        """Undo what the SQL aggregates counted for ``row`` by its columns."""
        if row[_KIND] != Kind.ACTION.value or type(row[2]) is not str or outside_any_run(row[2]):
            return
        allowed = row[_VERDICT] == Verdict.ALLOWED.value
        self.per_tool[row[_TOOL]][0 if allowed else 1] -= 1
        self.taken.append((row[_TIME], allowed))


_CALL_KIND_NAMES = frozenset(k.value for k in _CALL_KINDS)
_REQUEST = Kind.REQUEST.value


class Restream(Exception):
    """The window holds a row whose run, by its JSON, is not the one its ``run_id``
    column names (changed outside the ledger): its runs' calls cannot be settled run by
    run by the columns, so the report is built by the streaming pass of whole events,
    which reads every row as its JSON says (the message names the row)."""


class _Ends:
    """The ``seq`` of each run's last row in the window, and how many runs the window
    holds (calls outside any run apart).

    Kept as bits over the window's ``seq`` range (one bit per row: memory an eighth of a
    byte per row, whatever the number of runs) while the range is dense. ``seq`` values
    need not be: a sequence restarted higher (``setval``, a restore) or a ``seq`` changed
    by SQL leaves a gap, and bits over ``10^12`` numbers are 125 GB. When the range is
    more than :data:`_DENSE` times the window's rows, the last ``seq`` of each run is
    kept instead, sorted (8 bytes a run), and looked up by bisection."""

    __slots__ = ("_bits", "_low", "_sorted", "outside", "runs")

    def __init__(
        self, reader: SQLReader, seqs: tuple[int, int], where: list[Any], rows: int
    ) -> None:
        low, high = seqs
        self._low = low
        dense = high - low < _DENSE * max(rows, 1)
        self._bits = bytearray((high - low) // 8 + 1) if dense else bytearray()
        ends = array("q")
        self.runs = 0
        self.outside = 0
        t = reader._table
        outside = sa.func.max(sa.case((~_in_run(t), 1), else_=0))
        query = (
            sa.select(sa.func.max(t.c.seq), outside)
            .where(*where, t.c.seq >= low, t.c.seq <= high)
            .group_by(t.c.run_id)
        )
        bits = self._bits
        with reader._reading() as conn:
            # streamed as runs() streams (libpq's single-row mode on PostgreSQL: no
            # server-side cursor, which a caller's connection in autocommit mode cannot
            # hold), and never by Connection.execution_options, which changes the
            # connection in place: a PostgresSink(connection) reads through the caller's,
            # whose every later statement would then open a server-side cursor
            for seq, out in reader._streamed(conn, query):
                if dense:
                    offset = int(seq) - low
                    bits[offset >> 3] |= 1 << (offset & 7)
                else:
                    ends.append(int(seq))
                if out:
                    self.outside += 1
                else:
                    self.runs += 1
        self._sorted = None if dense else array("q", sorted(ends))

    def last(self, seq: int) -> bool:
        found = self._sorted
        if found is not None:
            at = bisect_left(found, seq)
            return at < len(found) and found[at] == seq
        offset = seq - self._low
        return bool(self._bits[offset >> 3] >> (offset & 7) & 1)


_DENSE = 64  # seq numbers per window row up to which _Ends keeps bits (8 bytes a row)


def _one_pass(
    reader: SQLReader,
    seqs: tuple[int, int],
    window: tuple[int | None, int | None],
    work: _Pass,
    leaves: LeafRange | None,
    progress: Callable[[int], None] | None,
) -> None:
    """The pass (:class:`_Pass`) over the rows ``seqs`` (first and last ``seq`` of the
    window), one streamed query."""
    t = reader._table
    sqlite = reader._dialect == "sqlite"
    mark = "?" if sqlite else "%s"
    text = "CAST(event_json AS BLOB)" if sqlite else "event_json"
    tree = ", leaf_index, nodes" if leaves is not None else ""
    sql = (  # time_hi_us last (_HIGH)
        f"SELECT seq, event_id, {', '.join(FILTER_COLUMNS)}, {text}, content_hash{tree}, "
        f"time_hi_us FROM {_table_name(t)} WHERE seq >= {mark} AND seq <= {mark} ORDER BY seq"
    )
    since, until = window
    low = -(1 << 63) if since is None else since
    high = 1 << 63 if until is None else until
    one, end, last = work.one, work.end, work.ends.last
    for done, row in enumerate(stream_rows(reader, sql, seqs), 1):
        if type(row[_TIME]) is not int:  # SQLite keeps what a hand-made UPDATE stored
            raise CorruptRecord(
                f"events row seq={row[0]} (event_id {row[1]}): its time_us column holds "
                f"{row[_TIME]!r}, not a time in microseconds; the row was changed outside "
                "the ledger (`ledger db check` lists such rows)",
                seq=row[0],
                event_id=str(row[1]),
            )
        leaf = None
        if leaves is not None:  # its leaf, for the log check and to spare the decode check
            data = row[_TEXT]
            data = data if type(data) is bytes else _utf8(data)
            leaf = sha256(b"\x00" + data).digest()
        if low <= row[_TIME] < high:
            nodes = row[_NODES] if leaves is not None else None
            one(row, leaf is not None and isinstance(nodes, _BYTES) and bytes(nodes[:32]) == leaf)
            if last(row[0]):
                end(row[2])
        else:  # between the window's rows, outside it by its column: rare (late commits)
            work.beside(row, low, high)
        if leaves is not None:
            leaves.row(row[_LEAF], data, row[_NODES], leaf)
        if progress is not None and done % _PROGRESS_EVERY == 0:
            progress(done)
    for run_id in list(work.runs):  # none is left on a ledger that did not change meanwhile
        end(run_id)


def _utf8(data: object) -> bytes:
    return bytes(data) if isinstance(data, bytes | memoryview | bytearray) else str(data).encode()


def _per_tool(reader: SQLReader, where: list[Any]) -> dict[str, list[int]]:
    """Allowed actions and denials per tool in the window (calls inside runs): SQL."""
    t = reader._table
    with reader._reading() as conn:
        rows = conn.execute(
            sa.select(t.c.tool, sa.func.sum(_allowed(t)), sa.func.count())
            .where(*where, t.c.kind == Kind.ACTION.value, _in_run(t))
            .group_by(t.c.tool)
        ).all()
    return {tool: [int(a or 0), int(n) - int(a or 0)] for tool, a, n in rows}


def _in_run(t: sa.Table) -> sa.ColumnElement[bool]:
    return sa.func.substr(t.c.run_id, 1, len(OUTSIDE_RUN_PREFIX)) != OUTSIDE_RUN_PREFIX


def _allowed(t: sa.Table) -> sa.ColumnElement[int]:
    return sa.case((t.c.verdict == Verdict.ALLOWED.value, 1), else_=0)


def _timeline(
    reader: SQLReader,
    where: list[Any],
    scan: _Pass | None,
    start: datetime | None,
    end: datetime | None,
) -> tuple[TimeBucket, ...]:
    """The timeline's buckets: actions and denials per bucket index by SQL, with the
    scan's corrections for rows whose columns were not what their JSON says."""
    placed = layout(start, end)
    if placed is None:
        return ()
    first, width, _ = placed
    t = reader._table
    first_us = to_micros(first)
    width_us = width // timedelta(microseconds=1)
    index = ((t.c.time_us - first_us) // width_us).label("bucket")
    query = (
        sa.select(index, sa.func.sum(_allowed(t)), sa.func.count())
        .where(*where, t.c.kind == Kind.ACTION.value, _in_run(t))
        .group_by(index)
    )
    actions: Counter[int] = Counter()
    denials: Counter[int] = Counter()
    with reader._reading() as conn:
        for bucket, a, total in conn.execute(query):
            actions[int(bucket)] += int(a or 0)
            denials[int(bucket)] += int(total) - int(a or 0)
    changes_of = () if scan is None else ((scan.taken, -1), (scan.added, 1))
    for changes, sign in changes_of:
        for micros, allowed in changes:
            (actions if allowed else denials)[(micros - first_us) // width_us] += sign
    return buckets_of(placed, actions, denials)


def _held(reader: SQLReader, upto: Any) -> tuple[datetime | None, datetime | None]:
    """The oldest and newest event time in the whole store (of the rows ``upto``, the
    report's bound on ``seq``)."""
    t = reader._table
    with reader._reading() as conn:
        low, high = conn.execute(
            sa.select(sa.func.min(t.c.time_us), sa.func.max(t.c.time_us)).where(upto)
        ).one()
        try:
            return (
                None if low is None else from_micros(low),
                None if high is None else from_micros(high),
            )
        except (TypeError, ValueError, OverflowError):  # changed by SQL: name the row
            bad = high if low is None or is_micros(low) else low
            row = conn.execute(
                sa.select(t.c.seq, t.c.run_id).where(t.c.time_us == bad, upto).limit(1)
            ).first()
    where = "an events row" if row is None else f"events row seq={row[0]} (run {row[1]!r})"
    raise CorruptRecord(
        f"{where}: its time_us column holds {bad!r}, which is not a time in microseconds; "
        "the row was changed outside the ledger. Run `ledger db check`"
    )


def _window_micros(since: datetime | None, until: datetime | None) -> tuple[int | None, int | None]:
    return (
        None if since is None else to_micros(since, "since"),
        None if until is None else to_micros(until, "until"),
    )


def _listed_runs(
    reader: SQLReader, where: list[Any], outside: int, limit: int
) -> tuple[RunSummary, ...]:
    """The first ``limit`` runs of the window (``where``: its bounds and the report's
    bound on ``seq``), oldest first, as ``reader.runs`` gives them (``outside``: how
    many of the window's "runs" are calls outside any run, left out)."""
    listed = reader._summaries(reader._runs_query(where, limit + outside, False))
    return tuple(r for r in listed if not outside_any_run(r.run_id))[:limit]


def _keeps_tree(reader: SQLReader) -> bool:
    return (
        isinstance(reader, LeafSource)
        and bool(getattr(reader, "keeps_head", False))
        and "nodes" in reader._table.c
        and hasattr(reader, "_trees")
    )


def _first_leaf(reader: SQLReader, seq: int) -> Any:
    t = reader._table
    with reader._reading() as conn:
        return conn.execute(sa.select(t.c.leaf_index).where(t.c.seq == seq)).scalar()


def report_in_database(
    reader: Reader,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    progress: Callable[[int], None] | None = None,
    ledger: str = "",
    listed: int = MAX_LISTED,
) -> ComplianceReport:
    """The report over ``[since, until)`` of the SQL reader ``reader`` (see the module
    docstring); the same fields, rules and order as the streaming build (``listed``:
    how many items each listing holds)."""
    if not isinstance(reader, SQLReader):
        raise ValidationError(f"reader: expected a SQL sink, got {type(reader).__name__}")
    t = reader._table
    reader._check_open()
    with reader._reading() as conn:  # the report is of the rows committed by now
        cap = conn.execute(sa.select(sa.func.max(t.c.seq))).scalar()
    # every aggregate below reads the same rows, however many are committed meanwhile
    upto = t.c.seq <= (cap if cap is not None else -1)
    where = [*_window(t, since, until), upto]
    window = _window_micros(since, until)
    per_tool = _per_tool(reader, where)
    with reader._reading() as conn:
        low, high, count = conn.execute(
            sa.select(sa.func.min(t.c.seq), sa.func.max(t.c.seq), sa.func.count()).where(*where)
        ).one()
    tree = _keeps_tree(reader)
    head = reader.current_head() if tree else None  # type: ignore[attr-defined]
    tally = Tally(listed=listed)
    leaves: LeafRange | None = None
    work: _Pass | None = None
    run_total = 0
    if low is not None:
        seqs = (int(low), int(high))
        ends = _Ends(reader, seqs, where, int(count))
        run_total = ends.runs
        work = _Pass(per_tool, tally, ends, since, until)
        if tree:
            first = _first_leaf(reader, seqs[0])
            leaves = (
                start_range(reader, int(first))
                if isinstance(first, int) and head is not None and 0 <= first <= head[1].size
                else LeafRange(0, Frontier())
            )
            if first is None:
                leaves.failed = f"row seq={seqs[0]} has no leaf index"
        _one_pass(reader, seqs, window, work, leaves, progress)
        if work.misfiled:
            raise Restream(work.misfiled)
        for state in work.deferred:  # runs cut by the window's edges: read across them
            look_across(state, reader, since, until)
            state.finish()
    if progress is not None:
        progress(0 if work is None else work.hashes.checked)
    log_check: VerifyResult | None = None
    scope: LogScope | None = None
    if tree:
        log_check, scope = window_log_check(reader, leaves, head)
    else:
        log_check = verify_stored(reader)
    for tool, (allowed, denied) in per_tool.items():
        if allowed or denied:
            stats = tally.tool(tool)
            stats.actions, stats.denials = allowed, denied
    runs = _listed_runs(reader, where, 0 if work is None else work.ends.outside, listed)
    oldest, newest = _held(reader, upto)
    first_t = None if work is None or work.first is None else from_micros(work.first)
    last_t = None if work is None or work.last is None else from_micros(work.last)
    hashes = HashTally() if work is None else work.hashes
    return ComplianceReport(
        generated_at=utc_now(),
        since=since,
        until=until,
        events=0 if work is None else work.events,
        runs=runs,
        ledger=shown_url(ledger) if ledger else "",
        oldest_record=oldest,
        newest_record=newest,
        hash_check=with_unreadable(hashes.result(), tally.skipped, tally.beyond),
        timeline=_timeline(reader, where, work, since or first_t, span_end(until, last_t)),
        log_check=log_check,
        log_scope=scope,
        **tally_parts(tally, run_total),
    )

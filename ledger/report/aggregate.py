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
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import orjson
import sqlalchemy as sa

from ledger.errors import CorruptRecord, ValidationError
from ledger.integrity.merkle import Frontier
from ledger.integrity.verify import LeafSource, VerifyResult, verify_stored
from ledger.model.event import Event
from ledger.model.values import OUTSIDE_RUN_PREFIX, Actor, Approval, Kind, Verdict, outside_any_run
from ledger.report.calls import CallPass, Fact, FactRef, Record, Tally, listed_of, look_across
from ledger.report.document import ComplianceReport
from ledger.report.hashes import HashTally, verify_row, with_unreadable
from ledger.report.listing import MAX_LISTED
from ledger.report.logcheck import LeafRange, LogScope, start_range, window_log_check
from ledger.report.model import TimeBucket
from ledger.report.timeline import buckets_of, layout
from ledger.sinks.base import Reader, RunSummary
from ledger.sinks.rows import FILTER_COLUMNS, from_micros, parse_row, to_micros
from ledger.sinks.sql import SQLReader
from ledger.sinks.url import shown_url
from ledger.timefmt import utc_now

__all__ = ["PAGE", "in_database", "report_in_database"]

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
    return Fact(
        kind,
        row[1],
        row[2],
        row[3],
        row[_TOOL],
        None if verdict is None else _VERDICTS[verdict],
        from_micros(row[_TIME]),
        _text(get("reason", "")),
        _text(get("err", "")),
        _text(get("label", "")),
        _text(get("agent_path", "")),
        actors.get(get("actor")) if kind is Kind.ACTION else None,
        None if approval is None else Approval.from_dict(approval),
        refs,
    )


def _text(value: object) -> str:
    if type(value) is not str:
        raise ValidationError(f"expected a string, got {type(value).__name__}")
    return value


# positions in the rows both passes read: seq, event_id, the FILTER_COLUMNS, event_json
# (the READ_COLUMNS), then the first pass's content_hash, leaf_index and nodes
_KIND, _TOOL, _VERDICT, _TIME, _TEXT, _HASH, _LEAF, _NODES = 4, 5, 6, 7, 9, 10, 11, 12
_FILTERS = slice(2, 2 + len(FILTER_COLUMNS))
_READ = slice(0, _TEXT + 1)


def _table_name(t: sa.Table) -> str:
    return f'"{t.schema}".events' if t.schema else "events"


def _stream(reader: SQLReader, sql: str, params: tuple[Any, ...]) -> Iterator[Any]:
    """The rows of one driver-level query, streamed :data:`PAGE` at a time on one
    connection (one snapshot; a server-side cursor on PostgreSQL)."""
    with reader._reading() as conn:
        result = conn.execution_options(yield_per=PAGE).exec_driver_sql(sql, params)
        try:
            for part in result.partitions():
                yield from part
        finally:
            result.close()


class _Checks:
    """The first pass: every row of the window checked (content hash, id, filter
    columns: :func:`~ledger.report.hashes.verify_row`) and counted, and every row from
    the window's first to its last fed to the log check (:class:`LeafRange`). A row
    with a problem is decoded as the readers decode it: one that does not read back is
    left out of the counts (``left_out``; what SQL counted for it by its columns is
    taken back, ``per_tool`` and the timeline's ``taken``), one that does is kept
    (``decoded``) for the second pass and counted as its JSON says (``added``)."""

    def __init__(self, per_tool: dict[str, list[int]]) -> None:
        self.per_tool = per_tool
        self.tally = HashTally()
        self.events = 0
        self.first: int | None = None
        self.last: int | None = None
        self.skipped: list[CorruptRecord] = []
        self.left_out: set[int] = set()
        self.decoded: dict[int, Event] = {}
        self.taken: list[tuple[int, bool]] = []  # (time_us, allowed) counted by SQL
        self.added: list[tuple[int, bool]] = []  # (time_us, allowed) as the JSON says

    def _seen(self, micros: int) -> None:
        self.events += 1
        if self.first is None or micros < self.first:
            self.first = micros
        if self.last is None or micros > self.last:
            self.last = micros

    def one(self, row: Any) -> None:
        event_id, text, stored = row[1], row[_TEXT], row[_HASH]
        found = dict(zip(FILTER_COLUMNS, row[_FILTERS], strict=True))
        _, computed, problem = verify_row(event_id, text, stored, found)
        self.tally.add(event_id, row[2], stored, computed, problem)
        if not problem and stored is not None:  # the hash vouches for the JSON it was made of
            self._seen(row[_TIME])
            return
        self.take_back(row)
        try:
            event = parse_row(tuple(row[_READ]))
        except CorruptRecord as exc:
            self.skipped.append(exc)
            self.left_out.add(int(row[0]))
            return
        micros = to_micros(event.time)
        self._seen(micros)
        if event.kind is Kind.ACTION and not outside_any_run(event.run_id):
            allowed = event.verdict is Verdict.ALLOWED
            self.per_tool.setdefault(event.tool, [0, 0])[0 if allowed else 1] += 1
            self.added.append((micros, allowed))
        self.decoded[int(row[0])] = event

    def take_back(self, row: Any) -> None:
        """Undo what the SQL aggregates counted for ``row`` by its columns."""
        if row[_KIND] != Kind.ACTION.value or outside_any_run(row[2]):
            return
        allowed = row[_VERDICT] == Verdict.ALLOWED.value
        self.per_tool[row[_TOOL]][0 if allowed else 1] -= 1
        self.taken.append((row[_TIME], allowed))


def _check_rows(
    reader: SQLReader,
    seqs: tuple[int, int],
    window: tuple[int | None, int | None],
    checks: _Checks,
    leaves: LeafRange | None,
    progress: Callable[[int], None] | None,
) -> None:
    """The first pass over the rows ``seqs`` (first and last ``seq`` of the window)."""
    t = reader._table
    sqlite = reader._dialect == "sqlite"
    mark = "?" if sqlite else "%s"
    text = "CAST(event_json AS BLOB)" if sqlite else "event_json"
    tree = ", leaf_index, nodes" if leaves is not None else ""
    sql = (
        f"SELECT seq, event_id, {', '.join(FILTER_COLUMNS)}, {text}, content_hash{tree} "
        f"FROM {_table_name(t)} WHERE seq >= {mark} AND seq <= {mark} ORDER BY seq"
    )
    since, until = window
    low = -(1 << 63) if since is None else since
    high = 1 << 63 if until is None else until
    one = checks.one
    for done, row in enumerate(_stream(reader, sql, seqs), 1):
        if low <= row[_TIME] < high:
            one(row)
        if leaves is not None:
            data = row[_TEXT]
            leaves.row(row[_LEAF], data if type(data) is bytes else _utf8(data), row[_NODES])
        if progress is not None and done % _PROGRESS_EVERY == 0:
            progress(done)


def _utf8(data: object) -> bytes:
    return bytes(data) if isinstance(data, bytes | memoryview | bytearray) else str(data).encode()


_RESULT = Kind.TOOL_RESULT.value


def _facts(
    reader: SQLReader,
    seqs: tuple[int, int],
    window: tuple[int | None, int | None],
    checks: _Checks,
    tally: Tally,
    since: datetime | None,
    until: datetime | None,
) -> list[CallPass]:
    """The second pass: the window's calls run by run (``ORDER BY run_id, seq``), each
    run's calls settled into ``tally`` when the run is read (one run's calls in memory);
    the runs cut by the window's edges are returned, to be read across them."""
    t = reader._table
    sqlite = reader._dialect == "sqlite"
    mark = "?" if sqlite else "%s"
    text = "CAST(event_json AS BLOB)" if sqlite else "event_json"
    where = [f"seq >= {mark}", f"seq <= {mark}"]
    params: list[Any] = list(seqs)
    since_us, until_us = window
    if since_us is not None:
        where.append(f"time_us >= {mark}")
        params.append(since_us)
    if until_us is not None:
        where.append(f"time_us < {mark}")
        params.append(until_us)
    kinds = ", ".join(f"'{k.value}'" for k in sorted(_CALL_KINDS))
    sql = (
        f"SELECT seq, event_id, {', '.join(FILTER_COLUMNS)}, CASE WHEN kind = '{_RESULT}' "
        f"THEN NULL ELSE {text} END FROM {_table_name(t)} WHERE {' AND '.join(where)} "
        f"AND kind IN ({kinds}) ORDER BY run_id, seq"
    )
    actors = _Actors()
    state = CallPass(counting=False, tally=tally)
    deferred: list[CallPass] = []
    left_out, decoded = checks.left_out, checks.decoded
    current: str | None = None

    def end_run(state: CallPass) -> CallPass:
        if (since is not None and state.orphans and state.cut_runs()) or (
            until is not None and state.allowed and state.open_runs()
        ):
            deferred.append(state)
            return CallPass(counting=False, tally=tally)
        state.finish()
        return state

    for row in _stream(reader, sql, tuple(params)):
        if row[2] != current:
            if current is not None:
                state = end_run(state)
            current = row[2]
        seq = row[0]
        if left_out and seq in left_out:
            continue
        record: Record | None = decoded.get(seq) if decoded else None
        if record is None:
            record = _call_fact(row, actors)
        if record is None:  # a malformed member: decoded as the readers decode it
            try:
                record = parse_row(tuple(row))
            except CorruptRecord as exc:
                checks.skipped.append(exc)
                checks.take_back(row)
                checks.events -= 1
                continue
        state.add(record)
    if current is not None:
        state = end_run(state)
    return deferred


def _call_fact(row: Any, actors: _Actors) -> Fact | None:
    """The :class:`Fact` of an intact row of the second pass (a result from its columns
    alone); None when a member the report reads is malformed."""
    if row[_KIND] == _RESULT:
        verdict = row[_VERDICT]
        return Fact(
            Kind.TOOL_RESULT,
            row[1],
            row[2],
            row[3],
            row[_TOOL],
            None if verdict is None else _VERDICTS.get(verdict),
            from_micros(row[_TIME]),
            err="error" if row[8] else "",
        )
    try:
        return _fact(row, orjson.loads(row[_TEXT]), actors)
    except (ValidationError, TypeError, AttributeError, KeyError, orjson.JSONDecodeError):
        return None


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
    reader: SQLReader, where: list[Any], scan: _Checks, start: datetime | None, end: datetime | None
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
    for changes, sign in ((scan.taken, -1), (scan.added, 1)):
        for micros, allowed in changes:
            (actions if allowed else denials)[(micros - first_us) // width_us] += sign
    return buckets_of(placed, actions, denials)


def _held(reader: SQLReader) -> tuple[datetime | None, datetime | None]:
    """The oldest and newest event time in the whole store."""
    t = reader._table
    with reader._reading() as conn:
        low, high = conn.execute(
            sa.select(sa.func.min(t.c.time_us), sa.func.max(t.c.time_us))
        ).one()
    return (
        None if low is None else from_micros(low),
        None if high is None else from_micros(high),
    )


def _window_micros(since: datetime | None, until: datetime | None) -> tuple[int | None, int | None]:
    return (
        None if since is None else to_micros(since, "since"),
        None if until is None else to_micros(until, "until"),
    )


def _listed_runs(
    reader: SQLReader, since: datetime | None, until: datetime | None
) -> tuple[tuple[RunSummary, ...], int]:
    """The first :data:`MAX_LISTED` runs of the window (oldest first) and how many."""
    listed: list[RunSummary] = []
    total = 0
    for run in reader.runs(since=since, until=until):
        if outside_any_run(run.run_id):
            continue
        total += 1
        if len(listed) < MAX_LISTED:
            listed.append(run)
    return tuple(listed), total


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
) -> ComplianceReport:
    """The report over ``[since, until)`` of the SQL reader ``reader`` (see the module
    docstring); the same fields, rules and order as the streaming build."""
    if not isinstance(reader, SQLReader):
        raise ValidationError(f"reader: expected a SQL sink, got {type(reader).__name__}")
    t = reader._table
    where = _window(t, since, until)
    window = _window_micros(since, until)
    reader._check_open()
    per_tool = _per_tool(reader, where)
    with reader._reading() as conn:
        low, high = conn.execute(
            sa.select(sa.func.min(t.c.seq), sa.func.max(t.c.seq)).where(*where)
        ).one()
    tree = _keeps_tree(reader)
    head = reader.stored_head() if tree else None  # type: ignore[attr-defined]
    checks = _Checks(per_tool)
    leaves: LeafRange | None = None
    tally = Tally()
    if low is not None:
        seqs = (int(low), int(high))
        if tree:
            first = _first_leaf(reader, seqs[0])
            leaves = (
                start_range(reader, int(first))
                if isinstance(first, int) and head is not None and 0 <= first <= head[1].size
                else LeafRange(0, Frontier())
            )
            if first is None:
                leaves.failed = f"row seq={seqs[0]} has no leaf index"
        _check_rows(reader, seqs, window, checks, leaves, progress)
        deferred = _facts(reader, seqs, window, checks, tally, since, until)
        for state in deferred:  # runs cut by the window's edges: read across them
            look_across(state, reader, since, until)
            state.finish()
    tally.skipped[:0] = checks.skipped
    if progress is not None:
        progress(checks.tally.checked)
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
    runs, run_total = _listed_runs(reader, since, until)
    oldest, newest = _held(reader)
    first_t = None if checks.first is None else from_micros(checks.first)
    last_t = None if checks.last is None else from_micros(checks.last)
    return ComplianceReport(
        generated_at=utc_now(),
        since=since,
        until=until,
        events=checks.events,
        runs=runs,
        tools=tuple(sorted(tally.tools.values(), key=lambda s: s.tool)),
        denials=tally.denials.items(),
        missing_results=tally.missing.items(),
        unsafe_without_intent=tally.unsafe.items(),
        approved=tally.approved.items(),
        agents=tuple(sorted(tally.agents.values(), key=lambda w: w.who)),
        principals=tuple(sorted(tally.principals.values(), key=lambda w: w.who)),
        outside_runs=tally.outside.items(),
        ledger=shown_url(ledger) if ledger else "",
        oldest_record=oldest,
        newest_record=newest,
        hash_check=with_unreadable(checks.tally.result(), tally.skipped),
        timeline=_timeline(reader, where, checks, since or first_t, until or last_t),
        log_check=log_check,
        log_scope=scope,
        listed=listed_of(tally, run_total),
        approval_groups=tally.approval_groups(),
    )

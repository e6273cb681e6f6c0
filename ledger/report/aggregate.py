"""The compliance report computed in the database (SQLite, PostgreSQL).

>>> with SQLiteSink("ledger.db") as reader:                        # doctest: +SKIP
...     report = build_report(reader, since=start, until=end)      # comes here

:func:`~ledger.report.build.build_report` takes this path for a SQL reader. It reads:

* **by SQL aggregates** (``GROUP BY`` over the indexed ``kind``, ``tool`` and ``time_us``
  columns, nothing but the answer leaves the database): the window's event count and
  first and last time, allowed actions and denials per tool, the timeline's buckets, the
  run summaries (``reader.runs``) and the oldest and newest record held;
* **in one streaming pass** over the window's rows in commit order (pages of
  :data:`PAGE` rows, no connection held between pages): the per-row checks (the content
  hash recomputed from the stored JSON, the id and the filter columns against the JSON,
  :func:`~ledger.report.hashes.verify_row`) and the per-call rules
  (:class:`~ledger.report.calls.CallPass`), fed with :class:`~ledger.report.calls.Fact`
  rows made from the columns and the JSON the check has just parsed (never a whole
  ``Event``; the members of calls only). A row with a problem is decoded as the
  readers decode it (the JSON is the truth); one that does not read back as an event is
  left out and listed, as the streaming build does.

Memory holds what the report lists (denials, approved actions, findings, runs) and one
entry per call of the window (to pair intents with results), never the events.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from ledger.errors import CorruptRecord, ValidationError
from ledger.integrity.checkpoint import TreeHead
from ledger.integrity.verify import LeafRow, LeafSource, VerifyResult, verify_ledger
from ledger.model.values import OUTSIDE_RUN_PREFIX, Actor, Approval, Kind, Verdict, outside_any_run
from ledger.report.calls import (
    CallPass,
    Fact,
    FactRef,
    approved_actions,
    in_time_order,
    look_across,
)
from ledger.report.document import ComplianceReport
from ledger.report.hashes import HashTally, with_unreadable
from ledger.report.model import TimeBucket
from ledger.report.timeline import buckets_of, layout
from ledger.sinks.base import Reader
from ledger.sinks.rows import FILTER_COLUMNS, from_micros, parse_row, to_micros
from ledger.sinks.sql import SQLReader, stored_json
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


class _Scan:
    """The one streaming pass over the window's rows: every row checked, each call's
    rows fed to the :class:`CallPass`, the events counted. A row with a problem counts
    as the streaming build counts it (by its JSON, or not at all when it does not read
    back): what SQL counted for it by its columns is taken back (``per_tool`` and the
    timeline's ``taken``) and what its JSON says is added (``added``)."""

    def __init__(self, state: CallPass, per_tool: dict[str, list[int]]) -> None:
        self.state = state
        self.per_tool = per_tool
        self.tally = HashTally()
        self.actors = _Actors()
        self.first: int | None = None
        self.last: int | None = None
        self.taken: list[tuple[int, bool]] = []  # (time_us, allowed) counted by SQL
        self.added: list[tuple[int, bool]] = []  # (time_us, allowed) as the JSON says

    def run(
        self, reader: SQLReader, where: list[Any], progress: Callable[[int], None] | None
    ) -> None:
        """Scan the window's rows (a seq range found through the time index)."""
        t = reader._table
        with reader._reading() as conn:
            bounds = sa.select(sa.func.min(t.c.seq), sa.func.max(t.c.seq)).where(*where)
            low, high = conn.execute(bounds).one()
        if low is None:
            return
        for row in _pages(reader, int(low) - 1, [*where, t.c.seq <= high], progress):
            self.one(row)

    def leaves(
        self,
        reader: SQLReader,
        window: tuple[int | None, int | None],
        progress: Callable[[int], None] | None,
    ) -> Iterator[LeafRow]:
        """Every row of the ledger as the log's check reads it, the rows of the
        ``window`` (``[since, until)`` in microseconds) scanned for the report on the way:
        one pass for the report and the tamper-evident log."""
        since, until = window
        for row in _pages(reader, -(1 << 62), [], progress):
            micros = row[_TIME]
            if (since is None or micros >= since) and (until is None or micros < until):
                self.one(row)
            raw, index = row[_TEXT], row[_LEAF]
            yield LeafRow(
                seq=int(row[0]),
                event_id=str(row[1]),
                leaf_index=None if index is None else int(index),
                data=raw if isinstance(raw, bytes) else str(raw).encode("utf-8"),
            )

    def _seen(self, micros: int) -> None:
        self.state.events += 1
        if self.first is None or micros < self.first:
            self.first = micros
        if self.last is None or micros > self.last:
            self.last = micros

    def one(self, row: Any) -> None:
        from ledger.report.hashes import verify_row

        event_id = row[1]
        text, stored = row[_TEXT], row[_HASH]
        found = dict(zip(FILTER_COLUMNS, row[_FILTERS], strict=True))
        obj, computed, problem = verify_row(event_id, text, stored, found)
        self.tally.add(event_id, row[2], stored, computed, problem)
        if not problem and stored is not None:  # the hash vouches for the JSON it was made of
            if _KINDS.get(row[_KIND]) not in _CALL_KINDS:
                self._seen(row[_TIME])
                return
            try:
                fact = _fact(row, obj, self.actors)
            except (ValidationError, TypeError, AttributeError, KeyError):
                pass  # a malformed member: decoded as the readers decode it, below
            else:
                self._seen(row[_TIME])
                self.state.add(fact)
                return
        self._take_back(row)
        try:
            event = parse_row(tuple(row[: _TEXT + 1]))  # seq, event_id, filters, event_json
        except CorruptRecord as exc:
            self.state.skipped.append(exc)
            return
        micros = to_micros(event.time)
        self._seen(micros)
        if event.kind is Kind.ACTION and not outside_any_run(event.run_id):
            allowed = event.verdict is Verdict.ALLOWED
            self.per_tool.setdefault(event.tool, [0, 0])[0 if allowed else 1] += 1
            self.added.append((micros, allowed))
        if event.kind in _CALL_KINDS:
            self.state.add(event)

    def _take_back(self, row: Any) -> None:
        """Undo what the SQL aggregates counted for ``row`` by its columns."""
        if row[_KIND] != Kind.ACTION.value or outside_any_run(row[2]):
            return
        allowed = row[_VERDICT] == Verdict.ALLOWED.value
        self.per_tool[row[_TOOL]][0 if allowed else 1] -= 1
        self.taken.append((row[_TIME], allowed))


# positions in a scanned row: seq, event_id, the FILTER_COLUMNS, event_json, content_hash,
# leaf_index
_KIND, _TOOL, _VERDICT, _TIME, _TEXT, _HASH, _LEAF = 4, 5, 6, 7, 9, 10, 11
_FILTERS = slice(2, 2 + len(FILTER_COLUMNS))


def _pages(
    reader: SQLReader, cursor: int, where: list[Any], progress: Callable[[int], None] | None
) -> Iterator[Any]:
    """The rows after ``cursor`` matching ``where`` in commit order, :data:`PAGE` at a
    time (no connection held between pages)."""
    t = reader._table
    columns = [t.c.seq, t.c.event_id, *(t.c[name] for name in FILTER_COLUMNS)]
    done = 0
    while True:
        with reader._reading() as conn:
            text = stored_json(t, conn.dialect.name)
            rows = conn.execute(
                sa.select(*columns, text, t.c.content_hash, t.c.leaf_index)
                .where(*where, t.c.seq > cursor)
                .order_by(t.c.seq)
                .limit(PAGE)
            ).all()
        yield from rows
        done += len(rows)
        if progress is not None and rows:
            progress(done)
        if len(rows) < PAGE:
            return
        cursor = rows[-1][0]


class _ReportLeaves:
    """The SQL sink as the log's check reads it, its rows scanned for the report as
    they go by (:meth:`_Scan.leaves`); everything else is the sink's own."""

    def __init__(self, reader: Any, rows: Callable[[], Iterator[LeafRow]]) -> None:
        self._reader = reader
        self._rows = rows
        self._read = False

    def leaf_rows(self) -> Iterator[LeafRow]:
        if self._read:  # a second reading (to name a finding) is a plain one
            yield from self._reader.leaf_rows()
            return
        self._read = True
        yield from self._rows()

    def stored_head(self) -> tuple[str, TreeHead] | None:
        head: tuple[str, TreeHead] | None = self._reader.stored_head()
        return head

    def stored_leaf_hashes(self) -> Iterator[tuple[int, bytes]]:
        hashes: Iterator[tuple[int, bytes]] = self._reader.stored_leaf_hashes()
        return hashes

    def checkpoint_notes(self) -> list[str]:
        return list(self._reader.checkpoint_notes())

    def stored_consistency_proof(self, old_size: int, new_size: int) -> tuple[bytes, ...] | None:
        proof: tuple[bytes, ...] | None = self._reader.stored_consistency_proof(old_size, new_size)
        return proof

    def count_rows(self) -> int:
        return int(self._reader.count_rows())


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
    reader: SQLReader, where: list[Any], scan: _Scan, start: datetime | None, end: datetime | None
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
    where = _window(reader._table, since, until)
    reader._check_open()
    state = CallPass(counting=False)
    per_tool = _per_tool(reader, where)
    scan = _Scan(state, per_tool)
    log_check: VerifyResult | None = None
    if isinstance(reader, LeafSource) and getattr(reader, "keeps_head", False):
        window = (
            None if since is None else to_micros(since, "since"),
            None if until is None else to_micros(until, "until"),
        )
        leaves = _ReportLeaves(reader, lambda: scan.leaves(reader, window, progress))
        log_check = verify_ledger(leaves, None)  # the stored tree and checkpoints, no keys
    else:
        scan.run(reader, where, progress)
    if progress is not None:
        progress(scan.tally.checked)
    for tool, (allowed, denied) in per_tool.items():
        if allowed or denied:
            stats = state.tool(tool)
            stats.actions, stats.denials = allowed, denied
    look_across(state, reader, since, until)
    runs = tuple(r for r in reader.runs(since=since, until=until) if not outside_any_run(r.run_id))
    oldest, newest = _held(reader)
    first = None if scan.first is None else from_micros(scan.first)
    last = None if scan.last is None else from_micros(scan.last)
    return ComplianceReport(
        generated_at=utc_now(),
        since=since,
        until=until,
        events=state.events,
        runs=runs,
        tools=tuple(sorted(state.tools.values(), key=lambda s: s.tool)),
        denials=tuple(sorted(state.denials, key=lambda d: (d.time, d.event_id))),
        missing_results=in_time_order(state.missing()),
        unsafe_without_intent=in_time_order(state.unsafe()),
        approved=tuple(approved_actions(state)),
        agents=tuple(sorted(state.agents.values(), key=lambda w: w.who)),
        principals=tuple(sorted(state.principals.values(), key=lambda w: w.who)),
        outside_runs=in_time_order(state.outside),
        ledger=shown_url(ledger) if ledger else "",
        oldest_record=oldest,
        newest_record=newest,
        hash_check=with_unreadable(scan.tally.result(), state.skipped),
        timeline=_timeline(reader, where, scan, since or first, until or last),
        log_check=log_check,
    )

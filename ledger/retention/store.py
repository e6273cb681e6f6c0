"""Retention on a SQL ledger: the policy, legal holds, erasure and vacuum.

>>> from ledger.sinks import open_sink
>>> with open_sink("sqlite:///ledger.db") as sink:                    # doctest: +SKIP
...     r = Retention(sink)
...     r.set_policy(keep="400d", floor="180d", by="dpo", reason="records policy v3")
...     hold = r.add_hold(run_id="r-17", reason="litigation 2026-044", by="legal")
...     plan = r.erase(Selection.of_run("r-12"), reason="GDPR Art. 17 #42", by="dpo",
...                    dry_run=True)
...     done = r.erase(Selection.of_run("r-12"), reason="GDPR Art. 17 #42", by="dpo")

Every change runs in **one transaction** that holds the writers' lock of the Merkle log
(SQLite ``BEGIN IMMEDIATE``, the tree head row ``FOR UPDATE`` on PostgreSQL): the checks
(floor, holds, the selection), the tombstones, and the retention run that records the
change (:mod:`ledger.retention.records`) as new leaves of the log. A crash at any point
leaves all of it or none of it. A refused request raises ``RetentionError`` (a rule) or
``ValidationError`` (bad input) and changes nothing.

Erasure streams: the selected rows are read in pages of :data:`PAGE` by ``seq`` inside the
transaction, each page's tombstones written before the next is read, so memory does not
grow with the number of rows. Each tombstone keeps the leaf hash the log stored for the
row (its level-0 node); a row whose bytes no longer match that leaf was changed outside
the ledger, and erasing it would hide the tampering, so the erasure is refused.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import sqlalchemy as sa
from ulid import ULID

from ledger.canonical import canonical_bytes
from ledger.errors import IntegrityError, LedgerError, RetentionError, ValidationError
from ledger.ids import coerce_event_id
from ledger.integrity._keytext import b64encode
from ledger.integrity.merkle import leaf_hash
from ledger.integrity.note import NoteSigner, Verifier
from ledger.integrity.policy_change import false_signature, signed_by, signed_here
from ledger.model.erasure import ALL_FIELDS, ERASE_TOOL, tombstone_of
from ledger.model.event import Event
from ledger.model.sealed import ENVELOPE_HEAD, ENVELOPE_HEAD_IN_TEXT, is_envelope
from ledger.model.shown import shows_as_is
from ledger.retention.records import (
    ADMIN_RUN_PREFIX,
    HOLD_ADD_TOOL,
    HOLD_RELEASE_TOOL,
    POLICY_TOOL,
    RetentionRun,
    is_admin_run,
)
from ledger.retention.rules import (
    Hold,
    Policy,
    change_kind,
    parse_date,
    reason_or_default,
    refuse,
    require_reason,
    require_text,
    visible_text,
)
from ledger.retention.tables import retention_tables
from ledger.retention.tombstones import TombstoneMaker
from ledger.sinks.rows import (
    content_hash,
    event_row,
    from_micros,
    stated_micros,
    to_micros,
)
from ledger.sinks.shred import SEALED_FIELDS, shred_tables
from ledger.sinks.sql import fetch_all
from ledger.sinks.tree import NUMBERED_COLUMNS, TreeTables, number_rows, raise_time_high
from ledger.timefmt import (
    format_duration,
    format_time,
    format_time_us,
    parse_duration,
    parse_time,
    utc_now,
)

__all__ = [
    "PAGE",
    "ErasureOutcome",
    "ErasureRecord",
    "PolicyState",
    "Retention",
    "Selected",
    "Selection",
    "operator",
]

log = logging.getLogger(__name__)

PAGE = 1000
_SECOND = timedelta(seconds=1)


RECORD_TOOLS = frozenset((ERASE_TOOL, POLICY_TOOL, HOLD_ADD_TOOL, HOLD_RELEASE_TOOL))
"""The tools of the retention records the ledger appends to its own log."""


def _actor(by: object) -> str:
    """Who a retention change is recorded as made by: ``by`` stripped, else
    :func:`operator`; ``ValidationError`` for a blank name or one with a control
    character (a line break would forge a line in the listings), wherever it came from."""
    if by is None:
        return operator()
    if not isinstance(by, str) or not by.strip():
        raise ValidationError(
            "--by: say who is acting (a name, e.g. 'dpo@example.com'), or leave it out for "
            "$LEDGER_OPERATOR or the login name; nothing was changed"
        )
    return _name(by, "--by")


_MAX_NAME = 200  # the longest name of who acts, in characters


def _name(text: str, what: str) -> str:
    require_text(text, what)  # not UTF-8 (a lone surrogate) is said as such
    if not shows_as_is(text):  # a line break of any kind, a control, a bidi override
        raise ValidationError(
            f"{what}: {text!r} holds a control character or a line break; nothing was changed"
        )
    if not visible_text(text):  # only characters that show nothing
        raise ValidationError(
            f"{what}: {text!r} shows nothing; say who is acting (a name, e.g. "
            "'dpo@example.com'); nothing was changed"
        )
    if len(text.strip()) > _MAX_NAME:
        raise ValidationError(
            f"{what}: {len(text.strip()):,} characters; a name is at most {_MAX_NAME}; "
            "nothing was changed"
        )
    return text.strip()


def operator() -> str:
    """Who is acting: ``$LEDGER_OPERATOR``, else the login name (each refused with a
    control character, as ``--by`` is)."""
    name = os.environ.get("LEDGER_OPERATOR", "").strip()
    if name:
        return _name(name, "$LEDGER_OPERATOR")
    try:
        return _name(getpass.getuser(), "the login name")
    except (KeyError, OSError):
        return "unknown"


# --- values -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyState:
    """The policy in force, with its version and record."""

    policy: Policy
    version: int
    record_id: str
    set_at: datetime
    set_by: str
    reason: str
    signed_by: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Stable field names (``ledger retention show --json``)."""
        return {
            **self.policy.to_dict(),
            "version": self.version,
            "record": self.record_id,
            "set_at": format_time_us(self.set_at),
            "set_by": self.set_by,
            "reason": self.reason,
            "signed_by": self.signed_by,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """What an erasure selects: a run, everything before a time, or events by id.
    Retention runs (the records themselves) are never selected."""

    run_id: str | None = None
    before: datetime | None = None
    event_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.event_ids:  # as of_events reads them: one id alone, any iterable, any case
            given: Any = self.event_ids
            ids = (given,) if isinstance(given, str | ULID) else given
            unique = dict.fromkeys(str(coerce_event_id(i, field="--event")) for i in ids)
            object.__setattr__(self, "event_ids", tuple(unique))
        given = sum((self.run_id is not None, self.before is not None, bool(self.event_ids)))
        if given != 1:
            raise ValidationError(
                "select exactly one of: a run (--run RUN_ID), a date (--before DATE), or "
                "event ids (--event ID, repeatable)"
            )
        if self.run_id is not None and (not isinstance(self.run_id, str) or not self.run_id):
            raise ValidationError(
                f"--run: expected a run id (text), got {self.run_id!r}"
                if not isinstance(self.run_id, str)
                else "--run: the run id is empty"
            )
        if self.run_id is not None:
            require_text(self.run_id, "--run")
        if self.before is not None:
            if not isinstance(self.before, datetime):
                raise ValidationError(
                    f"--before: expected a datetime, got {type(self.before).__name__} (read "
                    "a date with ledger.retention.parse_date)"
                )
            if self.before.tzinfo is None:
                raise ValidationError(
                    "--before: a naive datetime has no time zone; give an aware one (e.g. "
                    "tzinfo=UTC)"
                )

    @classmethod
    def of_run(cls, run_id: str) -> Selection:
        """Every event of ``run_id``."""
        return cls(run_id=run_id)

    @classmethod
    def older_than(cls, before: datetime | str) -> Selection:
        """Every event with a time before ``before`` (outside retention runs): an aware
        datetime, or text as ``ledger erase --before`` takes it (``2026-01-31``, midnight
        UTC, or an RFC 3339 time; :func:`parse_date`).

        >>> Selection.older_than("2025-01-01").describe()
        'events before 2025-01-01T00:00:00Z'
        """
        if isinstance(before, str):
            before = parse_date(before, what="before")
        return cls(before=before)

    @classmethod
    def of_events(cls, ids: Sequence[str | ULID]) -> Selection:
        """The events ``ids`` (each once, however often given; one id alone counts as
        one event, not as its letters)."""
        given: Any = ids  # read (one id alone, any iterable, any case) by __post_init__
        return cls(event_ids=given)

    def describe(self) -> str:
        """``run r1`` / ``events before 2026-01-01T00:00:00Z`` / ``3 event(s)``."""
        if self.run_id is not None:
            return f"run {self.run_id}"
        if self.before is not None:
            return f"events before {format_time(self.before)}"
        return f"{len(set(self.event_ids))} event(s) by id"

    def to_dict(self) -> dict[str, Any]:
        """The selection as the erasure record states it."""
        if self.run_id is not None:
            return {"run_id": self.run_id}
        if self.before is not None:
            return {"before": format_time(self.before)}
        return {"event_ids": list(self.event_ids)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Selected:
    """One event an erasure selects (what ``--dry-run`` lists)."""

    event_id: str
    run_id: str
    kind: str
    tool: str
    time: datetime
    leaf_index: int
    already: bool  # already erased (these fields): left as it is

    def to_dict(self) -> dict[str, Any]:
        """Stable field names."""
        return {
            "event_id": self.event_id,
            "run_id": self.run_id,
            "kind": self.kind,
            "tool": self.tool,
            "time": format_time_us(self.time),
            "leaf_index": self.leaf_index,
            "already_erased": self.already,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ErasureOutcome:
    """What an erasure did (or, with ``dry_run``, would do)."""

    selection: Selection
    fields: tuple[str, ...]
    erased: int
    already: int
    dry_run: bool
    record_id: str | None = None
    digest: str = ""
    shredded: bool = False  # the run's data key destroyed (a crypto-shredding ledger)

    def to_dict(self) -> dict[str, Any]:
        """Stable field names (``ledger erase --json``)."""
        return {
            "selection": self.selection.to_dict(),
            "fields": list(self.fields),
            "erased": self.erased,
            "already_erased": self.already,
            "dry_run": self.dry_run,
            "record": self.record_id,
            "digest": self.digest,
            "shredded": self.shredded,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ErasureRecord:
    """One erasure as the ledger's index keeps it."""

    record_id: str
    at: datetime
    by: str
    reason: str
    selection: dict[str, Any]
    fields: tuple[str, ...]
    events: int
    digest: str
    policy_version: int

    def to_dict(self) -> dict[str, Any]:
        """Stable field names."""
        return {
            "record": self.record_id,
            "at": format_time_us(self.at),
            "by": self.by,
            "reason": self.reason,
            "selection": self.selection,
            "fields": list(self.fields),
            "events": self.events,
            "digest": self.digest,
            "policy_version": self.policy_version,
        }


@dataclass(slots=True)
class _Txn:
    """One retention transaction on a connection holding the writers' lock."""

    conn: sa.Connection
    now: datetime
    pending: list[Event] = field(default_factory=list)


# --- the service -------------------------------------------------------------------------


CLIPPED = frozenset(("args", "result"))
"""The fields an event's ``preview`` clips: erasing both erases the preview too."""


class Retention:
    """Retention, holds and erasure over a SQL sink (``SQLiteSink`` or ``PostgresSink``).

    ``clock`` gives "now" (the time of the records, the floor's cutoff); it is never
    taken later than the wall clock, so no clock lets an erasure into the floor.
    """

    def __init__(self, sink: Any, *, clock: Callable[[], datetime] = utc_now) -> None:
        if not hasattr(sink, "_tree_writing") or not hasattr(sink, "_trees"):
            raise ValidationError(
                f"retention needs a SQL ledger (sqlite:/// or postgresql://), not {sink!r}: "
                "a JSONL file cannot be erased in place"
            )
        self._sink = sink
        self._schema: str | None = getattr(sink, "schema", None)
        self._events: sa.Table = sink._table
        self._trees: TreeTables = sink._trees
        self._t = retention_tables(self._schema)
        shred = shred_tables(self._schema)
        self._keys, self._mode = shred.keys, shred.mode
        self._clock = clock
        self._logged_queries: dict[tuple[str, ...], Any] = {}

    # --- plumbing ---------------------------------------------------------------

    def _writing(self) -> AbstractContextManager[sa.Connection]:
        writing: AbstractContextManager[sa.Connection] = self._sink._tree_writing()
        return writing

    def _reading(self) -> AbstractContextManager[sa.Connection]:
        reading: AbstractContextManager[sa.Connection] = self._sink._reading()
        return reading

    @contextmanager
    def _looking(self) -> Iterator[sa.Connection]:
        """One snapshot of the ledger, read without the writers' lock: what a dry run
        reads (it changes nothing, so writers need not wait for it). SQLite: a deferred
        transaction; PostgreSQL: ``REPEATABLE READ, READ ONLY`` (on a caller's connection,
        its own transaction as it is)."""
        with self._reading() as conn:
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("BEGIN")
                try:
                    yield conn
                finally:
                    conn.exec_driver_sql("ROLLBACK")
                return
            if not conn.in_transaction():
                conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn

    def _now(self, conn: sa.Connection) -> datetime:
        """The time of a retention change made in ``conn``'s transaction. Never later
        than the wall clock, nor on PostgreSQL than the database server's (a clock
        ahead would move the floor's cutoff forward and let a caller erase what the floor
        protects), and never earlier than the latest retention record (a clock behind
        would date a change before the ones it follows, and the report would show it in
        a period it was not made in)."""
        wall = utc_now()
        if conn.dialect.name == "postgresql":  # the server's, not only this host's
            server = conn.exec_driver_sql("SELECT statement_timestamp()").scalar_one()
            if isinstance(server, datetime) and server.tzinfo is not None:
                wall = min(wall, server.astimezone(UTC))
        told = self._clock()
        if not isinstance(told, datetime) or told.tzinfo is None:
            raise ValidationError(
                f"Retention(clock=...) returned {told!r}: it must return a datetime with a "
                "time zone (e.g. datetime.now(UTC)); nothing was changed"
            )
        now = min(told.astimezone(UTC), wall)
        t = self._events
        latest = conn.execute(
            sa.select(sa.func.max(t.c.time_us)).where(*_admin_runs(t.c.run_id))
        ).scalar()
        if isinstance(latest, int) and latest > to_micros(now):
            after = min(from_micros(latest), wall)
            if after > now:
                log.info("the clock reads %s, before the latest retention record: %s used",
                         format_time(now), format_time(after))  # fmt: skip
                now = after
        return now

    def _append(self, txn: _Txn, events: list[Event]) -> None:
        """Append ``events`` to the log inside ``txn``: rows numbered from the head's
        size, each with the tree nodes it completes, then the new head."""
        conn = txn.conn
        frontier = self._sink._tree_frontier(conn)
        if conn.dialect.name == "postgresql":  # commit order for tailing readers
            conn.execute(sa.text("SELECT pg_advisory_xact_lock_shared(:k)"), {"k": self._sink._key})
        rows = number_rows(frontier, list(map(event_row, events)))
        numbered = raise_time_high(conn, self._sink._trees.events, rows)
        conn.execute(
            self._events.insert(), [dict(zip(NUMBERED_COLUMNS, r, strict=True)) for r in numbered]
        )
        self._sink._tree_moved(conn, frontier)

    def policy(self) -> PolicyState | None:
        """The policy in force, or None when none was ever set."""
        with self._reading() as conn:
            return self._policy(conn)

    def policies(self) -> list[PolicyState]:
        """Every version of the policy, oldest first."""
        p = self._t.policy
        with self._reading() as conn:
            rows = conn.execute(sa.select(p).order_by(p.c.version)).all()
        return [self._policy_state(r) for r in rows]

    def _policy(self, conn: sa.Connection) -> PolicyState | None:
        p = self._t.policy
        row = conn.execute(sa.select(p).order_by(p.c.version.desc()).limit(1)).first()
        return None if row is None else self._policy_state(row)

    def _logged(
        self,
        conn: sa.Connection,
        tools: Sequence[str] = tuple(RECORD_TOOLS),
        records: list[tuple[str, str, Any]] | None = None,
    ) -> list[tuple[str, str, Any]]:
        """(event id, tool, args) of the retention records of ``tools`` in the log, in
        log order: the proof the retention tables are an index of. ``records``, when
        given, is every record as this returned it earlier in the same transaction
        (read once where the policy, the holds and the erasures are checked).

        The rows of the retention runs are read twice over: by the ``run_id`` index (the
        range of the reserved prefix) and by the ``tool`` index (the records' tools),
        the prefix checked exactly by ``substr`` in both, so a collation that orders
        punctuation its own way loses nothing; a run found only by its record is read
        whole by its id. Every row is checked: its bytes are the leaf the log committed,
        its ``run_id``, ``kind`` and ``tool`` columns are what its JSON says, and a run
        that carries a retention tool holds exactly one record (an ``action`` of it). A
        record hidden by an edited column (so that a hold or a raised floor would not be
        found) is refused as tampering; one whose every row's run column was rewritten
        is beyond what the columns can show, and ``ledger verify``, which reads every
        row, reports the erasures it let through. A run of the reserved prefix that
        carries no retention tool (written before writers were refused the prefix, or
        copied from such a ledger) is no record and is left alone."""
        if records is not None:
            return [r for r in records if r[1] in tools]
        by_run, by_tool, of_runs = self._logged_sql()
        rows = {r[0]: r for r in fetch_all(conn, by_run)}
        found = {str(r[2]) for r in rows.values()}
        missed = sorted({str(r[0]) for r in fetch_all(conn, by_tool)} - found)
        for start in range(0, len(missed), 500):  # a collation that broke the range
            for r in fetch_all(conn, of_runs, {"runs": missed[start : start + 500]}):
                rows[r[0]] = r
        wanted = set(tools)
        actions: dict[str, int] = {}
        marked: set[str] = set()
        out: list[tuple[int, str, str, Any]] = []
        for seq, event_id, run_id, kind, tool, text, leaf in rows.values():
            data = str(text).encode("utf-8")
            if leaf is None or leaf_hash(data) != bytes(leaf):
                raise _tampered(
                    f"retention record row {event_id}: its stored bytes no longer match the "
                    "leaf the log committed"
                )
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError:
                obj = None
            if type(obj) is not dict or (
                obj.get("run_id"),
                obj.get("kind"),
                obj.get("tool", ""),
            ) != (run_id, kind, tool):
                raise _tampered(
                    f"retention record row {event_id}: its run_id, kind or tool column is not "
                    "what its committed JSON says"
                )
            if tool not in RECORD_TOOLS:
                continue
            marked.add(str(run_id))
            if kind != "action":  # the record's tool_result carries the same tool
                continue
            actions[str(run_id)] = actions.get(str(run_id), 0) + 1
            if tool in wanted:
                out.append((int(seq), str(event_id), str(tool), obj.get("args")))
        hollow = sorted(run for run in marked if actions.get(run, 0) != 1)
        if hollow:
            raise _tampered(
                f"retention run {hollow[0]} does not hold exactly one record action (a row's "
                "run_id column was changed)"
            )
        return [(event_id, tool, args) for _, event_id, tool, args in sorted(out)]

    def _logged_sql(self) -> tuple[Any, Any, Any]:
        """The three queries of :meth:`_logged`, built once (building costs more than
        running them)."""
        found = self._logged_queries.get(())
        if found is None:
            t = self._events
            columns = (
                t.c.seq,
                t.c.event_id,
                t.c.run_id,
                t.c.kind,
                t.c.tool,
                t.c.event_json,
                sa.func.substr(t.c.nodes, 1, 32),
            )
            prefix = _admin(t.c.run_id)
            by_run = sa.select(*columns).where(*_admin_runs(t.c.run_id))
            # no "kind = 'action'" here: SQLite would pick the kind index and walk every
            # action of the ledger; the tool index finds the few rows
            by_tool = sa.select(t.c.run_id).where(t.c.tool.in_(sorted(RECORD_TOOLS)), prefix)
            of_runs = sa.select(*columns).where(
                t.c.run_id.in_(sa.bindparam("runs", expanding=True))
            )
            found = self._logged_queries[()] = (by_run, by_tool, of_runs)
        return found

    def _trusted_policy(
        self, conn: sa.Connection, records: list[tuple[str, str, Any]] | None = None
    ) -> PolicyState | None:
        """The policy in force, checked against the policy records in the log: every
        change that lowered the floor (or changed the keys) signed by a key of the
        policy before it, and the table's latest version the log's latest record. A
        table changed outside the ledger (a floor lowered, a key added, a version
        deleted by SQL) is refused, so nothing is erased under a policy nobody set."""
        state = self._policy(conn)
        previous: Policy | None = None
        last: tuple[str, Any] | None = None
        history: list[tuple[str, Any, Policy]] = []
        for event_id, _tool, record in self._logged(conn, [POLICY_TOOL], records):
            if not isinstance(record, dict):
                raise _tampered(f"policy record {event_id} is not a policy change")
            try:
                policy = Policy(
                    keep=parse_duration(str(record["keep"])),
                    floor=parse_duration(str(record["floor"])),
                    keys=tuple(record.get("keys") or ()),
                )
            except (KeyError, ValidationError) as exc:
                raise _tampered(f"policy record {event_id} is malformed ({exc})") from None
            if change_kind(previous, policy) == "lower":
                assert previous is not None
                if not signed_by(record, previous.keys):
                    raise _tampered(
                        f"policy record {event_id} (version {record.get('version')}) lowers "
                        "the floor or changes the policy keys without a valid signature by "
                        "a key of the policy before it"
                    )
                assert last is not None
                if not signed_here(record, last[0]):
                    raise _tampered(
                        f"policy record {event_id} (version {record.get('version')}) lowers "
                        "the floor or changes the policy keys with a signature made for "
                        "another ledger's policy (its record was copied into this log)"
                    )
            if false_signature(record, previous.keys if previous else (), policy.keys):
                raise _tampered(
                    f"policy record {event_id} (version {record.get('version')}) carries a "
                    "signature that no key of the policy before or after it made (the "
                    "ledger never writes one: it would be shown as signed by a key that did "
                    "not sign it)"
                )
            previous, last = policy, (event_id, record)
            history.append((event_id, record, policy))
        if last is None and state is None:
            return None
        if last is not None and state is None:
            raise refuse(
                f"the log holds retention policy records (the last: {last[0]}) but the "
                "retention_policy table is empty: the tables were emptied outside the "
                "ledger, or this ledger was made by `ledger db copy` from a JSONL file, "
                "which has no tables to carry; nothing can be erased here until they are "
                "restored (erase in the original ledger)"
            )
        if last is None or state is None:
            raise _tampered(
                "the retention policy table and the policy records in the log disagree "
                f"(table: {'none' if state is None else f'version {state.version}'}, log: "
                f"{'none' if last is None else f'record {last[0]}'})"
            )
        event_id, record = last
        assert previous is not None
        said, table = _policy_said(event_id, record, previous), _policy_said_by(state)
        if said[:3] + said[6:] != table[:3] + table[6:]:  # id, version, policy, signed by
            raise _tampered(
                f"the retention policy table (version {state.version}: keep "
                f"{format_duration(state.policy.keep)}, floor "
                f"{format_duration(state.policy.floor)}) is not the policy the log records "
                f"last (record {event_id}: version {record.get('version')}, keep "
                f"{record.get('keep')}, floor {record.get('floor')})"
            )
        p = self._t.policy
        versions = [self._policy_state(r) for r in conn.execute(sa.select(p).order_by(p.c.version))]
        if len(versions) != len(history) or any(
            _policy_said(*logged) != _policy_said_by(v)
            for logged, v in zip(history, versions, strict=False)
        ):
            raise _tampered(
                "the retention policy table's history (when, by whom, why, keep and floor of "
                "each version) is not the policy records' in the log"
            )
        return state

    def tables_changed(self, *, scan: bool = True) -> str:
        """Why the retention tables are not what the log's retention records say (a
        policy, hold, erasure or data key row changed by SQL: what :class:`TablesChanged`
        refuses erasures for), or "" when they agree. What the compliance report checks before
        it shows the tables. The log and the tables are read in one snapshot, so a
        change committed meanwhile (an erasure, a hold) is seen in both or in neither.

        ``scan`` also reads the events of a crypto-shredding ledger for runs whose data
        key row was deleted (a pass over every row: what ``ledger verify``, which reads
        every row anyway, asks for; the report, ``retention show`` and ``hold list`` do
        not)."""
        found = []
        with self._reading() as conn:
            _snapshot(conn)
            try:
                logged = self._logged(conn)
            except RetentionError as exc:  # a record row changed: no table can agree
                what = exc.what if isinstance(exc, TablesChanged) else ""
                return what or str(exc).removesuffix("; nothing was changed")
            for check in (
                self._trusted_policy,
                self._trusted_holds,
                self._trusted_erasures,
                self._trusted_keys,
                *((self._kept_keys,) if scan else ()),
            ):
                try:
                    check(conn, logged)
                except RetentionError as exc:  # a table changed, or emptied (or a copy
                    # from JSONL, which carries no tables: what it shows is not the log's)
                    what = exc.what if isinstance(exc, TablesChanged) else ""
                    found.append(what or str(exc).removesuffix("; nothing was changed"))
                except (LedgerError, sa.exc.DBAPIError) as exc:  # a table dropped, say
                    if not logged:
                        raise  # no retention record: a ledger that never had the tables
                    found.append(f"the retention tables cannot be read ({exc})")
        return "; ".join(found)

    def _trusted_holds(
        self, conn: sa.Connection, records: list[tuple[str, str, Any]] | None = None
    ) -> list[Hold]:
        """The standing holds, checked against the hold records in the log: every hold
        the log placed must be in the table as placed (scope, reason, who, when) and, as
        the log says, standing or released (when, by whom, why, by which record), and
        every hold of the table must be one the log placed. A hold released, put back,
        deleted, narrowed, added or re-attributed by SQL is refused: the report shows
        the table's holds, their reasons and their times."""
        rows = {str(r.hold_id): r for r in conn.execute(sa.select(self._t.holds))}
        placed: dict[str, dict[str, Any]] = {}
        released: dict[str, tuple[str, dict[str, Any]]] = {}
        holding = [HOLD_ADD_TOOL, HOLD_RELEASE_TOOL]
        for event_id, tool, record in self._logged(conn, holding, records):
            if not isinstance(record, dict) or not isinstance(record.get("hold"), str):
                raise _tampered(f"hold record {event_id} is malformed")
            if tool == HOLD_ADD_TOOL:
                placed[record["hold"]] = record
            else:
                released.setdefault(record["hold"], (event_id, record))
        forged = sorted(set(rows) - set(placed))
        if forged:
            raise _tampered(
                f"the holds table holds {forged[0]}, which no hold record in the log placed"
            )
        holds: list[Hold] = []
        for hold_id, record in placed.items():
            row = rows.get(hold_id)
            hold = None if row is None else _hold(row)
            scope = {k: record.get(k) for k in ("run_id", "since", "until") if k in record}
            if row is None or hold is None or _hold_scope(hold) != scope:
                raise _tampered(
                    f"legal hold {hold_id} ({record.get('covers', '?')}) was placed in the "
                    "log but is not, or not as placed, in the holds table"
                )
            said = _said(record, hold.reason, hold.created_by, row.created_us)
            ended = released.get(hold_id)
            if ended is None:
                said = said and hold.active and row.release_record is None
            else:
                release_id, ending = ended
                said = (
                    said
                    and not hold.active
                    and row.release_record == release_id
                    and _said(ending, hold.release_reason, hold.released_by, row.released_us)
                )
            if not said:
                raise _tampered(
                    f"legal hold {hold_id} ({record.get('covers', '?')}): the holds table "
                    "says other than the log's hold records of who placed it, when and why, "
                    "or whether, when, by whom and why it was released"
                )
            if hold.active:
                holds.append(hold)
        return holds

    def _trusted(self, conn: sa.Connection) -> tuple[list[Any], PolicyState | None, list[Hold]]:
        """The log's retention records, the policy in force and the standing holds, with
        every retention table checked against the log: what each retention change
        (policy, hold, erasure) reads first, so none is made on tables SQL changed."""
        logged = self._logged(conn)
        state = self._trusted_policy(conn, logged)
        holds = self._trusted_holds(conn, logged)
        self._trusted_erasures(conn, logged)
        self._trusted_keys(conn, logged)
        return logged, state, holds

    def _trusted_erasures(
        self, conn: sa.Connection, records: list[tuple[str, str, Any]] | None = None
    ) -> None:
        """Check the erasures table against the erasure records in the log: one row per
        record, each saying what its record says (when, by whom, why, the selection,
        the fields, the count, the digest, the policy version). A row deleted, added or
        changed by SQL is refused: the report lists the table's rows, so a deleted one
        would hide an erasure from the period it belongs to."""
        e = self._t.erasures
        query = sa.select(e.c.record_id, *(e.c[name] for name in _ERASURE_COLUMNS))
        table = {str(r[0]): r[1:] for r in fetch_all(conn, query)}
        for event_id, _tool, record in self._logged(conn, [ERASE_TOOL], records):
            row = table.pop(event_id, None)
            if row is None:
                raise _tampered(
                    f"erasure record {event_id} stands in the log but not in the erasures table"
                )
            said = _logged_erasure(record) if isinstance(record, dict) else None
            if said is None or said != _erasure_row(row):
                raise _tampered(
                    f"the erasures table's row {event_id} is not what the log's erasure record says"
                )
        if table:
            raise _tampered(
                f"the erasures table holds {min(table)}, which no erasure record in the log made"
            )

    def _trusted_keys(
        self, conn: sa.Connection, records: list[tuple[str, str, Any]] | None = None
    ) -> None:
        """Check the destroyed data keys of a crypto-shredding ledger (``run_keys``)
        against the erasure records in the log: a key is destroyed exactly when an
        erasure record says it destroyed it (``shredded``), with that record's id,
        reason, actor and time (what readers show as the erasure). A key destroyed by
        SQL (a run's payloads made unreadable inside the floor or under a hold, with no
        erasure), or put back (a shredded run readable again), is refused."""
        k = self._keys
        mode = self._mode
        if (
            conn.execute(sa.select(mode.c.scheme).limit(1)).first() is None
            and conn.execute(sa.select(k.c.run_id).limit(1)).first() is not None
        ):
            raise _tampered(
                "the run_keys table holds data keys but the payload_mode row is gone: the "
                "ledger was created with crypto-shredding and the row recording it was "
                "deleted outside the ledger (a writer would store new payloads in clear)"
            )
        claimed: dict[str, tuple[str, dict[str, Any]]] = {}
        for event_id, _tool, record in self._logged(conn, [ERASE_TOOL], records):
            shredded = record.get("shredded") if isinstance(record, dict) else None
            if isinstance(shredded, dict) and isinstance(shredded.get("run_id"), str):
                claimed[shredded["run_id"]] = (event_id, record)
        gone = conn.execute(
            sa.select(
                k.c.run_id,
                k.c.record_id,
                k.c.reason,
                k.c.destroyed_by,
                k.c.destroyed_us,
                k.c.wrapped.is_(None).label("unwrappable"),
            )
            .where(sa.or_(k.c.destroyed_us.is_not(None), k.c.wrapped.is_(None)))
            .order_by(k.c.run_id)
        ).all()
        for row in gone:
            said = claimed.pop(str(row.run_id), None)
            if said is None:
                raise _tampered(
                    f"the data key of run {row.run_id!r} is destroyed in the run_keys table, "
                    "but no erasure record in the log destroyed it"
                )
            event_id, record = said
            if not row.unwrappable:  # the key is there again
                raise _tampered(
                    f"erasure record {event_id} destroyed the data key of run "
                    f"{row.run_id!r}, but the run_keys table holds it again (put back outside "
                    "the ledger: the erased payloads can be read)"
                )
            if row.destroyed_us is None:
                raise _tampered(
                    f"erasure record {event_id} destroyed the data key of run "
                    f"{row.run_id!r}, but the run_keys table no longer says when (changed "
                    "outside the ledger)"
                )
            try:
                at: int | None = to_micros(parse_time(str(record.get("at"))))
            except ValidationError:
                at = None
            stored = (row.record_id, row.reason, row.destroyed_by, row.destroyed_us)
            if stored != (event_id, record.get("reason"), record.get("by"), at):
                raise _tampered(
                    f"the run_keys table says the data key of run {row.run_id!r} was "
                    f"destroyed by {row.record_id!r} ({row.reason!r}), which is not what "
                    f"erasure record {event_id} says"
                )
        if claimed:
            run_id, (event_id, _record) = min(claimed.items())
            raise _tampered(
                f"erasure record {event_id} destroyed the data key of run {run_id!r}, but "
                "the run_keys table holds it again, or no longer holds its row (put back "
                "or deleted outside the ledger)"
            )

    def _kept_keys(
        self, conn: sa.Connection, records: list[tuple[str, str, Any]] | None = None
    ) -> None:
        """In a crypto-shredding ledger, refuse a run whose rows hold sealed payloads but
        whose data key row is gone (deleted by SQL: its payloads lost with no erasure).
        One scan of the events for the envelope's text (what ``ledger verify`` pays
        anyway); the runs it finds (none in an intact ledger but those whose other
        fields quote an envelope) are read to check that their rows really hold an
        envelope in a sealed field. Not run before each erasure (it
        would scan the ledger); :meth:`tables_changed` runs it for ``ledger verify``."""
        del records  # the run keys are checked against the log by _trusted_keys
        t, k = self._events, self._keys
        mode = self._mode
        stated = conn.execute(sa.select(mode.c.key_id).limit(1)).first()
        if stated is None and conn.execute(sa.select(k.c.run_id).limit(1)).first() is None:
            return  # a ledger in clear (a lost mode row: _trusted_keys says so)
        if stated is not None:
            other = conn.execute(
                sa.select(k.c.run_id, k.c.key_id).where(k.c.key_id != stated[0]).limit(1)
            ).first()
            if other is not None:
                raise _tampered(
                    f"the data key of run {other[0]!r} is wrapped by key {other[1]!r}, but "
                    f"the payload_mode row names key {stated[0]!r} (one of them was changed "
                    "outside the ledger)"
                )
        payloads = getattr(self._sink, "_payloads", None)
        lost = None if payloads is None else payloads.unopenable(conn)
        if lost is not None:
            raise _tampered(
                f"the data key of run {lost!r} in the run_keys table does not open with the "
                "payload key: it was changed outside the ledger, and the run's payloads are "
                "lost with no erasure record"
            )
        marks = (ENVELOPE_HEAD, ENVELOPE_HEAD_IN_TEXT)  # as args/result, as a preview
        keyless = (
            sa.select(t.c.run_id)
            .where(
                sa.or_(*(t.c.event_json.contains(m, autoescape=True) for m in marks)),
                ~sa.exists().where(k.c.run_id == t.c.run_id),
                _not_admin(t.c.run_id),
            )
            .distinct()
        )
        for (run_id,) in conn.execute(keyless).all():
            for (text,) in conn.execute(sa.select(t.c.event_json).where(t.c.run_id == run_id)):
                try:
                    obj = orjson.loads(str(text))
                except orjson.JSONDecodeError:
                    continue
                if isinstance(obj, dict) and any(
                    is_envelope(_field_text(obj.get(name), name)) for name in SEALED_FIELDS
                ):
                    raise _tampered(
                        f"run {run_id!r} holds encrypted payloads but the run_keys table "
                        "holds no data key for it (its row was deleted outside the ledger, "
                        "with no erasure record)"
                    )

    @staticmethod
    def _policy_state(row: Any) -> PolicyState:
        """A row of the policy table; one holding what the ledger never writes (a keep
        that is no whole number of hours, text where JSON belongs: SQL's doing) is
        refused as a changed table, not as the caller's input."""
        try:
            signature = json.loads(row.signature) if row.signature else None
            return PolicyState(
                policy=Policy(
                    keep=int(row.keep_s) * _SECOND,
                    floor=int(row.floor_s) * _SECOND,
                    keys=tuple(json.loads(row.keys)),
                ),
                version=int(row.version),
                record_id=str(row.record_id),
                set_at=from_micros(int(row.set_us)),
                set_by=str(row.set_by),
                reason=str(row.reason),
                signed_by=f"{signature['name']}+{signature['key_id']}" if signature else "",
            )
        except (ValidationError, ValueError, TypeError, KeyError, OverflowError) as exc:
            raise _tampered(
                f"the retention policy table's version {row.version!r} cannot be read ({exc})"
            ) from None

    def set_policy(
        self,
        *,
        keep: str | timedelta,
        floor: str | timedelta | None = None,
        keys: Sequence[str] | None = None,
        signer: NoteSigner | None = None,
        reason: str | None = None,
        by: str | None = None,
    ) -> PolicyState:
        """Set the retention policy (a new version, recorded in the log).

        ``floor`` defaults to the current floor (0 for a first policy); ``keys`` (verifier
        key texts) to the current policy keys. Raising the floor is free; lowering it,
        or changing the keys once some are set, needs ``signer`` to be one of the
        current policy's keys (``RetentionError`` otherwise, nothing changed). ``reason``
        None records "(no reason given)".
        """
        why = reason_or_default(reason)
        who = _actor(by)
        keep_span = keep if isinstance(keep, timedelta) else parse_duration(keep, what="keep")
        if keys is not None:  # a key named twice is one key (kept in the order given)
            if isinstance(keys, str):
                keys = (keys,)
            keys = tuple(dict.fromkeys(str(text).strip() for text in keys))
        for text in keys or ():  # a malformed key is refused before anything
            try:
                Verifier.from_key(text)
            except IntegrityError as exc:
                raise ValidationError(
                    f"keys: {text[:60]!r} is not a note verifier key "
                    "(name+hexid+base64, the text of a .vkey file: give its text, not its "
                    f"path); nothing was changed ({exc})"
                ) from None
        if signer is not None and not isinstance(signer, NoteSigner):
            raise ValidationError(
                f"signer: expected a signer (Signer.from_key(key text)), got "
                f"{type(signer).__name__}; nothing was changed"
            )
        with self._writing() as conn:
            txn = _Txn(conn=conn, now=self._now(conn))
            _, current, _ = self._trusted(conn)
            if floor is None:
                floor_span = current.policy.floor if current else timedelta(0)
            else:
                floor_span = (
                    floor if isinstance(floor, timedelta) else parse_duration(floor, what="floor")
                )
            new = Policy(
                keep=keep_span,
                floor=floor_span,
                keys=tuple(keys) if keys is not None else (current.policy.keys if current else ()),
            )
            kind = change_kind(current.policy if current else None, new)
            if kind == "same" and current is not None:
                return current
            version = (current.version + 1) if current else 1
            run = RetentionRun()
            body = {
                "origin": self._sink.origin,
                "after": None if current is None else current.record_id,
                "version": version,
                "keep": format_duration(new.keep),
                "floor": format_duration(new.floor),
                "keys": list(new.keys),
                "previous": None if current is None else current.policy.to_dict(),
                "change": kind,
                "at": format_time(txn.now),
                "by": who,
                "reason": why,
            }
            signature = None
            if signer is not None or kind == "lower":
                signature = self._sign_change(current, kind, body, signer)
            record = {**body, "signature": signature}
            conn.execute(
                self._t.policy.insert().values(
                    version=version,
                    keep_s=int(new.keep / _SECOND),
                    floor_s=int(new.floor / _SECOND),
                    keys=json.dumps(list(new.keys)),
                    record_id=str(run.record_id),
                    set_us=to_micros(txn.now),
                    set_by=who,
                    reason=why,
                    signature=None if signature is None else json.dumps(signature),
                )
            )
            asked = f"set retention: keep {body['keep']}, floor {body['floor']} ({kind}): {why}"
            self._append(
                txn,
                run.events(
                    tool=POLICY_TOOL,
                    asked=asked,
                    record=record,
                    outcome={"version": version, "change": kind},
                    reason=why,
                    by=who,
                    at=txn.now,
                ),
            )
            state = self._policy(conn)
        assert state is not None
        log.info("retention policy v%d set by %s (%s)", version, who, kind)
        return state

    @staticmethod
    def _sign_change(
        current: PolicyState | None, kind: str, body: dict[str, Any], signer: NoteSigner | None
    ) -> dict[str, Any]:
        """The signature of a policy change (over its RFC 8785 form): by a key of the
        current policy when the change lowers the floor, else by a key of the policy
        before or after it."""
        if kind == "lower":
            keys = current.policy.keys if current else ()
            if not keys:
                raise refuse(
                    "lowering the retention floor needs a signed policy change, and this "
                    "policy has no policy key: set one first with `ledger retention set "
                    "--policy-key VKEY_FILE` (keys can be added freely while none is set)"
                )
            if signer is None:
                raise refuse(
                    "lowering the retention floor (or changing the policy keys) needs a "
                    "signature: give --key with the signer key of one of the policy keys "
                    "(in the library, signer=Signer.from_key(...))"
                )
            trusted = {(v.name, v.key_id) for v in map(Verifier.from_key, keys)}
            if (signer.name, signer.key_id) not in trusted:
                raise refuse(
                    f"the key {signer.name}+{signer.key_id:08x} is not one of the policy "
                    "keys, so it cannot lower the floor"
                )
        assert signer is not None
        # a change that needs no signature is shown as signed by its signer: only a key
        # of the policy (before or after the change) may sign it
        known = [*(current.policy.keys if current else ()), *body.get("keys", ())]
        if (signer.name, signer.key_id) not in {
            (v.name, v.key_id) for v in map(Verifier.from_key, known)
        }:
            raise refuse(
                f"the key {signer.name}+{signer.key_id:08x} is not one of the policy keys, "
                "so the change would be shown as signed by a key nobody registered: leave "
                "--key out (raising the floor or changing keep needs no signature) or sign "
                "with a policy key"
            )
        message = canonical_bytes(body, "rfc8785")
        signature = {
            "name": signer.name,
            "key_id": f"{signer.key_id:08x}",
            "signature": b64encode(signer.sign(message)),
        }
        # a lowering stands only signed by a key of the policy before it (as the log is
        # replayed); any other change by a key of the policy before or after it
        verifying = list(current.policy.keys) if kind == "lower" and current else known
        if not signed_by({**body, "signature": signature}, verifying):
            raise refuse(
                f"the key {signer.name}+{signer.key_id:08x} has the name and key id of a "
                "policy key but is not that key (its signature does not verify with the "
                "registered public key): sign with the policy key itself"
            )
        return signature

    # --- legal holds --------------------------------------------------------------

    def holds(self, *, released: bool = False) -> list[Hold]:
        """The holds standing (with ``released``, the released ones too), oldest first."""
        with self._reading() as conn:
            return self._holds(conn, released=released)

    def _holds(self, conn: sa.Connection, *, released: bool) -> list[Hold]:
        t = self._t.holds
        query = sa.select(t).order_by(t.c.hold_id)
        if not released:
            query = query.where(t.c.released_us.is_(None))
        return [_hold(r) for r in conn.execute(query)]

    def add_hold(
        self,
        *,
        run_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        reason: str,
        by: str | None = None,
    ) -> Hold:
        """Place a legal hold on a run or a time range ``[since, until)``; recorded in
        the log. ``since`` and ``until`` are aware datetimes or text as ``ledger hold
        add`` takes a date (``2026-01-31``, midnight UTC, or an RFC 3339 time)."""
        if isinstance(since, str):
            since = parse_date(since, what="since")
        if isinstance(until, str):
            until = parse_date(until, what="until")
        why = require_reason(reason)
        who = _actor(by)
        run = RetentionRun()
        with self._writing() as conn:
            txn = _Txn(conn=conn, now=self._now(conn))
            self._trusted(conn)
            hold = Hold(
                hold_id=str(run.record_id),
                reason=why,
                run_id=run_id,
                since=since,
                until=until,
                created=txn.now,
                created_by=who,
            )
            if run_id is not None and is_admin_run(run_id):
                raise refuse(
                    f"run {run_id!r} records a retention change: the ledger keeps those "
                    "whatever happens, so a hold on it would hold nothing; give the run "
                    "whose events are to be kept"
                )
            if run_id is not None and not self._run_exists(conn, run_id):
                raise self._no_run(conn, run_id)
            conn.execute(
                self._t.holds.insert().values(
                    hold_id=hold.hold_id,
                    run_id=run_id,
                    since_us=None if since is None else to_micros(since, "--since"),
                    until_us=None if until is None else to_micros(until, "--until"),
                    reason=why,
                    created_us=to_micros(txn.now),
                    created_by=who,
                    record_id=hold.hold_id,
                )
            )
            record = {"hold": hold.hold_id, "covers": hold.describe(), **_hold_scope(hold)}
            self._append(
                txn,
                run.events(
                    tool=HOLD_ADD_TOOL,
                    asked=f"hold {hold.describe()}: {why}",
                    record={**record, "by": who, "at": format_time(txn.now), "reason": why},
                    outcome={"hold": hold.hold_id},
                    reason=why,
                    by=who,
                    at=txn.now,
                ),
            )
        return hold

    def release_hold(
        self, hold_id: str, *, reason: str | None = None, by: str | None = None
    ) -> Hold:
        """Release the hold ``hold_id``; recorded in the log (``reason`` None records
        "(no reason given)"). ``RetentionError`` for an unknown or already released hold."""
        if not isinstance(hold_id, str | ULID):
            raise ValidationError(
                f"hold id: expected the id `ledger hold list` shows, got {type(hold_id).__name__}"
            )
        try:  # a ULID in any case, as event ids are read
            hold_id = str(coerce_event_id(hold_id, field="hold id"))
        except ValidationError:
            hold_id = str(hold_id)  # no id the ledger made: "no legal hold" below
        why = reason_or_default(reason)
        who = _actor(by)
        t = self._t.holds
        run = RetentionRun()
        with self._writing() as conn:
            txn = _Txn(conn=conn, now=self._now(conn))
            self._trusted(conn)
            row = conn.execute(sa.select(t).where(t.c.hold_id == hold_id)).first()
            if row is None:
                raise refuse(f"no legal hold {hold_id!r} (see `ledger hold list`)")
            hold = _hold(row)
            if not hold.active:
                raise refuse(f"legal hold {hold_id} was already released")
            conn.execute(
                t.update()
                .where(t.c.hold_id == hold_id)
                .values(
                    released_us=to_micros(txn.now),
                    released_by=who,
                    release_reason=why,
                    release_record=str(run.record_id),
                )
            )
            self._append(
                txn,
                run.events(
                    tool=HOLD_RELEASE_TOOL,
                    asked=f"release hold {hold_id} ({hold.describe()}): {why}",
                    record={"hold": hold_id, "by": who, "at": format_time(txn.now), "reason": why},
                    outcome={"released": hold_id},
                    reason=why,
                    by=who,
                    at=txn.now,
                ),
            )
            released = _hold(conn.execute(sa.select(t).where(t.c.hold_id == hold_id)).one())
        return released

    # --- erasure ----------------------------------------------------------------------

    def erasures(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        touching: bool = False,
    ) -> list[ErasureRecord]:
        """The erasures made in ``[since, until)``, oldest first; with ``touching``, also
        those made at any other time that erased events of ``[since, until)`` (what a
        report of that window must account for: its erased events): a tombstone in the
        window names the record, or, for a crypto-shredding erasure (which leaves the
        rows as they are), its run has events there. One whose selection took events of
        the window already erased by another is not listed for it."""
        e = self._t.erasures
        query = sa.select(e).order_by(e.c.at_us, e.c.record_id)
        lo = None if since is None else to_micros(since, "since")
        hi = None if until is None else to_micros(until, "until")
        if not touching:
            if lo is not None:
                query = query.where(e.c.at_us >= lo)
            if hi is not None:
                query = query.where(e.c.at_us < hi)
        with self._reading() as conn:
            found = [_erasure_record(r) for r in conn.execute(query)]
            if touching:
                found = [
                    made
                    for made in found
                    if (
                        (lo is None or to_micros(made.at) >= lo)
                        and (hi is None or to_micros(made.at) < hi)
                    )
                    or self._erased_in(conn, made, lo, hi)
                ]
        return found

    def _erased_in(
        self, conn: sa.Connection, made: ErasureRecord, lo: int | None, hi: int | None
    ) -> bool:
        """True when the erasure ``made`` erased an event whose time is in ``[lo, hi)``
        (Unix µs; None: open): among the events its selection takes there, a tombstone
        names its record (every tombstone lists the records that made it), or it
        destroyed a run's data key (its record says ``shredded``: no row changed)."""
        where = self._selection_in(conn, made.selection, lo, hi)
        if where is None:
            return False
        t = self._events
        query = sa.select(t.c.seq).where(*where)
        if conn.execute(query.where(t.c.event_json.contains(made.record_id)).limit(1)).first():
            return True
        if conn.execute(query.limit(1)).first() is None:
            return False
        text = conn.execute(
            sa.select(t.c.event_json).where(t.c.event_id == made.record_id)
        ).scalar()
        try:
            record = orjson.loads(text).get("args") if isinstance(text, str) else None
        except orjson.JSONDecodeError:
            return True  # unreadable: listed, and the checks of the log name it
        return isinstance(record, dict) and record.get("shredded") is not None

    def _selection_in(
        self, conn: sa.Connection, selection: dict[str, Any], lo: int | None, hi: int | None
    ) -> list[Any] | None:
        """The conditions on the events the erasure ``selection`` (as its record states
        it) takes whose time is in ``[lo, hi)`` (Unix µs; None: open); None when it
        takes none. Erased rows keep their run id and time, so the index columns answer
        it."""
        t = self._events
        where = [t.c.time_us >= lo] if lo is not None else []
        where += [t.c.time_us < hi] if hi is not None else []
        if "run_id" in selection:
            where.append(t.c.run_id == str(selection["run_id"]))
        elif "before" in selection:
            where += [t.c.time_us < to_micros(parse_time(selection["before"])),
                      _not_admin(t.c.run_id)]  # fmt: skip
        else:
            ids = [str(i) for i in selection.get("event_ids", ())]
            if not ids:
                return None
            where.append(_ids_in(t.c.event_id, ids, conn.dialect.name))
        return where

    def erase(
        self,
        selection: Selection,
        *,
        reason: str,
        by: str | None = None,
        fields: Sequence[str] | None = ALL_FIELDS,
        dry_run: bool = False,
        each: Callable[[Selected], None] | None = None,
    ) -> ErasureOutcome:
        """Erase the events ``selection`` picks (``fields`` of each; all by default;
        ``args`` and ``result`` together take the ``preview`` along, the gate's clip of
        them).

        Refused, nothing changed (``RetentionError``): no policy set, an event inside the
        floor, an event under a legal hold, an unknown run or event id, a retention
        record selected, a row whose bytes no longer match its leaf. ``ValidationError``
        for an empty reason or an unknown field. ``each`` is called with every selected
        event as it is processed (what ``--dry-run`` lists). With ``dry_run`` the same
        checks run and nothing is written.
        """
        if not isinstance(selection, Selection):  # a run id given as text, say
            raise ValidationError(
                f"selection: expected a Selection (Selection.of_run(RUN_ID), "
                f"Selection.older_than(DATE), Selection.of_events(IDS)), got "
                f"{type(selection).__name__}"
            )
        why = require_reason(reason)
        who = _actor(by)
        if fields is None:  # no fields named: the whole event
            fields = ALL_FIELDS
        elif isinstance(fields, str):  # one field name, not its letters
            fields = (fields,)
        fields = tuple(fields)  # read once (a generator, say)
        wanted = tuple(f for f in ALL_FIELDS if f in set(fields))
        unknown = sorted(set(fields) - set(ALL_FIELDS))
        if unknown or not wanted:
            raise ValidationError(
                f"--field: {', '.join(unknown) or '(none)'} cannot be erased; erasable fields "
                f"are {', '.join(ALL_FIELDS)}"
            )
        if set(wanted) >= CLIPPED:  # the preview is the gate's clip of args or result:
            # with both gone, keeping it would keep what was to be erased (with one, it
            # may clip the other, kept: name preview to take it too)
            wanted = tuple(f for f in ALL_FIELDS if f in {*wanted, "preview"})
        run = RetentionRun()
        try:
            return self._erase(selection, why, who, wanted, dry_run, each, run)
        except _Rollback as stop:  # a dry run, or nothing to erase: nothing is written
            return stop.outcome

    def _erase(
        self,
        selection: Selection,
        why: str,
        who: str,
        wanted: tuple[str, ...],
        dry_run: bool,
        each: Callable[[Selected], None] | None,
        run: RetentionRun,
    ) -> ErasureOutcome:
        record_id = str(run.record_id)
        with self._looking() if dry_run else self._writing() as conn:
            if conn.dialect.name == "sqlite" and not dry_run:  # freed bytes are zeroed
                conn.exec_driver_sql("PRAGMA secure_delete = ON")
            txn = _Txn(conn=conn, now=self._now(conn))
            logged, state, holds = self._trusted(conn)
            if state is None:
                raise refuse(
                    "no retention policy is set, so nothing may be erased: set one first "
                    "with `ledger retention set --keep 400d --floor 180d`"
                )
            where = self._where(conn, selection, listing=each is not None)
            if each is not None:  # refuse before anything is listed
                self._check_allowed(conn, where, state, txn.now, holds)
            guard = _Guard(state.policy.cutoff(txn.now), holds)
            payloads = self._sink._payloads if selection.run_id is not None else None
            shred = payloads is not None and bool({"args", "result"} & set(wanted))
            if shred and not {"args", "result"} <= set(wanted):
                raise refuse(
                    "in this crypto-shredding ledger a run's args and result (and previews) "
                    "are encrypted under one data key, so erasing one of them destroys the "
                    "other too: give both (--field args --field result) or erase the whole run"
                )
            # (the key seals the preview too: erase() took it along with args and result)
            key_only = shred and set(wanted) <= set(SEALED_FIELDS)  # the rows stay as they are
            if key_only and each is not None and payloads is not None:
                assert selection.run_id is not None
                if payloads.destroyed(conn, selection.run_id):  # its payloads went before
                    each = _as_already(each)
            try:
                erased, already, digest, stones = self._tombstones(
                    conn,
                    selection,
                    wanted,
                    record_id,
                    why,
                    dry_run or key_only,
                    each,
                    guard,
                    logged,
                )
            except _Violation:
                # a selected row inside the floor or under a hold: say exactly what
                self._check_allowed(conn, where, state, txn.now, holds)
                raise refuse("a selected event is inside the floor or under a hold") from None
            if (
                selection.run_id is not None
                and not erased
                and not already
                and not self._run_exists(conn, selection.run_id)  # none held the fields
            ):
                raise self._no_run(conn, selection.run_id)
            if shred:
                assert payloads is not None and selection.run_id is not None
                destroyed = dry_run or payloads.destroy(
                    conn, selection.run_id, record_id=record_id, reason=why, by=who,
                    at_us=to_micros(txn.now),
                )  # fmt: skip
                if dry_run and payloads.destroyed(conn, selection.run_id):
                    destroyed = False
                if key_only:  # no tombstone: the ciphertext stays, unreadable
                    if not destroyed:  # destroyed before: what held those fields went then
                        erased, already = 0, erased + already
                    digest = stones = hashlib.sha256().hexdigest()
                # nothing erased: the transaction (with the key's destruction) is undone
                shred = destroyed and erased > 0
            outcome = ErasureOutcome(
                selection=selection,
                fields=wanted,
                erased=erased,
                already=already,
                dry_run=dry_run,
                record_id=None if dry_run or not erased else record_id,
                digest=digest if erased else "",
                shredded=shred,
            )
            if dry_run or not erased:
                raise _Rollback(outcome)
            record = {
                "selection": selection.to_dict(),
                "fields": list(wanted),
                "events": 0 if key_only else erased,
                "digest": digest,
                "tombstones": stones,
                "already_erased": already,
                "policy": {"version": state.version, **state.policy.to_dict()},
                "at": format_time(txn.now),
                "by": who,
                "reason": why,
            }
            if shred:  # the run's data key was destroyed: its args and result are unreadable
                assert payloads is not None
                record["shredded"] = {"run_id": selection.run_id, "key_id": payloads.key_id}
                record["shredded_events"] = erased
            conn.execute(
                self._t.erasures.insert().values(
                    record_id=record_id,
                    at_us=to_micros(txn.now),
                    by=who,
                    reason=why,
                    selection=json.dumps(selection.to_dict()),
                    fields=json.dumps(list(wanted)),
                    rows_erased=erased,
                    digest=digest,
                    policy_version=state.version,
                )
            )
            self._append(
                txn,
                run.events(
                    tool=ERASE_TOOL,
                    asked=f"erase {selection.describe()}: {why}",
                    record=record,
                    outcome={"erased": erased, "already_erased": already},
                    reason=why,
                    by=who,
                    at=txn.now,
                ),
            )
        log.info("erased %d event(s) of %s: record %s", erased, selection.describe(), record_id)
        return outcome

    def _run_exists(self, conn: sa.Connection, run_id: str) -> bool:
        t = self._events
        return (
            conn.execute(sa.select(t.c.seq).where(t.c.run_id == run_id).limit(1)).first()
            is not None
        )

    def _no_run(self, conn: sa.Connection, run_id: str) -> Exception:
        """The refusal of an unknown run id; one that begins stored runs' ids (the
        readers take a unique prefix) is told that retention takes the whole id."""
        t = self._events
        # a range of the run index (a LIKE would walk every row on SQLite), then checked
        after = (
            sa.select(t.c.run_id)
            .where(t.c.run_id > run_id, t.c.run_id < run_id + "\U0010ffff")
            .order_by(t.c.run_id)
            .limit(50)
        )
        runs = dict.fromkeys(str(r) for (r,) in conn.execute(after)) if run_id else {}
        found = [r for r in runs if r.startswith(run_id)][:3]
        if found:
            shown = ", ".join(found[:2]) + (" ..." if len(found) > 2 else "")
            return refuse(
                f"no run {run_id!r} is stored; it begins the id of run {shown}: holds and "
                "erasures take a whole run id, never a prefix"
            )
        return refuse(f"no events of run {run_id!r} are stored (see `ledger runs`)")

    def _where(self, conn: sa.Connection, selection: Selection, *, listing: bool) -> list[Any]:
        """The WHERE clauses of ``selection`` (for the exact counts of a refusal), after
        checking it names what exists. An unknown run is found by the scan itself
        (no row) unless ``listing`` (a dry run lists nothing before a refusal)."""
        t = self._events
        if selection.run_id is not None:
            if is_admin_run(selection.run_id):
                raise refuse(
                    f"run {selection.run_id} records a retention change; the records of "
                    "retention are kept (they are the proof of what was erased)"
                )
            if listing and not self._run_exists(conn, selection.run_id):
                raise self._no_run(conn, selection.run_id)
            return [t.c.run_id == selection.run_id]
        if selection.before is not None:
            before = to_micros(selection.before, "--before")
            return [t.c.time_us < before, _not_admin(t.c.run_id)]
        ids = list(dict.fromkeys(selection.event_ids))
        found: dict[str, str] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            for event_id, run_id in conn.execute(
                sa.select(t.c.event_id, t.c.run_id).where(t.c.event_id.in_(part))
            ):
                found[str(event_id)] = str(run_id)
        missing = [i for i in ids if i not in found]
        if missing:
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            raise refuse(f"no event with id {shown} is stored")
        admin = [i for i, r in found.items() if is_admin_run(r)]
        if admin:
            raise refuse(f"event {admin[0]} is a retention record; those are kept")
        return [_ids_in(t.c.event_id, ids, conn.dialect.name)]

    def _check_allowed(
        self,
        conn: sa.Connection,
        where: list[Any],
        state: PolicyState,
        now: datetime,
        holds: list[Hold],
    ) -> None:
        """Refuse when the floor or a standing hold protects a selected event, saying
        everything in the way at once (the floor and every hold)."""
        found = [
            self._floor_problem(conn, where, state, now),
            self._holds_problem(conn, where, holds),
        ]
        if any(found):
            raise refuse("; and ".join(p for p in found if p))

    def _floor_problem(
        self, conn: sa.Connection, where: list[Any], state: PolicyState, now: datetime
    ) -> str:
        t = self._events
        when = state.policy.cutoff(now)
        if when is None:  # a floor of zero protects nothing
            return ""
        cutoff = to_micros(when)
        row = conn.execute(
            sa.select(sa.func.count(), sa.func.max(t.c.time_us)).where(
                *where, t.c.time_us >= cutoff
            )
        ).one()
        if not int(row[0]):
            return ""
        youngest = int(row[1])
        ahead = (
            f"; dated after this erasure's own time ({format_time_us(now)}), as by a "
            "writer whose clock was ahead, so its age is not known: only a floor of 0 "
            "(a signed policy change) lets it go"
            if youngest > to_micros(now)
            else ""
        )
        return (
            f"{int(row[0])} selected event(s) are inside the retention floor of "
            f"{format_duration(state.policy.floor)} (the youngest from "
            f"{format_time_us(from_micros(youngest))}; nothing at or "
            f"after {format_time_us(from_micros(cutoff))} may be erased{ahead})"
        )

    def _holds_problem(self, conn: sa.Connection, where: list[Any], holds: list[Hold]) -> str:
        """What standing holds cover a selected event, naming every such hold ("" when
        none does)."""
        t = self._events
        blocking: list[tuple[int, Hold]] = []
        for hold in holds:
            if hold.run_id is not None:
                scope = [t.c.run_id == hold.run_id]
            else:
                scope = []
                if hold.since is not None:
                    scope.append(t.c.time_us >= to_micros(hold.since))
                if hold.until is not None:
                    scope.append(t.c.time_us < to_micros(hold.until))
            count = conn.execute(sa.select(sa.func.count()).where(*where, *scope)).scalar_one()
            if count:
                blocking.append((int(count), hold))
        if len(blocking) == 1:
            count, hold = blocking[0]
            return (
                f"{count} selected event(s) are under legal hold {hold.hold_id} "
                f"({hold.describe()}: {hold.reason}); {_WHILE_HELD}"
            )
        if blocking:
            each = "; ".join(
                f"{count} under hold {hold.hold_id} ({hold.describe()}: {hold.reason})"
                for count, hold in blocking
            )
            return f"selected events are under {len(blocking)} legal holds: {each}; {_WHILE_HELD}"
        return ""

    def _pages(self, conn: sa.Connection, selection: Selection) -> Iterator[list[Any]]:
        """The rows ``selection`` picks, in ``seq`` order, :data:`PAGE` at a time, by
        driver-level queries: ``seq, event_id, leaf_index, run_id, time_us``, the stored
        leaf hash and the stored bytes. A run or a date: pages after a ``seq`` cursor.
        Event ids: their ``seq`` found once (the ids as one parameter: a driver binds
        at most 65,535), then read a page of them at a time, so the cost grows with the
        ids, not with the ids times the pages."""
        sqlite = conn.dialect.name == "sqlite"
        mark = "?" if sqlite else "%s"
        name = f'"{self._schema}".events' if self._schema else "events"
        data = "CAST(event_json AS BLOB)" if sqlite else "event_json"
        # SQLite keeps any type in any column: a leaf read as text might not decode
        leaf = "substr(CAST(nodes AS BLOB), 1, 32)" if sqlite else "substr(nodes, 1, 32)"
        columns = f"SELECT seq, event_id, leaf_index, run_id, time_us, {leaf}, {data} FROM {name}"
        listed = "IN (SELECT value FROM json_each(?))" if sqlite else "= ANY(%s)"

        def each(values: list[Any]) -> Any:  # the one parameter of ``listed``
            return json.dumps(values) if sqlite else values

        if selection.event_ids:
            ids = list(dict.fromkeys(selection.event_ids))
            found = conn.exec_driver_sql(
                f"SELECT seq FROM {name} WHERE event_id {listed}", (each(ids),)
            ).fetchall()
            seqs = sorted(int(seq) for (seq,) in found)
            for start in range(0, len(seqs), PAGE):
                part = seqs[start : start + PAGE]
                yield list(
                    conn.exec_driver_sql(
                        f"{columns} WHERE seq {listed} ORDER BY seq", (each(part),)
                    ).fetchall()
                )
            return
        params: list[Any]
        if selection.run_id is not None:
            where, params = f"run_id = {mark}", [selection.run_id]
        else:
            where = f"time_us < {mark} AND substr(run_id, 1, {len(ADMIN_RUN_PREFIX)}) <> {mark}"
            assert selection.before is not None
            params = [to_micros(selection.before, "--before"), ADMIN_RUN_PREFIX]
        sql = f"{columns} WHERE {where} AND seq > {mark} ORDER BY seq LIMIT {PAGE}"
        cursor = -(1 << 62)
        while True:
            rows = list(conn.exec_driver_sql(sql, (*params, cursor)).fetchall())
            if rows:
                yield rows
            if len(rows) < PAGE:
                return
            cursor = int(rows[-1][0])

    def _check_tombstones(
        self, conn: sa.Connection, record_id: str, logged: list[tuple[str, str, Any]]
    ) -> None:
        """Refuse when the tombstones erasure record ``record_id`` wrote (the rows of its
        selection whose latest erasure it is) are not the bytes its ``tombstones``
        digest vouches for, as ``ledger verify`` checks them: one changed by SQL. Read
        before any of them is rewritten. A row a later erasure rewrote counts by the
        digest its tombstone keeps of the bytes this record wrote (``erased.earlier``);
        skipped, as by verify, when one was rewritten before tombstones kept it."""
        record = next(
            (r for i, t, r in logged if i == record_id and t == ERASE_TOOL and isinstance(r, dict)),
            None,
        )
        selection = None if record is None else record.get("selection")
        if record is None or not _selection_shape(selection):
            raise _tampered(f"tombstones name erasure record {record_id}, which the log lacks")
        assert isinstance(selection, dict)
        if "run_id" in selection:
            chosen = Selection.of_run(str(selection["run_id"]))
        elif "before" in selection:
            chosen = Selection.older_than(parse_time(selection["before"]))
        else:
            chosen = Selection.of_events(list(selection["event_ids"]))
        stones, rows, last = hashlib.sha256(), 0, 0
        for page in self._pages(conn, chosen):
            for _seq, _event_id, index, _run, _time, _leaf, raw in page:
                data = raw if type(raw) is bytes else str(raw).encode("utf-8")
                stone = tombstone_of(data) if _MARK in data else None
                if stone is None or record_id not in stone.records:
                    continue
                rows += 1
                written = stone.written_digest(record_id, data)
                if written is not None and isinstance(index, int):
                    last += 1
                    stones.update(index.to_bytes(8, "big") + written)
        if rows == last and stones.hexdigest() != record.get("tombstones"):
            raise refuse(
                f"the tombstones of erasure record {record_id} are not the bytes it wrote: "
                "one was changed outside the ledger, and erasing it again would hide that. "
                "Run `ledger verify`"
            )

    def _tombstones(
        self,
        conn: sa.Connection,
        selection: Selection,
        wanted: tuple[str, ...],
        record_id: str,
        reason: str,
        dry_run: bool,
        each: Callable[[Selected], None] | None,
        guard: _Guard,
        logged: list[tuple[str, str, Any]],
    ) -> tuple[int, int, str, str]:
        """Stream the selected rows page by page; write each page's tombstones. Returns
        the rows erased, those already erased, and the two digests of the record.

        Per row: the floor and the holds (``guard``; ``_Violation`` when one forbids
        it), its bytes against its stored leaf hash (the first 32 bytes of its
        ``nodes``, read by the page query itself), the tombstone
        (:class:`~ledger.retention.tombstones.TombstoneMaker`) and the two digests; the
        page's tombstones are written by one driver-level ``executemany``. A page of
        ordinary rows, all of which may go, does all of that at once (:func:`_fast_page`);
        any other page (a dry run, a row erased before, a refusal to explain) row by row."""
        sqlite = conn.dialect.name == "sqlite"
        name = f'"{self._schema}".events' if self._schema else "events"
        if sqlite:  # executemany runs one prepared statement in C
            update = (
                f"UPDATE {name} SET event_json = ?, content_hash = ?, has_err = ? WHERE seq = ?"
            )
        else:  # one statement per page (executemany would be one per row)
            update = (
                f"UPDATE {name} AS e SET event_json = v.j, content_hash = v.h, has_err = v.x "
                "FROM json_to_recordset(%s::json) AS v(j text, h text, x boolean, s bigint) "
                "WHERE e.seq = v.s"
            )
        maker = TombstoneMaker(fields=wanted, record=record_id, reason=reason)
        digest, stones = hashlib.sha256(), hashlib.sha256()
        erased = already = 0
        want = set(wanted)
        whole = want == set(ALL_FIELDS)
        cutoff, check_holds = guard.cutoff, guard.active
        make, sha256, note, vouch = maker.make, hashlib.sha256, digest.update, stones.update
        wholes: set[str] | None = None  # the records of whole erasures, read at need
        vouched: set[str] = set()  # records whose tombstones were checked
        for rows in self._pages(conn, selection):
            indexes = [r[2] for r in rows]
            if None in indexes:
                bad = next(r for r in rows if r[2] is None)
                raise refuse(
                    f"events row seq={bad[0]} has no leaf index (inserted outside the "
                    "ledger); run `ledger verify`"
                )
            fast = None if each is not None or dry_run else _fast_page(rows, maker, guard)
            if fast is not None:  # every row of the page checked, none erased before
                updates, leaves, tombs = fast
                erased += len(updates)
                note(leaves)
                vouch(tombs)
            else:
                updates = []
            for seq, event_id, index, run_id, time_us, leaf, raw in rows if fast is None else ():
                if time_us >= cutoff or (check_holds and guard.holds(run_id, time_us)):
                    raise _Violation
                data = raw if type(raw) is bytes else str(raw).encode("utf-8")
                stored = leaf if type(leaf) is bytes or leaf is None else bytes(leaf)
                if stored is None or len(stored) != 32:
                    raise refuse(
                        f"event {event_id} (leaf {index}) has no stored leaf hash; the tree "
                        "was changed outside the ledger. Run `ledger verify`"
                    )
                stone = tombstone_of(data) if _MARK in data else None
                claimed = stone.leaf_hash if stone is not None else leaf_hash(data)
                if claimed != stored:
                    raise refuse(
                        f"event {event_id} (leaf {index}): its stored bytes no longer match "
                        "the leaf the log committed, so it was changed outside the ledger and "
                        "erasing it would hide that. Run `ledger verify`"
                    )
                stated: tuple[str, int | None] | None
                if stone is not None:
                    stated = (stone.run_id, None if stone.time is None else to_micros(stone.time))
                else:
                    stated = _json_key(data)
                if stated != (run_id, time_us):
                    raise _index_changed(seq, event_id, run_id, time_us, stated)
                # a tombstone names the fields it held that went: erased before when it
                # holds none of the wanted fields still and, for a whole erasure, a whole
                # erasure made it (a whole erasure takes over a field erasure's rows, so
                # no record is left vouching for only some of its tombstones)
                done = False
                if stone is not None and not any(f in orjson.loads(data) for f in want):
                    if not whole and not want & set(stone.fields):
                        continue  # it never held them: left as it is, not listed
                    if whole and wholes is None:
                        wholes = _whole_records(logged)
                    done = not whole or bool(wholes and wholes & set(stone.records))
                elif not whole and not maker.changes(orjson.loads(data)):
                    continue  # it holds none of the fields: left as it is, not listed
                if each is not None:
                    event = Event.from_json(data)
                    each(
                        Selected(
                            event_id=str(event_id),
                            run_id=event.run_id,
                            kind=str(event.kind),
                            tool=event.tool,
                            time=event.time,
                            leaf_index=int(index),
                            already=done,
                        )
                    )
                if done:
                    already += 1
                    continue
                if stone is not None and stone.records[-1] not in vouched:
                    # a tombstone rewritten again: first, its record must still vouch for
                    # the tombstones it wrote (else erasing would hide an edit of them)
                    self._check_tombstones(conn, stone.records[-1], logged)
                    vouched.add(stone.records[-1])
                erased += 1
                key = index.to_bytes(8, "big")
                note(key + stored)
                if dry_run:
                    continue
                tomb, chash, has_err = make(data, stored.hex())
                if chash is None:
                    chash = content_hash(tomb)
                vouch(key + sha256(tomb.encode("utf-8")).digest())
                updates.append((tomb, chash, has_err, seq))
            if updates and sqlite:
                conn.exec_driver_sql(update, updates)
            elif updates:
                rows_json = orjson.dumps(
                    [{"j": j, "h": h, "x": x, "s": q} for j, h, x, q in updates]
                )
                conn.exec_driver_sql(update, (rows_json.decode(),))
        return erased, already, digest.hexdigest(), stones.hexdigest()


_Update = tuple[str, str | None, bool, int]  # tombstone, content hash, has_err, seq


def _whole_records(logged: list[tuple[str, str, Any]]) -> set[str]:
    """The ids of the erasure records in the log (``logged``, as
    :meth:`Retention._logged` read and checked them) that erased whole events. The log,
    not the erasures table: a table row deleted or changed by SQL cannot make a whole
    erasure's tombstones look field-erased, or the reverse."""
    whole = set(ALL_FIELDS)
    return {
        event_id
        for event_id, tool, record in logged
        if tool == ERASE_TOOL
        and isinstance(record, dict)
        and isinstance(record.get("fields"), list)
        and set(map(str, record["fields"])) >= whole
    }


def _fast_page(
    rows: Sequence[Any], maker: TombstoneMaker, guard: _Guard
) -> tuple[list[_Update], bytes, bytes] | None:
    """The tombstones of a page of scanned rows (``_pages``' columns) when every row is
    an ordinary event that may be erased: outside the floor, under no hold, its bytes
    its stored leaf, not erased before. Returns the updates and what the two digests
    take of the page, or None (nothing done) when a row is not such: the page then
    takes the row-by-row path of ``_tombstones``, which says what is wrong with it.
    The same results as that path, without a Python call per row but the hashes."""
    seqs, _ids, indexes, runs, times, leaves, raws = zip(*rows, strict=True)
    if max(times) >= guard.cutoff or (guard.active and any(map(guard.holds, runs, times))):
        return None
    if type(raws[0]) is not bytes:  # PostgreSQL gives text
        raws = tuple(str(r).encode("utf-8") for r in raws)
    if type(leaves[0]) is not bytes:
        leaves = tuple(x if x is None or type(x) is bytes else bytes(x) for x in leaves)
    sha256 = hashlib.sha256
    # equal lists of leaf hashes: every stored leaf is 32 bytes, none is None
    if _MARK in b"".join(raws) or list(map(leaf_hash, raws)) != list(leaves):
        return None
    # the floor and the holds were judged on the index columns: they must be what the
    # committed JSON states (the row-by-row path names a row whose columns were changed)
    try:
        objs = list(map(orjson.loads, raws))
    except orjson.JSONDecodeError:
        return None
    if list(map(_obj_key, objs)) != list(zip(runs, times, strict=True)):
        return None
    if not all(map(maker.changes, objs)):  # a row the erasure leaves as it is
        return None
    keys = [i.to_bytes(8, "big") for i in indexes]
    made = maker.make_page(raws, leaves, objs)
    updates = [
        (tomb, content_hash(tomb) if chash is None else chash, has_err, seq)
        for (tomb, chash, has_err), seq in zip(made, seqs, strict=True)
    ]
    noted = b"".join([k + leaf for k, leaf in zip(keys, leaves, strict=True)])
    vouched = b"".join(
        [k + sha256(t[0].encode("utf-8")).digest() for k, t in zip(keys, made, strict=True)]
    )
    return updates, noted, vouched


def _as_already(each: Callable[[Selected], None]) -> Callable[[Selected], None]:
    """``each``, told that every event it is given was erased before (the run's data key
    was destroyed by an earlier erasure: a dry run lists them as already erased)."""

    def listed(found: Selected) -> None:
        each(replace(found, already=True))

    return listed


def _json_key(data: bytes) -> tuple[str, int | None] | None:
    """``(run id, time in Unix µs)`` the stored event JSON ``data`` states, or None."""
    try:
        return _obj_key(orjson.loads(data))
    except orjson.JSONDecodeError:
        return None


def _obj_key(obj: Any) -> tuple[str, int | None] | None:
    """``(run id, time in Unix µs)`` of a parsed stored event, or None when unreadable."""
    if type(obj) is not dict:
        return None
    run, micros = obj.get("run_id", ""), stated_micros(obj.get("time"))
    return None if type(run) is not str or micros is None else (run, micros)


def _index_changed(
    seq: int, event_id: str, run_id: str, time_us: int, stated: tuple[str, int | None] | None
) -> Exception:
    """The refusal of a selected row whose ``run_id`` or ``time_us`` column is not what
    its committed JSON states: the floor, the holds and the selection read the columns."""
    said = (
        "no run and time that can be read"
        if stated is None
        else f"run {stated[0]!r} at "
        + ("an unreadable time" if stated[1] is None else format_time(from_micros(stated[1])))
    )
    return refuse(
        f"events row seq={seq} (event {event_id}): its index columns say run {run_id!r} at "
        f"{format_time(from_micros(int(time_us)))} but its committed JSON says {said}: the "
        "columns were changed outside the ledger, and an erasure selected and checked by "
        "them could erase what the floor or a hold protects. Nothing was erased; run "
        "`ledger db check`"
    )


class _Violation(Exception):
    """A scanned row is inside the floor or under a hold (the caller says which)."""


_WHILE_HELD = (
    "an erasure is refused whole while a hold covers any event it selects: leave the held "
    "events out of the selection (e.g. --run or --event for the others, or an earlier "
    "--before), or, once the hold's reason is over, `ledger hold release ID`"
)


@dataclass(frozen=True, slots=True)
class _Guard:
    """What the scan refuses: rows at or after ``cutoff`` (Unix microseconds: inside
    the floor; past every time when the floor is zero) and rows the standing holds
    cover."""

    cutoff: int
    standing: list[Hold]
    runs: frozenset[str] = frozenset()
    ranges: tuple[tuple[int, int], ...] = ()

    def __init__(self, cutoff: datetime | None, holds: list[Hold]) -> None:
        object.__setattr__(self, "cutoff", 1 << 63 if cutoff is None else to_micros(cutoff))
        object.__setattr__(self, "standing", holds)
        object.__setattr__(self, "runs", frozenset(h.run_id for h in holds if h.run_id))
        ranges = tuple(
            (
                -(1 << 63) if h.since is None else to_micros(h.since),
                1 << 63 if h.until is None else to_micros(h.until),
            )
            for h in holds
            if h.run_id is None
        )
        object.__setattr__(self, "ranges", ranges)

    @property
    def active(self) -> bool:
        """True when a hold stands (rows are checked against it)."""
        return bool(self.standing)

    def holds(self, run_id: str, time_us: int) -> bool:
        """True when a standing hold covers an event of ``run_id`` at ``time_us``."""
        return run_id in self.runs or any(lo <= time_us < hi for lo, hi in self.ranges)


class _Rollback(Exception):
    """Ends a PostgreSQL dry run by rolling its transaction back."""

    def __init__(self, outcome: ErasureOutcome) -> None:
        super().__init__("dry run")
        self.outcome = outcome


_MARK = b'"erased":{'


def _snapshot(conn: sa.Connection) -> None:
    """Make the reads that follow on ``conn`` one consistent snapshot: a deferred
    ``BEGIN`` on SQLite (WAL readers keep the snapshot of their first read), ``REPEATABLE
    READ`` on PostgreSQL; nothing when ``conn`` is already in a transaction (a caller's,
    whose snapshot it is)."""
    if conn.dialect.name == "sqlite":  # the driver begins no transaction of its own here
        raw = conn.connection.dbapi_connection
        if raw is not None and not getattr(raw, "in_transaction", True):
            conn.exec_driver_sql("BEGIN")
    elif conn.dialect.name == "postgresql" and not conn.in_transaction():
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")


def _admin_runs(column: Any) -> tuple[Any, Any, Any]:
    """The retention runs by the ``run_id`` index: the prefix's own range, and the
    prefix compared exactly (:func:`_admin`), so a collation that orders punctuation
    its own way lets in no other run."""
    high = ADMIN_RUN_PREFIX[:-1] + chr(ord(ADMIN_RUN_PREFIX[-1]) + 1)
    return column >= ADMIN_RUN_PREFIX, column < high, _admin(column)


def _admin(column: Any) -> Any:
    """A retention run (exactly: ``substr`` compares bytes, where ``LIKE`` would ignore
    case on SQLite and treat ``_`` as a wildcard)."""
    return sa.func.substr(column, 1, len(ADMIN_RUN_PREFIX)) == ADMIN_RUN_PREFIX


def _not_admin(column: Any) -> Any:
    """Not a retention run (the negation of :func:`_admin`)."""
    return sa.func.substr(column, 1, len(ADMIN_RUN_PREFIX)) != ADMIN_RUN_PREFIX


def _ids_in(column: Any, ids: list[str], dialect: str) -> Any:
    """``column`` is one of ``ids``, as one bound parameter however many they are (an
    ``IN`` list binds one each, and a driver takes at most 65,535): a JSON array read
    by ``json_each`` on SQLite, an array on PostgreSQL; both use the column's index."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import ARRAY

        return column == sa.any_(sa.cast(sa.literal(ids), ARRAY(sa.Text())))
    each = sa.func.json_each(sa.literal(json.dumps(ids))).table_valued("value")
    return column.in_(sa.select(each.c.value))


def _hold(row: Any) -> Hold:
    """A row of the legal holds table; one that does not read (SQL's doing) is refused
    as a changed table."""

    def t(v: Any) -> datetime | None:
        return None if v is None else from_micros(int(v))

    try:
        return Hold(
            hold_id=str(row.hold_id),
            reason=str(row.reason),
            run_id=row.run_id,
            since=t(row.since_us),
            until=t(row.until_us),
            created=t(row.created_us),
            created_by=str(row.created_by),
            released=t(row.released_us),
            released_by=str(row.released_by or ""),
            release_reason=str(row.release_reason or ""),
        )
    except (ValidationError, ValueError, TypeError, OverflowError) as exc:
        what = f"the legal holds table's row {row.hold_id!r} cannot be read ({exc})"
        raise _tampered(what) from None


def _policy_said(event_id: str, record: dict[str, Any], policy: Policy) -> tuple[Any, ...]:
    """What a policy record in the log says of its version (``policy``: its keep, floor
    and keys), in :func:`_policy_said_by`'s form."""
    signature = record.get("signature")
    signed = "" if not signature else f"{signature.get('name')}+{signature.get('key_id')}"
    try:
        at: int | None = to_micros(parse_time(str(record.get("at"))))
    except ValidationError:
        at = None
    return (event_id, record.get("version"), policy, record.get("by"), record.get("reason"),
            at, signed)  # fmt: skip


def _policy_said_by(state: PolicyState) -> tuple[Any, ...]:
    """What the policy table says of a version, as :func:`_policy_said` reads a record."""
    return (state.record_id, state.version, state.policy, state.set_by, state.reason,
            to_micros(state.set_at), state.signed_by)  # fmt: skip


def _erasure_record(r: Any) -> ErasureRecord:
    """A row of the erasures table; one that does not read (SQL's doing) is refused as a
    changed table."""
    try:
        selection = json.loads(r.selection)
        fields = json.loads(r.fields)
        if not isinstance(fields, list) or not _selection_shape(selection):
            raise TypeError("selection or fields of the wrong type")
        return ErasureRecord(
            record_id=str(r.record_id),
            at=from_micros(int(r.at_us)),
            by=str(r.by),
            reason=str(r.reason),
            selection=selection,
            fields=tuple(map(str, fields)),
            events=int(r.rows_erased),
            digest=str(r.digest),
            policy_version=int(r.policy_version),
        )
    except (ValidationError, ValueError, TypeError, OverflowError) as exc:
        raise _tampered(
            f"the erasures table's row {r.record_id!r} cannot be read ({exc})"
        ) from None


def _selection_shape(selection: object) -> bool:
    """True for a selection as :meth:`Selection.to_dict` writes it: a run, a time before
    which (RFC 3339), or event ids."""
    if not isinstance(selection, dict) or len(selection) != 1:
        return False
    ((key, value),) = selection.items()
    if key == "run_id":
        return isinstance(value, str)
    if key == "before":
        try:
            parse_time(value)
        except (ValidationError, TypeError, AttributeError):
            return False
        return True
    return key == "event_ids" and isinstance(value, list) and all(isinstance(i, str) for i in value)


_ERASURE_COLUMNS = (
    "at_us", "by", "reason", "selection", "fields", "rows_erased", "digest", "policy_version",
)  # fmt: skip
"""The columns of an erasures table row :func:`_erasure_row` reads, in its order."""


def _logged_erasure(record: dict[str, Any]) -> tuple[Any, ...] | None:
    """What an erasure's log record and its table row must agree on (the table's side:
    :func:`_erasure_row`), from the record's JSON object; None when it cannot be read.
    A shredding erasure of args and result only records ``events`` 0 (no row changed)
    and the rows whose payloads it shredded as ``shredded_events``: the table's count."""
    try:
        return (
            to_micros(parse_time(str(record["at"]))),
            record["by"],
            record["reason"],
            record["selection"],
            record["fields"],
            int(record["shredded_events" if "shredded_events" in record else "events"]),
            record["digest"],
            int(record["policy"]["version"]),
        )
    except (KeyError, TypeError, ValueError, ValidationError):
        return None


def _erasure_row(row: Sequence[Any]) -> tuple[Any, ...] | None:
    """:func:`_logged_erasure`'s tuple from a row of the erasures table (its
    :data:`_ERASURE_COLUMNS`); None when it cannot be read."""
    at_us, by, reason, selection, fields, rows_erased, digest, version = row
    try:
        return (
            int(at_us), by, reason, orjson.loads(selection), orjson.loads(fields),
            int(rows_erased), digest, int(version),
        )  # fmt: skip
    except (TypeError, ValueError):  # orjson's JSONDecodeError is a ValueError
        return None


def _field_text(value: Any, name: str) -> str | None:
    """A sealed field of an event's stored JSON as the text :func:`is_envelope` reads:
    ``args`` and ``result`` are raw JSON (an envelope is an object), ``preview`` text."""
    if value is None:
        return None
    if name == "preview":
        return value if isinstance(value, str) else None
    return orjson.dumps(value).decode()


def _said(record: dict[str, Any], reason: str, by: str, at_us: object) -> bool:
    """True when a hold record of the log (``reason``, ``by``, ``at``) says what the
    holds table's row says (a member the record does not hold is not compared)."""
    if "reason" in record and record["reason"] != reason:
        return False
    if "by" in record and record["by"] != by:
        return False
    if "at" in record:
        try:
            at = to_micros(parse_time(str(record["at"])))
        except ValidationError:
            return False
        return type(at_us) is int and at == at_us
    return True


def _hold_scope(hold: Hold) -> dict[str, Any]:
    if hold.run_id is not None:
        return {"run_id": hold.run_id}
    return {
        "since": None if hold.since is None else format_time(hold.since),
        "until": None if hold.until is None else format_time(hold.until),
    }


class TablesChanged(RetentionError):
    """The retention tables are not the index of the retention records in the log: they
    were changed outside the ledger (a floor lowered, a hold deleted, by SQL). ``what``
    says how."""

    def __init__(self, message: str, what: str = "") -> None:
        super().__init__(message)
        self.what = what


def _tampered(what: str) -> Exception:
    """The refusal of a request whose retention tables were changed outside the ledger."""
    return TablesChanged(
        f"{what}: the retention tables were changed outside the ledger (`ledger retention "
        "show` and `ledger verify` say how); restore the database from a backup; nothing "
        "was changed",
        what,
    )

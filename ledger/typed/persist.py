"""The trusted persistence step: a transaction artifact becomes records (reference §7.3).

::

    result = persist(config, store, artifact)
    result["ledgers"]["knowledge"]["persisted"], result["ledgers"]["knowledge"]["type"]
    # (2, 'notes')

Steps, all before anything is written:

1. revalidate the artifact as hostile input (:func:`validate_artifact`);
2. reconstruct each ledger it names; any diagnostic fails ("Invalid canonical ledger
   history");
3. reconcile: a request whose deterministic id is already stored (envelope id for notes,
   ``payload.id`` otherwise) is ``already_present`` when the payloads are canonically
   equal (an idempotent retry) and fails with "Conflicting ledger record ID" otherwise;
4. build the new records (one linear parent chain per ledger, starting at the current
   heads; the trusted clock's timestamp) and dry-run the reducer as the reference does:
   the history, then each new record **in order** (so a vote before its note in the same
   batch is refused, "Vote references a missing note"); history values are checked with
   the reference's schema subset, new values against the full Draft 2020-12 schema; then
   the whole history must replay as a projection would.

Only then are the records written, one shard (or a few, at the segment size) per ledger,
all ledgers in **one** store transaction: a failure or a crash (even SIGKILL) at any
step leaves the store as it was or with every ledger's records, never some of them
(see :mod:`ledger.typed.filetxn`; a git store pushes every branch in one atomic push).

The result reports, for **every configured ledger** in configuration order (one with no
appends too: ``requested: 0`` ... ``transactions: []``, as the reference reports it),
counts, types and per request the id, transaction id, operation and status, **never a
value**.

The ``transactions`` entries have exactly the reference's four keys (``id``,
``transaction_id``, ``operation``, ``validated``), one per request, whether it was
persisted now or found already present (the counts say how many of each); raw ledgers
report counts only, as upstream. A
vote for a missing note raises :class:`InvalidVoteError` whose ``result`` is the
reference's audit object ``{requested, persisted: 0, rejected: 1, invalid_vote_requests: 1}``
for that ledger only (the reference also lists the ledgers it had already pushed; here
nothing was written, the transaction being all or nothing).
Concurrent ``persist`` calls on one store are serialized by the store's lock (a folder
store: an advisory ``flock`` on its root; threads and processes alike), so a retried
artifact racing its first attempt is reconciled, never appended twice. A git store
re-plans on the fresher history when another writer pushed first.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ledger.errors import LedgerError, PersistError
from ledger.typed.config import LedgerConfig, LedgerDef
from ledger.typed.jsontext import canonical_json, format_timestamp, new_record_id
from ledger.typed.layout import LedgerChange, StoreError
from ledger.typed.projection import DEFAULT_ROW_LIMIT, validate_replay_output
from ledger.typed.reconstruct import Reconstruction
from ledger.typed.records import Record
from ledger.typed.reducers.notes import NotesReducer
from ledger.typed.reducers.simple import make_reducer
from ledger.typed.shard_writer import new_shards
from ledger.typed.storage import LedgerStore
from ledger.typed.transactions import Append, validate_artifact

__all__ = ["InvalidVoteError", "persist"]

log = logging.getLogger(__name__)
MAX_HEADS = 64


class InvalidVoteError(PersistError):
    """A vote references a missing note; ``result`` is the reference's audit object."""

    def __init__(self, message: str, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.result = result


@dataclass(slots=True, kw_only=True)
class _Plan:
    ledger: LedgerDef
    appends: list[Append]
    fresh: list[Append] = field(default_factory=list)
    present: list[Append] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)


def persist(
    config: LedgerConfig,
    store: LedgerStore,
    artifact: Mapping[str, Any],
    *,
    now: datetime | str | None = None,
) -> dict[str, Any]:
    """Validate, reconcile, dry-run and append ``artifact``; the result object, or raise.

    Raises :class:`~ledger.errors.PersistError` (nothing written) when any check fails.
    The records of every ledger are written in one all-or-nothing store transaction.
    """
    appends = validate_artifact(config, artifact)
    transaction_id: str = artifact["transaction_id"]
    timestamp = _timestamp(now)
    groups = _group(appends)

    def plan() -> tuple[dict[str, LedgerChange], list[_Plan]]:
        plans = [
            _prepare(store, config[name], group, timestamp)
            for name, group in sorted(groups.items())
        ]
        changes: dict[str, LedgerChange] = {}
        for p in plans:
            if p.records:
                try:
                    change, _ = new_shards(p.records, store.segment_bytes(p.ledger.name))
                except LedgerError as exc:
                    raise PersistError(f"Ledger records are not durable: {exc}") from None
                changes[p.ledger.name] = change
        return changes, plans

    try:
        plans = store.run_transaction(plan)
    except (StoreError, OSError) as exc:
        raise PersistError(f"Ledger records are not durable: {exc}") from None
    by_name = {plan.ledger.name: plan for plan in plans}
    ledgers = {  # every configured ledger, in configuration order, as the reference reports
        ledger.name: _report(
            by_name.get(ledger.name) or _Plan(ledger=ledger, appends=[]), transaction_id
        )
        for ledger in config.ledgers
    }
    log.info(
        "persisted transaction %s: %s",
        transaction_id,
        {name: entry["persisted"] for name, entry in ledgers.items()},
    )
    return {"version": 1, "ledgers": ledgers}


def _timestamp(now: datetime | str | None) -> str:
    try:
        return format_timestamp(now)
    except LedgerError as exc:
        raise PersistError(f"invalid persistence time: {exc}") from None


def _group(appends: Sequence[Append]) -> dict[str, list[Append]]:
    groups: dict[str, list[Append]] = {}
    for append in appends:
        groups.setdefault(append.ledger, []).append(append)
    return groups


def _prepare(store: LedgerStore, ledger: LedgerDef, appends: list[Append], timestamp: str) -> _Plan:
    history = store.read(ledger.name)
    if history.diagnostics:
        raise PersistError(
            f"Invalid canonical ledger history in ledger {ledger.name!r}: "
            f"{history.diagnostics[0]} ({len(history.diagnostics)} problem(s))"
        )
    plan = _Plan(ledger=ledger, appends=appends)
    _reconcile(plan, _stored_ids(ledger, history))
    plan.records = _chain(plan, history.heads, timestamp)
    _dry_run(plan, history)
    return plan


def _stored_ids(ledger: LedgerDef, history: Reconstruction) -> dict[str, Record]:
    if ledger.type == "notes":
        return {record.id: record for record in history.records}
    stored: dict[str, Record] = {}
    for record in history.records:
        ident = record.payload.get("id") if isinstance(record.payload, dict) else None
        if isinstance(ident, str):
            stored.setdefault(ident, record)
    return stored


def _reconcile(plan: _Plan, stored: Mapping[str, Record]) -> None:
    for append in plan.appends:
        existing = stored.get(append.final_id)
        if existing is None:
            plan.fresh.append(append)
        elif canonical_json(existing.payload) == canonical_json(append.payload):
            plan.present.append(append)
        else:
            raise PersistError(
                f"Conflicting ledger record ID {append.final_id} in ledger "
                f"{plan.ledger.name!r}: a different record is already stored under it"
            )


def _chain(plan: _Plan, heads: Sequence[str], timestamp: str) -> list[Record]:
    if plan.fresh and len(heads) > MAX_HEADS:
        raise PersistError(f"Too many ledger DAG heads in ledger {plan.ledger.name!r}")
    records: list[Record] = []
    parents: Sequence[str] = heads
    for append in plan.fresh:
        ident = append.final_id if plan.ledger.type == "notes" else new_record_id()
        try:
            record = Record.new(
                id=ident, timestamp=timestamp, parents=parents, payload=append.payload
            )
        except LedgerError as exc:
            raise PersistError(f"Invalid ledger record at index {append.index}: {exc}") from None
        records.append(record)
        parents = (record.sha,)
    return records


def _dry_run(plan: _Plan, history: Reconstruction) -> None:
    ledger = plan.ledger
    if ledger.type is None:
        return
    try:
        # the reference's dry run: the history, then each new record, applied in order
        # (so a vote before its note in one batch fails); history values are checked as
        # the reference checked them, new ones against the full schema (strict on write)
        reducer = make_reducer(ledger.type, schema=ledger.schema, key=ledger.key)
        if isinstance(reducer, NotesReducer):
            reducer.sequential = True
        for record in history.records:
            reducer.apply(record)
        reducer.strict_schema = True
        for record in plan.records:
            reducer.apply(record)
        for _, problem in reducer.finish():
            raise problem
        if plan.records:  # and what is pushed must project (the pre-push validation)
            tables = reducer.output()
            rows = sum(len(t) for t in tables.values())
            limit = max(DEFAULT_ROW_LIMIT, len(history.records) + len(plan.records), rows)
            validate_replay_output(reducer.specs, tables, row_limit=limit)
    except (LedgerError, ValueError, TypeError) as exc:
        message = str(exc)
        if ledger.type == "notes" and "missing note" in message:
            audit = {
                "requested": len(plan.appends),
                "persisted": 0,
                "rejected": 1,
                "invalid_vote_requests": 1,
            }
            raise InvalidVoteError(
                f"Vote references a missing note in ledger {ledger.name!r}: {message}",
                {"version": 1, "ledgers": {ledger.name: audit}},
            ) from None
        raise PersistError(
            f"Ledger {ledger.name!r} would not replay with the new records: {message}"
        ) from None


def _report(plan: _Plan, transaction_id: str) -> dict[str, Any]:
    ledger = plan.ledger
    entry: dict[str, Any] = {
        "requested": len(plan.appends),
        "validated": len(plan.appends),
        "persisted": len(plan.fresh),
        "already_present": len(plan.present),
        "reconciled": len(plan.present),
        "rejected": 0,
        "branch": ledger.branch_name,
    }
    if ledger.type is None:
        return entry
    entry["type"] = ledger.type
    entry["transactions"] = [
        {
            "id": append.final_id,
            "transaction_id": transaction_id,
            "operation": append.operation,
            "validated": True,
        }
        for append in plan.appends
    ]
    if ledger.type == "notes":
        entry |= _note_counts(plan.fresh)
    return entry


def _note_counts(fresh: Sequence[Append]) -> dict[str, int]:
    votes = [a.payload.get("vote") for a in fresh if a.operation == "vote"]
    return {
        "notes_added": sum(1 for a in fresh if a.operation == "note"),
        "note_votes_added": len(votes),
        "upvotes": votes.count("up"),
        "downvotes": votes.count("down"),
        "invalid_vote_requests": 0,
    }

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
   heads; the trusted clock's timestamp) and dry-run the reducers over history plus them.

Only then are the records appended, one shard (or a few, at the segment size) per ledger.
Should a later ledger's append fail, the shards already written by this call are removed
again, so a failure leaves the store as it was. The result reports counts, types and per
request the id, transaction id, operation and status, **never a value**.

The ``transactions`` entries have exactly the reference's four keys (``id``,
``transaction_id``, ``operation``, ``validated``), one per request, whether it was
persisted now or found already present (the counts say how many of each); raw ledgers
report counts only, as upstream. A
vote for a missing note raises :class:`InvalidVoteError` whose ``result`` is the
reference's audit object ``{requested, persisted: 0, rejected: 1, invalid_vote_requests: 1}``.
Concurrent ``persist`` calls on one store are serialized by an advisory lock on the store's
root directory (:func:`store_lock`, POSIX ``flock``; threads and processes alike), so a
retried artifact racing its first attempt is reconciled, never appended twice.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from types import ModuleType
from typing import Any

from ledger.errors import LedgerError, PersistError
from ledger.typed.config import LedgerConfig, LedgerDef
from ledger.typed.records import Record, canonical_json, format_timestamp, new_record_id
from ledger.typed.reducers.simple import replay
from ledger.typed.store import Reconstruction, ShardStore
from ledger.typed.transactions import Append, validate_artifact

__all__ = ["InvalidVoteError", "persist", "store_lock"]

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

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
    store: ShardStore,
    artifact: Mapping[str, Any],
    *,
    now: datetime | str | None = None,
) -> dict[str, Any]:
    """Validate, reconcile, dry-run and append ``artifact``; the result object, or raise.

    Raises :class:`~ledger.errors.PersistError` (nothing written) when any check fails.
    """
    appends = validate_artifact(config, artifact)
    transaction_id: str = artifact["transaction_id"]
    timestamp = _timestamp(now)
    with store_lock(store):
        plans = [
            _prepare(store, config[name], group, timestamp)
            for name, group in sorted(_group(appends).items())
        ]
        _write(store, plans)
    ledgers = {plan.ledger.name: _report(plan, transaction_id) for plan in plans}
    log.info(
        "persisted transaction %s: %s",
        transaction_id,
        {name: entry["persisted"] for name, entry in ledgers.items()},
    )
    return {"version": 1, "ledgers": ledgers}


@contextmanager
def store_lock(store: ShardStore) -> Iterator[None]:
    """Hold the store's exclusive advisory lock (a no-op where ``fcntl`` is missing)."""
    store.root.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield
        return
    fd = os.open(store.root, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


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


def _prepare(store: ShardStore, ledger: LedgerDef, appends: list[Append], timestamp: str) -> _Plan:
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
    if ledger.type is None or not plan.records:
        return
    try:
        replay(ledger, [*history.records, *plan.records])
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


def _write(store: ShardStore, plans: Sequence[_Plan]) -> None:
    written: list[tuple[str, list[Record]]] = []
    try:
        for plan in plans:
            if plan.records:
                name = plan.ledger.name
                located = store.append_records(name, plan.records)
                written.append((name, located))
    except (LedgerError, OSError) as exc:
        _roll_back(store, written)
        raise PersistError(f"Ledger records are not durable: {exc}") from None


def _roll_back(store: ShardStore, written: Sequence[tuple[str, list[Record]]]) -> None:
    for name, records in written:
        for shard in {record.shard for record in records if record.shard}:
            (store.shard_dir(name) / shard).unlink(missing_ok=True)
            log.warning("rolled back shard %s of ledger %s after a failed persist", shard, name)


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

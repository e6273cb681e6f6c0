"""Lossless maintenance compaction: plan, validate as hostile input, apply (reference §5.3)::

    plan = plan_compaction(config, store, "history")        # a dict, or None: nothing to do
    outcome = apply_compaction(config, store, plan)
    outcome.status                                          # "ready"

Compaction merges small, verified shard files into one *built* segment and deletes the
sources. Records are never changed: every record id, sha and parent relation survives and
replaying the ledger before and after gives the identical order and state. Apply checks
exactly that (the *lossless proof*) before it writes anything.

``apply_compaction`` returns one of five outcomes:

- ``ready``: the plan was valid against the current files and has been applied (with
  ``dry_run=True``: would be applied; nothing written);
- ``already_applied``: its sources are gone and its replacement is present, or the state
  file lists its ``plan_id``;
- ``stale``: some or all sources are gone without that evidence;
- ``conflict``: a source or the replacement exists with different content;
- ``rejected``: the plan is malformed, its replacement does not rebuild from the files,
  or the lossless proof failed.

Appends keep working meanwhile: they only add new shard files, which a plan never names.
The git ``base_commit`` of the reference is, here, the SHA-256 of the ledger's shard list
(each segment id with its digest) when the plan was made.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger.errors import LedgerError, ValidationError
from ledger.typed.compaction.plan import (
    PLAN_VERSION,
    RejectedPlanError,
    plan_id,
    validate_plan,
)
from ledger.typed.compaction.segments import (
    COMPACTION_METADATA,
    Segment,
    build_segment,
    file_digest,
    load_segments,
)
from ledger.typed.config import LedgerConfig, LedgerDef
from ledger.typed.jsontext import canonical_json, format_timestamp, sha256_hexdigest
from ledger.typed.layout import LedgerChange
from ledger.typed.order import replay_order
from ledger.typed.records import Record
from ledger.typed.reducers.simple import replay
from ledger.typed.storage import LedgerStore

__all__ = [
    "CompactionOutcome",
    "apply_compaction",
    "plan_compaction",
]

log = logging.getLogger(__name__)

STATE_VERSION = "gh-aw/ledger-compaction-state/v1"
MAX_STATE_BYTES = 64 * 1024
MAX_RECENT = 20
_INTERVALS = {"daily": timedelta(hours=20), "weekly": timedelta(hours=164)}


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionOutcome:
    """What :func:`apply_compaction` found (and did): ``status`` is one of five values."""

    status: str
    plan_id: str | None = None
    reason: str = ""
    applied: bool = False
    added: tuple[str, ...] = field(default=())
    removed: tuple[str, ...] = field(default=())


# --- planning -----------------------------------------------------------------------------


def plan_compaction(
    config: LedgerConfig,
    store: LedgerStore,
    name: str,
    *,
    trigger: str = "requested",
    now: datetime | None = None,
) -> dict[str, Any] | None:
    """A compaction plan for ledger ``name``, or ``None`` when nothing is due or worth doing.

    ``trigger`` is ``"requested"`` (always due) or ``"scheduled"`` (due per the ledger's
    ``compaction.schedule``: never for manual, after 20 h daily, after 164 h weekly).
    """
    if trigger not in ("requested", "scheduled"):
        raise ValidationError(f"trigger must be 'requested' or 'scheduled', not {trigger!r}")
    ledger = config[name]
    moment = now or datetime.now(UTC)
    if not ledger.compaction.enabled or not _due(store, ledger, trigger, moment):
        return None
    segments = load_segments(store, name)
    selected = _select(ledger, segments)
    if selected is None:
        return None
    records = [record for segment in selected for record in segment.records]
    replacement_id, content = build_segment(records, COMPACTION_METADATA)
    sources = [s for s in selected if s.id != replacement_id]
    if not sources:
        return None
    plan: dict[str, Any] = {
        "version": PLAN_VERSION,
        "ledger": name,
        "branch": ledger.branch_name,
        "trigger": trigger,
        "created_at": format_timestamp(moment),
        "base_commit": _base_commit(segments),
        "sources": [_entry(s.id, s.sha256, s.bytes, s.shas) for s in sorted(sources, key=_id)],
        "replacement": _entry(
            replacement_id, file_digest(content), len(content), sorted({r.sha for r in records})
        ),
    }
    plan["plan_id"] = plan_id(plan)
    log.info("planned compaction %s of ledger %s: %d sources", plan["plan_id"], name, len(sources))
    return plan


def _id(segment: Segment) -> str:
    return segment.id


def _entry(segment: str, digest: str, size: int, records: list[str]) -> dict[str, Any]:
    return {"segment": segment, "sha256": digest, "bytes": size, "records": records}


def _due(store: LedgerStore, ledger: LedgerDef, trigger: str, now: datetime) -> bool:
    if trigger == "requested":
        return True
    schedule = ledger.compaction.schedule
    if schedule not in _INTERVALS:
        return False
    state = read_state(store, ledger.name)
    if state is None:
        return True
    try:
        last = datetime.strptime(state["last_applied_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
    except (KeyError, TypeError, ValueError):
        return True
    return now.astimezone(UTC) - last.replace(tzinfo=UTC) >= _INTERVALS[schedule]


def _select(ledger: LedgerDef, segments: Mapping[str, Segment]) -> list[Segment] | None:
    limit = ledger.max_segment_bytes
    candidates = sorted(
        (s for s in segments.values() if s.valid and s.bytes < limit), key=lambda s: s.id
    )
    policy = ledger.compaction
    if len(candidates) < policy.min_segments:
        return None
    selected: list[Segment] = []
    seen: set[str] = set()
    total = 0
    for segment in candidates:
        fresh = {r.sha: r for r in segment.records if r.sha not in seen}
        size = sum(len(r.to_line().encode("utf-8", "surrogatepass")) + 1 for r in fresh.values())
        if total + size > limit:
            continue
        selected.append(segment)
        seen |= set(fresh)
        total += size
        if len(selected) >= policy.max_segments:
            break
    return selected if len(selected) >= 2 else None


def _base_commit(segments: Mapping[str, Segment]) -> str:
    listing = [[seg_id, segments[seg_id].sha256] for seg_id in sorted(segments)]
    return sha256_hexdigest(canonical_json(listing))


# --- applying -----------------------------------------------------------------------------


def apply_compaction(
    config: LedgerConfig,
    store: LedgerStore,
    plan: Mapping[str, Any],
    *,
    dry_run: bool = False,
    now: datetime | None = None,
) -> CompactionOutcome:
    """Revalidate ``plan`` against the current files and, when ``ready``, apply it."""
    try:
        validate_plan(config, plan)
    except RejectedPlanError as exc:
        return CompactionOutcome(status="rejected", reason=str(exc))
    ledger = config[plan["ledger"]]

    def run() -> tuple[dict[str, LedgerChange], CompactionOutcome]:
        outcome, change = _apply(ledger, store, plan, dry_run=dry_run, now=now)
        return ({} if change is None else {ledger.name: change}), outcome

    outcome = store.run_transaction(run)
    if outcome.applied:
        log.info("applied compaction %s of ledger %s", plan["plan_id"], ledger.name)
    return outcome


def _apply(
    ledger: LedgerDef,
    store: LedgerStore,
    plan: Mapping[str, Any],
    *,
    dry_run: bool,
    now: datetime | None,
) -> tuple[CompactionOutcome, LedgerChange | None]:
    pid: str = plan["plan_id"]
    name = ledger.name
    state = read_state(store, name)
    if state is not None and pid in state.get("recent_plan_ids", ()):
        outcome = CompactionOutcome(
            status="already_applied", plan_id=pid, reason="plan id recorded"
        )
        return outcome, None
    segments = load_segments(store, name)
    verdict = _check_files(plan, segments)
    if verdict is not None:
        return CompactionOutcome(status=verdict[0], plan_id=pid, reason=verdict[1]), None
    problem, content = _rebuild_and_prove(ledger, plan, segments)
    if problem is not None:
        return CompactionOutcome(status="rejected", plan_id=pid, reason=problem), None
    replacement: str = plan["replacement"]["segment"]
    removed = tuple(source["segment"] for source in plan["sources"])
    added = () if replacement in segments else (replacement,)
    outcome = CompactionOutcome(
        status="ready", plan_id=pid, applied=not dry_run, added=added, removed=removed
    )
    if dry_run:
        return outcome, None
    change = LedgerChange(
        add={f"{replacement}.jsonl": content} if added else {},
        remove=[f"{seg_id}.jsonl" for seg_id in removed],
        state=state_bytes(store, name, plan, now),
        message=f"Compact ledger {name} with plan {pid}",
    )
    return outcome, change


def _check_files(
    plan: Mapping[str, Any], segments: Mapping[str, Segment]
) -> tuple[str, str] | None:
    sources: list[Mapping[str, Any]] = plan["sources"]
    present = [s for s in sources if s["segment"] in segments]
    for source in present:
        segment = segments[source["segment"]]
        same = (segment.sha256, segment.bytes, segment.shas) == (
            source["sha256"],
            source["bytes"],
            source["records"],
        )
        if not segment.valid or not same:
            return "conflict", f"source segment {segment.id} changed or is invalid"
    replacement = plan["replacement"]
    existing = segments.get(replacement["segment"])
    if existing is not None and (existing.sha256, existing.bytes) != (
        replacement["sha256"],
        replacement["bytes"],
    ):
        return "conflict", f"replacement segment {existing.id} exists with other content"
    if not present:
        if existing is not None:
            return "already_applied", "every source is gone and the replacement is present"
        return "stale", "every source is gone but the replacement is absent"
    if len(present) < len(sources):
        return "stale", f"{len(sources) - len(present)} of {len(sources)} sources are gone"
    return None


def _rebuild_and_prove(
    ledger: LedgerDef, plan: Mapping[str, Any], segments: Mapping[str, Segment]
) -> tuple[str | None, bytes]:
    sources = {source["segment"] for source in plan["sources"]}
    replacement = plan["replacement"]
    pool = [r for seg_id in sources for r in segments[seg_id].records]
    if replacement["segment"] in segments:
        pool += segments[replacement["segment"]].records
    seg_id, content = build_segment(pool, COMPACTION_METADATA)
    rebuilt = (seg_id, file_digest(content), len(content), sorted({r.sha for r in pool}))
    planned = (
        replacement["segment"],
        replacement["sha256"],
        replacement["bytes"],
        replacement["records"],
    )
    if rebuilt != planned:
        return "the replacement does not rebuild from the ledger's own records", content
    before = [r for s in segments.values() if s.valid for r in s.records]
    after = [r for s in segments.values() if s.valid and s.id not in sources for r in s.records]
    after += pool
    return _lossless(ledger, before, after), content


def _lossless(ledger: LedgerDef, before: Sequence[Record], after: Sequence[Record]) -> str | None:
    old = {r.sha: (r.id, r.parents, canonical_json(r.payload)) for r in before}
    new = {r.sha: (r.id, r.parents, canonical_json(r.payload)) for r in after}
    if old != new:
        return "lossless proof failed: record ids, shas or parents would change"
    old_order, new_order = replay_order(before), replay_order(after)
    if [r.sha for r in old_order] != [r.sha for r in new_order]:
        return "lossless proof failed: the replay order would change"
    if ledger.type is not None and _state(ledger, old_order) != _state(ledger, new_order):
        return "lossless proof failed: the replayed state would change"
    return None


def _state(ledger: LedgerDef, records: Sequence[Record]) -> object:
    try:
        return ("ok", replay(ledger, records, ordered=True).tables)
    except (LedgerError, ValueError, TypeError) as exc:
        return ("error", str(exc))


# --- the state file -----------------------------------------------------------------------


def read_state(store: LedgerStore, name: str) -> dict[str, Any] | None:
    """The ledger's compaction state, or ``None`` when absent or invalid (it is ignored)."""
    try:
        data = store.read_state(name)  # a link raises StoreError: refused, not ignored
        if data is None or len(data) > MAX_STATE_BYTES:
            return None
        state = json.loads(data.decode("utf-8"))
    except (OSError, ValueError):
        return None
    keys = {
        "version",
        "ledger",
        "last_plan_id",
        "last_trigger",
        "last_applied_at",
        "recent_plan_ids",
    }
    if not isinstance(state, dict) or set(state) != keys or state["version"] != STATE_VERSION:
        return None
    if state["ledger"] != name or not isinstance(state["recent_plan_ids"], list):
        return None
    return state


def state_bytes(
    store: LedgerStore, name: str, plan: Mapping[str, Any], now: datetime | None = None
) -> bytes:
    """The state file recording ``plan`` as the last applied one (newest first, at most
    20 ids)."""
    previous = read_state(store, name)
    recent = [pid for pid in (previous or {}).get("recent_plan_ids", []) if pid != plan["plan_id"]]
    state = {
        "version": STATE_VERSION,
        "ledger": name,
        "last_plan_id": plan["plan_id"],
        "last_trigger": plan["trigger"],
        "last_applied_at": format_timestamp(now or datetime.now(UTC)),
        "recent_plan_ids": [plan["plan_id"], *recent][:MAX_RECENT],
    }
    return (canonical_json(state) + "\n").encode()

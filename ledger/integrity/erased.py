"""The erased-row rule of ``ledger verify``: a tombstone is *erased (hash kept)* only
when an erasure record in the log accounts for it; otherwise it is tampering.

>>> rows = ErasedRows()
>>> rows.leaf(0, b'{"event_id":"01J...","kind":"request"}') is None   # an ordinary row
True

An erased row's stored bytes are a tombstone (:mod:`ledger.model.erasure`): its leaf is
the leaf hash the tombstone keeps, which must equal the level-0 node the log stored when
the event was committed, so the tree, the checkpoints and the proofs still verify. Each
tombstone names the erasure records that made it; each record (an ``action`` of tool
``ledger.erase``, itself a leaf of the log, after the rows it erased) states how many rows
it erased and two digests: of their ``(leaf index, leaf hash)`` and of the
``(leaf index, SHA-256 of the tombstone bytes)`` it wrote. Verification recomputes both
from the tombstones in one pass (memory: a few hashers per record, and the indexes of
erased rows for the level-0 check). A tombstone that names no record in the log, a record
whose count or digests the tombstones do not match (a tombstone forged, added, changed
or removed), or a kept leaf hash that is not the stored level-0 node is a finding. When a
later erasure re-erased some of a record's rows (whole after fields), those rows' bytes
are the later record's to vouch for, and the earlier record's tombstone digest is not
checked (its count and leaf digest still are).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger.integrity.policy_change import (
    false_signature,
    floor_cutoff,
    lowers,
    signed_by,
    signed_here,
)
from ledger.model.erasure import (
    ADMIN_RUN_PREFIX,
    ERASE_TOOL,
    POLICY_TOOL,
    HoldScope,
    hold_change,
    policy_floor,
    record_summary,
    retention_record,
    tombstone_of,
)
from ledger.timefmt import format_duration, format_time, utc_now

__all__ = ["ErasedRows", "RecordTally"]

_MAX_LISTED = 10
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_ID_PREFIX = b'{"event_id":"'  # how every row the ledger writes begins
_SKEW = timedelta(minutes=5)  # how far ahead of the verifier's clock a writer's may be


@dataclass(slots=True)
class RecordTally:
    """What the tombstones naming one erasure record add up to."""

    rows: int = 0
    # rows whose bytes as this record wrote them are known: those whose latest erasure
    # it is, and those a later erasure replaced keeping their digest (erased.earlier)
    last_rows: int = 0
    first_index: int = -1
    leaves: Any = field(default_factory=hashlib.sha256)
    stones: Any = field(default_factory=hashlib.sha256)
    event_ids: list[str] = field(default_factory=list)
    found: bool = False
    at_index: int = -1  # the record's own leaf index, once its row is read
    summary: Any = None  # the record's RecordSummary once its row is read
    youngest: datetime | None = None  # the latest event time among its rows
    in_force: tuple[int, timedelta] | None = None  # the log's policy when it was read
    holds: tuple[HoldScope, ...] = ()  # the log's standing holds when it was read
    runs: dict[str, int] = field(default_factory=dict)  # its rows per run, for the holds
    times: array[int] = field(default_factory=lambda: array("q"))  # its rows' times (µs)
    untimed: int = 0  # its rows whose time could not be read


class ErasedRows:
    """State of the erased-row rule over one pass (see the module notes)."""

    __slots__ = ("before", "claims", "holds", "keys", "policy", "records", "unsigned")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget every row read (a pass starting over)."""
        self.records: dict[str, RecordTally] = {}
        self.claims: list[tuple[int, bytes, str]] = []  # (leaf index, kept hash, event id)
        self.policy: tuple[int, timedelta] | None = None  # the policy in force (version, floor)
        self.keys: tuple[str, ...] = ()  # the keys of the policy in force
        self.before: str | None = None  # the event id of its record
        self.holds: dict[str, HoldScope] = {}  # the holds placed and not yet released
        # (event id, message, leaf index) of each policy record that lowered the floor,
        # or changed the keys, with no valid signature by a key of the policy before it,
        # and of each tombstone of a retention record (never erased by the ledger)
        self.unsigned: list[tuple[str, str, int]] = []

    def retention_record(self, data: bytes, event_id: str = "", index: int = -1) -> None:
        """Read a row of a retention run (rows in leaf order): a policy record is the
        policy in force from there on (unless it lowers the floor, or changes the keys,
        without a valid signature by a key of the policy before it: then it is a
        finding and the policy before it stays in force), a hold's record or release
        changes the standing holds, for the erasure records that follow; an erasure
        record is tallied even when no tombstone names it (its rows were put back)."""
        found = retention_record(data)
        if found is None:
            return
        tool, args = found
        if not event_id and data.startswith(_ID_PREFIX):
            event_id = data[13:39].decode("ascii", "replace")
        if tool == ERASE_TOOL:
            if event_id not in self.records:
                self.records[event_id] = RecordTally()
            self.see(event_id, data, index)
            return
        if tool == POLICY_TOOL:
            policy = policy_floor(args)
            if policy is None:
                return
            keys = args.get("keys")
            keys = tuple(keys) if type(keys) is list and all(type(k) is str for k in keys) else ()
            if self.policy is not None and lowers(self.policy[1], self.keys, policy[1], keys):
                if not signed_by(args, self.keys):
                    said = _unsigned(event_id, policy, self.policy, _UNSIGNED)
                    self.unsigned.append((event_id, said, index))
                    return
                if not signed_here(args, self.before):
                    said = _unsigned(event_id, policy, self.policy, _ELSEWHERE)
                    self.unsigned.append((event_id, said, index))
                    return
            if false_signature(args, self.keys, keys):  # it stands (no signature was
                # needed), but the signer it shows did not sign it
                self.unsigned.append((event_id, _falsely_signed(event_id, policy, args), index))
            self.policy, self.keys = policy, keys
            self.before = event_id
            return
        change = hold_change(tool, args)
        if change is not None:
            hold, scope = change
            if scope is None:
                self.holds.pop(hold, None)
            else:
                self.holds[hold] = scope

    def leaf(self, index: int, data: bytes, event_id: str = "") -> bytes | None:
        """The kept leaf hash when ``data`` is a tombstone (tallied), else None."""
        stone = tombstone_of(data)
        if stone is None:
            return None
        key = index.to_bytes(8, "big")
        self.claims.append((index, stone.leaf_hash, event_id))
        if stone.run_id.startswith(ADMIN_RUN_PREFIX):
            self.unsigned.append((event_id, f"event {event_id or '?'} (leaf {index}) is a "
                                  f"tombstone of a retention record (run {stone.run_id}): "
                                  "retention records are the proof of what was erased and "
                                  "the ledger never erases them, so it was erased outside "
                                  "it", index))  # fmt: skip
        for record in stone.records:
            tally = self.records.get(record)
            if tally is None:
                tally = self.records[record] = RecordTally()
            tally.rows += 1
            if tally.first_index < 0:
                tally.first_index = index
            tally.leaves.update(key + stone.leaf_hash)
            written = stone.written_digest(record, data)
            if written is not None:
                tally.last_rows += 1
                tally.stones.update(key + written)
            if len(tally.event_ids) < _MAX_LISTED:
                tally.event_ids.append(event_id)
            if stone.time is not None and (tally.youngest is None or stone.time > tally.youngest):
                tally.youngest = stone.time
            tally.runs[stone.run_id] = tally.runs.get(stone.run_id, 0) + 1
            if stone.time is None:
                tally.untimed += 1
            else:
                tally.times.append((stone.time - _EPOCH) // _MICRO)
        return stone.leaf_hash

    def see(self, event_id: str, data: bytes, index: int = -1) -> None:
        """Read the row ``event_id`` (leaf ``index``) as an erasure record when
        tombstones named it."""
        tally = self.records.get(event_id)
        if tally is not None and not tally.found:
            tally.found = True
            tally.at_index = index
            tally.summary = record_summary(data)
            tally.in_force = self.policy
            tally.holds = tuple(self.holds.values())

    @property
    def erased(self) -> int:
        """How many tombstones were read."""
        return len(self.claims)

    def problems(self, stored_leaves: Iterable[tuple[int, bytes]]) -> list[tuple[str, str, int]]:
        """``(record or event id, message, leaf index)`` for each tombstone the log does
        not account for; ``stored_leaves`` are the stored level-0 nodes in index order
        (read only when there are tombstones)."""
        out: list[tuple[str, str, int]] = list(self.unsigned)
        for record, t in self.records.items():
            if not t.rows:  # an erasure record no tombstone names
                if t.summary is not None and t.summary.events > 0:
                    out.append((record, f"erasure record {record} erased "
                                f"{t.summary.events} row(s) but no tombstone names it: the "
                                "erased rows were put back (their bytes restored, or "
                                "replaced) outside the ledger", t.at_index))  # fmt: skip
                continue
            listed = ", ".join(e for e in t.event_ids if e)
            where = f"{t.rows} tombstone(s) ({listed}{' ...' if t.rows > _MAX_LISTED else ''})"
            s = t.summary
            if not t.found or s is None:
                out.append((record, f"{where} name erasure record {record}, which is not an "
                            "erasure record in the log: the rows' bytes were replaced outside "
                            "the ledger", t.first_index))  # fmt: skip
            elif s.events != t.rows or s.digest != t.leaves.hexdigest():
                out.append((record, f"erasure record {record} erased {s.events} row(s) but "
                            f"{where} name it, or their kept leaf hashes differ: a tombstone "
                            "was forged, added or removed outside the ledger",
                            t.first_index))  # fmt: skip
            elif t.last_rows == t.rows and s.tombstones != t.stones.hexdigest():
                out.append((record, f"the tombstones of erasure record {record} are not the "
                            "bytes it wrote: a tombstone was changed after the erasure",
                            t.first_index))  # fmt: skip
            else:
                forbidden = _against_policy(record, t)
                if forbidden:
                    out.append((record, forbidden, t.first_index))
        if self.claims:
            claims = iter(sorted(self.claims))
            want = next(claims, None)
            for index, stored in stored_leaves:
                while want is not None and want[0] < index:
                    want = next(claims, None)
                if want is None:
                    break
                if want[0] == index and want[1] != stored:
                    out.append((want[2], f"the tombstone of event {want[2]} keeps a leaf hash "
                                f"that is not the one the log stored for leaf {index}",
                                index))  # fmt: skip
        return out

    def summaries(self) -> list[tuple[str, int, int]]:
        """``(record id, rows, first leaf index)`` for each erasure record named."""
        return [(r, t.rows, t.first_index) for r, t in self.records.items() if t.rows]


def _against_policy(record: str, t: RecordTally) -> str:
    """Why erasure record ``record`` was not allowed by the retention policy the log
    held when it was made (its last policy record before it), or "": made with no
    policy in force, under another version than it names, or erasing an event younger
    than that policy's floor at the time it states."""
    s = t.summary
    if t.in_force is None:
        return (
            f"erasure record {record} erased {t.rows} row(s) while the log held no retention "
            "policy: nothing may be erased before a policy is set, so it was made outside "
            "the ledger"
        )
    version, floor = t.in_force
    if s.policy_version != version or s.floor != floor:
        named = f"version {s.policy_version}" if s.policy_version is not None else "no version"
        return (
            f"erasure record {record} names policy {named} (floor "
            f"{'?' if s.floor is None else format_duration(s.floor)}), but the policy in the "
            f"log when it was made is version {version} (floor {format_duration(floor)})"
        )
    if s.at is None:
        return f"erasure record {record} does not say when it was made"
    if s.at > utc_now() + _SKEW:  # a later date would move the floor's cutoff forward
        return (
            f"erasure record {record} is dated {format_time(s.at)}, after this "
            "verification's own clock: the ledger dates an erasure when it makes it"
        )
    cutoff = floor_cutoff(s.at, floor)
    if cutoff is not None and t.youngest is not None and t.youngest >= cutoff:
        return (
            f"erasure record {record} erased an event inside the retention floor of "
            f"{format_duration(floor)} (an event from {format_time(t.youngest)}; at "
            f"{format_time(s.at)} nothing from {format_time(cutoff)} on could be erased)"
        )
    for hold in t.holds:
        held = _held(hold, t)
        if held:
            return (
                f"erasure record {record} erased {held} event(s) under legal hold "
                f"{hold.hold_id} ({_covers(hold)}), which stood in the log when it was made"
            )
    return ""


_UNSIGNED = (
    "without a valid signature by one of that policy's keys: the ledger never writes such "
    "a change, so it was made outside it"
)
_ELSEWHERE = (
    "with a signature made for another ledger's policy (its record was copied into this "
    "log, not made here)"
)


def _unsigned(
    event_id: str, policy: tuple[int, timedelta], before: tuple[int, timedelta], why: str
) -> str:
    """The finding of a policy record that lowers the floor (or changes the keys) and
    does not stand (``why``: :data:`_UNSIGNED` or :data:`_ELSEWHERE`)."""
    version, floor = policy
    return (
        f"retention policy record {event_id or '?'} (version {version}, floor "
        f"{format_duration(floor)}) lowers the floor of version {before[0]} "
        f"({format_duration(before[1])}) or changes its keys {why}; erasures after it "
        f"are judged under version {before[0]}"
    )


def _falsely_signed(event_id: str, policy: tuple[int, timedelta], args: Any) -> str:
    """The finding of a policy record whose signature no policy key made."""
    signature = args.get("signature")
    signer = (
        f" by {signature.get('name')}+{signature.get('key_id')}"
        if isinstance(signature, dict)
        else ""
    )
    version, floor = policy
    return (
        f"retention policy record {event_id or '?'} (version {version}, floor "
        f"{format_duration(floor)}) carries a signature{signer} that no key of the policy "
        "before or after it made: the ledger never writes such a change, so it was made "
        "outside it (the change itself needed no signature and stands)"
    )


def _held(hold: HoldScope, t: RecordTally) -> int:
    """How many of the rows ``t`` tallies ``hold`` covers (a row of unknown time counts
    for a time range: nothing shows it is outside)."""
    if hold.run_id is not None:
        return t.runs.get(hold.run_id, 0)
    lo = -(1 << 63) if hold.since is None else (hold.since - _EPOCH) // _MICRO
    hi = (1 << 63) if hold.until is None else (hold.until - _EPOCH) // _MICRO
    return t.untimed + sum(1 for us in t.times if lo <= us < hi)


def _covers(hold: HoldScope) -> str:
    if hold.run_id is not None:
        return f"run {hold.run_id}"
    start = format_time(hold.since) if hold.since else "(open)"
    end = format_time(hold.until) if hold.until else "(open)"
    return f"{start} .. {end}"

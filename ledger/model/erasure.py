"""What an erased event keeps: the ``erased`` member of a tombstone, and the rule that
reads one back from stored bytes.

>>> from ledger.model.event import Event
>>> ev = Event(kind="action", run_id="r1", call_id="c1", tool="send_mail",
...            args={"to": "alice@example.com"}, verdict="allowed")
>>> gone = erase_fields(ev, fields=ALL_FIELDS, leaf_hash="ab" * 32,
...                     record="01JDX0S1ZQ9T4W8M3V6K2N7B5C", reason="GDPR Art. 17 request 42")
>>> gone.args is None, gone.tool, gone.erased.reason
(True, 'send_mail', 'GDPR Art. 17 request 42')
>>> tombstone_of(gone.to_json().encode()).leaf_hash == bytes.fromhex("ab" * 32)
True

An erasure (``ledger erase``) replaces an event's stored bytes with a *tombstone*: the
same event with its content fields removed and one more member, ``erased``::

    "erased": {"earlier": ["<64 hex>"],               (re-erased) the bytes before it
               "fields": ["args", "result"],         the fields that were removed
               "had_err": false,                      (with err) whether it held one
               "leaf_hash": "<64 hex>",               the event's original leaf hash
               "marked_safe": true,                   (a decision's label or reason)
               "records": ["<erasure record id>"],    the erasures that removed them
               "reason": "GDPR Art. 17 request 42"}   the latest erasure's reason

What a tombstone always keeps (:data:`KEPT_FIELDS`): the event id, run id, call id,
time, kind, tool, verdict and duration, so chains still pair intents with results and
reports still count actions and denials. Two facts of the erased fields stay too, since
the chain and the report are built from them and neither is the erased text: when
``err`` goes, whether the event held one (``had_err``: the call failed, see
:func:`ledger.model.marks.failed`), and when a ``gate_decision``'s ``label`` or
``reason`` goes, whether they marked a safe read (``marked_safe``, see
:func:`ledger.model.marks.marks_safe`). An erased run reads as it read before: its safe
reads are still safe reads, its failed calls still failed. (A tombstone written before
these members were kept has neither: its failure is then unknown, and its decision not
marked safe.) A field-level erasure removes only the fields
named (``args`` and ``result``, say); a whole erasure removes every field of
:data:`ALL_FIELDS`. The leaf hash is the one the Merkle log stored for the event when it
was committed (its level-0 node), so the tree, its checkpoints and every proof still
verify; ``ledger verify`` takes an erased row's leaf from there and requires an erasure
record in the log (an ``action`` of tool :data:`ERASE_TOOL`, whose arguments carry the
number of rows it erased and two :func:`erasure_digest` values: of their leaf hashes, and
of the tombstone bytes it wrote) for each tombstone, so a tombstone changed afterwards,
or one no erasure made, is tampering. A tombstone erased again keeps, in ``earlier``, the
SHA-256 of the bytes each earlier erasure left (oldest first, one for each of
``records`` but the last): the bytes that erasure's ``tombstones`` digest covers, which
an evidence bundle of another run that erasure touched needs once they are gone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

import orjson

from ledger.errors import ValidationError
from ledger.model.marks import marks_safe, stated_failed
from ledger.timefmt import parse_duration, parse_time

__all__ = [
    "ALL_FIELDS",
    "ERASE_TOOL",
    "KEPT_FIELDS",
    "POLICY_TOOL",
    "Erasure",
    "RecordSummary",
    "Tombstone",
    "erase_fields",
    "erase_stored",
    "erased_reason",
    "erased_text",
    "erased_whole",
    "erasure_digest",
    "hold_change",
    "kept_facts",
    "policy_floor",
    "record_summary",
    "request_field",
    "request_shown",
    "retention_record",
    "tombstone_of",
]

ADMIN_RUN_PREFIX = "ledger-retention-"
"""The run id prefix of the runs that record retention changes (only actions in such a
run are retention records)."""
ERASE_TOOL = "ledger.erase"
"""The tool name of an erasure record (an ``action`` the ledger appends to its own log)."""
POLICY_TOOL = "ledger.retention.set"
"""The tool name of a retention policy record (verification checks each erasure against
the policy the log held when it was made)."""
HOLD_ADD_TOOL = "ledger.hold.add"
"""The tool name of a legal hold's record (and of its release, below): verification
checks each erasure against the holds standing when it was made."""
HOLD_RELEASE_TOOL = "ledger.hold.release"

ALL_FIELDS = (
    "refs", "agent_path", "label", "preview", "args", "reason", "result", "err", "actor",
    "approval",
)  # fmt: skip
"""Every field an erasure can remove; erasing an event whole removes all of them."""

KEPT_FIELDS = ("event_id", "run_id", "call_id", "time", "kind", "tool", "verdict", "duration_ms")
"""What a tombstone always keeps: the structure chains and reports are built from."""

_EMPTY: dict[str, Any] = {
    "refs": (), "agent_path": "", "label": "", "preview": "", "args": None, "reason": "",
    "result": None, "err": "", "actor": None, "approval": None,
}  # fmt: skip
_MARK = b'"erased":{'


class _Erasable(Protocol):
    """An event as :func:`erase_fields` needs it (``ledger.model.event.Event``)."""

    @property
    def event_id(self) -> object: ...
    @property
    def kind(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def err(self) -> str: ...
    @property
    def erased(self) -> Erasure | None: ...
    def replace(self, **changes: Any) -> Any: ...
    def to_json(self) -> str: ...


E = TypeVar("E", bound=_Erasable)


@dataclass(frozen=True, slots=True, kw_only=True)
class Erasure:
    """The ``erased`` member of a tombstone.

    ``fields``: the names of the fields the event held that were erased (in
    :data:`ALL_FIELDS` order; a field the event never held is not named, so a reader
    shows as erased only what was there: empty when the event, erased whole, held none
    of them); ``leaf_hash``: the
    event's leaf hash as 64 lowercase hex digits; ``records``: the event ids of the
    erasure records that removed them, oldest first; ``reason``: the latest reason.
    """

    fields: tuple[str, ...]
    leaf_hash: str
    records: tuple[str, ...]
    reason: str
    had_err: bool | None = None
    """Whether the event held an ``err`` (its call failed); set when ``err`` is erased
    (None: not known, as in a tombstone written before it was kept)."""
    marked_safe: bool | None = None
    """Whether a ``gate_decision``'s ``label`` or ``reason`` marked a safe read; set when
    either is erased (None: not known)."""
    earlier: tuple[str, ...] = ()
    """SHA-256 (64 hex digits) of the tombstone bytes each earlier erasure of the event
    left, for the last ``len(earlier)`` of ``records[:-1]``, oldest first: empty for a
    tombstone one erasure wrote; a tombstone erased again before they were kept holds
    fewer than ``records[:-1]``."""

    def __post_init__(self) -> None:
        unknown = [f for f in self.fields if f not in ALL_FIELDS]
        if unknown or len(set(self.fields)) != len(self.fields):
            raise ValidationError(
                f"erased.fields: {list(self.fields)!r} must name fields among "
                f"{', '.join(ALL_FIELDS)}"
            )
        for name, value, needs in (
            ("had_err", self.had_err, ("err",)),
            ("marked_safe", self.marked_safe, ("label", "reason")),
        ):
            if value is not None and (type(value) is not bool or not set(needs) & set(self.fields)):
                raise ValidationError(
                    f"erased.{name}: {value!r} must be true or false, and only when "
                    f"{' or '.join(needs)} is among the erased fields"
                )
        if len(self.leaf_hash) != 64 or self.leaf_hash.strip("0123456789abcdef"):
            raise ValidationError(f"erased.leaf_hash: {self.leaf_hash!r} is not 64 hex digits")
        if not self.records or not all(isinstance(r, str) and len(r) == 26 for r in self.records):
            raise ValidationError(f"erased.records: {self.records!r} must be event ids")
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ValidationError("erased.reason: an erasure needs a non-empty reason")
        if len(self.earlier) >= len(self.records) or not all(
            isinstance(d, str) and len(d) == 64 and not d.strip("0123456789abcdef")
            for d in self.earlier
        ):
            raise ValidationError(
                f"erased.earlier: {list(self.earlier)!r} must be 64 hex digits for each of "
                "at most the records but the last"
            )

    def written_by(self, record: str) -> str | None:
        """The SHA-256 (hex) of the tombstone bytes ``record`` (one of ``records``) left:
        None for the last record (its bytes are the stored ones) or one erased again
        before ``earlier`` was kept.

        >>> e = Erasure(fields=("args",), leaf_hash="ab" * 32, records=("A" * 26, "B" * 26),
        ...             reason="r", earlier=("cd" * 32,))
        >>> e.written_by("A" * 26) == "cd" * 32, e.written_by("B" * 26)
        (True, None)
        """
        if record not in self.records[:-1]:
            return None
        position = self.records.index(record) - (len(self.records) - 1 - len(self.earlier))
        return self.earlier[position] if position >= 0 else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON member, its members in sorted order (as RFC 8785 orders them)."""
        out: dict[str, Any] = {"earlier": list(self.earlier)} if self.earlier else {}
        out["fields"] = list(self.fields)
        if self.had_err is not None:
            out["had_err"] = self.had_err
        out["leaf_hash"] = self.leaf_hash
        if self.marked_safe is not None:
            out["marked_safe"] = self.marked_safe
        out["records"] = list(self.records)
        out["reason"] = self.reason
        return out

    @classmethod
    def from_dict(cls, value: object) -> Erasure:
        """Read the ``erased`` member back (``ValidationError`` when malformed)."""
        if not isinstance(value, Mapping):
            raise ValidationError(f"erased: expected an object, got {type(value).__name__}")
        fields, records = value.get("fields"), value.get("records")
        leaf, reason = value.get("leaf_hash"), value.get("reason")
        earlier = value.get("earlier", [])
        if (
            not isinstance(earlier, list)
            or not isinstance(fields, list)
            or not isinstance(records, list)
            or not isinstance(leaf, str)
            or not isinstance(reason, str)
            or not _REQUIRED <= set(value) <= _MEMBERS
        ):
            raise ValidationError(
                "erased: expected {fields: [...], leaf_hash: hex, records: [...], reason: "
                "text} and, when err, a label or a reason went, had_err or marked_safe"
            )
        return cls(
            fields=tuple(fields),
            leaf_hash=leaf,
            records=tuple(records),
            reason=reason,
            had_err=value.get("had_err"),
            marked_safe=value.get("marked_safe"),
            earlier=tuple(earlier),
        )


_REQUIRED = frozenset(("fields", "leaf_hash", "records", "reason"))
_MEMBERS = _REQUIRED | {"had_err", "marked_safe", "earlier"}


def kept_facts(
    *, kind: object, label: object, reason: object, err: object, fields: Iterable[str],
    before: Erasure | None,
) -> tuple[bool | None, bool | None]:  # fmt: skip
    """``(had_err, marked_safe)`` of a tombstone erasing ``fields`` (with those of an
    earlier erasure, ``before``) from an event of ``kind`` whose ``label``, ``reason``
    and ``err`` are as given (what is left of them): the one rule both
    :func:`erase_fields` and :func:`erase_stored` follow.

    An earlier erasure's facts stand (the fields they speak of are gone); a fact an
    older tombstone did not keep stays unknown, except that a safe marker still
    readable in the field left marks a safe read.

    >>> kept_facts(kind="tool_result", label="", reason="", err="timeout",
    ...            fields=ALL_FIELDS, before=None)
    (True, None)
    >>> kept_facts(kind="gate_decision", label="safe:ro", reason="", err="",
    ...            fields=["label"], before=None)
    (None, True)
    """
    gone = set(fields) | (set(before.fields) if before is not None else set())
    text = [v if type(v) is str else "" for v in (label, reason, err)]
    had_err: bool | None = None
    if before is not None and "err" in before.fields:
        had_err = before.had_err
    elif "err" in gone:
        had_err = bool(text[2])
    marked: bool | None = None
    if kind == "gate_decision" and {"label", "reason"} & gone:
        if before is not None and before.marked_safe is not None:
            marked = before.marked_safe
        elif before is not None and {"label", "reason"} & set(before.fields):
            marked = True if marks_safe(text[0], text[1]) else None
        else:
            marked = marks_safe(text[0], text[1])
    return had_err, marked


def erased_whole(event: _Erasable) -> bool:
    """True when ``event`` is a tombstone that holds none of the erasable fields any
    more (erased whole, or field by field until nothing was left).

    >>> from ledger.model import Event
    >>> e = Event(kind="action", run_id="r", call_id="c", args='{"to":"alice"}')
    >>> gone = erase_fields(e, fields=ALL_FIELDS, leaf_hash="ab" * 32,
    ...                     record="0" * 26, reason="GDPR Art. 17")
    >>> erased_whole(e), erased_whole(gone), gone.erased.fields
    (False, True, ('args',))
    """
    return event.erased is not None and all(getattr(event, f) == _EMPTY[f] for f in ALL_FIELDS)


def erase_fields(event: E, *, fields: Iterable[str], leaf_hash: str, record: str, reason: str) -> E:
    """``event`` with ``fields`` removed and its ``erased`` member set (merged with an
    earlier erasure of the same event: the union of the fields, the records in order).

    ``leaf_hash`` is the event's original leaf hash (hex); an earlier erasure's must be
    the same (``ValidationError`` otherwise).
    """
    wanted = set(fields)
    unknown = sorted(wanted - set(ALL_FIELDS))
    if unknown:
        raise ValidationError(
            f"cannot erase {', '.join(unknown)}: erasable fields are {', '.join(ALL_FIELDS)} "
            f"({', '.join(KEPT_FIELDS)} are always kept)"
        )
    before = event.erased
    records: tuple[str, ...] = (record,)
    earlier: tuple[str, ...] = ()
    if before is not None:
        if before.leaf_hash != leaf_hash:
            raise ValidationError(
                f"event {event.event_id}: its tombstone keeps leaf hash {before.leaf_hash}, "
                f"not {leaf_hash}; the row was changed outside the ledger"
            )
        records = (*before.records, record)
        earlier = (*before.earlier, hashlib.sha256(event.to_json().encode()).hexdigest())
    held = {f for f in wanted if getattr(event, f) != _EMPTY[f]}  # what it still holds
    gone = held | (set(before.fields) if before is not None else set())
    ordered = tuple(f for f in ALL_FIELDS if f in gone)
    had_err, marked = kept_facts(
        kind=str(event.kind),
        label=event.label,
        reason=event.reason,
        err=event.err,
        fields=ordered,
        before=before,
    )
    erasure = Erasure(
        fields=ordered,
        leaf_hash=leaf_hash,
        records=records,
        reason=reason,
        had_err=had_err,
        marked_safe=marked,
        earlier=earlier,
    )
    erased: E = event.replace(**{f: _EMPTY[f] for f in ordered}, erased=erasure)
    return erased


@dataclass(frozen=True, slots=True, kw_only=True)
class Tombstone:
    """What verification reads from a tombstone's bytes."""

    leaf_hash: bytes
    records: tuple[str, ...]
    fields: tuple[str, ...]
    time: datetime | None = None  # the erased event's time (None: not readable)
    run_id: str = ""  # the erased event's run
    erasure: Erasure | None = None  # the whole member (what else it keeps)

    def written_digest(self, record: str, data: bytes) -> bytes | None:
        """The SHA-256 of the bytes erasure ``record`` wrote for this event, whose stored
        bytes are ``data``: theirs when ``record`` is the latest, else the digest
        ``erased.earlier`` keeps; None when not known (erased again before it was kept,
        or not one of its records). What a record's ``tombstones`` digest is made of."""
        if self.records and self.records[-1] == record:
            return hashlib.sha256(data).digest()
        kept = None if self.erasure is None else self.erasure.written_by(record)
        return None if kept is None else bytes.fromhex(kept)


def tombstone_of(data: bytes) -> Tombstone | None:
    """The tombstone in the stored bytes ``data``, or None when they hold an ordinary
    event (or are not an event at all). Cheap for ordinary rows: a byte search first."""
    if _MARK not in data:
        return None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict or "erased" not in obj:
        return None
    try:
        erasure = Erasure.from_dict(obj["erased"])
    except ValidationError:
        return None
    return Tombstone(
        leaf_hash=bytes.fromhex(erasure.leaf_hash),
        records=erasure.records,
        fields=erasure.fields,
        time=_time_or_none(obj.get("time")),
        run_id=obj["run_id"] if type(obj.get("run_id")) is str else "",
        erasure=erasure,
    )


def erasure_digest(rows: Iterable[tuple[int, bytes]]) -> str:
    """The digest an erasure record carries of the rows it erased: SHA-256 over each
    ``(leaf index, leaf hash)`` in leaf order, the index as 8 bytes big-endian, as hex.

    >>> erasure_digest([])
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
    """
    h = hashlib.sha256()
    for index, leaf in rows:
        h.update(index.to_bytes(8, "big") + leaf)
    return h.hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordSummary:
    """What an erasure record states about the rows it erased: how many, the
    :func:`erasure_digest` of their ``(leaf index, leaf hash)`` and the one of their
    ``(leaf index, SHA-256 of the tombstone bytes it wrote)``."""

    events: int
    digest: str
    tombstones: str
    at: datetime | None = None  # when the erasure was made (its ``at``)
    policy_version: int | None = None  # the policy it says it was made under
    floor: timedelta | None = None  # that policy's floor, as the record states it


def record_summary(data: bytes) -> RecordSummary | None:
    """The :class:`RecordSummary` in the stored bytes of an erasure record (an
    ``action`` of tool :data:`ERASE_TOOL` whose ``args`` hold ``events``, ``digest`` and
    ``tombstones``), or None when ``data`` is not one."""
    found = retention_record(data)
    if found is None or found[0] != ERASE_TOOL:
        return None
    args = found[1]
    count, digest, stones = args.get("events"), args.get("digest"), args.get("tombstones")
    if type(count) is not int or type(digest) is not str or type(stones) is not str:
        return None
    policy = args.get("policy")
    version = floor = None
    if type(policy) is dict:
        version = policy.get("version") if type(policy.get("version")) is int else None
        try:
            floor = parse_duration(policy["floor"]) if "floor" in policy else None
        except ValidationError:
            floor = None
    return RecordSummary(
        events=count,
        digest=digest,
        tombstones=stones,
        at=_time_or_none(args.get("at")),
        policy_version=version,
        floor=floor,
    )


def policy_floor(args: dict[str, Any]) -> tuple[int, timedelta] | None:
    """``(version, floor)`` of a retention policy record's ``args`` (see
    :func:`retention_record`), or None when its version or floor cannot be read."""
    version, floor = args.get("version"), args.get("floor")
    if type(version) is not int or type(floor) is not str:
        return None
    try:
        return version, parse_duration(floor)
    except ValidationError:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldScope:
    """What a legal hold's record says it covers: a run, or a time range (either end
    open; neither: every event)."""

    hold_id: str
    run_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def hold_change(tool: str, args: dict[str, Any]) -> tuple[str, HoldScope | None] | None:
    """``(hold id, its scope)`` for a legal hold's record (``tool``
    :data:`HOLD_ADD_TOOL` and its ``args``, see :func:`retention_record`), ``(hold id,
    None)`` for its release, else None."""
    hold = args.get("hold")
    if type(hold) is not str or tool not in (HOLD_ADD_TOOL, HOLD_RELEASE_TOOL):
        return None
    if tool == HOLD_RELEASE_TOOL:
        return hold, None
    run = args.get("run_id")
    return hold, HoldScope(
        hold_id=hold,
        run_id=run if type(run) is str else None,
        since=_time_or_none(args.get("since")),
        until=_time_or_none(args.get("until")),
    )


def retention_record(data: bytes) -> tuple[str, dict[str, Any]] | None:
    """``(tool, args)`` of the retention record in the stored bytes ``data``: an
    ``action`` in a retention run (a record the ledger appends to its own log; an agent's
    event of the same tool name in another run is none) whose ``args`` is an object;
    else None."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict or obj.get("kind") != "action":
        return None
    run, tool, args = obj.get("run_id"), obj.get("tool"), obj.get("args")
    if type(run) is not str or not run.startswith(ADMIN_RUN_PREFIX) or type(tool) is not str:
        return None
    return (tool, args) if type(args) is dict else None


def _time_or_none(value: object) -> datetime | None:
    """``value`` read as an event time, or None when it is not one."""
    if type(value) is not str:
        return None
    try:
        return parse_time(value)
    except ValidationError:
        return None


class _MaybeErased(Protocol):
    @property
    def erased(self) -> Erasure | None: ...


def erased_text(event: _MaybeErased | None, *fields: str) -> str:
    """``[erased: <reason>]`` when one of ``fields`` of ``event`` was erased, else "":
    what readers show in place of an erased part (never "missing" or "none"). A
    tombstone keeps the latest erasure's reason; when earlier erasures took some of
    its fields (each record in the log says which, and why), the text says so rather
    than give the latest reason for every part.

    >>> class E: erased = Erasure(fields=("args",), leaf_hash="ab" * 32,
    ...                           records=("0" * 26,), reason="GDPR request 42")
    >>> erased_text(E(), "args"), erased_text(E(), "result")
    ('[erased: GDPR request 42]', '')
    >>> class F: erased = Erasure(fields=("args", "refs"), leaf_hash="ab" * 32,
    ...                           records=("0" * 26, "1" * 26), reason="cleanup")
    >>> erased_text(F(), "args")
    '[erased: cleanup, the latest of 2 erasures of this event]'
    """
    said = erased_reason(event, *fields)
    return "" if said is None else f"[erased: {said}]"


def erased_reason(event: _MaybeErased | None, *fields: str) -> str | None:
    """Why one of ``fields`` of ``event`` was erased, as readers say it (the text of
    :func:`erased_text`), or None when none of them was."""
    gone = None if event is None else event.erased
    if gone is None or not any(f in gone.fields for f in fields):
        return None
    if len(gone.records) > 1:
        return f"{gone.reason}, the latest of {len(gone.records)} erasures of this event"
    return gone.reason


class _Request(_MaybeErased, Protocol):
    @property
    def args(self) -> str | None: ...
    @property
    def preview(self) -> str: ...


def request_field(request: _Request) -> str:
    """Which field holds the text of a request, as every reader shows it: ``args`` when
    it holds or held them (an erased ``args`` shows as erased, not as the preview),
    else ``preview`` (:func:`request_shown` is what it reads as).

    >>> class R: args, preview = None, ""; erased = Erasure(fields=("preview",),
    ...     leaf_hash="ab" * 32, records=("0" * 26,), reason="GDPR request 42")
    >>> request_field(R()), request_shown(R())
    ('preview', '[erased: GDPR request 42]')
    """
    if request.args is not None or erased_text(request, "args"):
        return "args"
    return "preview"


def request_shown(request: _Request) -> str:
    """The text of a request as the text readers show it (``chain``, ``why``): its
    :func:`request_field`, or ``[erased: reason]`` where it was erased; "" when none was
    recorded."""
    field = request_field(request)
    return erased_text(request, field) or getattr(request, field) or ""


_SAFE = 2**53 - 1


def erase_stored(
    data: bytes, *, fields: Iterable[str], leaf_hash: str, record: str, reason: str
) -> tuple[str, str | None, bool]:
    """``(tombstone JSON, its content hash, has_err)`` for the stored event bytes
    ``data``: the same text as ``erase_fields(Event.from_json(data), ...).to_json()``
    (a property test says so), built on the parsed JSON without a round trip through
    :class:`~ledger.model.event.Event`, so an erasure of many rows costs little more
    than writing them. The content hash is the ``sha256:`` of the RFC 8785 form, taken
    directly when every member left is text or a safe integer (always so for a whole
    erasure), else None (the caller computes it the general way).
    """
    obj = orjson.loads(data)
    if type(obj) is not dict:
        raise ValidationError("stored event JSON is not an object")
    wanted = set(fields)
    before = obj.pop("erased", None)
    prior = None if before is None else Erasure.from_dict(before)
    if prior is not None and prior.leaf_hash != leaf_hash:
        raise ValidationError(
            f"event {obj.get('event_id')}: its tombstone keeps leaf hash "
            f"{prior.leaf_hash}, not {leaf_hash}; the row was changed outside the ledger"
        )
    held = {f for f in wanted if f in obj}  # empty values are not stored
    wanted = held | (set(prior.fields) if prior is not None else set())
    get = obj.get
    had_err, marked = kept_facts(
        kind=get("kind"), label=get("label", ""), reason=get("reason", ""), err=get("err", ""),
        fields=wanted, before=prior,
    )  # fmt: skip
    member = Erasure(
        fields=tuple(f for f in ALL_FIELDS if f in wanted),
        leaf_hash=leaf_hash,
        records=(record,) if prior is None else (*prior.records, record),
        reason=reason,
        had_err=had_err,
        marked_safe=marked,
        # the bytes the earlier erasure left, which its tombstones digest covers
        earlier=() if prior is None else (*prior.earlier, hashlib.sha256(data).hexdigest()),
    ).to_dict()
    out = {k: v for k, v in obj.items() if k not in wanted}
    out["erased"] = member
    text = orjson.dumps(out).decode()
    simple = all(
        type(v) is str or (type(v) is int and -_SAFE <= v <= _SAFE)
        for k, v in out.items()
        if k != "erased"
    )
    digest = (
        "sha256:" + hashlib.sha256(orjson.dumps(out, option=orjson.OPT_SORT_KEYS)).hexdigest()
        if simple
        else None
    )
    return text, digest, stated_failed(out)

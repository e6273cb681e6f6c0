"""Event <-> JSON, in the reference's field order and omit-empty rules.

``args`` and ``result`` are raw JSON: written verbatim and read back byte-exact, by a
top-level scanner that keeps each value's source text. Used through
``Event.to_json()`` and ``Event.from_json(text)``. Decoding takes one of two paths: compact
JSON (what ``to_json`` writes, so every stored row) is parsed by ``orjson`` and checked
field by field; anything else goes to the exact scanner, which reads any layout and names
what is wrong. This module is the one JSON codec of events; it knows the event only
through :class:`EventFields`, so it sits below :mod:`ledger.model.event`.

The SQL sinks write each row with :func:`encode_event_hashed`: the JSON and its RFC 8785
content hash from one set of members, without parsing the JSON again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from datetime import datetime
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, Protocol, TypeVar

import orjson
from ulid import ULID

from ledger.canonical import (
    MAX_SAFE_INTEGER,
    CanonicalizationError,
    canonical_bytes,
    loads_exact,
)
from ledger.errors import ValidationError
from ledger.ids import ulid_text
from ledger.model.erasure import Erasure
from ledger.model.values import (
    INT64_MAX,
    JSON_WS,
    MAX_NESTING,
    Actor,
    Approval,
    Kind,
    Ref,
    RefSource,
    Verdict,
    nested_deeper,
)
from ledger.timefmt import format_time


class EventFields(Protocol):
    """The 16 fields of an event, as the codec reads them."""

    @property
    def kind(self) -> Kind: ...
    @property
    def event_id(self) -> ULID: ...
    @property
    def run_id(self) -> str: ...
    @property
    def call_id(self) -> str: ...
    @property
    def refs(self) -> tuple[Ref, ...]: ...
    @property
    def time(self) -> datetime: ...
    @property
    def agent_path(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def preview(self) -> str: ...
    @property
    def args(self) -> str | None: ...
    @property
    def verdict(self) -> Verdict | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def result(self) -> str | None: ...
    @property
    def err(self) -> str: ...
    @property
    def duration_ms(self) -> int: ...
    @property
    def actor(self) -> Actor | None: ...
    @property
    def approval(self) -> Approval | None: ...
    @property
    def erased(self) -> Erasure | None: ...


E = TypeVar("E", bound=EventFields)

__all__ = [
    "EventFields",
    "checked_ref",
    "encode_event",
    "encode_event_hashed",
    "event_and_id_from_json",
    "event_canonical_hash",
    "event_from_json",
    "event_to_json",
]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_decoder = json.JSONDecoder(parse_constant=_refuse_constant)
_RAW_FIELDS = ("args", "result")
_KNOWN = frozenset(
    ("event_id", "refs", "time", "duration_ms", "args", "result", "run_id", "call_id",
     "agent_path", "kind", "tool", "label", "preview", "verdict", "reason", "err",
     "actor", "approval", "erased")
)  # fmt: skip
_STR_FIELDS = (
    "run_id", "call_id", "agent_path", "kind", "tool", "label", "preview", "verdict",
    "reason", "err",
)  # fmt: skip


def event_to_json(ev: EventFields) -> str:
    """Serialize ``ev``: event_id, run_id, call_id, refs, time, agent_path, kind, tool,
    label, preview, args, verdict, reason, result, err, duration_ms, then actor and
    approval; empty ones omitted (event_id, time and kind always written)."""
    return orjson.dumps(_members(ev, ulid_text(ev.event_id), format_time(ev.time))).decode()


def encode_event(ev: EventFields) -> tuple[str, str, str]:
    """``(event JSON, event id text, time text)``: the JSON of :func:`event_to_json` and
    the two texts it embeds, for callers that need them too (no second encoding)."""
    event_id, time = ulid_text(ev.event_id), format_time(ev.time)
    return orjson.dumps(_members(ev, event_id, time)).decode(), event_id, time


def encode_event_hashed(ev: EventFields) -> tuple[str, str, str | None]:
    """``(event JSON, event id text, content hash)``: the hash is that of
    :func:`event_canonical_hash`, computed from the same members (None when the event
    has no RFC 8785 form)."""
    event_id = ulid_text(ev.event_id)
    out = _members(ev, event_id, format_time(ev.time))
    return orjson.dumps(out).decode(), event_id, _hash_members(ev, out)


def _members(ev: EventFields, event_id: str, time: str) -> dict[str, Any]:
    """The event's JSON members in the reference's order, empty ones left out; enum
    members stand for their values (orjson writes them so)."""
    out: dict[str, Any] = {"event_id": event_id}
    if ev.run_id:
        out["run_id"] = ev.run_id
    if ev.call_id:
        out["call_id"] = ev.call_id
    if ev.refs:
        out["refs"] = [{"source": str(r.source), "id": r.id, "hash": r.hash} for r in ev.refs]
    out["time"] = time
    if ev.agent_path:
        out["agent_path"] = ev.agent_path
    out["kind"] = ev.kind
    if ev.tool:
        out["tool"] = ev.tool
    if ev.label:
        out["label"] = ev.label
    if ev.preview:
        out["preview"] = ev.preview
    if ev.args is not None:
        out["args"] = orjson.Fragment(ev.args)
    if ev.verdict is not None:
        out["verdict"] = ev.verdict
    if ev.reason:
        out["reason"] = ev.reason
    if ev.result is not None:
        out["result"] = orjson.Fragment(ev.result)
    if ev.err:
        out["err"] = ev.err
    if ev.duration_ms:
        out["duration_ms"] = ev.duration_ms
    if ev.actor is not None:
        out["actor"] = ev.actor.to_dict()
    if ev.approval is not None:
        out["approval"] = approval_dict(ev.approval)
    if ev.erased is not None:  # a tombstone (ledger.model.erasure)
        out["erased"] = ev.erased.to_dict()
    return out


def approval_dict(approval: Approval) -> dict[str, str]:
    """An approval's JSON members (``time`` in the one RFC 3339 form), empty ones out."""
    out = {"approver": approval.approver}
    if approval.time is not None:
        out["time"] = format_time(approval.time)
    if approval.reason:
        out["reason"] = approval.reason
    return out


def _hash_members(ev: EventFields, out: dict[str, Any]) -> str | None:
    """``sha256:`` of the RFC 8785 form of the members ``out`` of ``ev`` (changed in
    place: raw ``args``/``result`` become their canonical values), or None.

    Equal to ``sha256_of(orjson.loads(ev.to_json()), "rfc8785")`` (a property test says
    so) without parsing the whole JSON again: every key is ASCII, so RFC 8785 member
    order is ``orjson``'s sorted order (nested ref objects included); strings are valid
    Unicode (the ``Event`` checks it), which ``orjson`` writes exactly as RFC 8785 does;
    ``args`` and ``result`` are canonicalized on their own, at their own depth (a flat
    object of safe values, the common case, is left to ``orjson`` as a value)."""
    if ev.duration_ms > MAX_SAFE_INTEGER:
        return None
    for name, raw in (("args", ev.args), ("result", ev.result)):
        if raw is not None:
            if (part := _canonical_part(raw)) is None:
                return None
            out[name] = part
    return "sha256:" + hashlib.sha256(orjson.dumps(out, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _canonical_part(raw: str) -> Any:
    """The raw JSON ``raw`` as a member value that ``orjson`` writes in its RFC 8785 form
    (sorting keys): the parsed value when it is a flat object of safe values, else its
    canonical bytes as a fragment; None when it has no RFC 8785 form. A fragment is
    canonicalized inside a one-member object so it sits at the same depth as in the
    event, and every depth rule applies exactly as there."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(value) is dict and "".join(value).isascii() and _flat_safe(value.values()):
        # ledger.canonical's own fast rule for this simple case: ASCII keys sort as
        # UTF-16 does, and strings, safe integers, booleans and null are written by
        # orjson exactly as RFC 8785 writes them. Exact as read: orjson reads an integer
        # beyond 64 bits as a float, and a flat safe object holds none
        return value
    try:
        value = loads_exact(raw, value)  # an integer beyond 64 bits kept exact: no form
    except CanonicalizationError:
        return None
    try:
        return orjson.Fragment(canonical_bytes({"a": value}, "rfc8785")[5:-1])
    except CanonicalizationError:
        return None


_FLAT_TYPES = frozenset((str, bool, type(None)))


def _flat_safe(values: Collection[Any]) -> bool:
    """True when every value is a string, a boolean, null or an integer within
    +/-(2^53 - 1): values ``orjson`` writes exactly as RFC 8785 does."""
    kinds = set(map(type, values))
    if kinds <= _FLAT_TYPES:
        return True
    if kinds - _FLAT_TYPES != {int}:
        return False
    return all(-MAX_SAFE_INTEGER <= x <= MAX_SAFE_INTEGER for x in values if type(x) is int)


def event_canonical_hash(ev: EventFields, event_id: str, time: str) -> str | None:
    """``sha256:`` of the RFC 8785 form of ``ev``'s JSON, built from its fields, or None
    when a part has no RFC 8785 form; ``event_id``/``time`` are its JSON's texts."""
    return _hash_members(ev, _members(ev, event_id, time))


def _skip(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in JSON_WS:
        i += 1
    return i


def _expect(text: str, i: int, char: str) -> int:
    if i >= len(text) or text[i] != char:
        found = repr(text[i]) if i < len(text) else "end of text"
        raise ValidationError(f"event JSON: expected {char!r} at offset {i}, found {found}")
    return i + 1


def _scan_object(text: str) -> dict[str, tuple[Any, str]]:
    """Parse a top-level JSON object into ``{key: (value, raw_text)}``."""
    i = _expect(text, _skip(text, 0), "{")
    fields: dict[str, tuple[Any, str]] = {}
    i = _skip(text, i)
    if i < len(text) and text[i] == "}":
        i += 1
    else:
        while True:
            i = _expect(text, _skip(text, i), '"')
            key, i = scanstring(text, i, True)
            i = _expect(text, _skip(text, i), ":")
            start = _skip(text, i)
            try:
                value, i = _decoder.raw_decode(text, start)
            except ValueError as exc:
                raise ValidationError(f"{key}: value does not parse as JSON ({exc})") from None
            if key in fields:
                raise ValidationError(f"event JSON: duplicate key {key!r}")
            fields[key] = (value, text[start:i])
            i = _skip(text, i)
            if i < len(text) and text[i] == ",":
                i += 1
                continue
            i = _expect(text, i, "}")
            break
    if _skip(text, i) != len(text):
        raise ValidationError(f"event JSON: unexpected text after the object at offset {i}")
    return fields


def event_from_json(cls: type[E], text: str | bytes) -> E:
    """Build an event of class ``cls`` from its JSON text, keeping ``args``/``result``
    byte-exact; raise ``ValidationError`` naming what is wrong."""
    return event_and_id_from_json(cls, text)[0]


def event_and_id_from_json(cls: type[E], text: str | bytes) -> tuple[E, str | None]:
    """:func:`event_from_json` and the ``event_id`` member's text as the JSON states it
    (None when the JSON is not compact: the caller reads it from the text if it needs
    it). A stored row's reader compares it with the row's ``event_id`` column without
    formatting the decoded id again.

    >>> from ledger.model.event import Event
    >>> ev, stated = event_and_id_from_json(Event, Event(kind="request").to_json())
    >>> stated == str(ev.event_id)
    True
    """
    fast = _compact(cls, text)
    if fast is not None:
        return fast
    try:
        return _event_from_json(cls, text), None
    except RecursionError:
        raise ValidationError(
            "event JSON is nested too deeply to read; it cannot be an event this library wrote"
        ) from None


def decode_problem(cls: type[E], obj: object, text: str | bytes) -> str:
    """What stops the stored JSON ``text`` (parsed by ``orjson``: ``obj``) from reading
    back as an event of ``cls``, as every reader decodes it, or "" when it does: the
    check a pass over stored rows makes without keeping the event (the compact form
    costs no second parse).

    >>> from ledger.model.event import Event
    >>> import orjson
    >>> text = Event(kind="request", duration_ms=5).to_json()
    >>> decode_problem(Event, orjson.loads(text), text)
    ''
    >>> bad = text.replace('"duration_ms":5', '"duration_ms":"5"')
    >>> decode_problem(Event, orjson.loads(bad), bad)
    "duration_ms: expected an integer, got '5'"
    """
    if _compact_parsed(cls, obj, text) is not None:
        return ""
    try:
        _event_from_json(cls, text)
    except ValidationError as exc:
        return str(exc)
    except RecursionError:
        return "event JSON is nested too deeply to read"
    return ""


def _event_from_json(cls: type[E], text: str | bytes) -> E:
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"event JSON is not UTF-8 ({exc})") from None
    if not isinstance(text, str):
        raise ValidationError(f"event JSON: expected str or bytes, got {type(text).__name__}")
    try:
        fields = _scan_object(text)
    except (ValueError, IndexError) as exc:
        if isinstance(exc, ValidationError):
            raise
        raise ValidationError(f"event JSON does not parse: {exc}") from None
    kwargs: dict[str, Any] = {}
    for key in ("event_id", "time", "kind"):
        if key not in fields:
            raise ValidationError(f"event JSON: required field {key!r} is missing")
    for key, (value, raw) in fields.items():
        if key in _RAW_FIELDS:
            kwargs[key] = raw
        elif key in _STR_FIELDS or key in ("event_id", "time"):
            if not isinstance(value, str):
                raise ValidationError(f"{key}: expected a string, got {type(value).__name__}")
            if key == "verdict" and value == "":
                continue
            kwargs[key] = value
        elif key == "refs":
            if value is None:
                continue
            if not isinstance(value, list):
                raise ValidationError(f"refs: expected an array, got {type(value).__name__}")
            kwargs[key] = value
        elif key in ("duration_ms", "actor", "approval", "erased"):
            kwargs[key] = value
    return cls(**kwargs)


# --- decoding compact JSON (what to_json writes) without the exact scanner --------------

_KINDS: dict[object, Kind] = dict(Kind._value2member_map_)
_VERDICTS: dict[object, Verdict] = dict(Verdict._value2member_map_)
_SOURCES: dict[object, RefSource] = dict(RefSource._value2member_map_)
_REF_KEYS = frozenset(("source", "id", "hash"))
_TIME_LENGTHS = frozenset({20, *range(22, 28)})  # parse_time's own layout: 0, 1-6 digits
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# each ASCII Crockford digit (either case) to the digit of its value in int(..., 32);
# every other byte to "!", which int() refuses: an id read as coerce_event_id reads it
_ULID_DIGITS = bytes(
    ord("0123456789abcdefghijklmnopqrstuv"[_CROCKFORD.index(chr(b).upper())])
    if b < 128 and chr(b).upper() in _CROCKFORD
    else ord("!")
    for b in range(256)
)
_loads, _dumps, _new, _fromiso = orjson.loads, orjson.dumps, object.__new__, datetime.fromisoformat
_set = object.__setattr__
_join = "".join
_DECLINE = (orjson.JSONDecodeError, orjson.JSONEncodeError, TypeError, UnicodeEncodeError)
_EVENT_SLOTS = (
    "kind", "event_id", "run_id", "call_id", "refs", "time", "agent_path", "tool", "label",
    "preview", "args", "verdict", "reason", "result", "err", "duration_ms", "actor",
    "approval", "erased",
)  # fmt: skip


class _EventSlots:
    """An event's 19 slots, plainly writable: a decoded event is filled in as one of
    these and then becomes the event class (see :func:`_twin_of`)."""

    __slots__ = _EVENT_SLOTS


class _RefSlots:
    __slots__ = ("hash", "id", "source")


def _swappable(twin: type, cls: type) -> bool:
    """True when an instance of ``twin`` may become a ``cls`` by assigning ``__class__``:
    Python allows it between classes of one layout (the same slots, no ``__dict__``),
    and the object is then an ordinary ``cls`` (frozen, compared and hashed as one)."""
    probe: Any = _new(twin)
    try:
        probe.__class__ = cls
    except TypeError:
        return False
    return True


_TWINS: dict[type, bool] = {}
_REF_TWIN = _swappable(_RefSlots, Ref)


def _compact(cls: type[E], text: object) -> tuple[E, str] | None:
    """The event in ``text``, with its ``event_id`` member's text, when ``text`` is
    compact JSON (as ``to_json`` writes it) of a well-formed event, else None (the caller
    then takes the exact path, which reads any layout and names what is wrong).

    Compact means ``orjson`` writes the parsed value back to exactly ``text``; then the
    raw ``args``/``result`` texts are exactly ``orjson``'s output for their values, so
    they are recovered byte-exact without a scanner. Every field is checked as the
    constructor checks it (types, enums, id, time, range), once, straight from the parsed
    members (no keyword arguments, no second validation): strings that ``orjson`` parsed
    and wrote back are valid Unicode, the id is read as ``coerce_event_id`` reads it and
    the time as ``parse_time`` reads its own layout, so the event is the one the
    constructor would make (a property test holds the two paths equal). It is filled in
    through plain slots and then made a ``cls`` (:func:`_swappable`), which costs a
    third of setting 19 frozen slots one by one.
    """
    try:
        obj = _loads(text)  # type: ignore[arg-type]
    except _DECLINE:
        return None
    return _compact_parsed(cls, obj, text)


def _compact_parsed(cls: type[E], obj: object, text: object) -> tuple[E, str] | None:
    """:func:`_compact` of ``text`` already parsed (``obj``: ``orjson.loads(text)``)."""
    try:
        if type(obj) is not dict or _dumps(obj) != (text.encode() if type(text) is str else text):
            return None
    except _DECLINE:
        return None
    get = obj.get  # members it does not know are left out, as the exact path leaves them
    verdict = get("verdict", "")
    run_id, call_id, agent_path = get("run_id", ""), get("call_id", ""), get("agent_path", "")
    tool, label, preview = get("tool", ""), get("label", ""), get("preview", "")
    reason, err, duration = get("reason", ""), get("err", ""), get("duration_ms", 0)
    refs, args, result = get("refs"), get("args", _ABSENT), get("result", _ABSENT)
    who, approval, gone = get("actor"), get("approval"), get("erased")
    try:  # any KeyError, TypeError or ValueError below: not a well-formed event
        event_id, time = obj["event_id"], obj["time"]
        # every text member is a string: str.join refuses anything else (and orjson
        # makes no str subclasses)
        _join((event_id, time, verdict, run_id, call_id, agent_path, tool, label, preview,
               reason, err))  # fmt: skip
        kind = _KINDS[obj["kind"]]
        verdict = _VERDICTS[verdict] if verdict else None  # "" reads as absent, as exactly
        if type(duration) is not int or not 0 <= duration <= INT64_MAX or len(event_id) != 26:
            return None
        # the id as coerce_event_id reads it: a byte that is no Crockford digit (any
        # non-ASCII one too) becomes "!", which int() refuses
        number = int(event_id.encode().translate(_ULID_DIGITS), 32)
        # the time as parse_time reads the layout format_time writes (at C speed)
        if (
            number >> 128
            or len(time) not in _TIME_LENGTHS
            or time[4:11:3] != "--T"
            or time[-1] != "Z"
            or not time.isascii()
        ):
            return None
        when = _fromiso(time)
        refs = () if refs is None or refs == [] else _decode_refs(refs)
        actor = None
        if who is not None:
            last = _last_actor  # the previous event's: most often this one's too
            if who == last[0]:
                actor = last[1]
            elif (actor := _actor(who)) is None:
                return None
        approved = None if approval is None else _approval(approval)
        erased = None if gone is None else Erasure.from_dict(gone)
    except (KeyError, TypeError, ValueError):  # ValidationError is a ValueError
        return None
    if refs is None:
        return None
    # args and result as stored (compact: orjson writes them back byte-exact), refused
    # here when nested deeper than the constructor allows: the exact path names them
    raw_args = None if args is _ABSENT else _dumps(args)
    raw_result = None if result is _ABSENT else _dumps(result)
    if (
        raw_args is not None
        and raw_args.count(b"[") + raw_args.count(b"{") > MAX_NESTING  # most, at C speed
        and nested_deeper(raw_args)
    ) or (
        raw_result is not None
        and raw_result.count(b"[") + raw_result.count(b"{") > MAX_NESTING
        and nested_deeper(raw_result)
    ):
        return None
    eid = _new(ULID)
    eid.bytes = number.to_bytes(16, "big")  # all ULID.from_bytes sets, already checked
    ev: Any = _new(_EventSlots)
    ev.kind = kind
    ev.event_id = eid
    ev.run_id = run_id
    ev.call_id = call_id
    ev.refs = refs
    ev.time = when
    ev.agent_path = agent_path
    ev.tool = tool
    ev.label = label
    ev.preview = preview
    ev.args = None if raw_args is None else raw_args.decode()
    ev.verdict = verdict
    ev.reason = reason
    ev.result = None if raw_result is None else raw_result.decode()
    ev.err = err
    ev.duration_ms = duration
    ev.actor = actor
    ev.approval = approved
    ev.erased = erased
    swap = _TWINS.get(cls)
    if swap is None:
        swap = _TWINS[cls] = _swappable(_EventSlots, cls)
    if swap:
        ev.__class__ = cls
        return ev, event_id
    out = _new(cls)  # a class of another layout: its slots set one by one
    for name in _EVENT_SLOTS:
        _set(out, name, getattr(ev, name))
    return out, event_id


_ABSENT = object()


_ACTORS: dict[tuple[tuple[str, object], ...], Actor] = {}
_ACTOR_KEYS = frozenset(("principal", "agent_id", "agent_version"))


def _actor(value: object) -> Actor | None:
    """``Actor.from_dict(value)``, made once per distinct actor (a ledger holds few; the
    value is frozen, so one object serves every event naming it) and kept as the last
    actor seen; None for an empty actor, which the exact path reads as no actor (so the
    compact path declines it)."""
    global _last_actor
    if type(value) is not dict or not value.keys() <= _ACTOR_KEYS:
        return Actor.from_dict(value) or None
    key = tuple(value.items())  # an unhashable member raises TypeError: the exact path
    found = _ACTORS.get(key)
    if found is None:
        found = Actor.from_dict(value)
        if not found:
            return None
        if len(_ACTORS) >= 4096:
            _ACTORS.clear()
        _ACTORS[key] = found
    _last_actor = (value, found)  # one assignment: a reader in another thread sees a pair
    return found


_last_actor: tuple[object, Actor | None] = (None, None)
_APPROVAL_KEYS = frozenset(("approver", "time", "reason"))


class _ApprovalSlots:
    __slots__ = ("approver", "reason", "time")


_APPROVAL_TWIN = _swappable(_ApprovalSlots, Approval)


def _approval(value: object) -> Approval:
    """``Approval.from_dict(value)``: a member as ``to_json`` writes it (strings, the
    time in ``format_time``'s layout) is made without checking it twice; anything else
    goes through ``Approval.from_dict``, which names what is wrong."""
    if type(value) is dict and value.keys() <= _APPROVAL_KEYS:
        approver, when, reason = value.get("approver"), value.get("time"), value.get("reason", "")
        moment = None if when is None else _utc(when)
        if (
            _APPROVAL_TWIN
            and type(approver) is type(reason) is str
            and approver
            and (when is None or moment)
        ):
            made: Any = _new(_ApprovalSlots)
            made.approver, made.time, made.reason = approver, moment, reason
            made.__class__ = Approval
            return made  # type: ignore[no-any-return]
    return Approval.from_dict(value)


def _utc(text: object) -> datetime | None:
    """``parse_time(text)`` when ``text`` is a string in the layout ``format_time``
    writes (the layout ``parse_time`` itself reads at C speed), else None."""
    if (
        type(text) is not str
        or len(text) not in _TIME_LENGTHS
        or text[4:11:3] != "--T"
        or text[-1] != "Z"
        or not text.isascii()
    ):
        return None
    try:
        return _fromiso(text)
    except ValueError:
        return None


def checked_ref(source: RefSource | str, id_: str, hash_: str) -> Ref:
    """The :class:`Ref` ``Ref(source=source, id=id_, hash=hash_)`` for values already
    known valid (strings of valid Unicode; ``source`` a :class:`RefSource` when it names
    one), made without checking them again: for decoders and the chain, whose inputs
    were checked when read.

    >>> checked_ref(RefSource.TOOL, "01J", "") == Ref(source="tool", id="01J")
    True
    """
    ref: Any = _new(_RefSlots if _REF_TWIN else Ref)
    if _REF_TWIN:
        ref.source, ref.id, ref.hash = source, id_, hash_
        ref.__class__ = Ref
    else:
        _set(ref, "source", source)
        _set(ref, "id", id_)
        _set(ref, "hash", hash_)
    return ref  # type: ignore[no-any-return]


def _decode_refs(value: object) -> tuple[Ref, ...] | None:
    """The refs of a ``refs`` member as ``to_json`` writes them (each with its three
    members, strings), or None (the exact path then decides)."""
    if type(value) is not list:
        return None
    out = []
    for item in value:
        if type(item) is not dict or len(item) != 3:
            return None
        source, id_, hash_ = item["source"], item["id"], item["hash"]  # or KeyError
        if not type(source) is type(id_) is type(hash_) is str:
            return None
        if _REF_TWIN:
            ref: Any = _new(_RefSlots)
            ref.source, ref.id, ref.hash = _SOURCES.get(source, source), id_, hash_
            ref.__class__ = Ref
            out.append(ref)
        else:
            out.append(checked_ref(_SOURCES.get(source, source), id_, hash_))
    return tuple(out)

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

from ledger.canonical import MAX_SAFE_INTEGER, CanonicalizationError, canonical_bytes
from ledger.errors import ValidationError
from ledger.ids import coerce_event_id, ulid_text
from ledger.model.erasure import Erasure
from ledger.model.values import INT64_MAX, JSON_WS, Actor, Approval, Kind, Ref, RefSource, Verdict
from ledger.timefmt import coerce_time, format_time


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
    "encode_event",
    "encode_event_hashed",
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
        # orjson exactly as RFC 8785 writes them
        return value
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
    fast = _decode_compact(cls, text)
    if fast is not None:
        return fast
    try:
        return _event_from_json(cls, text)
    except RecursionError:
        raise ValidationError(
            "event JSON is nested too deeply to read; it cannot be an event this library wrote"
        ) from None


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

_TEXT_FIELDS = ("run_id", "call_id", "agent_path", "tool", "label", "preview", "reason", "err")
_KINDS: dict[object, Kind] = dict(Kind._value2member_map_)
_VERDICTS: dict[object, Verdict] = dict(Verdict._value2member_map_)
_SOURCES: dict[object, RefSource] = dict(RefSource._value2member_map_)
_REF_KEYS = frozenset(("source", "id", "hash"))


def _decode_compact(cls: type[E], text: object) -> E | None:
    """The event in ``text`` when ``text`` is compact JSON (as ``to_json`` writes it) of a
    well-formed event, else None (the caller then takes the exact path, which reads any
    layout and names what is wrong).

    Compact means ``orjson`` writes the parsed value back to exactly ``text``; then the
    raw ``args``/``result`` texts are exactly ``orjson``'s output for their values, so
    they are recovered byte-exact without a scanner. Every field is checked as the
    constructor checks it (types, enums, id, time, range); strings that ``orjson``
    parsed and wrote back are valid Unicode.
    """
    try:
        obj = orjson.loads(text)  # type: ignore[arg-type]
        if type(obj) is not dict:
            return None
        back = orjson.dumps(obj)
        if back != (text.encode("utf-8") if type(text) is str else text):
            return None
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, TypeError, UnicodeEncodeError):
        return None
    if not obj.keys() <= _KNOWN:
        return None
    get = obj.get
    kind, event_id, time = get("kind"), get("event_id"), get("time")
    if type(kind) is not str or type(event_id) is not str or type(time) is not str:
        return None
    if (kind := _KINDS.get(kind)) is None:
        return None
    verdict = get("verdict", "")  # "" reads as absent, as the exact path reads it
    if type(verdict) is not str:
        return None
    if verdict and (verdict := _VERDICTS.get(verdict)) is None:
        return None
    duration = get("duration_ms", 0)
    if type(duration) is not int or not 0 <= duration <= INT64_MAX:
        return None
    texts = [get(name, "") for name in _TEXT_FIELDS]
    if not all(type(t) is str for t in texts):
        return None
    refs = _decode_refs(get("refs"))
    if refs is None:
        return None
    try:
        eid, when = coerce_event_id(event_id), coerce_time(time)
    except ValidationError:
        return None
    args, result = get("args", _ABSENT), get("result", _ABSENT)
    who, approval, gone = get("actor"), get("approval"), get("erased")
    try:
        actor = None if who is None else _actor(who)
        approved = None if approval is None else Approval.from_dict(approval)
        erased = None if gone is None else Erasure.from_dict(gone)
    except (ValidationError, TypeError):
        return None
    if (actor is not None and not actor) or (
        approved is not None and approval_dict(approved) != approval
    ):
        return None  # not what to_json writes: the exact path decides
    ev = object.__new__(cls)
    set_ = object.__setattr__
    for name, value in zip(_TEXT_FIELDS, texts, strict=True):
        set_(ev, name, value)
    set_(ev, "event_id", eid)
    set_(ev, "time", when)
    set_(ev, "kind", kind)
    set_(ev, "refs", refs)
    set_(ev, "verdict", verdict or None)
    set_(ev, "duration_ms", duration)
    set_(ev, "actor", actor)
    set_(ev, "approval", approved)
    set_(ev, "erased", erased)
    set_(ev, "args", None if args is _ABSENT else orjson.dumps(args).decode("utf-8"))
    set_(ev, "result", None if result is _ABSENT else orjson.dumps(result).decode("utf-8"))
    return ev


_ABSENT = object()
_ACTORS: dict[tuple[tuple[str, object], ...], Actor] = {}
_ACTOR_KEYS = frozenset(("principal", "agent_id", "agent_version"))


def _actor(value: object) -> Actor:
    """``Actor.from_dict(value)``, made once per distinct actor (a ledger holds few; the
    value is frozen, so one object serves every event naming it)."""
    if type(value) is not dict or not value.keys() <= _ACTOR_KEYS:
        return Actor.from_dict(value)
    key = tuple(value.items())  # an unhashable member raises TypeError: the exact path
    found = _ACTORS.get(key)
    if found is None:
        found = Actor.from_dict(value)
        if len(_ACTORS) >= 4096:
            _ACTORS.clear()
        _ACTORS[key] = found
    return found


def _decode_refs(value: object) -> tuple[Ref, ...] | None:
    if value is None or value == []:
        return ()
    if type(value) is not list:
        return None
    out = []
    for item in value:
        if type(item) is not dict or not item.keys() <= _REF_KEYS:
            return None
        source, id_, hash_ = item.get("source", ""), item.get("id", ""), item.get("hash", "")
        if type(source) is not str or type(id_) is not str or type(hash_) is not str:
            return None
        ref = object.__new__(Ref)
        object.__setattr__(ref, "source", _SOURCES.get(source, source))
        object.__setattr__(ref, "id", id_)
        object.__setattr__(ref, "hash", hash_)
        out.append(ref)
    return tuple(out)

"""Event <-> JSON, in the reference's field order and omit-empty rules.

``args`` and ``result`` are raw JSON: written verbatim and read back byte-exact, by a
top-level scanner that keeps each value's source text. Used through
``Event.to_json()`` and ``Event.from_json(text)`` (which first tries the compact-JSON
path of :mod:`ledger.model.event`: what ``to_json`` writes decodes without the scanner).

The SQL sinks write each row with :func:`encode_event_hashed`: the JSON and its RFC 8785
content hash from one set of members, without parsing the JSON again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any

import orjson

from ledger.canonical import MAX_SAFE_INTEGER, CanonicalizationError, canonical_bytes
from ledger.errors import ValidationError
from ledger.ids import ulid_text
from ledger.timefmt import format_time

if TYPE_CHECKING:
    from ledger.model.event import Event

__all__ = [
    "encode_event",
    "encode_event_hashed",
    "event_canonical_hash",
    "event_from_json",
    "event_to_json",
]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_decoder = json.JSONDecoder(parse_constant=_refuse_constant)
_WS = " \t\n\r"
_RAW_FIELDS = ("args", "result")
_KNOWN = frozenset(
    ("event_id", "refs", "time", "duration_ms", "args", "result", "run_id", "call_id",
     "agent_path", "kind", "tool", "label", "preview", "verdict", "reason", "err")
)  # fmt: skip
_STR_FIELDS = (
    "run_id", "call_id", "agent_path", "kind", "tool", "label", "preview", "verdict",
    "reason", "err",
)  # fmt: skip


def event_to_json(ev: Event) -> str:
    """Serialize ``ev``: event_id, run_id, call_id, refs, time, agent_path, kind, tool,
    label, preview, args, verdict, reason, result, err, duration_ms; empty ones omitted
    (event_id, time and kind always written)."""
    return orjson.dumps(_members(ev, ulid_text(ev.event_id), format_time(ev.time))).decode()


def encode_event(ev: Event) -> tuple[str, str, str]:
    """``(event JSON, event id text, time text)``: the JSON of :func:`event_to_json` and
    the two texts it embeds, for callers that need them too (no second encoding)."""
    event_id, time = ulid_text(ev.event_id), format_time(ev.time)
    return orjson.dumps(_members(ev, event_id, time)).decode(), event_id, time


def encode_event_hashed(ev: Event) -> tuple[str, str, str | None]:
    """``(event JSON, event id text, content hash)``: the hash is that of
    :func:`event_canonical_hash`, computed from the same members (None when the event
    has no RFC 8785 form)."""
    event_id = ulid_text(ev.event_id)
    out = _members(ev, event_id, format_time(ev.time))
    return orjson.dumps(out).decode(), event_id, _hash_members(ev, out)


def _members(ev: Event, event_id: str, time: str) -> dict[str, Any]:
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
    return out


def _hash_members(ev: Event, out: dict[str, Any]) -> str | None:
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


def event_canonical_hash(ev: Event, event_id: str, time: str) -> str | None:
    """``sha256:`` of the RFC 8785 form of ``ev``'s JSON, built from its fields, or None
    when a part has no RFC 8785 form; ``event_id``/``time`` are its JSON's texts."""
    return _hash_members(ev, _members(ev, event_id, time))


def _skip(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in _WS:
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


def event_from_json(cls: type[Event], text: str | bytes) -> Event:
    """Build an ``Event`` from its JSON text, keeping ``args``/``result`` byte-exact."""
    try:
        return _event_from_json(cls, text)
    except RecursionError:
        raise ValidationError(
            "event JSON is nested too deeply to read; it cannot be an event this library wrote"
        ) from None


def _event_from_json(cls: type[Event], text: str | bytes) -> Event:
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"event JSON is not UTF-8 ({exc})") from None
    if not isinstance(text, str):
        raise ValidationError(f"event JSON: expected str or bytes, got {type(text).__name__}")
    fast = _from_json_fast(cls, text)
    if fast is not None:
        return fast
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
        elif key == "duration_ms":
            kwargs[key] = value
    return cls(**kwargs)


def _from_json_fast(cls: type[Event], text: str) -> Event | None:
    """Parse with orjson, taking ``args``/``result`` in compact form; accept the result
    only when re-serializing it gives ``text`` back byte for byte (so the raw values are
    exactly the source's). Anything else goes to the exact scanner."""
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not obj.keys() <= _KNOWN:
        return None
    try:
        for key in _RAW_FIELDS:
            if key in obj:
                obj[key] = orjson.dumps(obj[key]).decode("utf-8")
        if obj.get("verdict") == "":
            del obj["verdict"]
        ev = cls(**obj)
    except (ValidationError, TypeError):
        return None
    return ev if event_to_json(ev) == text else None

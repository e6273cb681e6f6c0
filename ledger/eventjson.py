"""Event <-> JSON, in the reference's field order and omit-empty rules.

``args`` and ``result`` are raw JSON: written verbatim and read back byte-exact, by a
top-level scanner that keeps each value's source text. Used through
``Event.to_json()`` and ``Event.from_json(text)``.
"""

from __future__ import annotations

import json
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any

import orjson

from ledger.errors import ValidationError
from ledger.timefmt import format_time

if TYPE_CHECKING:
    from ledger.model import Event

__all__ = ["event_from_json", "event_to_json"]


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
    out: dict[str, Any] = {"event_id": str(ev.event_id)}
    if ev.run_id:
        out["run_id"] = ev.run_id
    if ev.call_id:
        out["call_id"] = ev.call_id
    if ev.refs:
        out["refs"] = [r.to_dict() for r in ev.refs]
    out["time"] = format_time(ev.time)
    if ev.agent_path:
        out["agent_path"] = ev.agent_path
    out["kind"] = str(ev.kind)
    for name in ("tool", "label", "preview"):
        if value := getattr(ev, name):
            out[name] = value
    if ev.args is not None:
        out["args"] = orjson.Fragment(ev.args)
    if ev.verdict is not None:
        out["verdict"] = str(ev.verdict)
    if ev.reason:
        out["reason"] = ev.reason
    if ev.result is not None:
        out["result"] = orjson.Fragment(ev.result)
    if ev.err:
        out["err"] = ev.err
    if ev.duration_ms:
        out["duration_ms"] = ev.duration_ms
    return orjson.dumps(out).decode("utf-8")


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

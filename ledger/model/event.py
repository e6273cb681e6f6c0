"""The provenance data model: ``Event``, ``Ref`` and their enums.

>>> ev = Event(kind="action", run_id="r1", call_id="c1", tool="delete_file",
...            args='{"path":"/tmp/x"}', verdict="allowed",
...            refs=[Ref(source="tool", id="01J...", hash="")])
>>> Event.from_json(ev.to_json()) == ev
True

``args`` and ``result`` hold raw JSON text and are kept byte-exact: text given is checked
to be JSON and stored as given; any other Python value is serialized compactly. An
``Event`` is immutable; use :func:`dataclasses.replace` to derive another.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import orjson
from ulid import ULID

from ledger.errors import ValidationError
from ledger.ids import coerce_event_id, new_event_id
from ledger.model.codec import event_from_json, event_to_json
from ledger.timefmt import coerce_time, utc_now

__all__ = ["Event", "Kind", "Ref", "RefSource", "Verdict", "new_event_id"]


_JSON_WS = " \t\n\r"
_INT64_MAX = 2**63 - 1


class Kind(StrEnum):
    """What an event records. Values are the reference's."""

    PROMPT = "prompt"
    MODEL_RESPONSE = "model_response"
    TOOL_REQUEST = "tool_request"
    GATE_DECISION = "gate_decision"
    TOOL_RESULT = "tool_result"
    ABORT = "abort"
    RUN_END = "run_end"
    REQUEST = "request"  # chain head: the run's input
    RETRIEVED = "retrieved"  # what was put in front of the model, by ref
    ACTION = "action"  # intent + verdict, committed before execution


class Verdict(StrEnum):
    """A gate's decision on one tool call."""

    ALLOWED = "allowed"
    DENIED = "denied"
    NEEDS_APPROVAL = "needs_approval"


class RefSource(StrEnum):
    """What a ``Ref`` points at, so resolution never guesses from the id's shape."""

    TOOL = "tool"  # id is a ledger event id (a tool result)
    MEMORY = "memory"  # id is a memory entry id
    LEDGER = "ledger"  # id is a typed-ledger record id, hash its sha


def _enum(enum: type[StrEnum], value: object, name: str) -> Any:
    if isinstance(value, enum):
        return value
    if isinstance(value, str):
        try:
            return enum(value)
        except ValueError:
            pass
    allowed = ", ".join(repr(m.value) for m in enum)
    raise ValidationError(f"{name}: {value!r} is not one of {allowed}")


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{name}: expected a string, got {type(value).__name__}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError(f"{name}: text is not valid Unicode ({exc})") from None
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Ref:
    """An item that was available to the agent, by id plus the content hash seen then.

    ``source`` is a :class:`RefSource` when it names a known source; an unknown source
    string is kept as given (so a foreign record can still be read) but such a ref does
    not count as evidence for ``commit_action`` and verifies as ``unverifiable``.
    """

    source: RefSource | str
    id: str
    hash: str = ""

    def __post_init__(self) -> None:
        source = _text(self.source, "ref.source")
        if not isinstance(self.source, RefSource) and source in RefSource._value2member_map_:
            object.__setattr__(self, "source", RefSource(source))
        _text(self.id, "ref.id")
        _text(self.hash, "ref.hash")

    @property
    def known_source(self) -> bool:
        """True when ``source`` is one of :class:`RefSource`."""
        return isinstance(self.source, RefSource)

    def to_dict(self) -> dict[str, str]:
        """The reference's JSON shape: all three fields, always."""
        return {"source": str(self.source), "id": self.id, "hash": self.hash}

    @classmethod
    def from_dict(cls, data: object) -> Ref:
        """Build a ref from its JSON object; raise ``ValidationError`` on a bad shape."""
        if not isinstance(data, dict):
            raise ValidationError(f"ref: expected an object, got {type(data).__name__}")
        return cls(source=data.get("source", ""), id=data.get("id", ""), hash=data.get("hash", ""))


def _raw_json(value: object, name: str) -> str | None:
    """Normalize ``args``/``result``: raw JSON text kept as is, other values serialized."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{name}: raw JSON bytes are not UTF-8 ({exc})") from None
    if isinstance(value, str):
        value = value.strip(_JSON_WS)  # white space around the value is not part of it
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise ValidationError(
                f"{name}: {value[:60]!r} is not JSON text ({exc}); pass raw JSON text, "
                "or a Python value to have it serialized"
            ) from None
        _check_nesting(value, parsed, name)
        return value
    try:
        text = orjson.dumps(value).decode("utf-8")
    except TypeError as exc:
        raise ValidationError(f"{name}: value cannot be serialized as JSON ({exc})") from None
    _check_nesting(text, None, name)  # the JSON written, not the Python value (dataclasses...)
    if "null" in text:  # orjson writes NaN and infinities as null: refuse them instead
        try:
            json.dumps(value, allow_nan=False)
        except ValueError:
            raise ValidationError(
                f"{name}: NaN and infinities are not JSON; give finite numbers"
            ) from None
    return text


MAX_NESTING = 128
"""Deepest nesting of arrays and objects kept in ``args``/``result`` (``[]`` nests 1
level, ``[[1]]`` 2): anything stored must read back, and JSON nested much deeper cannot
be read back reliably (parsers stop at a recursion limit). The gate keeps less (64)."""


def _check_nesting(text: str, parsed: object, name: str) -> None:
    """``ValidationError`` when the JSON ``text`` (``parsed``, or None to parse it here)
    nests deeper than :data:`MAX_NESTING`; its bracket count rules most texts out at C
    speed."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return
    level = [orjson.loads(text) if parsed is None else parsed]
    for _ in range(MAX_NESTING):
        level = [
            child
            for v in level
            if isinstance(v, dict | list)
            for child in (v.values() if isinstance(v, dict) else v)
        ]
        if not level:
            return
    if any(isinstance(v, dict | list) for v in level):
        raise ValidationError(
            f"{name}: JSON nested more than {MAX_NESTING} levels deep (arrays and objects); "
            "flatten it, or store it as a string"
        )


def _refs(value: object) -> tuple[Ref, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValidationError(f"refs: expected a sequence of Ref, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, Ref):
            out.append(item)
        elif isinstance(item, dict):
            out.append(Ref.from_dict(item))
        else:
            raise ValidationError(f"refs[{i}]: expected a Ref, got {type(item).__name__}")
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class Event:
    """One recorded fact about a run. Fields that do not apply to a kind stay empty.

    The constructor is keyword-only and takes the plain strings as well as the enum
    members, a list of refs (or their dicts), and ``args``/``result`` as raw JSON text or
    as a Python value; attributes always hold the normalized forms.
    """

    kind: Kind
    event_id: ULID
    run_id: str
    call_id: str
    refs: tuple[Ref, ...]
    time: datetime
    agent_path: str
    tool: str
    label: str
    preview: str
    args: str | None
    verdict: Verdict | None
    reason: str
    result: str | None
    err: str
    duration_ms: int

    def __init__(
        self,
        *,
        kind: Kind | str,
        event_id: ULID | str | None = None,
        run_id: str = "",
        call_id: str = "",
        refs: Iterable[Ref | Mapping[str, str]] = (),
        time: datetime | str | None = None,
        agent_path: str = "",
        tool: str = "",
        label: str = "",
        preview: str = "",
        args: object = None,
        verdict: Verdict | str | None = None,
        reason: str = "",
        result: object = None,
        err: str = "",
        duration_ms: int = 0,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "kind", _enum(Kind, kind, "kind"))
        set_(self, "event_id", new_event_id() if event_id is None else coerce_event_id(event_id))
        texts = {"run_id": run_id, "call_id": call_id, "agent_path": agent_path, "tool": tool,
                 "label": label, "preview": preview, "reason": reason, "err": err}  # fmt: skip
        for name, value in texts.items():
            set_(self, name, _text(value, name))
        set_(self, "refs", _refs(refs))
        set_(self, "time", utc_now() if time is None else coerce_time(time))
        set_(self, "args", _raw_json(args, "args"))
        set_(self, "result", _raw_json(result, "result"))
        set_(self, "verdict", None if verdict is None else _enum(Verdict, verdict, "verdict"))
        if isinstance(duration_ms, bool) or not isinstance(duration_ms, int):
            raise ValidationError(f"duration_ms: expected an integer, got {duration_ms!r}")
        if not 0 <= duration_ms <= _INT64_MAX:
            raise ValidationError(f"duration_ms: {duration_ms} is outside 0..2**63-1")
        set_(self, "duration_ms", duration_ms)

    def to_json(self) -> str:
        """The reference's JSON (field order and omit-empty rules); ``args``/``result``
        are embedded byte-exact."""
        return event_to_json(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> Event:
        """Parse one event's JSON; raise ``ValidationError`` naming the bad field."""
        if cls is Event:
            fast = _decode_compact(text)
            if fast is not None:
                return fast
        return event_from_json(cls, text)

    def replace(self, **changes: Any) -> Event:
        """A copy with ``changes`` applied (validated like a new event)."""
        return dataclasses.replace(self, **changes)


# --- decoding compact JSON (what to_json writes) without the exact scanner --------------

_KNOWN_KEYS = frozenset(
    ("event_id", "refs", "time", "duration_ms", "args", "result", "run_id", "call_id",
     "agent_path", "kind", "tool", "label", "preview", "verdict", "reason", "err")
)  # fmt: skip
_TEXT_FIELDS = ("run_id", "call_id", "agent_path", "tool", "label", "preview", "reason", "err")
_KINDS: dict[object, Kind] = dict(Kind._value2member_map_)
_VERDICTS: dict[object, Verdict] = dict(Verdict._value2member_map_)
_SOURCES: dict[object, RefSource] = dict(RefSource._value2member_map_)
_REF_KEYS = frozenset(("source", "id", "hash"))


def _decode_compact(text: object) -> Event | None:
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
    if not obj.keys() <= _KNOWN_KEYS:
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
    if type(duration) is not int or not 0 <= duration <= _INT64_MAX:
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
    ev = object.__new__(Event)
    set_ = object.__setattr__
    for name, value in zip(_TEXT_FIELDS, texts, strict=True):
        set_(ev, name, value)
    set_(ev, "event_id", eid)
    set_(ev, "time", when)
    set_(ev, "kind", kind)
    set_(ev, "refs", refs)
    set_(ev, "verdict", verdict or None)
    set_(ev, "duration_ms", duration)
    set_(ev, "args", None if args is _ABSENT else orjson.dumps(args).decode("utf-8"))
    set_(ev, "result", None if result is _ABSENT else orjson.dumps(result).decode("utf-8"))
    return ev


_ABSENT = object()


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

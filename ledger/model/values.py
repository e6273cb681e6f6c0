"""The values an event is made of: its enums, :class:`Ref`, and the field validators.

>>> Ref(source="tool", id="01J0000000000000000000000A").known_source
True
>>> Kind("action") is Kind.ACTION
True

The validators (``enum_value``, ``text_value``, ``raw_json``, ``refs_value``) are the one
place each field rule lives; :class:`~ledger.model.event.Event` and the decoder of
:mod:`ledger.model.codec` both use them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import orjson

from ledger.errors import ValidationError
from ledger.timefmt import coerce_time

__all__ = [
    "INT64_MAX",
    "JSON_WS",
    "MAX_NESTING",
    "OUTSIDE_RUN_PREFIX",
    "Actor",
    "Approval",
    "Kind",
    "Ref",
    "RefSource",
    "Verdict",
    "check_nesting",
    "enum_value",
    "nested_deeper",
    "outside_any_run",
    "raw_json",
    "refs_value",
    "text_value",
]

JSON_WS = " \t\n\r"
OUTSIDE_RUN_PREFIX = "norun-"
"""The run id prefix the gate gives a call made outside any run (``"norun-" + ULID``):
such a call is denied and recorded under a run of its own, which is not a run."""


def outside_any_run(run_id: str) -> bool:
    """True for the run id of a call the gate recorded outside any run."""
    return run_id.startswith(OUTSIDE_RUN_PREFIX)


INT64_MAX = 2**63 - 1


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


def enum_value(enum: type[StrEnum], value: object, name: str) -> Any:
    if isinstance(value, enum):
        return value
    if isinstance(value, str):
        try:
            return enum(value)
        except ValueError:
            pass
    allowed = ", ".join(repr(m.value) for m in enum)
    raise ValidationError(f"{name}: {value!r} is not one of {allowed}")


def text_value(value: object, name: str) -> str:
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
        source = text_value(self.source, "ref.source")
        if not isinstance(self.source, RefSource) and source in RefSource._value2member_map_:
            object.__setattr__(self, "source", RefSource(source))
        text_value(self.id, "ref.id")
        text_value(self.hash, "ref.hash")

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


def raw_json(value: object, name: str) -> str | None:
    """Normalize ``args``/``result``: raw JSON text kept as is, other values serialized."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{name}: raw JSON bytes are not UTF-8 ({exc})") from None
    if isinstance(value, str):
        value = value.strip(JSON_WS)  # white space around the value is not part of it
        try:
            orjson.loads(value)  # JSON text, or refused
        except orjson.JSONDecodeError as exc:
            raise ValidationError(
                f"{name}: {value[:60]!r} is not JSON text ({exc}); pass raw JSON text, "
                "or a Python value to have it serialized"
            ) from None
        check_nesting(value, name)
        return value
    try:
        text = orjson.dumps(value).decode("utf-8")
    except TypeError as exc:
        raise ValidationError(f"{name}: value cannot be serialized as JSON ({exc})") from None
    check_nesting(text, name)  # the JSON written, not the Python value (dataclasses...)
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


def check_nesting(text: str, name: str) -> None:
    """``ValidationError`` naming ``name`` when the JSON ``text`` nests deeper than
    :data:`MAX_NESTING`."""
    if text.count("[") + text.count("{") <= MAX_NESTING:  # most texts, at C speed
        return
    if nested_deeper(text.encode("utf-8", "surrogatepass")):
        raise ValidationError(
            f"{name}: JSON nested more than {MAX_NESTING} levels deep (arrays and objects); "
            "flatten it, or store it as a string"
        )


_AS_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_SHAPE = bytes(b for b in range(256) if b not in b'[]{}"')


def nested_deeper(raw: bytes, limit: int = MAX_NESTING) -> bool:
    """True when the JSON text ``raw`` nests arrays and objects more than ``limit``
    levels deep, found at C speed (no walk over its values in Python): the escapes
    taken out (an escaped backslash first, so every quote left opens or closes a
    string), then the strings, and every bracket read as ``[``/``]``; what is left is
    the shape, whose innermost pairs go one level a pass.

    >>> nested_deeper(b'[[1]]', 1), nested_deeper(b'[[1]]', 2), nested_deeper(b'["]]]",[[2]]]', 2)
    (True, False, True)
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    shape = raw.translate(_AS_SQUARE, _NOT_SHAPE)
    # a string holding no bracket is now "" (and two strings with only punctuation
    # between them merge, which changes no shape): gone at C speed; the rest split out
    shape = shape.replace(b'""', b"")
    if b'"' in shape:
        shape = b"".join(shape.split(b'"')[::2])
    for _ in range(limit):
        if not shape:
            return False
        shape = shape.replace(b"[]", b"")
    return bool(shape)


def refs_value(value: object) -> tuple[Ref, ...]:
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Actor:
    """Who a run acts as and for: the principal (the user or service the agent works
    for) and the agent's own id and version (its path in a multi-agent system is the
    event's ``agent_path``). Every field is optional; the gate writes it on each event of
    a run started with ``Gate.run(..., principal=...)``.

    >>> Actor(principal="alice@example.com", agent_id="triage-bot", agent_version="1.4")
    Actor(principal='alice@example.com', agent_id='triage-bot', agent_version='1.4')
    """

    principal: str = ""
    agent_id: str = ""
    agent_version: str = ""

    def __post_init__(self) -> None:
        for name in ("principal", "agent_id", "agent_version"):
            text_value(getattr(self, name), f"actor.{name}")

    def __bool__(self) -> bool:
        return bool(self.principal or self.agent_id or self.agent_version)

    def to_dict(self) -> dict[str, str]:
        """The JSON shape: only the fields that are set."""
        return {k: v for k, v in self._items() if v}

    def _items(self) -> tuple[tuple[str, str], ...]:
        return (
            ("principal", self.principal),
            ("agent_id", self.agent_id),
            ("agent_version", self.agent_version),
        )

    @classmethod
    def from_dict(cls, data: object) -> Actor:
        """Build it from its JSON object; ``ValidationError`` on another shape."""
        if isinstance(data, Actor):
            return data
        if not isinstance(data, dict):
            raise ValidationError(f"actor: expected an object, got {type(data).__name__}")
        unknown = sorted(set(data) - {"principal", "agent_id", "agent_version"})
        if unknown:
            raise ValidationError(f"actor: unknown field {unknown[0]!r}")
        return cls(**data)


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """Who approved a call, when, and why: on the ``gate_decision`` and ``action`` of a
    call an approver allowed (or refused). ``time`` is when the approver answered (it
    may be earlier than the decision was recorded).

    >>> Approval(approver="bob", reason="change ticket 4711").approver
    'bob'
    """

    approver: str
    time: datetime | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        text_value(self.approver, "approval.approver")
        if not self.approver:
            raise ValidationError("approval.approver: name who approved (it is empty)")
        text_value(self.reason, "approval.reason")
        if self.time is not None:
            object.__setattr__(self, "time", coerce_time(self.time, field="approval.time"))

    @classmethod
    def from_dict(cls, data: object) -> Approval:
        """Build it from its JSON object; ``ValidationError`` on another shape."""
        if isinstance(data, Approval):
            return data
        if not isinstance(data, dict):
            raise ValidationError(f"approval: expected an object, got {type(data).__name__}")
        unknown = sorted(set(data) - {"approver", "time", "reason"})
        if unknown:
            raise ValidationError(f"approval: unknown field {unknown[0]!r}")
        if "approver" not in data:
            raise ValidationError("approval: the approver is missing")
        return cls(**data)

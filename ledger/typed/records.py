"""Canonical ledger records: the 7-key envelope, its hash and the deterministic ids.

A record is one line of a shard file, the gh-aw canonical JSON of exactly these keys::

    {"id": "ldg-…", "parents": ["sha256:…"], "payload": …, "sha": "sha256:…",
     "timestamp": "2026-01-01T00:00:00.000Z", "type": "ledger_append", "version": 1}

``sha`` is ``"sha256:"`` + the SHA-256 of the canonical JSON of the record without
``sha``. Build one with :meth:`Record.new`, read one with :meth:`Record.from_line`, write
one with :meth:`Record.to_line`::

    rec = Record.new(id=final_id("12345:1", 0), timestamp="2026-01-01T00:00:00.000Z",
                     parents=(), payload={"operation": "append", "value": "x"})
    assert Record.from_line(rec.to_line()) == rec

The text helpers (:func:`canonical_json`, :func:`final_id`, :func:`format_timestamp`...)
live in :mod:`ledger.typed.jsontext` and are re-exported here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final

import orjson

from ledger.canonical import canonicalize
from ledger.errors import CanonicalizationError, RecordError
from ledger.typed.jsontext import (
    MAX_SAFE_INTEGER,
    canonical_json,
    check_timestamp,
    is_record_id,
    record_sha,
    sha256_hexdigest,
)

__all__ = [
    "MAX_SAFE_INTEGER",
    "RECORD_KEYS",
    "InvalidRecordLine",
    "Record",
]

MAX_PARENTS: Final = 64
RECORD_KEYS: Final = frozenset(
    {"version", "id", "type", "timestamp", "parents", "payload", "sha"},
)

SHA_RE: Final = re.compile(r"sha256:[0-9a-f]{64}")
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f]")


class InvalidRecordLine(RecordError):
    """A shard line is not a valid canonical record; ``code`` is the diagnostic code.

    Codes: ``invalid-json``, ``unsupported-version``, ``invalid-envelope``,
    ``invalid-sha``.
    """

    def __init__(self, code: str, detail: str, record_id: str | None = None) -> None:
        self.code = code
        self.detail = detail
        self.record_id = record_id
        super().__init__(f"{code}: {detail}")


# --- the record ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One canonical ledger record; ``shard`` and ``offset`` are set when read from disk.

    Construct it with the seven envelope fields, positionally in the documented order
    ``Record(version, id, type, timestamp, parents, payload, sha)`` or by keyword
    (``parents`` may be any sequence; it is kept as a tuple), or with :meth:`new`
    which computes ``sha`` and checks every envelope rule. Direct construction does not
    verify anything; :meth:`from_line` and :meth:`from_mapping` do. Equality ignores the
    location.
    """

    version: int
    id: str
    type: str
    timestamp: str
    parents: tuple[str, ...]
    payload: Any
    sha: str
    _: KW_ONLY
    shard: str | None = field(default=None, compare=False)
    offset: int | None = field(default=None, compare=False)
    line_no: int | None = field(default=None, compare=False, repr=False)
    _line: str | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        parents: object = self.parents  # a list is welcome; it is kept as a tuple
        if not isinstance(parents, tuple):
            if isinstance(parents, str | bytes) or not isinstance(parents, Iterable):
                raise RecordError("record parents must be a sequence of sha256 strings")
            object.__setattr__(self, "parents", tuple(parents))

    def __hash__(self) -> int:
        return hash(self.sha)

    @classmethod
    def new(
        cls,
        *,
        id: str,
        timestamp: str,
        parents: Sequence[str],
        payload: Any,
        type: str = "ledger_append",
    ) -> Record:
        """Build a record, computing its ``sha``; raises :class:`RecordError` if invalid.

        ``parents`` are sorted and must be unique ``sha256:`` hashes.
        """
        body = {
            "version": 1,
            "id": id,
            "type": type,
            "timestamp": timestamp,
            "parents": sorted(parents),
            "payload": payload,
        }
        _check_envelope(body, check_sha=False)
        try:
            text = canonical_json(body)
        except CanonicalizationError as exc:
            raise RecordError(
                f"Ledger value must be finite, acyclic JSON; the record payload is not: {exc}"
            ) from exc
        sha = "sha256:" + sha256_hexdigest(text)
        cut = text.rfind(',"timestamp":"')  # the envelope's: only "type" and "version" follow
        return cls._from_body(body, sha, _line=f'{text[:cut]},"sha":"{sha}"{text[cut:]}')

    @classmethod
    def _from_body(
        cls, body: Mapping[str, Any], sha: str, _line: str | None = None, **extra: Any
    ) -> Record:
        record = cls(
            version=body["version"],
            id=body["id"],
            type=body["type"],
            timestamp=body["timestamp"],
            parents=tuple(body["parents"]),
            payload=body["payload"],
            sha=sha,
            **extra,
        )
        # The verified canonical line, kept to avoid re-serializing; not an init field,
        # so dataclasses.replace() on a changed record never reuses a stale line.
        object.__setattr__(record, "_line", _line)
        return record

    @classmethod
    def from_mapping(cls, obj: Mapping[str, Any]) -> Record:
        """Check a parsed record (all seven keys, ``sha`` included) and wrap it."""
        _check_envelope(obj, check_sha=True)
        expected = record_sha(obj)
        if expected != obj["sha"]:
            raise InvalidRecordLine(
                "invalid-sha",
                f"record {obj['id']} has sha {obj['sha']} but its content hashes to {expected}",
            )
        return cls._from_body(obj, obj["sha"])

    @classmethod
    def from_line(cls, text: str | bytes) -> Record:
        """Parse one shard line; raises :class:`InvalidRecordLine` (a ``RecordError``).

        The line must be byte-identical to the canonical JSON of the record. One trailing
        ``\n`` (as iterating over a shard file yields it) is allowed and ignored.
        """
        if isinstance(text, bytes | bytearray | memoryview):
            try:
                text = bytes(text).decode()
            except UnicodeDecodeError:
                raise InvalidRecordLine("invalid-envelope", "line is not UTF-8") from None
        if not isinstance(text, str):
            raise InvalidRecordLine(
                "invalid-json", f"a record line is text or bytes, not {type(text).__name__}"
            )
        return parse_line(text.removesuffix("\n"))

    def as_dict(self) -> dict[str, Any]:
        """The record as a plain mapping of its seven envelope keys."""
        return {
            "id": self.id,
            "parents": list(self.parents),
            "payload": self.payload,
            "sha": self.sha,
            "timestamp": self.timestamp,
            "type": self.type,
            "version": self.version,
        }

    def to_line(self) -> str:
        """The canonical JSON line of the record, without the trailing newline."""
        if self._line is not None:
            return self._line
        return canonical_json(self.as_dict())

    def payload_json(self) -> str:
        """The canonical JSON text of the payload (what ``records.payload`` stores)."""
        line = self._line
        if line is not None:  # the payload's text sits between the parents and the sha
            start = line.index(',"payload":') + len(',"payload":')
            return line[start : line.rfind(_SHA_MARK)]
        return canonical_json(self.payload)

    def located(self, shard: str, offset: int, line_no: int) -> Record:
        """A copy of this record that knows the shard file and byte offset it came from."""
        copy = Record(
            version=self.version,
            id=self.id,
            type=self.type,
            timestamp=self.timestamp,
            parents=self.parents,
            payload=self.payload,
            sha=self.sha,
            shard=shard,
            offset=offset,
            line_no=line_no,
        )
        object.__setattr__(copy, "_line", self._line)
        return copy


# --- envelope checks -----------------------------------------------------------------


def _check_envelope(obj: Mapping[str, Any], *, check_sha: bool) -> None:
    if not isinstance(obj, Mapping):
        raise InvalidRecordLine("invalid-envelope", "record must be a JSON object")
    version = obj.get("version")
    if type(version) not in (int, float) or version != 1:
        raise InvalidRecordLine(
            "unsupported-version",
            f"record version {version!r} is not supported; only version 1 is",
        )
    keys = set(obj)
    wanted = RECORD_KEYS if check_sha else RECORD_KEYS - {"sha"}
    if keys != wanted:
        extra = sorted(keys - wanted)
        missing = sorted(wanted - keys)
        raise InvalidRecordLine(
            "invalid-envelope",
            f"record must have exactly the keys {sorted(wanted)} "
            f"(missing {missing}, unexpected {extra})",
        )
    _check_fields(obj)
    if check_sha and (not isinstance(obj["sha"], str) or not SHA_RE.fullmatch(obj["sha"])):
        raise InvalidRecordLine(
            "invalid-envelope", f"record sha {obj['sha']!r} must be sha256:<64 hex>"
        )


def _check_fields(obj: Mapping[str, Any]) -> None:
    rid = obj["id"]
    if not is_record_id(rid):
        raise InvalidRecordLine("invalid-envelope", f"record id {rid!r} must be ldg-<uuid4>")
    rtype = obj["type"]
    if not isinstance(rtype, str) or not 1 <= _js_length(rtype) <= 128 or _CONTROL_RE.search(rtype):
        raise InvalidRecordLine(
            "invalid-envelope",
            f"record {rid} type must be a string of 1..128 characters without control characters",
        )
    try:
        check_timestamp(obj["timestamp"])
    except RecordError as exc:
        raise InvalidRecordLine("invalid-envelope", f"record {rid}: {exc}") from None
    _check_parents(rid, obj["parents"])


def _js_length(text: str) -> int:
    """``text.length`` in JavaScript: UTF-16 code units (an emoji counts 2)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _check_parents(rid: str, parents: object) -> None:
    if not isinstance(parents, list | tuple) or len(parents) > MAX_PARENTS:
        raise InvalidRecordLine(
            "invalid-envelope", f"record {rid} parents must be an array of at most 64 hashes"
        )
    previous = ""
    for parent in parents:
        if not isinstance(parent, str) or SHA_RE.fullmatch(parent) is None:
            raise InvalidRecordLine(
                "invalid-envelope", f"record {rid} parent {parent!r} must be sha256:<64 hex>"
            )
        if parent <= previous:
            raise InvalidRecordLine(
                "invalid-envelope",
                f"record {rid} parents must be unique and strictly ascending",
            )
        previous = parent


# --- parsing a line ------------------------------------------------------------------

_SHA_MARK: Final = ',"sha":"sha256:'


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:  # JSON.parse accepts lone surrogate escapes; orjson does not
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise InvalidRecordLine("invalid-json", f"line is not valid JSON: {exc}") from None


def _no_constant(name: str) -> None:
    """``NaN`` and ``Infinity`` are Python's JSON extensions; ``JSON.parse`` refuses them."""
    raise ValueError(f"{name} is not JSON")


def _canonical_record(obj: dict[str, Any]) -> str:
    """Canonical text of a record whose envelope fields were already checked (the gh-aw
    profile of :mod:`ledger.canonical`, whose own fast path serves plain records)."""
    return canonicalize(obj, profile="gh-aw")


def _as_js_numbers(value: Any) -> Any:
    """Integers beyond the safe range become floats, as JavaScript parses them."""
    if type(value) is int and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return float(value)
    if isinstance(value, dict):
        return {key: _as_js_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_js_numbers(item) for item in value]
    return value


def parse_line(
    text: str, shard: str | None = None, offset: int | None = None, line_no: int | None = None
) -> Record:
    """Parse and fully check one canonical line (see :meth:`Record.from_line`).

    ``shard``, ``offset`` and ``line_no`` record where the line was read from.
    """
    obj = _loads(text)
    if not isinstance(obj, dict):
        raise InvalidRecordLine("invalid-envelope", "record must be a JSON object")
    _check_envelope(obj, check_sha=True)
    try:
        canon = _canonical_record(obj)
    except CanonicalizationError:
        obj = _as_js_numbers(obj)  # JSON.parse reads 2**53 as a (double) number
        try:
            canon = canonical_json(obj)
        except CanonicalizationError as exc:
            raise InvalidRecordLine(
                "invalid-envelope", f"record {obj['id']} is not canonical JSON: {exc}"
            ) from None
    cut = canon.rfind(_SHA_MARK)
    unsigned = canon[:cut] + canon[cut + len(_SHA_MARK) + 65 :]
    expected = "sha256:" + sha256_hexdigest(unsigned)
    if expected != obj["sha"]:
        raise InvalidRecordLine(
            "invalid-sha",
            f"record {obj['id']} has sha {obj['sha']} but its content hashes to {expected}",
            obj["id"],
        )
    if canon != text:
        raise InvalidRecordLine(
            "invalid-envelope",
            f"record {obj['id']} line is not byte-identical to its canonical JSON",
            obj["id"],
        )
    return Record._from_body(
        obj, obj["sha"], _line=text, shard=shard, offset=offset, line_no=line_no
    )

"""The text of the gh-aw profile: canonical JSON, hashes, ids and envelope timestamps.

::

    canonical_json({"b": 1, "10": 1, "2": 1, "a": 1})  # '{"2":1,"10":1,"a":1,"b":1}'
    final_id("tx", 0)                                   # 'ldg-56f73ce7-225c-46bb-…'
    format_timestamp(datetime(2026, 1, 1, tzinfo=UTC))  # '2026-01-01T00:00:00.000Z'

:func:`canonical_json` is the gh-aw profile of :mod:`ledger.canonical`; for the common
case (ASCII keys not starting with a digit, safe integers, no floats) it takes a fast path
through ``orjson`` whose output is byte-identical (a property test checks this), and falls
back to the reference canonicalizer for everything else. :mod:`ledger.typed.records`
re-exports every public name.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from ledger.canonical import canonicalize
from ledger.errors import RecordError

__all__ = [
    "MAX_SAFE_INTEGER",
    "canonical_json",
    "check_timestamp",
    "final_id",
    "format_timestamp",
    "is_record_id",
    "js_length",
    "loads_as_js",
    "new_record_id",
    "record_sha",
    "sha256_hexdigest",
    "utf8_len",
    "well_formed",
]

MAX_SAFE_INTEGER: Final = 2**53 - 1
ID_RE: Final = re.compile(
    r"ldg-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
)
TIMESTAMP_RE: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.[0-9]{3}Z"
)
_MONTH_DAYS: Final = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def canonical_json(value: object) -> str:
    """The gh-aw canonical JSON text of ``value`` (JS key order and number formatting).

    >>> canonical_json({"b": 1, "10": 1, "2": 1, "a": 1})
    '{"2":1,"10":1,"a":1,"b":1}'

    Raises :class:`~ledger.errors.CanonicalizationError` for NaN, infinities, unsafe
    integers, non-string keys, cycles and nesting deeper than 32.
    """
    return canonicalize(value, profile="gh-aw")  # the one gh-aw canonicalizer


def _js_int(text: str) -> int | float:
    value = int(text)
    return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else float(text)


def _no_js_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def loads_as_js(text: str | bytes) -> Any:
    """Parse JSON text as JavaScript's ``JSON.parse`` does: an integer beyond ±(2**53-1)
    becomes the nearest double, the last of two equal keys wins, NaN is refused. This is
    the reading of evidence (faithful on read); what this library *writes* never holds
    such an integer (:func:`canonical_json` refuses it, strict on write).

    >>> canonical_json(loads_as_js("12345678901234567890"))
    '12345678901234567000'
    """
    return json.loads(text, parse_int=_js_int, parse_constant=_no_js_constant)


def sha256_hexdigest(text: str) -> str:
    """Hex SHA-256 of the UTF-8 bytes of ``text`` as JavaScript encodes it (a lone
    surrogate hashes as U+FFFD)."""
    return hashlib.sha256(_utf8(text)).hexdigest()


def utf8_len(text: str) -> int:
    """UTF-8 byte length as JavaScript measures it (a lone surrogate counts 3 bytes)."""
    return len(_utf8(text))


def _utf8(text: str) -> bytes:
    """The UTF-8 bytes JavaScript makes of ``text`` (``Buffer.from``, ``TextEncoder``): a
    surrogate pair is one character, a lone surrogate becomes U+FFFD."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return well_formed(text).encode()


def well_formed(text: str) -> str:
    """``text`` with every lone UTF-16 surrogate replaced by U+FFFD (and surrogate pairs
    joined), as JavaScript's ``toWellFormed`` and every UTF-8 encoder of it do."""
    if text.isascii():
        return text
    try:
        text.encode()
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def js_length(text: str) -> int:
    """The length of ``text`` as JavaScript counts it, in UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def record_sha(record: Mapping[str, Any]) -> str:
    """``"sha256:"`` + hex SHA-256 of the canonical JSON of ``record`` without ``sha``.

    >>> record_sha({"version": 1, "id": "ldg-…", ...})  # doctest: +SKIP
    'sha256:9f34…'
    """
    as_dict = getattr(record, "as_dict", None)  # a Record is accepted as well
    mapping = as_dict() if callable(as_dict) else record
    if not isinstance(mapping, Mapping):
        raise RecordError(f"record_sha needs a record mapping, not {type(record).__name__}")
    body = {key: value for key, value in mapping.items() if key != "sha"}
    return "sha256:" + sha256_hexdigest(canonical_json(body))


def final_id(transaction_id: str, index: int) -> str:
    """The deterministic record id of request ``index`` of a transaction.

    >>> final_id("tx", 0)
    'ldg-56f73ce7-225c-46bb-863e-074a5b1a8744'

    ``transaction_id`` must be a string and ``index`` a non-negative integer (the
    request's position in the whole batch); anything else raises ``RecordError``. The
    text ``"<transaction_id>:<index>"`` is hashed as JavaScript encodes it to UTF-8: a
    lone surrogate in the transaction id hashes as U+FFFD, as the reference's does.
    """
    if not isinstance(transaction_id, str):
        raise RecordError(
            f"transaction_id must be a string like '12345:1', not {type(transaction_id).__name__}"
        )
    if type(index) is not int or index < 0:
        raise RecordError(f"index must be a non-negative integer, not {index!r}")
    return "ldg-" + _uuid_shape(sha256_hexdigest(f"{transaction_id}:{index}"))


def _uuid_shape(h: str) -> str:
    variant = (int(h[16:18], 16) & 0x3F) | 0x80
    return f"{h[0:8]}-{h[8:12]}-4{h[13:16]}-{variant:02x}{h[18:20]}-{h[20:32]}"


def new_record_id() -> str:
    """A random envelope id, ``ldg-<uuid4>``, as the reference writer makes them."""
    return f"ldg-{uuid.uuid4()}"


def is_record_id(value: object) -> bool:
    """True when ``value`` is a string shaped ``ldg-<uuid4>``."""
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None


def format_timestamp(moment: datetime | str | None = None) -> str:
    """The envelope timestamp ``YYYY-MM-DDTHH:MM:SS.sssZ`` (UTC, milliseconds).

    >>> format_timestamp(datetime(2026, 1, 1, tzinfo=UTC))
    '2026-01-01T00:00:00.000Z'

    ``None`` means now; a string must already be in that exact form. Anything else
    raises :class:`~ledger.errors.RecordError`.
    """
    if moment is None:
        moment = datetime.now(UTC)
    if isinstance(moment, str):
        check_timestamp(moment)
        return moment
    if not isinstance(moment, datetime):
        raise RecordError(
            f"record timestamp must be a timezone-aware datetime or a string like "
            f"2026-01-01T00:00:00.000Z, not {type(moment).__name__}"
        )
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise RecordError("record timestamp must be timezone-aware; pass a UTC datetime")
    moment = moment.astimezone(UTC)
    return (
        f"{moment.year:04d}"
        + moment.strftime("-%m-%dT%H:%M:%S.")
        + (f"{moment.microsecond // 1000:03d}Z")
    )


_GOOD_TIMESTAMPS: dict[str, None] = {}


def check_timestamp(value: object) -> None:
    """Refuse anything but a timestamp a JavaScript ``Date`` round-trips exactly.

    That is ``YYYY-MM-DDTHH:MM:SS.sssZ`` with ASCII digits and a real calendar date and
    time (years 0000..9999; hour 24 and leap seconds are not round-tripped by JS).
    """
    if not isinstance(value, str):
        raise RecordError(
            f"record timestamp {value!r:.80} must be a string like 2026-01-01T00:00:00.000Z"
        )
    if value in _GOOD_TIMESTAMPS:  # one persistence run stamps all its records alike
        return
    match = TIMESTAMP_RE.fullmatch(value)
    if match is None:
        raise RecordError(
            f"record timestamp {value!r:.80} must be a UTC ISO time with milliseconds, "
            "like 2026-01-01T00:00:00.000Z",
        )
    year, month, day, hour, minute, second = (int(part) for part in match.groups())
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = 29 if month == 2 and leap else _MONTH_DAYS[month - 1] if 1 <= month <= 12 else 0
    if not 1 <= day <= days or hour > 23 or minute > 59 or second > 59:
        raise RecordError(f"record timestamp {value!r} is not a real date and time")
    if len(_GOOD_TIMESTAMPS) > 4096:
        _GOOD_TIMESTAMPS.clear()
    _GOOD_TIMESTAMPS[value] = None

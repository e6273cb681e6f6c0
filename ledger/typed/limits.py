"""Shape and size limits for hostile typed-ledger input (reference §7.2).

>>> check_shape({"a": [1, 2, {"b": None}]})
>>> stringify_bytes({"a": "é"})
10

Limits: nesting depth at most 32 (the top level is depth 0), at most 128 keys per object,
keys at most 256 UTF-8 bytes. Request sizes are measured as the reference measures them,
on the compact (not canonical) JSON text, ``JSON.stringify``'s.
"""

from __future__ import annotations

import json

from ledger.canonical import GHAW_MAX_DEPTH
from ledger.errors import RecordError

__all__ = [
    "MAX_KEYS",
    "MAX_KEY_BYTES",
    "RESERVED_FIELDS",
    "check_shape",
    "stringify_bytes",
]

MAX_KEYS = 128
MAX_KEY_BYTES = 256
#: Top-level keys a requested payload may not carry (``id`` too, for raw records).
RESERVED_FIELDS = frozenset(
    {"transaction_id", "hash", "payload_sha", "parents", "sha", "timestamp", "version"}
)


def check_shape(value: object, *, depth: int = 0) -> None:
    """Refuse values nested deeper than 32, objects with too many or too long keys.

    It stops at the depth limit, so a cyclic value is refused rather than followed.
    """
    if depth > GHAW_MAX_DEPTH:
        raise RecordError(f"Ledger JSON exceeds maximum nesting depth ({GHAW_MAX_DEPTH})")
    if isinstance(value, dict):
        if len(value) > MAX_KEYS:
            raise RecordError(f"Ledger record object has more than {MAX_KEYS} keys")
        for key, item in value.items():
            if not isinstance(key, str) or _utf8_len(key) > MAX_KEY_BYTES:
                raise RecordError(
                    f"Ledger record keys must be strings of at most {MAX_KEY_BYTES} bytes"
                )
            check_shape(item, depth=depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            check_shape(item, depth=depth + 1)


def stringify_bytes(value: object) -> int:
    """Byte length of the compact JSON text, as the reference's ``JSON.stringify``."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError, RecursionError) as exc:
        raise RecordError(f"Ledger value must be finite, acyclic JSON ({exc})") from None
    return _utf8_len(text)


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))

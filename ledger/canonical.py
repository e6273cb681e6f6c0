"""Canonical JSON in two profiles, and the ``sha256:`` content hashes built on it.

>>> from ledger.canonical import canonicalize, sha256_of
>>> canonicalize({"b": [1.0, -0.0, 1e21, 1e-7], "a": "é\\n"})
'{"a":"é\\\\n","b":[1,0,1e+21,1e-7]}'
>>> canonicalize({"b": 1, "10": 1, "2": 1, "a": 1}, profile="gh-aw")
'{"2":1,"10":1,"a":1,"b":1}'
>>> sha256_of({}, profile="gh-aw")
'sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a'

Profiles
--------
``"rfc8785"`` (provenance content hashes, exports) is RFC 8785 (JCS) exactly: object keys
sorted by their UTF-16 code units, ECMAScript number formatting, no white space, strings
with only ``\\b \\t \\n \\f \\r \\" \\\\`` and ``\\u00xx`` (lowercase) escapes and everything
else as raw UTF-8. Strings holding surrogate code points are not Unicode text and are
refused, as the RFC requires.

``"gh-aw"`` (typed ledger records) is what the gh-aw reference produces: JavaScript's
``JSON.stringify`` over recursively key-sorted plain objects. It differs from ``rfc8785``
in three ways only:

* keys that are array indices (canonical decimal integers 0 .. 2**32-2, such as ``"2"``
  and ``"10"``; not ``"02"``) come first in ascending numeric order, the JavaScript property
  order; the other keys follow in UTF-16 code-unit order;
* depth is limited. Every value has a depth: the top-level value is depth 0, and the
  elements of an array or the member values of an object at depth *d* are at depth
  *d* + 1. Any value, container or scalar, deeper than 32 is refused (the reference checks
  ``depth > 32`` before it looks at the value). So ``[[1]]`` nested to put the ``1`` at
  depth 32 is accepted, one more level is refused, and 33 nested empty lists are fine;
* strings are read as JavaScript reads them (UTF-16): a high surrogate code point followed
  by a low one forms one character, and a lone surrogate is written ``\\udxxx``.

Both profiles refuse NaN and the infinities, ``int`` values beyond ±(2**53-1), non-string
keys, cycles (a container inside itself; shared, acyclic references are fine) and any
type other than ``dict``, ``list``, ``tuple``, ``str``, ``int``, ``float``, ``bool`` and
``None`` (subclasses of these count as their base type). ``bool`` is never a number;
``-0.0`` is written ``0``. Each refusal raises :class:`CanonicalizationError` naming the
path, e.g. ``$.a[3]``.

Speed
-----
Values made only of exact builtin types, with safe numbers, BMP-only keys where order could
differ and no array-index keys (gh-aw) are serialized by ``orjson`` with sorted keys, which
then matches this module's pure-Python encoder byte for byte: ``orjson`` escapes strings as
RFC 8785 does, and sorts keys by code point, which equals UTF-16 order unless a key has a
character above U+FFFF. Floats go to ``orjson`` only when non-integral with
1e-4 <= |x| < 1e15, where ``orjson``, ``repr`` and ECMAScript all print the shortest
round-trip digits in plain decimal notation. Everything else takes the exact encoder.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from json.encoder import encode_basestring as _quote
from typing import Any, Final, Literal

import orjson

from ledger._canonical_numbers import MAX_SAFE_INTEGER, format_number
from ledger.errors import CanonicalizationError

__all__ = [
    "GHAW_MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "PROFILES",
    "CanonicalizationError",
    "Profile",
    "canonical_bytes",
    "canonicalize",
    "format_number",
    "loads_exact",
    "sha256_hex",
    "sha256_of",
]

Profile = Literal["rfc8785", "gh-aw"]
PROFILES: Final[tuple[Profile, ...]] = ("rfc8785", "gh-aw")
GHAW_MAX_DEPTH: Final = 32
"""Deepest value depth the gh-aw profile accepts (the top-level value is depth 0)."""

_FAST_MAX_DEPTH: Final = 128  # rfc8785 values nested deeper go to the exact encoder
_SORT: Final = orjson.OPT_SORT_KEYS
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_INDEX_HINT: Final = re.compile("\x00[0-9]")  # a key (after the first) starting with a digit
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_ARRAY_INDEX: Final = 2**32 - 2
_TYPES_HINT: Final = (
    "canonical JSON takes dict, list, tuple, str, int, float, bool and None only; convert it "
    "first (e.g. a set to a sorted list, bytes to base64 text, a datetime to ISO-8601 text)"
)


def canonicalize(value: object, profile: Profile = "rfc8785") -> str:
    """Return the canonical JSON text of ``value`` in ``profile`` (see the module docstring).

    >>> canonicalize({"z": None, "a": [True, 4.50, 2e-3, 10**15]})
    '{"a":[true,4.5,0.002,1000000000000000],"z":null}'
    >>> canonicalize({"𐀀": 1, "\\uffff": 2})  # UTF-16 order: U+10000 sorts before U+FFFF
    '{"𐀀":1,"\\uffff":2}'

    Raises :class:`CanonicalizationError` when ``value`` has no canonical form.
    """
    ghaw = _is_ghaw(profile)
    fast = _fast(value, ghaw)
    if fast is not None:
        return fast.decode()
    return _exact(value, ghaw)


def canonical_bytes(value: object, profile: Profile = "rfc8785") -> bytes:
    """Return the UTF-8 bytes of ``canonicalize(value, profile)``.

    >>> canonical_bytes({"é": 1})
    b'{"\\xc3\\xa9":1}'
    """
    ghaw = _is_ghaw(profile)
    fast = _fast(value, ghaw)
    if fast is not None:
        return fast
    return _exact(value, ghaw).encode()


def sha256_of(value: object, profile: Profile = "rfc8785") -> str:
    """Return ``"sha256:"`` + the lowercase hex SHA-256 of ``canonical_bytes(value, profile)``.

    >>> sha256_of([], profile="gh-aw")
    'sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945'
    """
    return "sha256:" + hashlib.sha256(canonical_bytes(value, profile)).hexdigest()


def sha256_hex(data: bytes | str) -> str:
    """Return ``"sha256:"`` + the lowercase hex SHA-256 of raw bytes, or of text as UTF-8.

    >>> sha256_hex("[]") == sha256_hex(b"[]") == sha256_of([])
    True
    """
    if isinstance(data, str):
        try:
            data = data.encode()
        except UnicodeEncodeError as exc:
            raise CanonicalizationError(
                f"sha256_hex: text has no UTF-8 form ({exc.reason} at index {exc.start}); "
                "pass bytes, or fix the text"
            ) from None
    elif not isinstance(data, bytes | bytearray | memoryview):
        raise CanonicalizationError(
            f"sha256_hex takes bytes or str, not {type(data).__name__}; "
            "use sha256_of for a JSON value"
        )
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _is_ghaw(profile: str) -> bool:
    if profile == "rfc8785":
        return False
    if profile == "gh-aw":
        return True
    raise CanonicalizationError(
        f"unknown canonical JSON profile {profile!r}; use one of {', '.join(PROFILES)}"
    )


# --- fast path: orjson on values where it provably agrees -------------------------------


def _fast(value: object, ghaw: bool) -> bytes | None:
    """``orjson`` output if it equals the exact encoder's for this value, else ``None``."""
    limit = GHAW_MAX_DEPTH if ghaw else _FAST_MAX_DEPTH
    if type(value) is dict:
        ok = _fast_dict(value, 0, limit, ghaw)
    elif type(value) is list or type(value) is tuple:
        ok = _fast_seq(value, 0, limit, ghaw)
    else:
        return None  # scalars are cheap for the exact encoder
    if not ok:
        return None
    try:
        return orjson.dumps(value, option=_SORT)
    except orjson.JSONEncodeError:  # surrogates in a string; non-str keys
        return None


def _fast_dict(d: dict[Any, Any], depth: int, limit: int, ghaw: bool) -> bool:
    if not d:
        return True
    if depth >= limit:  # its members would sit deeper than allowed
        return False
    try:
        keys = "\x00".join(d)
    except TypeError:  # a non-str key
        return False
    if not keys.isascii() and len(d) > 1 and max(keys) > "\uffff":
        return False  # code-point order may differ from UTF-16 order
    if ghaw and ("0" <= keys[:1] <= "9" or _INDEX_HINT.search(keys) is not None):
        return False  # may hold array-index keys
    return _fast_items(d.values(), depth, limit, ghaw)


def _fast_seq(a: list[Any] | tuple[Any, ...], depth: int, limit: int, ghaw: bool) -> bool:
    if not a:
        return True
    if depth >= limit:
        return False
    return _fast_items(a, depth, limit, ghaw)


def _fast_items(items: Any, depth: int, limit: int, ghaw: bool) -> bool:
    for x in items:
        kind = type(x)
        if kind is str or kind is bool or x is None:
            continue
        if kind is int:
            if -MAX_SAFE_INTEGER <= x <= MAX_SAFE_INTEGER:
                continue
            return False
        if kind is float:
            if (1e-4 <= x < 1e15 or -1e15 < x <= -1e-4) and not x.is_integer():
                continue
            return False  # NaN and infinities fail the range test too
        if kind is dict:
            if _fast_dict(x, depth + 1, limit, ghaw):
                continue
            return False
        if (kind is list or kind is tuple) and _fast_seq(x, depth + 1, limit, ghaw):
            continue
        return False
    return True


# --- exact path: a straightforward encoder that knows every rule ------------------------


class _Refusal(Exception):
    """Internal: a value has no canonical form; ``segments`` collect the path on unwinding."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.segments: list[str] = []  # innermost first


def _exact(value: object, ghaw: bool) -> str:
    encoder = _Encoder(ghaw)
    try:
        encoder.value(value, 0)
    except _Refusal as refusal:
        path = "$" + "".join(reversed(refusal.segments))
        profile = "gh-aw" if ghaw else "rfc8785"
        raise CanonicalizationError(
            f"cannot canonicalize {path} ({profile} profile): {refusal.problem}"
        ) from None
    except RecursionError:
        raise CanonicalizationError(
            "cannot canonicalize $: the value nests too deeply for Python's recursion limit; "
            "flatten it or store the deep part as text"
        ) from None
    return "".join(encoder.parts)


def _key_segment(key: str) -> str:
    if _NAME.match(key):
        return "." + key
    return "[" + json.dumps(key) + "]"


def _js_string(text: str) -> str:
    """``text`` as JavaScript sees its UTF-16 code units: surrogate pairs joined."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _utf16_units(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _is_array_index(key: str) -> bool:
    return (
        key.isascii()
        and key.isdigit()
        and (key == "0" or key[0] != "0")
        and int(key) <= _MAX_ARRAY_INDEX
    )


class _Encoder:
    __slots__ = ("active", "ghaw", "max_depth", "parts")

    def __init__(self, ghaw: bool) -> None:
        self.ghaw = ghaw
        self.max_depth = GHAW_MAX_DEPTH if ghaw else sys.maxsize
        self.parts: list[str] = []
        self.active: set[int] = set()  # ids of the containers being written (cycle check)

    def value(self, v: object, depth: int) -> None:
        if depth > self.max_depth:
            raise _Refusal(
                f"nesting depth {depth} exceeds the gh-aw maximum of {GHAW_MAX_DEPTH} "
                "(the top-level value is depth 0); flatten the value or store deep parts as text"
            )
        if v is None:
            self.parts.append("null")
        elif v is True:
            self.parts.append("true")
        elif v is False:
            self.parts.append("false")
        elif isinstance(v, str):
            self.parts.append(self.string(v))
        elif isinstance(v, int):
            if not -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
                raise _Refusal(
                    f"integer {int.__repr__(v)} is beyond ±(2**53-1), so JSON numbers cannot "
                    "carry it exactly; store it as a string"
                )
            self.parts.append(int.__repr__(v))
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise _Refusal(
                    f"{float.__repr__(v)} is not a JSON number; "
                    "replace it with null or a string, or leave the field out"
                )
            self.parts.append(format_number(float(v)))
        elif isinstance(v, dict):
            self.object(v, depth)
        elif isinstance(v, list | tuple):
            self.array(v, depth)
        else:
            raise _Refusal(f"unsupported type {type(v).__name__}; {_TYPES_HINT}")

    def string(self, text: str) -> str:
        if text.isascii() or (found := _SURROGATE.search(text)) is None:
            return _quote(text)
        if not self.ghaw:
            raise _Refusal(
                f"string holds the surrogate code point U+{ord(found.group()):04X}, which is "
                "not Unicode text and RFC 8785 refuses; repair the text (for example decode "
                "its bytes with errors='replace')"
            )
        return _SURROGATE.sub(_escape_surrogate, _quote(_js_string(text)))

    def enter(self, container: object, noun: str) -> int:
        ident = id(container)
        if ident in self.active:
            raise _Refusal(
                f"cycle: this {noun} contains itself; break the reference or copy the data"
            )
        self.active.add(ident)
        return ident

    def object(self, d: dict[Any, Any], depth: int) -> None:
        ident = self.enter(d, "dict")
        for key in d:
            if not isinstance(key, str):
                raise _Refusal(
                    f"object key {key!r} is {type(key).__name__}, not str; JSON object keys "
                    "are strings, so convert the keys with str() first"
                )
        parts = self.parts
        parts.append("{")
        for n, (name, key) in enumerate(self.members(d)):
            try:
                if n:
                    parts.append(",")
                parts.append(self.string(name))
                parts.append(":")
                self.value(d[key], depth + 1)
            except _Refusal as refusal:
                refusal.segments.append(_key_segment(key))
                raise
        parts.append("}")
        self.active.discard(ident)

    def members(self, d: dict[str, Any]) -> list[tuple[str, str]]:
        """``(name as written, key in d)`` pairs in the profile's order."""
        if not self.ghaw:
            astral = any(not k.isascii() and max(k) > "\uffff" for k in d)
            return [(k, k) for k in sorted(d, key=_utf16_units if astral else None)]
        pairs = [(_js_string(k), k) for k in d]
        if any(name is not key for name, key in pairs):
            if len({name for name, _ in pairs}) < len(pairs):
                raise _Refusal(
                    "two keys name the same JavaScript string once surrogate pairs are joined; "
                    "keep only one of them"
                )
            pairs.sort(key=lambda pair: _utf16_units(pair[0]))
        elif any(not k.isascii() and max(k) > "\uffff" for k in d):
            pairs.sort(key=lambda pair: _utf16_units(pair[0]))
        else:
            pairs.sort()
        index = [pair for pair in pairs if _is_array_index(pair[0])]
        if not index:
            return pairs
        index.sort(key=lambda pair: int(pair[0]))
        return index + [pair for pair in pairs if not _is_array_index(pair[0])]

    def array(self, a: list[Any] | tuple[Any, ...], depth: int) -> None:
        ident = self.enter(a, type(a).__name__)
        parts = self.parts
        parts.append("[")
        for n, item in enumerate(a):
            if n:
                parts.append(",")
            try:
                self.value(item, depth + 1)
            except _Refusal as refusal:
                refusal.segments.append(f"[{n}]")
                raise
        parts.append("]")
        self.active.discard(ident)


# a number token of at least 19 digits (where an integer beyond 64 bits would be): after
# the start of a value, not inside a string (a quote before it) nor a float's fraction
# or exponent (a dot, an e after it)
_LONG_DIGITS: Final = re.compile(r"(?:^|[\[:,\s])-?[0-9]{19,}(?=[\s,\]}]|$)")
_LONG_DIGITS_BYTES: Final = re.compile(rb"(?:^|[\[:,\s])-?[0-9]{19,}(?=[\s,\]}]|$)")
_PARSED: Final = object()  # no parse given


def loads_exact(text: str | bytes, parsed: Any = _PARSED) -> Any:
    """The JSON ``text`` parsed for hashing, every integer exact (``JSONDecodeError`` as
    ``orjson`` raises it). ``orjson`` reads an integer beyond 64 bits as a float, rounded,
    which has an RFC 8785 form the integer lacks: hashing that would let its digits
    change unseen. Such an integer is a number of at least 19 digits: only a text
    holding one is parsed again by the standard library, whose integers are exact (the
    RFC 8785 encoders then refuse it, as any integer beyond 2^53).
    ``CanonicalizationError`` when that parse cannot be made (a value nested deeper than
    Python's parser goes): no exact form. ``parsed``: ``orjson.loads`` of ``text``, when
    the caller has it.

    >>> loads_exact('{"n": 18446744073709551616, "id": "18446744073709551616"}')
    {'n': 18446744073709551616, 'id': '18446744073709551616'}
    """
    value = orjson.loads(text) if parsed is _PARSED else parsed
    if isinstance(text, str):
        long = _LONG_DIGITS.search(text) is not None
    else:
        long = _LONG_DIGITS_BYTES.search(text) is not None
    if not long:
        return value
    try:
        return json.loads(text)
    except RecursionError:
        raise CanonicalizationError(
            "the JSON is nested too deeply to read its integers exactly"
        ) from None

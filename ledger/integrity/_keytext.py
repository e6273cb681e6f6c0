"""Key texts and the small encodings they share, for notes and cosignatures.

Private to :mod:`ledger.integrity`: :mod:`.note` and :mod:`.cosignature` re-export what
is public. Key texts follow golang.org/x/mod/sumdb/note: a verifier key is
``<name>+<8 hex key id>+base64(type || public key)``, a signer key
``PRIVATE+KEY+<name>+<8 hex key id>+base64(type || 32-byte seed)``.
"""

from __future__ import annotations

import binascii
import hashlib
import re
import secrets
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ledger.errors import IntegrityError, ValidationError

__all__ = [
    "CONTROL",
    "b64decode",
    "b64encode",
    "check_key_name",
    "encodes",
    "is_valid_key_name",
    "key_id",
    "key_texts",
    "new_seed",
    "parse_signer_key",
    "parse_verifier_key",
    "public_key",
    "raw_public",
]

# The Unicode White_Space property: what Go's unicode.IsSpace reports (Python's
# str.isspace() differs on U+001C..U+001F, which are control characters here anyway).
_SPACES: Final = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_HEX8: Final = re.compile(r"[0-9a-fA-F]{8}")
CONTROL: Final = re.compile(r"[\x00-\x09\x0b-\x1f]")
# Padded standard base64, as Go's base64.StdEncoding accepts it (re.ASCII: no other digits).
_BASE64: Final = re.compile(
    r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?", re.ASCII
)


def b64encode(data: bytes) -> str:
    """Standard base64 with padding (RFC 4648 §4), as text.

    >>> b64encode(b"\\x01\\x02")
    'AQI='
    """
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def b64decode(text: str) -> bytes:
    """Decode standard padded base64 strictly, as Go's ``base64.StdEncoding`` does: no
    other characters, no missing or extra padding. Raises :class:`ValueError`.

    >>> b64decode("AQI=")
    b'\\x01\\x02'
    >>> b64decode("AQI")
    Traceback (most recent call last):
    ...
    ValueError: not standard base64: wrong characters, length or padding
    """
    if _BASE64.fullmatch(text) is None:
        raise ValueError("not standard base64: wrong characters, length or padding")
    return binascii.a2b_base64(text.encode("ascii"), strict_mode=True)


def is_valid_key_name(name: str) -> bool:
    """True when ``name`` can name a key: non-empty, no ``+``, no Unicode space, no
    control character.

    >>> is_valid_key_name("example.com/log"), is_valid_key_name("a b"), is_valid_key_name("a+b")
    (True, False, False)
    """
    return (
        isinstance(name, str)
        and bool(name)
        and "+" not in name
        and _SPACES.isdisjoint(name)
        and CONTROL.search(name) is None
        and encodes(name)
    )


def check_key_name(name: str) -> str:
    """Return ``name`` if it can name a key, else raise :class:`ValidationError`."""
    if not is_valid_key_name(name):
        raise ValidationError(
            f"invalid key name {name!r}: it must be non-empty, without '+', spaces or"
            " control characters (a schema-less URL such as example.com/log is best)"
        )
    return name


def encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def key_id(name: str, alg: int, public_key: bytes) -> int:
    """The key id: the first four bytes, big-endian, of
    ``SHA-256(name || 0x0A || alg || public_key)``.

    >>> f"{key_id('PeterNeumann', 1, b64decode('ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW')[1:]):08x}"
    'c74f20a3'
    """  # noqa: E501
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([alg]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def raw_public(key: Ed25519PublicKey) -> bytes:
    """The 32 raw bytes of an Ed25519 public key."""
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def public_key(raw: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from its 32 raw bytes; :class:`ValidationError` if not one."""
    if len(raw) != 32:
        raise ValidationError(f"an Ed25519 public key is 32 bytes, not {len(raw)}")
    try:
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as exc:
        raise ValidationError(f"not an Ed25519 public key: {exc}") from None


def _check_key_text(text: object, what: str) -> None:
    if not isinstance(text, str):
        raise ValidationError(f"a {what} key is text, not a {type(text).__name__}")


def parse_verifier_key(text: str, alg: int, what: str) -> tuple[str, int, bytes]:
    """Split ``name+hexid+base64(alg || key)``; check the name, the id and the key."""
    _check_key_text(text, what)
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise IntegrityError(f"malformed {what} key: want name+keyid+base64key")
    name, hex_id, b64 = parts
    if not is_valid_key_name(name):
        raise IntegrityError(f"malformed {what} key: invalid key name {name!r}")
    if _HEX8.fullmatch(hex_id) is None:
        raise IntegrityError(f"malformed {what} key: key id {hex_id!r} is not 8 hex digits")
    try:
        key = b64decode(b64)
    except ValueError as exc:
        raise IntegrityError(f"malformed {what} key {name!r}: {exc}") from None
    if len(key) != 33 or key[0] != alg:
        raise IntegrityError(
            f"malformed {what} key {name!r}: want the type byte {alg:#04x} and a 32-byte"
            " Ed25519 public key"
        )
    public = key[1:]
    if int(hex_id, 16) != key_id(name, alg, public):
        raise IntegrityError(
            f"{what} key {name!r}: key id {hex_id} does not match the name and public key"
        )
    return name, int(hex_id, 16), public


def parse_signer_key(text: str, alg: int, what: str) -> tuple[str, int, Ed25519PrivateKey]:
    """Split ``PRIVATE+KEY+name+hexid+base64(alg || seed)``; check the name and the id."""
    _check_key_text(text, f"{what} signer")
    parts = text.split("+", 4)
    if len(parts) != 5 or parts[0] != "PRIVATE" or parts[1] != "KEY":
        raise IntegrityError(f"malformed {what} signer key: want PRIVATE+KEY+name+keyid+key")
    _, _, name, hex_id, b64 = parts
    if not is_valid_key_name(name):
        raise IntegrityError(f"malformed {what} signer key: invalid key name {name!r}")
    if _HEX8.fullmatch(hex_id) is None:
        raise IntegrityError(f"malformed {what} signer key: key id {hex_id!r} is not 8 hex")
    try:
        key = b64decode(b64)
    except ValueError as exc:
        raise IntegrityError(f"malformed {what} signer key {name!r}: {exc}") from None
    if len(key) != 33 or key[0] != alg:
        raise IntegrityError(
            f"malformed {what} signer key {name!r}: want the type byte {alg:#04x} and a"
            " 32-byte Ed25519 seed"
        )
    private = Ed25519PrivateKey.from_private_bytes(key[1:])
    if int(hex_id, 16) != key_id(name, alg, raw_public(private.public_key())):
        raise IntegrityError(
            f"{what} signer key {name!r}: key id {hex_id} does not match the name and key"
        )
    return name, int(hex_id, 16), private


def key_texts(name: str, alg: int, private: Ed25519PrivateKey) -> tuple[str, str]:
    """``(signer key text, verifier key text)`` of ``private`` under ``name`` and type."""
    seed = private.private_bytes_raw()
    public = raw_public(private.public_key())
    kid = key_id(name, alg, public)
    signer = f"PRIVATE+KEY+{name}+{kid:08x}+{b64encode(bytes([alg]) + seed)}"
    verifier = f"{name}+{kid:08x}+{b64encode(bytes([alg]) + public)}"
    return signer, verifier


def new_seed() -> bytes:
    """32 random bytes from the operating system, an Ed25519 seed."""
    return secrets.token_bytes(32)

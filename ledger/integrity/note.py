"""Signed notes (C2SP ``signed-note``) and their Ed25519 keys, in the text forms of
golang.org/x/mod/sumdb/note.

A note is UTF-8 text ending in a newline, a blank line, then one signature line per key:
EM DASH (U+2014), space, key name, space, ``base64(4-byte key id || signature)``::

    >>> skey, vkey = generate_key("example.com/log")
    >>> signer, verifier = Signer.from_key(skey), Verifier.from_key(vkey)
    >>> note = sign_note("hello\\n", [signer])
    >>> note.startswith("hello\\n\\n— example.com/log ")
    True
    >>> open_note(note, [verifier])
    OpenedNote(text='hello\\n', signers=('example.com/log',), unknown=())

Key texts: the verifier key is ``<name>+<8 hex key id>+base64(0x01 || public key)``, the
signer key ``PRIVATE+KEY+<name>+<8 hex key id>+base64(0x01 || 32-byte seed)``. The key id
is the first four bytes, big-endian, of ``SHA-256(name || 0x0A || 0x01 || public key)``
(:func:`key_id`). A key name is non-empty and has no ``+`` and no Unicode space.

:func:`open_note` refuses exactly what sumdb/note's ``Open`` refuses: invalid UTF-8, an
ASCII control character other than newline, no blank line before the signatures, a
signature block that is empty or does not end in a newline, a line without the EM DASH
prefix, a bad key name, bad base64 or fewer than five signature bytes, more than 100
signatures, a failed signature by a known key, and a note that no known key signed.
Signatures by unknown keys -- including one that shares only the name, or only the key
id, with a known key, as the specification requires -- are returned, not verified.
Every refusal is an :class:`IntegrityError`.

Anything with ``name``, ``key_id`` and ``sign`` (:class:`NoteSigner`) signs, so a key
held by a KMS or HSM plugs in; anything with ``name``, ``key_id`` and ``verify``
(:class:`NoteVerifier`) verifies, which is how cosignatures (:mod:`.cosignature`) verify
inside a note.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, NamedTuple, Protocol, runtime_checkable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.errors import IntegrityError, ValidationError
from ledger.integrity._keytext import (
    CONTROL,
    b64decode,
    b64encode,
    check_key_name,
    encodes,
    is_valid_key_name,
    key_texts,
    new_seed,
    parse_signer_key,
    parse_verifier_key,
    public_key,
    raw_public,
)

__all__ = [
    "ALG_ED25519",
    "MAX_SIGNATURES",
    "NoteSignature",
    "NoteSigner",
    "NoteVerifier",
    "OpenedNote",
    "Signer",
    "Verifier",
    "add_signature_lines",
    "generate_key",
    "open_note",
    "parse_signatures",
    "sign_note",
]

ALG_ED25519: Final = 0x01
"""The signature type byte of Ed25519 note signatures."""

MAX_SIGNATURES: Final = 100
"""More signature lines than this make a note malformed (as in sumdb/note)."""

SIGNATURE_PREFIX: Final = "\u2014 "
"""EM DASH and a space, the start of every signature line."""

# --- keys ----------------------------------------------------------------------------


def generate_key(name: str) -> tuple[str, str]:
    """Make a new Ed25519 note key; return ``(signer key text, verifier key text)``.

    Keep the signer text secret; publish the verifier text.

    >>> skey, vkey = generate_key("example.com/log")
    >>> skey.startswith("PRIVATE+KEY+example.com/log+"), vkey.startswith("example.com/log+")
    (True, True)
    >>> Signer.from_key(skey).key_id == Verifier.from_key(vkey).key_id
    True
    """
    check_key_name(name)
    return key_texts(name, ALG_ED25519, Ed25519PrivateKey.from_private_bytes(new_seed()))


@runtime_checkable
class NoteSigner(Protocol):
    """What :func:`sign_note` needs of a key: a name, a key id and a signing function
    over the note text. A KMS- or HSM-held key implements this."""

    @property
    def name(self) -> str:
        """The key name written in the signature line."""
        ...

    @property
    def key_id(self) -> int:
        """The 32-bit key id written before the signature."""
        ...

    def sign(self, message: bytes) -> bytes:
        """Return the signature of ``message`` (the note text, UTF-8)."""
        ...


@runtime_checkable
class NoteVerifier(Protocol):
    """What :func:`open_note` needs of a trusted key: a name, a key id and a check."""

    @property
    def name(self) -> str:
        """The key name of the signature lines this key verifies."""
        ...

    @property
    def key_id(self) -> int:
        """The 32-bit key id of the signature lines this key verifies."""
        ...

    def verify(self, message: bytes, signature: bytes) -> bool:
        """True when ``signature`` (after the key id) is valid over ``message``."""
        ...


class Signer:
    """An Ed25519 note signer read from its signer key text (:func:`generate_key`).

    >>> skey, _ = generate_key("example.com/log")
    >>> signer = Signer.from_key(skey)
    >>> signer.name, len(signer.sign(b"text\\n"))
    ('example.com/log', 64)
    """

    __slots__ = ("_key", "_key_id", "_name")

    def __init__(self, name: str, key_id: int, key: Ed25519PrivateKey) -> None:
        self._name = name
        self._key_id = key_id
        self._key = key

    @classmethod
    def from_key(cls, text: str) -> Signer:
        """Read ``PRIVATE+KEY+<name>+<hex id>+<base64(0x01 || seed)>``; raise
        :class:`IntegrityError` when it is malformed or its key id does not match."""
        name, kid, private = parse_signer_key(text, ALG_ED25519, "note")
        return cls(name, kid, private)

    @property
    def name(self) -> str:
        """The key name."""
        return self._name

    @property
    def key_id(self) -> int:
        """The 32-bit key id."""
        return self._key_id

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""
        return self._key.sign(message)

    def verifier(self) -> Verifier:
        """The matching :class:`Verifier`."""
        public = raw_public(self._key.public_key())
        return Verifier(name=self._name, key_id=self._key_id, public_key=public)

    def __repr__(self) -> str:
        return f"Signer(name={self._name!r}, key_id={self._key_id:#010x})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Verifier:
    """An Ed25519 note verifier read from its verifier key text (:func:`generate_key`).

    >>> v = Verifier.from_key("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW")
    >>> v.name, f"{v.key_id:08x}"
    ('PeterNeumann', 'c74f20a3')
    """

    name: str
    key_id: int
    public_key: bytes
    _key: Ed25519PublicKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_key_name(self.name)
        if not 0 <= self.key_id < 1 << 32:
            raise ValidationError(f"key id {self.key_id!r} is not a 32-bit number")
        object.__setattr__(self, "_key", public_key(self.public_key))

    @classmethod
    def from_key(cls, text: str) -> Verifier:
        """Read ``<name>+<hex id>+<base64(0x01 || public key)>``; raise
        :class:`IntegrityError` when it is malformed or its key id does not match."""
        name, kid, public = parse_verifier_key(text, ALG_ED25519, "note verifier")
        return cls(name=name, key_id=kid, public_key=public)

    @property
    def key_text(self) -> str:
        """The verifier key text."""
        return f"{self.name}+{self.key_id:08x}+{b64encode(bytes([ALG_ED25519]) + self.public_key)}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """True when ``signature`` is this key's Ed25519 signature of ``message``."""
        given: tuple[object, object] = (message, signature)
        if not all(isinstance(x, bytes) for x in given) or len(signature) != 64:
            return False
        try:
            self._key.verify(signature, message)
        except InvalidSignature:
            return False
        return True


# --- notes ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class NoteSignature:
    """One signature line of a note, parsed but not verified."""

    name: str
    key_id: int
    signature: bytes
    """The signature bytes after the 4-byte key id."""
    encoded: str
    """The base64 text as written in the line: ``base64(key id || signature)``."""

    @classmethod
    def make(cls, name: str, key_id: int, signature: bytes) -> NoteSignature:
        """The signature line of ``signature`` by key ``(name, key_id)``."""
        encoded = b64encode(key_id.to_bytes(4, "big") + signature)
        return cls(name=name, key_id=key_id, signature=signature, encoded=encoded)

    @property
    def line(self) -> str:
        """The signature line, with its final newline."""
        return f"{SIGNATURE_PREFIX}{self.name} {self.encoded}\n"


class OpenedNote(NamedTuple):
    """What :func:`open_note` returns."""

    text: str
    """The note text, final newline included (the signed message)."""
    signers: tuple[str, ...]
    """The names of the known keys whose signatures verified, in note order."""
    unknown: tuple[str, ...]
    """The signature lines of unknown keys (no newline), duplicates dropped."""


def _check_text(text: str, *, error: type[Exception]) -> None:
    if CONTROL.search(text) is not None or not encodes(text):
        raise error(
            "malformed note: not valid UTF-8, or an ASCII control character other than newline"
        )


def parse_signatures(note: str | bytes) -> tuple[str, tuple[NoteSignature, ...]]:
    """Split a signed note into its text and its signature lines, checking the format
    only (no signature is verified). Raises :class:`IntegrityError` when malformed.

    >>> parse_signatures("a\\n\\n— k AAAAAAA=\\n")
    ('a\\n', (NoteSignature(name='k', key_id=0, signature=b'\\x00', encoded='AAAAAAA='),))
    """
    if isinstance(note, bytes | bytearray | memoryview):
        try:
            note = bytes(note).decode("utf-8")
        except UnicodeDecodeError:
            raise IntegrityError("malformed note: not valid UTF-8") from None
    if not isinstance(note, str):
        raise IntegrityError(f"malformed note: a note is text, not a {type(note).__name__}")
    _check_text(note, error=IntegrityError)
    split = note.rfind("\n\n")
    if split < 0:
        raise IntegrityError("malformed note: no blank line before the signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if not block.endswith("\n"):
        raise IntegrityError(
            "malformed note: the signature block is empty or does not end in a newline"
        )
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise IntegrityError(f"malformed note: more than {MAX_SIGNATURES} signatures")
    out: list[NoteSignature] = []
    for line in lines:
        if not line.startswith(SIGNATURE_PREFIX):
            raise IntegrityError(
                f"malformed note: signature line {line[:40]!r} does not start with '— '"
            )
        name, _, b64 = line[len(SIGNATURE_PREFIX) :].partition(" ")
        if not is_valid_key_name(name):
            raise IntegrityError(f"malformed note: invalid key name {name!r} in a signature")
        try:
            raw = b64decode(b64)
        except ValueError:
            raise IntegrityError(f"malformed note: signature by {name!r} is not base64") from None
        if not b64 or len(raw) < 5:
            raise IntegrityError(f"malformed note: signature by {name!r} is too short")
        kid = int.from_bytes(raw[:4], "big")
        out.append(NoteSignature(name=name, key_id=kid, signature=raw[4:], encoded=b64))
    return text, tuple(out)


def _known(verifiers: Iterable[NoteVerifier]) -> dict[tuple[str, int], NoteVerifier]:
    known: dict[tuple[str, int], NoteVerifier] = {}
    given: object = verifiers
    if given is None or isinstance(given, str | bytes):
        raise ValidationError(
            f"verifiers must be a list of verifier keys (Verifier.from_key), not {verifiers!r:.40}"
        )
    for v in verifiers:
        k = (v.name, v.key_id)
        if k in known and known[k] != v:
            raise ValidationError(
                f"two different verifier keys share the name {v.name!r} and key id"
                f" {v.key_id:08x}; pass only one"
            )
        known[k] = v
    return known


def open_note(note: str | bytes, verifiers: Iterable[NoteVerifier]) -> OpenedNote:
    """Check a signed note against trusted keys; return its text, the names of the known
    keys that signed it, and the signature lines of unknown keys.

    Raises :class:`IntegrityError` when the note is malformed, a known key's signature
    does not verify, or no known key signed it. A second signature by the same known
    key is ignored, as in sumdb/note.

    >>> _, vkey = generate_key("other.example/log")
    >>> open_note("hello\\n\\n— example.com/log AAAAAAA=\\n", [Verifier.from_key(vkey)])
    Traceback (most recent call last):
    ...
    ledger.errors.IntegrityError: note is not signed by any known key (unknown: example.com/log)
    """
    known = _known(verifiers)
    text, signatures = parse_signatures(note)
    message = text.encode("utf-8")
    signers: list[str] = []
    unknown: list[str] = []
    seen: set[tuple[str, int]] = set()
    for sig in signatures:
        k = (sig.name, sig.key_id)
        verifier = known.get(k)
        if verifier is None:
            line = sig.line[:-1]
            if line not in unknown:
                unknown.append(line)
            continue
        if k in seen:
            continue
        seen.add(k)
        if not verifier.verify(message, sig.signature):
            raise IntegrityError(
                f"signature by {sig.name!r} (key id {sig.key_id:08x}) does not verify:"
                " the note was changed or not signed by that key"
            )
        signers.append(sig.name)
    if not signers:
        names = ", ".join(sorted({s.name for s in signatures}))
        raise IntegrityError(f"note is not signed by any known key (unknown: {names})")
    return OpenedNote(text, tuple(signers), tuple(unknown))


def sign_note(text: str, signers: Iterable[NoteSigner]) -> str:
    """Sign ``text`` with each signer; return the signed note.

    ``text`` must end in a newline and hold no ASCII control character other than
    newline; signers need valid, distinct (name, key id) pairs. Raises
    :class:`ValidationError` otherwise.

    >>> skey = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
    >>> print(sign_note("If you think cryptography is the answer to your problem,\\n"
    ...                 "then you don't know what your problem is.\\n", [Signer.from_key(skey)]))
    If you think cryptography is the answer to your problem,
    then you don't know what your problem is.
    <BLANKLINE>
    — PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=
    <BLANKLINE>
    """  # noqa: E501
    if not text.endswith("\n"):
        raise ValidationError("note text must end in a newline")
    _check_text(text, error=ValidationError)
    message = text.encode("utf-8")
    lines: list[str] = []
    have: set[tuple[str, int]] = set()
    for signer in signers:
        name, kid = signer.name, signer.key_id
        check_key_name(name)
        if not 0 <= kid < 1 << 32:
            raise ValidationError(f"key id of {name!r} is not a 32-bit number")
        if (name, kid) in have:
            raise ValidationError(f"signer {name!r} ({kid:08x}) given twice")
        have.add((name, kid))
        signature = signer.sign(message)
        if not isinstance(signature, bytes | bytearray) or not signature:
            raise ValidationError(f"signer {name!r} returned no signature bytes")
        lines.append(NoteSignature.make(name, kid, bytes(signature)).line)
    if not lines:
        raise ValidationError("a signed note needs at least one signer")
    return text + "\n" + "".join(lines)


def add_signature_lines(note: str, lines: str | Iterable[str]) -> str:
    """Append signature lines (e.g. a witness's cosignatures) to a signed note, skipping
    lines the note already has; each must be a well-formed signature line. Nothing is
    verified here: :func:`open_note` the result with the keys you trust.

    >>> add_signature_lines("a\\n\\n— k AAAAAAA=\\n", "— w AAAAAQE=\\n— k AAAAAAA=\\n")
    'a\\n\\n— k AAAAAAA=\\n— w AAAAAQE=\\n'
    """
    text, existing = parse_signatures(note)
    if isinstance(lines, str):
        lines = lines.splitlines()
    have = {s.line for s in existing}
    out = [s.line for s in existing]
    for line in lines:
        line = line.removesuffix("\n")
        _, (sig,) = parse_signatures("x\n\n" + line + "\n")
        if sig.line not in have:
            have.add(sig.line)
            out.append(sig.line)
    if len(out) > MAX_SIGNATURES:
        raise IntegrityError(f"a note may carry at most {MAX_SIGNATURES} signatures")
    return text + "\n" + "".join(out)

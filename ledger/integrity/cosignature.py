"""Witness cosignatures (C2SP ``tlog-cosignature``, the Ed25519 ``cosignature/v1`` type).

A cosignature is a note signature line on a checkpoint by a witness that checked the
checkpoint is consistent with everything it saw before. Its key id uses the signature
type byte 0x04, and its payload is ``key id (4) || timestamp (8, big-endian) || Ed25519
signature (64)``; the signature is over::

    cosignature/v1
    time <timestamp>
    <the checkpoint text: origin, size, root, extension lines>

Witness key texts follow the note key forms with type byte 0x04: the verifier key
``<name>+<hex id>+base64(0x04 || public key)`` (a C2SP vkey), the signer key
``PRIVATE+KEY+<name>+<hex id>+base64(0x04 || seed)``.

    >>> skey, vkey = generate_witness_key("witness.example/w1")
    >>> witness = CosignatureSigner.from_key(skey)
    >>> body = "example.com/log\\n1\\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\\n"
    >>> line = witness.signature_line(body, timestamp=1679315147)
    >>> cosig = verify_cosignature(body + "\\n" + line, CosignatureVerifier.from_key(vkey))
    >>> cosig.name, cosig.timestamp
    ('witness.example/w1', 1679315147)

Both :class:`CosignatureSigner` and :class:`CosignatureVerifier` are also note signers and
verifiers (:class:`.NoteSigner`, :class:`.NoteVerifier`), so they work with
:func:`.sign_note`, :func:`.open_note` and :meth:`.Checkpoint.parse`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.errors import IntegrityError, ValidationError
from ledger.integrity._keytext import (
    b64encode,
    check_key_name,
    key_texts,
    new_seed,
    parse_signer_key,
    parse_verifier_key,
    public_key,
    raw_public,
)
from ledger.integrity.note import open_note, parse_signatures

__all__ = [
    "ALG_COSIGNATURE_V1",
    "COSIGNATURE_HEADER",
    "MAX_TIMESTAMP",
    "Cosignature",
    "CosignatureSigner",
    "CosignatureVerifier",
    "cosigned_message",
    "generate_witness_key",
    "verify_cosignature",
]

ALG_COSIGNATURE_V1: Final = 0x04
"""The signature type byte of timestamped Ed25519 cosignatures."""

COSIGNATURE_HEADER: Final = "cosignature/v1\n"
"""The first line of every signed message, for domain separation."""

MAX_TIMESTAMP: Final = (1 << 63) - 1
"""The largest timestamp a cosignature may carry."""


def cosigned_message(body: str, timestamp: int) -> bytes:
    """The message a ``cosignature/v1`` signs: header, time line, checkpoint text.

    >>> cosigned_message("log\\n0\\nAAAA\\n", 7)
    b'cosignature/v1\\ntime 7\\nlog\\n0\\nAAAA\\n'
    """
    if isinstance(timestamp, bool) or not 0 <= timestamp <= MAX_TIMESTAMP:
        raise ValidationError(f"timestamp must be from 0 to 2**63 - 1, not {timestamp!r}")
    return f"{COSIGNATURE_HEADER}time {timestamp}\n{body}".encode()


def generate_witness_key(name: str) -> tuple[str, str]:
    """Make a new Ed25519 witness key; return ``(signer key text, verifier key text)``.

    >>> skey, vkey = generate_witness_key("witness.example/w1")
    >>> CosignatureSigner.from_key(skey).key_id == CosignatureVerifier.from_key(vkey).key_id
    True
    """
    check_key_name(name)
    return key_texts(name, ALG_COSIGNATURE_V1, Ed25519PrivateKey.from_private_bytes(new_seed()))


@dataclass(frozen=True, slots=True, kw_only=True)
class Cosignature:
    """A verified cosignature: who, when (POSIX seconds), and the 64-byte signature."""

    name: str
    key_id: int
    timestamp: int
    signature: bytes


class CosignatureSigner:
    """A witness's cosigning key, read from its signer key text.

    ``clock`` gives the timestamp for :meth:`sign` (default: the current time).
    """

    __slots__ = ("_clock", "_key", "_key_id", "_name")

    def __init__(
        self,
        name: str,
        key_id: int,
        key: Ed25519PrivateKey,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._name = name
        self._key_id = key_id
        self._key = key
        self._clock = clock

    @classmethod
    def from_key(cls, text: str, *, clock: Callable[[], float] = time.time) -> CosignatureSigner:
        """Read ``PRIVATE+KEY+<name>+<hex id>+base64(0x04 || seed)``; raise
        :class:`IntegrityError` when it is malformed or its key id does not match."""
        name, kid, private = parse_signer_key(text, ALG_COSIGNATURE_V1, "witness")
        return cls(name, kid, private, clock=clock)

    @property
    def name(self) -> str:
        """The witness key name."""
        return self._name

    @property
    def key_id(self) -> int:
        """The 32-bit key id (computed with type byte 0x04)."""
        return self._key_id

    def cosign(self, body: str, *, timestamp: int) -> bytes:
        """Return the 72-byte ``timestamp || signature`` cosigning checkpoint ``body``."""
        signature = self._key.sign(cosigned_message(body, timestamp))
        return timestamp.to_bytes(8, "big") + signature

    def signature_line(self, body: str, *, timestamp: int | None = None) -> str:
        """Return the note signature line (with newline) cosigning checkpoint ``body``."""
        ts = int(self._clock()) if timestamp is None else timestamp
        payload = self._key_id.to_bytes(4, "big") + self.cosign(body, timestamp=ts)
        return f"\u2014 {self._name} {b64encode(payload)}\n"

    def sign(self, message: bytes) -> bytes:
        """Cosign ``message`` (a checkpoint text) at the clock's current time; the
        :class:`.NoteSigner` method, so :func:`.sign_note` can use a witness key."""
        return self.cosign(message.decode("utf-8"), timestamp=int(self._clock()))

    def verifier(self) -> CosignatureVerifier:
        """The matching :class:`CosignatureVerifier`."""
        public = raw_public(self._key.public_key())
        return CosignatureVerifier(name=self._name, key_id=self._key_id, public_key=public)

    def __repr__(self) -> str:
        return f"CosignatureSigner(name={self._name!r}, key_id={self._key_id:#010x})"


@dataclass(frozen=True, slots=True, kw_only=True)
class CosignatureVerifier:
    """A witness's public key, read from its verifier key text (a vkey with type 0x04)."""

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
    def from_key(cls, text: str) -> CosignatureVerifier:
        """Read ``<name>+<hex id>+base64(0x04 || public key)``; raise
        :class:`IntegrityError` when it is malformed or its key id does not match."""
        name, kid, public = parse_verifier_key(text, ALG_COSIGNATURE_V1, "witness verifier")
        return cls(name=name, key_id=kid, public_key=public)

    @property
    def key_text(self) -> str:
        """The verifier key text."""
        raw = bytes([ALG_COSIGNATURE_V1]) + self.public_key
        return f"{self.name}+{self.key_id:08x}+{b64encode(raw)}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """True when ``signature`` (``timestamp || Ed25519 signature``) cosigns the
        checkpoint text ``message``; the :class:`.NoteVerifier` method."""
        if len(signature) != 72:
            return False
        timestamp = int.from_bytes(signature[:8], "big")
        if timestamp > MAX_TIMESTAMP:
            return False
        try:
            body = message.decode("utf-8")
        except UnicodeDecodeError:
            return False
        try:
            self._key.verify(signature[8:], cosigned_message(body, timestamp))
        except InvalidSignature:
            return False
        return True


def verify_cosignature(note: str | bytes, verifier: CosignatureVerifier) -> Cosignature:
    """Find and check ``verifier``'s cosignature on a signed checkpoint note; return it.

    Raises :class:`IntegrityError` when the note is malformed or carries no valid
    cosignature by that key. (Whether the note text is a well-formed checkpoint, and
    whether the log signed it, is :meth:`.Checkpoint.parse`'s job.)
    """
    opened = open_note(note, [verifier])  # raises unless this witness's line verifies
    _, signatures = parse_signatures(note)
    for sig in signatures:  # open_note verified the first line with this name and id
        if sig.name == verifier.name and sig.key_id == verifier.key_id:
            return Cosignature(
                name=sig.name,
                key_id=sig.key_id,
                timestamp=int.from_bytes(sig.signature[:8], "big"),
                signature=sig.signature[8:],
            )
    raise IntegrityError(f"no cosignature by {verifier.name!r} in {opened.text[:40]!r}")

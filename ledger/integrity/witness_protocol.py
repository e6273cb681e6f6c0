"""The C2SP ``tlog-witness`` protocol, without the network: message formats and the
witness's decision on an ``add-checkpoint`` request.

The request body is ``old <size>`` on its own line, zero to 63 base64 consistency proof
lines, an empty line, then the signed checkpoint::

    >>> body = format_add_checkpoint(0, [], "log\\n0\\n...\\n\\n— log AAAA\\n")
    >>> body.split(b"\\n")[:2]
    [b'old 0', b'']
    >>> parse_add_checkpoint(body).old_size
    0

:func:`decide_add_checkpoint` is the whole witness rule set of the specification as a
pure function of the request, the trusted log keys, the witness's latest cosigned head
for the origin and the time: it returns the HTTP status, body and content type to
answer with, and the head to persist (atomically with the check) when it cosigned. The
HTTP server and client (:mod:`.witness`) only move bytes and keep state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ledger.errors import IntegrityError, ValidationError
from ledger.integrity._keytext import b64decode, b64encode
from ledger.integrity.checkpoint import (
    MAX_TREE_SIZE,
    Checkpoint,
    TreeHead,
    parse_checkpoint_body,
)
from ledger.integrity.cosignature import CosignatureSigner
from ledger.integrity.merkle import EMPTY_ROOT, HASH_SIZE, verify_consistency
from ledger.integrity.note import NoteVerifier, open_note, parse_signatures

__all__ = [
    "CONTENT_TYPE_SIZE",
    "CONTENT_TYPE_TEXT",
    "MAX_PROOF_LINES",
    "AddCheckpointRequest",
    "WitnessDecision",
    "decide_add_checkpoint",
    "format_add_checkpoint",
    "format_cosignatures",
    "format_size",
    "parse_add_checkpoint",
    "parse_cosignatures",
    "parse_size",
]

CONTENT_TYPE_SIZE: Final = "text/x.tlog.size"
"""The content type of a 409 answer that states the witness's latest size."""

CONTENT_TYPE_TEXT: Final = "text/plain; charset=utf-8"

MAX_PROOF_LINES: Final = 63
"""A request may carry at most this many consistency proof lines."""

_DECIMAL: Final = re.compile(r"0|[1-9][0-9]*")


def _decimal(text: str, what: str) -> int:
    if _DECIMAL.fullmatch(text) is None or int(text) > MAX_TREE_SIZE:
        raise ValidationError(f"{what} {text[:30]!r} is not a decimal tree size")
    return int(text)


@dataclass(frozen=True, slots=True, kw_only=True)
class AddCheckpointRequest:
    """A parsed ``add-checkpoint`` request."""

    old_size: int
    proof: tuple[bytes, ...]
    checkpoint: str
    """The signed checkpoint note, as sent."""


def format_add_checkpoint(old_size: int, proof: Sequence[bytes], checkpoint: str) -> bytes:
    """The ``add-checkpoint`` request body."""
    if isinstance(old_size, bool) or not 0 <= old_size <= MAX_TREE_SIZE:
        raise ValidationError(f"old size must be from 0 to 2**63 - 1, not {old_size!r}")
    if len(proof) > MAX_PROOF_LINES:
        raise ValidationError(f"at most {MAX_PROOF_LINES} proof hashes, not {len(proof)}")
    if any(len(h) != HASH_SIZE for h in proof):
        raise ValidationError(f"every proof hash must be {HASH_SIZE} bytes")
    lines = [f"old {old_size}", *(b64encode(h) for h in proof), ""]
    return ("\n".join(lines) + "\n" + checkpoint).encode("utf-8")


def parse_add_checkpoint(body: bytes | str) -> AddCheckpointRequest:
    """Parse an ``add-checkpoint`` request body; :class:`ValidationError` if malformed
    (the witness answers 400). The checkpoint itself is not checked here.

    >>> parse_add_checkpoint(b"old 5\\n\\ncheckpoint")
    AddCheckpointRequest(old_size=5, proof=(), checkpoint='checkpoint')
    >>> parse_add_checkpoint(b"old 05\\n\\ncheckpoint")
    Traceback (most recent call last):
    ...
    ledger.errors.ValidationError: old size '05' is not a decimal tree size
    """
    if isinstance(body, bytes | bytearray | memoryview):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            raise ValidationError("request body is not UTF-8") from None
    head, sep, checkpoint = body.partition("\n\n")
    if not sep:
        raise ValidationError("request has no empty line before the checkpoint")
    first, *proof_lines = head.split("\n")
    if not first.startswith("old "):
        raise ValidationError("request does not start with an 'old <size>' line")
    old_size = _decimal(first[4:], "old size")
    if len(proof_lines) > MAX_PROOF_LINES:
        raise ValidationError(f"more than {MAX_PROOF_LINES} consistency proof lines")
    proof: list[bytes] = []
    for line in proof_lines:
        try:
            h = b64decode(line)
        except ValueError:
            raise ValidationError("a consistency proof line is not base64") from None
        if len(h) != HASH_SIZE:
            raise ValidationError(f"a consistency proof hash is {len(h)} bytes, not 32")
        proof.append(h)
    return AddCheckpointRequest(old_size=old_size, proof=tuple(proof), checkpoint=checkpoint)


def format_size(size: int) -> bytes:
    """The body of a 409 answer: the latest cosigned size and a newline."""
    return f"{size}\n".encode("ascii")


def parse_size(body: bytes) -> int:
    """Read the body of a 409 ``text/x.tlog.size`` answer.

    >>> parse_size(b"20852014\\n")
    20852014
    """
    text = body.decode("ascii", errors="replace")
    if not text.endswith("\n"):
        raise ValidationError("size answer does not end in a newline")
    return _decimal(text[:-1], "size answer")


def format_cosignatures(lines: Iterable[str]) -> bytes:
    """The body of a 200 answer: one or more signature lines, each ending in newline."""
    out = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if not out:
        raise ValidationError("a cosignature answer has at least one line")
    return out.encode("utf-8")


def parse_cosignatures(body: bytes) -> tuple[str, ...]:
    """Read the body of a 200 answer: well-formed signature lines (with newlines).
    Nothing is verified: append them to the checkpoint (:func:`.add_signature_lines`)
    and open it with the witness keys you trust. :class:`IntegrityError` if malformed.

    >>> parse_cosignatures("— w AAAAAQE=\\n".encode())
    ('— w AAAAAQE=\\n',)
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise IntegrityError("cosignature answer is not UTF-8") from None
    _, signatures = parse_signatures("x\n\n" + text)
    return tuple(sig.line for sig in signatures)


# --- the witness's decision ----------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessDecision:
    """What to answer an ``add-checkpoint`` request with, and what to persist.

    ``checkpoint`` is set only on success (status 200): the verified checkpoint whose
    head becomes the witness's latest for its origin. It must be persisted, atomically
    with the check of ``old_size``, before the answer is sent.
    """

    status: int
    body: bytes
    content_type: str = CONTENT_TYPE_TEXT
    checkpoint: Checkpoint | None = None

    @classmethod
    def refuse(cls, status: int, reason: str) -> WitnessDecision:
        """A refusal with a one-line reason as the body."""
        return cls(status=status, body=(reason.replace("\n", " ") + "\n").encode("utf-8"))


def _origin_of(note: str) -> str | None:
    first, sep, _ = note.partition("\n")
    return first if sep and first else None


def decide_add_checkpoint(
    body: bytes | str,
    *,
    logs: Mapping[str, Sequence[NoteVerifier]],
    latest: Mapping[str, TreeHead],
    witness: Sequence[CosignatureSigner] | CosignatureSigner,
    now: int,
) -> WitnessDecision:
    """Apply the ``tlog-witness`` rules to an ``add-checkpoint`` request body.

    ``logs`` maps each known origin to its trusted keys; ``latest`` maps an origin to
    the latest head this witness cosigned for it (absent: never, i.e. size 0);
    ``witness`` is the cosigning key(s); ``now`` the POSIX time of the cosignature.

    Statuses: 400 malformed request or checkpoint, old size above the checkpoint's
    size; 404 unknown origin; 403 no trusted signature verifies; 409 old size is not
    the latest cosigned size (body: that size, ``text/x.tlog.size``), or the same size
    with another root; 422 the consistency proof fails; 200 cosigned (body: the lines).

    >>> from ledger.integrity.note import Signer, Verifier, generate_key
    >>> from ledger.integrity.cosignature import generate_witness_key
    >>> skey, vkey = generate_key("example.com/log")
    >>> wkey, _ = generate_witness_key("witness.example/w1")
    >>> head = TreeHead(size=1, root=bytes(32))
    >>> cp = Checkpoint.sign("example.com/log", head, Signer.from_key(skey))
    >>> decision = decide_add_checkpoint(
    ...     format_add_checkpoint(0, [], cp.text),
    ...     logs={"example.com/log": [Verifier.from_key(vkey)]},
    ...     latest={}, witness=CosignatureSigner.from_key(wkey), now=1700000000)
    >>> decision.status, decision.checkpoint.head == head
    (200, True)
    """
    try:
        request = parse_add_checkpoint(body)
    except ValidationError as exc:
        return WitnessDecision.refuse(400, str(exc))
    origin = _origin_of(request.checkpoint)
    if origin is None:
        return WitnessDecision.refuse(400, "the checkpoint has no origin line")
    verifiers = logs.get(origin)
    if not verifiers:
        return WitnessDecision.refuse(404, f"unknown log origin {origin!r}")
    try:
        parse_signatures(request.checkpoint)
    except IntegrityError as exc:
        return WitnessDecision.refuse(400, str(exc))
    try:
        opened = open_note(request.checkpoint, verifiers)
    except IntegrityError as exc:
        return WitnessDecision.refuse(403, str(exc))
    try:
        parsed = parse_checkpoint_body(opened.text)
    except IntegrityError as exc:
        return WitnessDecision.refuse(400, str(exc))
    checkpoint = Checkpoint(
        origin=parsed.origin,
        size=parsed.size,
        root=parsed.root,
        text=request.checkpoint,
        signers=opened.signers,
        extensions=parsed.extensions,
    )
    if request.old_size > checkpoint.size:
        return WitnessDecision.refuse(
            400, f"old size {request.old_size} is above the checkpoint size {checkpoint.size}"
        )
    known = latest.get(origin) or TreeHead(size=0, root=EMPTY_ROOT)
    if request.old_size != known.size:
        return WitnessDecision(
            status=409, body=format_size(known.size), content_type=CONTENT_TYPE_SIZE
        )
    if checkpoint.size == known.size and checkpoint.root != known.root:
        return WitnessDecision.refuse(
            409, f"a different root for tree size {known.size} was cosigned before"
        )
    try:
        verify_consistency(known.size, checkpoint.size, known.root, checkpoint.root, request.proof)
    except IntegrityError as exc:
        return WitnessDecision.refuse(422, str(exc))
    signers = [witness] if isinstance(witness, CosignatureSigner) else list(witness)
    lines = [w.signature_line(checkpoint.body, timestamp=now) for w in signers]
    return WitnessDecision(status=200, body=format_cosignatures(lines), checkpoint=checkpoint)

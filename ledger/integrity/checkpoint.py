"""Tree heads, inclusion proofs and signed checkpoints (C2SP ``tlog-checkpoint``).

A checkpoint is a signed note (:mod:`.note`) whose text is the log's origin line, the
tree size in decimal, the root hash in base64, and optional extension lines::

    >>> from ledger.integrity.note import Signer, Verifier, generate_key
    >>> skey, vkey = generate_key("example.com/log")
    >>> head = TreeHead(size=1, root=bytes(32))
    >>> cp = Checkpoint.sign("example.com/log", head, Signer.from_key(skey))
    >>> print(cp.body, end="")
    example.com/log
    1
    AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
    >>> again = Checkpoint.parse(cp.text, [Verifier.from_key(vkey)])
    >>> again == cp, again.head == head, again.signers
    (True, True, ('example.com/log',))
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ledger.errors import IntegrityError, ValidationError
from ledger.integrity._keytext import b64decode, b64encode
from ledger.integrity.merkle import HASH_SIZE, verify_consistency, verify_inclusion
from ledger.integrity.note import NoteSigner, NoteVerifier, open_note, sign_note

__all__ = [
    "MAX_TREE_SIZE",
    "Checkpoint",
    "CheckpointBody",
    "InclusionProof",
    "TreeHead",
    "checkpoint_body",
    "parse_checkpoint_body",
]

MAX_TREE_SIZE: Final = (1 << 63) - 1
"""The largest tree size a checkpoint may state (a signed 64-bit integer, as in Go)."""

_DECIMAL: Final = re.compile(r"0|[1-9][0-9]*")


def _check_size(size: int, what: str = "tree size") -> None:
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_TREE_SIZE:
        raise ValidationError(f"{what} must be an integer from 0 to 2**63 - 1, not {size!r}")


def _check_root(root: bytes, what: str = "root") -> None:
    if not isinstance(root, bytes) or len(root) != HASH_SIZE:
        raise ValidationError(f"{what} must be {HASH_SIZE} bytes")


@dataclass(frozen=True, slots=True)
class TreeHead:
    """The size and root hash of a tree.

    >>> TreeHead(size=0, root=bytes(32)).size
    0
    """

    size: int
    root: bytes

    def __post_init__(self) -> None:
        _check_size(self.size)
        _check_root(self.root)

    def verify_consistency(self, newer: TreeHead, proof: Sequence[bytes]) -> None:
        """Check that ``newer`` extends this head (:func:`.verify_consistency`)."""
        verify_consistency(self.size, newer.size, self.root, newer.root, proof)


@dataclass(frozen=True, slots=True)
class InclusionProof:
    """The evidence that leaf ``leaf_index`` (with hash ``leaf_hash``) is in the tree of
    ``tree_size`` leaves: the RFC 9162 audit path ``hashes``, lowest first.

    >>> from ledger.integrity.merkle import MemoryTree, leaf_hash
    >>> tree = MemoryTree.of(leaf_hash(bytes([i])) for i in range(5))
    >>> proof = InclusionProof(leaf_index=3, tree_size=5, leaf_hash=tree.leaf(3),
    ...                        hashes=tuple(tree.inclusion_proof(3)))
    >>> proof.verify(tree.root())
    """

    leaf_index: int
    tree_size: int
    leaf_hash: bytes
    hashes: tuple[bytes, ...]

    def __post_init__(self) -> None:
        _check_size(self.tree_size)
        _check_size(self.leaf_index, "leaf index")
        _check_root(self.leaf_hash, "leaf hash")
        if not isinstance(self.hashes, tuple):
            raise ValidationError("hashes must be a tuple of 32-byte hashes")

    def verify(self, root: bytes) -> None:
        """Check the proof against ``root``; raise :class:`IntegrityError` if it fails."""
        verify_inclusion(self.leaf_hash, self.leaf_index, self.tree_size, self.hashes, root)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointBody:
    """The parsed text of a checkpoint (no signatures)."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The note text, each line ending in a newline."""
        return checkpoint_body(self.origin, self.size, self.root, self.extensions)


def checkpoint_body(origin: str, size: int, root: bytes, extensions: Iterable[str] = ()) -> str:
    """Return the checkpoint note text: origin, size, base64 root, extension lines.

    >>> checkpoint_body("example.com/log", 3, bytes(32))
    'example.com/log\\n3\\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\\n'
    """
    lines = [origin, str(size), b64encode(root), *extensions]
    _check_size(size)
    _check_root(root)
    for i, line in enumerate(lines):
        if not line or "\n" in line:
            what = "origin" if i == 0 else "extension line"
            raise ValidationError(f"checkpoint {what} must be one non-empty line, not {line!r}")
    return "".join(line + "\n" for line in lines)


def parse_checkpoint_body(text: str) -> CheckpointBody:
    """Parse a checkpoint note text; raise :class:`IntegrityError` when it is malformed.

    Rules (C2SP tlog-checkpoint): every line ends in a newline; at least three lines;
    a non-empty origin; the size in decimal without sign or leading zeros; the root in
    standard base64, 32 bytes; extension lines non-empty.

    >>> parse_checkpoint_body("go.sum database tree\\n123456789012\\n"
    ...                       "TszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\\n").size
    123456789012
    >>> parse_checkpoint_body("log\\n012\\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\\n")
    Traceback (most recent call last):
    ...
    ledger.errors.IntegrityError: malformed checkpoint: tree size '012' is not a decimal number
    """
    if not text.endswith("\n"):
        raise IntegrityError("malformed checkpoint: the text does not end in a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise IntegrityError("malformed checkpoint: fewer than three lines")
    origin, size_text, root_text, *extensions = lines
    if not origin:
        raise IntegrityError("malformed checkpoint: the origin line is empty")
    if _DECIMAL.fullmatch(size_text) is None or int(size_text) > MAX_TREE_SIZE:
        raise IntegrityError(
            f"malformed checkpoint: tree size {size_text[:30]!r} is not a decimal number"
        )
    try:
        root = b64decode(root_text)
    except ValueError:
        raise IntegrityError("malformed checkpoint: the root hash is not base64") from None
    if len(root) != HASH_SIZE:
        raise IntegrityError(f"malformed checkpoint: the root hash is {len(root)} bytes, not 32")
    if any(not line for line in extensions):
        raise IntegrityError("malformed checkpoint: an extension line is empty")
    return CheckpointBody(
        origin=origin, size=int(size_text), root=root, extensions=tuple(extensions)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """A verified signed checkpoint.

    ``text`` is the whole signed note as received; ``signers`` names the trusted keys
    whose signatures verified (others are kept in ``text`` untouched). Which signers
    suffice is the caller's policy: pass only the log's key to require the log's
    signature.
    """

    origin: str
    size: int
    root: bytes
    text: str
    signers: tuple[str, ...]
    extensions: tuple[str, ...] = ()

    @property
    def head(self) -> TreeHead:
        """The tree head the checkpoint states."""
        return TreeHead(size=self.size, root=self.root)

    @property
    def body(self) -> str:
        """The signed note text (origin, size, root, extension lines)."""
        return checkpoint_body(self.origin, self.size, self.root, self.extensions)

    @classmethod
    def parse(cls, note_text: str | bytes, verifiers: Iterable[NoteVerifier]) -> Checkpoint:
        """Verify a signed checkpoint against trusted keys and parse it.

        Raises :class:`IntegrityError` when the note is malformed, a trusted key's
        signature fails, no trusted key signed it, or the text is not a checkpoint.
        """
        opened = open_note(note_text, verifiers)
        body = parse_checkpoint_body(opened.text)
        text = note_text if isinstance(note_text, str) else bytes(note_text).decode("utf-8")
        return cls(
            origin=body.origin,
            size=body.size,
            root=body.root,
            text=text,
            signers=opened.signers,
            extensions=body.extensions,
        )

    @classmethod
    def sign(
        cls,
        origin: str,
        head: TreeHead,
        signer: NoteSigner,
        *,
        extensions: Iterable[str] = (),
        cosigners: Iterable[NoteSigner] = (),
    ) -> Checkpoint:
        """Sign the checkpoint of ``head`` for the log ``origin`` with ``signer`` (and any
        ``cosigners``); raises :class:`ValidationError` on a bad origin or key name."""
        ext = tuple(extensions)
        body = checkpoint_body(origin, head.size, head.root, ext)
        all_signers = [signer, *cosigners]
        text = sign_note(body, all_signers)
        return cls(
            origin=origin,
            size=head.size,
            root=head.root,
            text=text,
            signers=tuple(s.name for s in all_signers),
            extensions=ext,
        )

"""Evidence bundles: one run's events with their inclusion proofs and the signed
checkpoint they are proven against, in one self-contained file that verifies offline.

    >>> bundle = make_bundle("r1", rows, checkpoint, proof_for)     # doctest: +SKIP
    >>> path.write_bytes(bundle.to_bytes())                          # doctest: +SKIP
    >>> verify_bundle(path.read_bytes(), [Verifier.from_key(vkey)])  # doctest: +SKIP

The file is UTF-8 JSON, written in exactly one form (keys sorted, two-space indent, a
final newline), so that *any* changed byte is refused: a change inside a value breaks a
proof, a signature or a field check, and a change of the layout breaks the form::

    {
      "checkpoint": "<the signed checkpoint note, C2SP tlog-checkpoint>",
      "events": [
        {
          "data": "<the event JSON exactly as stored>",
          "leaf_index": 7,
          "proof": ["<base64 hash>", ...]
        }
      ],
      "format": "agentledger-bundle/v1",
      "origin": "agentledger/01J...",
      "run_id": "r1",
      "tree_size": 42
    }

Each event's leaf hash is ``SHA-256(0x00 || UTF-8 bytes of data)``; ``proof`` is its
RFC 9162 inclusion proof (lowest level first) in the tree of ``tree_size`` leaves, whose
root the checkpoint states. See ``docs/integrity.md`` for verifying a bundle without
this library.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ledger.errors import IntegrityError
from ledger.integrity._keytext import b64decode, b64encode
from ledger.integrity.checkpoint import Checkpoint
from ledger.integrity.merkle import leaf_hash, verify_inclusion
from ledger.integrity.note import NoteVerifier
from ledger.integrity.verify import LeafRow

__all__ = ["BUNDLE_FORMAT", "Bundle", "BundleEvent", "make_bundle", "verify_bundle"]

BUNDLE_FORMAT: Final = "agentledger-bundle/v1"
_KEYS: Final = {"checkpoint", "events", "format", "origin", "run_id", "tree_size"}
_EVENT_KEYS: Final = {"data", "leaf_index", "proof"}


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleEvent:
    """One event of a bundle: its stored JSON, leaf index and inclusion proof."""

    leaf_index: int
    data: str
    proof: tuple[bytes, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Bundle:
    """A run's evidence: events, proofs, and the checkpoint they are proven against."""

    origin: str
    run_id: str
    tree_size: int
    checkpoint: str
    events: tuple[BundleEvent, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the file."""
        return {
            "checkpoint": self.checkpoint,
            "events": [
                {
                    "data": e.data,
                    "leaf_index": e.leaf_index,
                    "proof": [b64encode(h) for h in e.proof],
                }
                for e in self.events
            ],
            "format": BUNDLE_FORMAT,
            "origin": self.origin,
            "run_id": self.run_id,
            "tree_size": self.tree_size,
        }

    def to_bytes(self) -> bytes:
        """The file's bytes, in the one form :func:`verify_bundle` accepts."""
        return _form(self.to_dict())


def _form(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def make_bundle(
    run_id: str,
    rows: Sequence[LeafRow],
    checkpoint: Checkpoint,
    proof_for: Callable[[int], Sequence[bytes]],
) -> Bundle:
    """Bundle ``rows`` (the run's stored rows, each with its leaf index) with their
    inclusion proofs in the tree of ``checkpoint.size`` leaves (``proof_for(index)``).

    Raises :class:`IntegrityError` when a row has no leaf index, is not covered by the
    checkpoint, or is not UTF-8.
    """
    events: list[BundleEvent] = []
    for row in sorted(rows, key=lambda r: r.leaf_index if r.leaf_index is not None else -1):
        if row.leaf_index is None:
            raise IntegrityError(
                f"row seq={row.seq} has no leaf index (inserted outside the ledger); "
                "run `ledger verify`"
            )
        if row.leaf_index >= checkpoint.size:
            raise IntegrityError(
                f"event {row.event_id} (leaf {row.leaf_index}) is not covered by checkpoint "
                f"{checkpoint.size}; sign a newer checkpoint first (`ledger checkpoint`)"
            )
        try:
            data = row.data.decode("utf-8")
        except UnicodeDecodeError:
            raise IntegrityError(
                f"event {row.event_id}: its stored bytes are not UTF-8; it cannot be bundled"
            ) from None
        events.append(
            BundleEvent(
                leaf_index=row.leaf_index, data=data, proof=tuple(proof_for(row.leaf_index))
            )
        )
    return Bundle(
        origin=checkpoint.origin,
        run_id=run_id,
        tree_size=checkpoint.size,
        checkpoint=checkpoint.text,
        events=tuple(events),
    )


def _fail(why: str) -> IntegrityError:
    return IntegrityError(f"bundle refused: {why}")


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(f"{what} is not a non-negative integer")
    return value


def _parse(data: bytes) -> Bundle:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _fail(f"not a bundle file (not UTF-8 JSON: {exc})") from None
    if not isinstance(obj, dict) or set(obj) != _KEYS:
        raise _fail(f"the fields must be exactly {sorted(_KEYS)}")
    if obj["format"] != BUNDLE_FORMAT:
        raise _fail(f"unknown format {obj['format']!r} (expected {BUNDLE_FORMAT!r})")
    for name in ("checkpoint", "origin", "run_id"):
        if not isinstance(obj[name], str):
            raise _fail(f"{name} is not a string")
    if not isinstance(obj["events"], list) or not obj["events"]:
        raise _fail("events is not a non-empty list")
    events: list[BundleEvent] = []
    for i, e in enumerate(obj["events"]):
        if not isinstance(e, dict) or set(e) != _EVENT_KEYS:
            raise _fail(f"event #{i + 1}: the fields must be exactly {sorted(_EVENT_KEYS)}")
        if not isinstance(e["data"], str) or not isinstance(e["proof"], list):
            raise _fail(f"event #{i + 1}: data must be a string and proof a list")
        proof: list[bytes] = []
        for h in e["proof"]:
            try:
                proof.append(b64decode(h) if isinstance(h, str) else b"")
            except ValueError:
                raise _fail(f"event #{i + 1}: a proof hash is not base64") from None
        events.append(
            BundleEvent(
                leaf_index=_int(e["leaf_index"], f"event #{i + 1} leaf_index"),
                data=e["data"],
                proof=tuple(proof),
            )
        )
    bundle = Bundle(
        origin=obj["origin"],
        run_id=obj["run_id"],
        tree_size=_int(obj["tree_size"], "tree_size"),
        checkpoint=obj["checkpoint"],
        events=tuple(events),
    )
    if bundle.to_bytes() != data:
        raise _fail(
            "the file is not byte for byte the form the ledger writes (it was edited: "
            "a changed byte, a reformatting or a non-canonical base64 hash)"
        )
    return bundle


def verify_bundle(data: bytes, verifiers: Iterable[NoteVerifier]) -> Bundle:
    """Verify a bundle file's bytes offline; return the bundle, or raise
    :class:`IntegrityError` saying what failed.

    Checks: the exact file form; the checkpoint's signature by a trusted key, its
    origin and size against the bundle's; every event's inclusion proof against the
    checkpoint's root; every event's run id; leaf indexes strictly increasing.
    """
    bundle = _parse(bytes(data))
    cp = Checkpoint.parse(bundle.checkpoint, list(verifiers))
    if cp.origin != bundle.origin:
        raise _fail(f"the checkpoint is for the log {cp.origin!r}, not {bundle.origin!r}")
    if cp.size != bundle.tree_size:
        raise _fail(f"the checkpoint's size is {cp.size}, the bundle says {bundle.tree_size}")
    last = -1
    for e in bundle.events:
        if e.leaf_index <= last:
            raise _fail(f"leaf {e.leaf_index} is out of order or repeated")
        last = e.leaf_index
        try:
            verify_inclusion(
                leaf_hash(e.data.encode("utf-8")), e.leaf_index, cp.size, e.proof, cp.root
            )
        except IntegrityError as exc:
            raise _fail(f"event at leaf {e.leaf_index}: {exc}") from None
        try:
            event = json.loads(e.data)
        except ValueError:
            raise _fail(f"event at leaf {e.leaf_index} is not JSON") from None
        run = event.get("run_id", "") if isinstance(event, dict) else None
        if run != bundle.run_id:
            raise _fail(
                f"event at leaf {e.leaf_index} belongs to run {run!r}, not {bundle.run_id!r}"
            )
    return bundle

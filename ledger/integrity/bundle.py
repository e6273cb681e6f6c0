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

A run with erased events (tombstones, :mod:`ledger.model.erasure`): a tombstone's leaf
is the leaf hash it keeps, and the bundle has one more member, ``erasures``: for each
erasure record that last wrote one of its tombstones, the record itself (its stored
JSON, leaf index and inclusion proof) and ``others``, ``[leaf index, hex SHA-256 of the
tombstone bytes]`` of the record's other tombstones (outside this run), so that the
record's ``tombstones`` digest is recomputed offline and a changed byte of a tombstone
fails as a changed byte of an event does::

      "erasures": [
        {
          "others": [[1042, "<64 hex>"], ...],
          "record": {"data": "<the erasure record's JSON>", "leaf_index": 1090, "proof": [...]}
        }
      ],
"""

from __future__ import annotations

import hashlib
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
from ledger.model.erasure import record_summary, tombstone_of

__all__ = [
    "BUNDLE_FORMAT",
    "Bundle",
    "BundleErasure",
    "BundleEvent",
    "ErasureEvidence",
    "make_bundle",
    "verify_bundle",
]

BUNDLE_FORMAT: Final = "agentledger-bundle/v1"
_KEYS: Final = {"checkpoint", "events", "format", "origin", "run_id", "tree_size"}
_EVENT_KEYS: Final = {"data", "leaf_index", "proof"}
_ERASURE_KEYS: Final = {"others", "record"}


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleEvent:
    """One event of a bundle: its stored JSON, leaf index and inclusion proof."""

    leaf_index: int
    data: str
    proof: tuple[bytes, ...]

    @property
    def erased(self) -> bool:
        """True when ``data`` is a tombstone (the event was erased, its hash kept)."""
        return tombstone_of(self.data.encode("utf-8")) is not None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the event in the file."""
        return {
            "data": self.data,
            "leaf_index": self.leaf_index,
            "proof": [b64encode(h) for h in self.proof],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ErasureEvidence:
    """What :func:`make_bundle` needs of one erasure record: its stored row, and
    ``(leaf index, SHA-256 of the tombstone bytes)`` of each tombstone it last wrote
    (all of them; those of the bundled run are left out of the file)."""

    record: LeafRow
    tombstones: tuple[tuple[int, bytes], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleErasure:
    """One erasure record in a bundle, and its tombstones outside the bundled run."""

    record: BundleEvent
    others: tuple[tuple[int, str], ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the record in the file."""
        return {"others": [[i, h] for i, h in self.others], "record": self.record.to_dict()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Bundle:
    """A run's evidence: events, proofs, and the checkpoint they are proven against."""

    origin: str
    run_id: str
    tree_size: int
    checkpoint: str
    events: tuple[BundleEvent, ...]
    erasures: tuple[BundleErasure, ...] = ()

    @property
    def erased(self) -> int:
        """How many of the events are tombstones (erased, their hash kept)."""
        return sum(e.erased for e in self.events)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the file (``erasures`` only when there are some)."""
        out: dict[str, Any] = {
            "checkpoint": self.checkpoint,
            "events": [e.to_dict() for e in self.events],
            "format": BUNDLE_FORMAT,
            "origin": self.origin,
            "run_id": self.run_id,
            "tree_size": self.tree_size,
        }
        if self.erasures:
            out["erasures"] = [e.to_dict() for e in self.erasures]
        return out

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
    erasures: Sequence[ErasureEvidence] = (),
) -> Bundle:
    """Bundle ``rows`` (the run's stored rows, each with its leaf index) with their
    inclusion proofs in the tree of ``checkpoint.size`` leaves (``proof_for(index)``),
    and, when some rows are tombstones, ``erasures``: the evidence of each erasure
    record that last wrote one of them.

    Raises :class:`IntegrityError` when a row has no leaf index, is not covered by the
    checkpoint, or is not UTF-8, or when a tombstone's record is not in ``erasures``.
    """
    events = tuple(
        _bundled(row, checkpoint, proof_for)
        for row in sorted(rows, key=lambda r: r.leaf_index if r.leaf_index is not None else -1)
    )
    # each bundled tombstone stands for its latest record: what that record wrote
    # elsewhere (other runs, or rows of this run a later erasure replaced) is "others"
    last_of = {
        e.leaf_index: stone.records[-1]
        for e in events
        if (stone := tombstone_of(e.data.encode("utf-8"))) is not None
    }
    needed = set(last_of.values())
    given: dict[str, BundleErasure] = {}
    for evidence in erasures:
        record = _bundled(evidence.record, checkpoint, proof_for)
        if evidence.record.event_id not in needed:
            continue
        others = tuple(
            (index, digest.hex())
            for index, digest in sorted(evidence.tombstones)
            if last_of.get(index) != evidence.record.event_id
        )
        given[evidence.record.event_id] = BundleErasure(record=record, others=others)
    missing = sorted(needed - set(given))
    if missing:
        raise IntegrityError(
            f"run {run_id}: the erasure record {missing[0]} of its tombstones is not in the "
            "bundle; give its evidence (the `ledger bundle` command finds it)"
        )
    return Bundle(
        origin=checkpoint.origin,
        run_id=run_id,
        tree_size=checkpoint.size,
        checkpoint=checkpoint.text,
        events=events,
        erasures=tuple(sorted(given.values(), key=lambda e: e.record.leaf_index)),
    )


def _bundled(
    row: LeafRow, checkpoint: Checkpoint, proof_for: Callable[[int], Sequence[bytes]]
) -> BundleEvent:
    """One stored row with its inclusion proof."""
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
    proof = tuple(proof_for(row.leaf_index))
    stone = tombstone_of(row.data)
    leaf = leaf_hash(row.data) if stone is None else stone.leaf_hash
    try:  # never write a bundle that cannot verify
        verify_inclusion(leaf, row.leaf_index, checkpoint.size, proof, checkpoint.root)
    except IntegrityError as exc:
        raise IntegrityError(
            f"event {row.event_id} (leaf {row.leaf_index}) does not lead to checkpoint "
            f"{checkpoint.size}'s root ({exc}): its stored bytes or the stored tree were "
            "changed; not bundled. Run `ledger verify`"
        ) from None
    return BundleEvent(leaf_index=row.leaf_index, data=data, proof=proof)


def _fail(why: str) -> IntegrityError:
    return IntegrityError(f"bundle refused: {why}")


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(f"{what} is not a non-negative integer")
    return value


def _event(e: object, what: str) -> BundleEvent:
    if not isinstance(e, dict) or set(e) != _EVENT_KEYS:
        raise _fail(f"{what}: the fields must be exactly {sorted(_EVENT_KEYS)}")
    if not isinstance(e["data"], str) or not isinstance(e["proof"], list):
        raise _fail(f"{what}: data must be a string and proof a list")
    proof: list[bytes] = []
    for h in e["proof"]:
        try:
            proof.append(b64decode(h) if isinstance(h, str) else b"")
        except ValueError:
            raise _fail(f"{what}: a proof hash is not base64") from None
    return BundleEvent(
        leaf_index=_int(e["leaf_index"], f"{what} leaf_index"), data=e["data"], proof=tuple(proof)
    )


def _erasure(e: object, what: str) -> BundleErasure:
    if not isinstance(e, dict) or set(e) != _ERASURE_KEYS or not isinstance(e["others"], list):
        raise _fail(f"{what}: the fields must be exactly {sorted(_ERASURE_KEYS)}, others a list")
    others: list[tuple[int, str]] = []
    for item in e["others"]:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not isinstance(item[1], str)
            or len(item[1]) != 64
            or item[1].strip("0123456789abcdef")
        ):
            raise _fail(f"{what}: each of others must be [leaf index, 64 lowercase hex digits]")
        others.append((_int(item[0], f"{what} leaf index"), item[1]))
    return BundleErasure(record=_event(e["record"], f"{what} record"), others=tuple(others))


def _parse(data: bytes) -> Bundle:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _fail(f"not a bundle file (not UTF-8 JSON: {exc})") from None
    except RecursionError:
        raise _fail("not a bundle file (JSON nested too deeply)") from None
    if not isinstance(obj, dict) or not _KEYS <= set(obj) <= _KEYS | {"erasures"}:
        raise _fail(f"the fields must be exactly {sorted(_KEYS)} (and erasures)")
    if obj["format"] != BUNDLE_FORMAT:
        raise _fail(f"unknown format {obj['format']!r} (expected {BUNDLE_FORMAT!r})")
    for name in ("checkpoint", "origin", "run_id"):
        if not isinstance(obj[name], str):
            raise _fail(f"{name} is not a string")
    if not isinstance(obj["events"], list) or not obj["events"]:
        raise _fail("events is not a non-empty list")
    erasures = obj.get("erasures", [])
    if not isinstance(erasures, list):
        raise _fail("erasures is not a list")
    bundle = Bundle(
        origin=obj["origin"],
        run_id=obj["run_id"],
        tree_size=_int(obj["tree_size"], "tree_size"),
        checkpoint=obj["checkpoint"],
        events=tuple(_event(e, f"event #{i + 1}") for i, e in enumerate(obj["events"])),
        erasures=tuple(_erasure(e, f"erasure #{i + 1}") for i, e in enumerate(erasures)),
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
    checkpoint's root (a tombstone's with the leaf hash it keeps); every event's run id;
    leaf indexes strictly increasing; and for tombstones, each erasure record's own
    inclusion proof and its count and ``tombstones`` digest recomputed from the
    bundled tombstones' bytes and the record's ``others``.
    """
    bundle = _parse(bytes(data))
    cp = Checkpoint.parse(bundle.checkpoint, list(verifiers))
    if cp.origin != bundle.origin:
        raise _fail(f"the checkpoint is for the log {cp.origin!r}, not {bundle.origin!r}")
    if cp.size != bundle.tree_size:
        raise _fail(f"the checkpoint's size is {cp.size}, the bundle says {bundle.tree_size}")
    last = -1
    written: dict[str, dict[int, bytes]] = {}  # record id -> leaf index -> tombstone digest
    for e in bundle.events:
        if e.leaf_index <= last:
            raise _fail(f"leaf {e.leaf_index} is out of order or repeated")
        last = e.leaf_index
        raw = e.data.encode("utf-8")
        stone = tombstone_of(raw)
        leaf = leaf_hash(raw) if stone is None else stone.leaf_hash
        _included(leaf, e, cp, f"event at leaf {e.leaf_index}")
        if stone is not None:
            written.setdefault(stone.records[-1], {})[e.leaf_index] = hashlib.sha256(raw).digest()
        try:
            event = json.loads(e.data)
        except (ValueError, RecursionError):
            raise _fail(f"event at leaf {e.leaf_index} is not JSON") from None
        run = event.get("run_id", "") if isinstance(event, dict) else None
        if run != bundle.run_id:
            raise _fail(
                f"event at leaf {e.leaf_index} belongs to run {run!r}, not {bundle.run_id!r}"
            )
    _check_erasures(bundle, cp, written)
    return bundle


def _included(leaf: bytes, e: BundleEvent, cp: Checkpoint, what: str) -> None:
    try:
        verify_inclusion(leaf, e.leaf_index, cp.size, e.proof, cp.root)
    except IntegrityError as exc:
        raise _fail(f"{what}: {exc}") from None


def _check_erasures(bundle: Bundle, cp: Checkpoint, written: dict[str, dict[int, bytes]]) -> None:
    """Each tombstone's latest erasure record is in the bundle, in the log, and its
    count and tombstone digest match the tombstones' bytes (bundled and ``others``)."""
    last = -1
    for er in bundle.erasures:
        rec = er.record
        what = f"erasure record at leaf {rec.leaf_index}"
        if rec.leaf_index <= last:
            raise _fail(f"{what} is out of order or repeated")
        last = rec.leaf_index
        raw = rec.data.encode("utf-8")
        _included(leaf_hash(raw), rec, cp, what)
        summary = record_summary(raw)
        try:
            record_id = json.loads(rec.data).get("event_id")
        except (ValueError, AttributeError, RecursionError):
            record_id = None
        if summary is None or not isinstance(record_id, str):
            raise _fail(f"{what} is not an erasure record (an action of tool ledger.erase)")
        mine = written.pop(record_id, None)
        if mine is None:
            raise _fail(f"{what} ({record_id}) erased none of the bundled events")
        rows = dict(mine)
        for index, digest in er.others:
            if index in rows:
                raise _fail(f"{what}: leaf {index} is listed twice")
            rows[index] = bytes.fromhex(digest)
        h = hashlib.sha256()
        for index in sorted(rows):
            h.update(index.to_bytes(8, "big") + rows[index])
        if len(rows) != summary.events or h.hexdigest() != summary.tombstones:
            raise _fail(
                f"the tombstones of erasure record {record_id} are not the ones it wrote "
                f"({summary.events} row(s)): a tombstone was changed, added or removed"
            )
    if written:
        raise _fail(
            f"tombstone(s) name erasure record {sorted(written)[0]}, which the bundle does "
            "not hold: they cannot be checked"
        )

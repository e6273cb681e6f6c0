"""Verify a whole ledger: recompute every leaf, rebuild the tree, check the checkpoints.

    >>> result = verify_ledger(sink, [Verifier.from_key(vkey)], [note_text])  # doctest: +SKIP
    >>> result.ok, [f.kind for f in result.findings]                          # doctest: +SKIP
    (False, ['changed'])

The rows come from a :class:`LeafSource`: the SQL sinks are one (their stored bytes, leaf
indexes, stored tree head and nodes, and stored checkpoints), :class:`JSONLLeaves` is one
over the lines of a JSONL file (leaf ``i`` = line ``i + 1``'s bytes without its newline;
no stored tree, so only checkpoints given by the caller are checked).

One pass in commit order recomputes each leaf ``SHA-256(0x00 || bytes)`` and folds it
into the compact range, keeping the root at every checkpoint's size and the few nodes
the consistency proofs between checkpoints need (memory O(log n + checkpoints)). What it
finds, each a :class:`Finding` naming the row where it can:

==============  =======================================================================
``changed``     a row's bytes differ from the leaf committed for it (content hash
                rewritten or not)
``deleted``     leaf indexes with no row (a gap), or a stored leaf without its row
``reordered``   rows out of leaf order, or a row holding the bytes of another leaf
``inserted``    a row without a leaf index (written around the ledger), or a leaf index
                used twice
``truncated``   the tree is smaller than a checkpoint (rows cut off, an old backup)
``mismatch``    the rows do not lead to a checkpoint's root
``fork``        two checkpoints that are not consistent (one size, two roots; or no
                consistency proof between them)
``unknown-key`` a checkpoint no trusted key signed
``bad-checkpoint`` a malformed checkpoint, a failed signature, another log's origin
``head``        the stored tree head does not match the rows (tree tables changed)
``uncovered``   (warning) rows after the last checkpoint; ``no-checkpoint`` (warning)
``erased``      (info) rows an erasure replaced by tombstones, accounted for by its
                record in the log: *erased (hash kept)*, not tampering (the rule:
                :mod:`ledger.integrity.erased`; a tombstone it does not account for is
                ``changed``)
==============  =======================================================================

``result.ok`` is True when no finding is an error (warnings do not fail it).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ledger.errors import IntegrityError, StorageError, ValidationError
from ledger.integrity._keytext import b64encode
from ledger.integrity.checkpoint import Checkpoint, TreeHead, parse_checkpoint_body
from ledger.integrity.erased import ErasedRows
from ledger.integrity.merkle import (
    EMPTY_ROOT,
    Frontier,
    consistency_nodes,
    consistency_path,
    leaf_hash,
    subtree_from_nodes,
    verify_consistency,
)
from ledger.integrity.note import NoteVerifier, open_note, parse_signatures
from ledger.model.erasure import ADMIN_RUN_PREFIX

__all__ = [
    "Finding",
    "FindingKind",
    "JSONLLeaves",
    "LeafRow",
    "LeafSource",
    "VerifyResult",
    "coverage_findings",
    "verify_ledger",
]

_PROGRESS_EVERY = 20000
_MAX_NAMED = 1000  # row findings named one by one; beyond, one summary finding


class FindingKind(StrEnum):
    """What :func:`verify_ledger` can find."""

    CHANGED = "changed"
    DELETED = "deleted"
    REORDERED = "reordered"
    INSERTED = "inserted"
    TRUNCATED = "truncated"
    MISMATCH = "mismatch"
    FORK = "fork"
    UNKNOWN_KEY = "unknown-key"
    BAD_CHECKPOINT = "bad-checkpoint"
    HEAD = "head"
    UNCOVERED = "uncovered"
    NO_CHECKPOINT = "no-checkpoint"
    UNREADABLE = "unreadable"
    ERASED = "erased"
    ROW = "row"  # a row's content hash or index columns disagree with its JSON
    RETENTION_TABLES = "retention-tables"  # the policy/hold tables are not the log's


_WARNINGS = frozenset({FindingKind.UNCOVERED, FindingKind.NO_CHECKPOINT})
_INFO = frozenset({FindingKind.ERASED})


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One thing verification found; ``severity`` is ``"error"`` or ``"warning"``."""

    kind: FindingKind
    message: str
    seq: int | None = None
    event_id: str | None = None
    leaf_index: int | None = None
    checkpoint_size: int | None = None
    rows: int | None = None  # an ``erased`` finding: the rows its erasure record erased

    @property
    def severity(self) -> str:
        """``"warning"`` for rows not yet covered, ``"error"`` for everything else."""
        if self.kind in _INFO:
            return "info"  # erased rows, hash kept: not a failure
        return "warning" if self.kind in _WARNINGS else "error"

    def to_dict(self) -> dict[str, Any]:
        """Stable field names for ``--json``."""
        out: dict[str, Any] = {
            "kind": str(self.kind),
            "severity": self.severity,
            "message": self.message,
        }
        for name in ("seq", "event_id", "leaf_index", "checkpoint_size", "rows"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyResult:
    """The outcome of :func:`verify_ledger`."""

    origin: str | None
    size: int
    root: bytes
    rows: int
    checkpoints_verified: tuple[int, ...]
    findings: tuple[Finding, ...] = field(default=())
    signatures_checked: bool = True  # False: no key given, checkpoints matched by root only

    @property
    def ok(self) -> bool:
        """True when nothing but warnings was found."""
        return not any(f.severity == "error" for f in self.findings)

    @property
    def errors(self) -> tuple[Finding, ...]:
        """The findings that fail verification."""
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def covered(self) -> int:
        """The largest checkpoint size that verified (0 when none)."""
        return max(self.checkpoints_verified, default=0)

    def summary(self) -> str:
        """One line for people."""
        if self.ok:
            if not self.checkpoints_verified:
                signed = "; no checkpoint verified"
            elif self.signatures_checked:
                signed = f"; checkpoints verified up to size {self.covered}"
            else:
                signed = (
                    f"; checkpoint roots matched up to size {self.covered} (signatures not "
                    "checked: no verifier key given)"
                )
            return f"verified: {self.size} leaves, root {b64encode(self.root)}{signed}"
        kinds = sorted({str(f.kind) for f in self.errors})
        return f"NOT verified: {len(self.errors)} finding(s) ({', '.join(kinds)})"

    def to_dict(self) -> dict[str, Any]:
        """Stable field names for ``--json``."""
        return {
            "ok": self.ok,
            "origin": self.origin,
            "size": self.size,
            "root": b64encode(self.root),
            "rows": self.rows,
            "checkpoints_verified": list(self.checkpoints_verified),
            "covered": self.covered,
            "signatures_checked": self.signatures_checked,
            "findings": [f.to_dict() for f in self.findings],
        }


class LeafRow(NamedTuple):
    """One stored row as verification reads it: commit position, id, leaf index (None
    when the row has none) and the bytes exactly as stored. (A tuple, so a database
    cursor's rows serve as they come.)"""

    seq: int
    event_id: str
    leaf_index: int | None
    data: bytes


@runtime_checkable
class LeafSource(Protocol):
    """Where :func:`verify_ledger` reads a ledger from (the SQL sinks, :class:`JSONLLeaves`)."""

    def leaf_rows(self) -> Iterator[LeafRow]:
        """Every row in commit order."""
        ...

    def stored_head(self) -> tuple[str, TreeHead] | None:
        """``(origin, head)`` as stored; None when the source keeps none."""
        ...

    def stored_leaf_hashes(self) -> Iterator[tuple[int, bytes]]:
        """The stored leaf hashes ``(index, hash)``; empty when the source keeps none."""
        ...

    def checkpoint_notes(self) -> list[str]:
        """The checkpoints the source stores (unverified note texts)."""
        ...

    def stored_consistency_proof(self, old_size: int, new_size: int) -> tuple[bytes, ...] | None:
        """A consistency proof from stored nodes, or None."""
        ...

    def count_rows(self) -> int:
        """How many rows :meth:`leaf_rows` will yield (for progress)."""
        ...


class JSONLLeaves:
    """A JSONL file as a :class:`LeafSource`: leaf ``i`` is line ``i + 1``'s bytes
    without its newline (a last line without a newline is a leaf too).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "l.jsonl")
    >>> _ = open(path, "wb").write(b'{"a":1}\\n{"b":2}\\n')
    >>> [r.data for r in JSONLLeaves(path).leaf_rows()]
    [b'{"a":1}', b'{"b":2}']
    """

    __slots__ = ("path",)
    keeps_head = False

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _lines(self) -> Iterator[bytes]:
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below, lines streamed
        except OSError as exc:
            raise StorageError(
                f"cannot read the JSONL ledger {self.path}: {exc.strerror}"
            ) from None
        with f:
            for line in f:
                yield line[:-1] if line.endswith(b"\n") else line

    def leaf_rows(self) -> Iterator[LeafRow]:
        """Each line, numbered from 1 (``seq``) and 0 (``leaf_index``)."""
        for i, data in enumerate(self._lines()):
            event_id = (
                data[13:39].decode("ascii", "replace") if data.startswith(b'{"event_id":"') else ""
            )
            yield LeafRow(seq=i + 1, event_id=event_id, leaf_index=i, data=data)

    def leaves(self) -> Iterator[bytes]:
        """Each line's bytes, in order."""
        return self._lines()

    def origin_guess(self) -> str | None:
        """``agentledger/<first event id>``: the identity a JSONL log has without a
        place to store one (its first event is fixed when the file is created)."""
        for row in self.leaf_rows():
            return f"agentledger/{row.event_id}" if len(row.event_id) == 26 else None
        return None

    def stored_head(self) -> tuple[str, TreeHead] | None:
        """A JSONL file stores no tree head."""
        return None

    def stored_leaf_hashes(self) -> Iterator[tuple[int, bytes]]:
        """A JSONL file stores no leaf hashes."""
        return iter(())

    def checkpoint_notes(self) -> list[str]:
        """A JSONL file stores no checkpoints: give them to :func:`verify_ledger`."""
        return []

    def stored_consistency_proof(self, old_size: int, new_size: int) -> tuple[bytes, ...] | None:
        """No stored nodes."""
        return None

    def count_rows(self) -> int:
        """The number of lines."""
        return sum(1 for _ in self._lines())


@dataclass(slots=True)
class _Given:
    label: str
    note: str


@dataclass(slots=True)
class _Valid:
    label: str
    cp: Checkpoint


def _check_notes(
    given: Sequence[_Given], verifiers: Sequence[NoteVerifier] | None, findings: list[Finding]
) -> list[_Valid]:
    """Parse and verify each checkpoint; a finding for each that fails."""
    known = None if verifiers is None else {(v.name, v.key_id) for v in verifiers}
    valid: list[_Valid] = []
    for g in given:
        try:
            body, sigs = parse_signatures(g.note)
            parsed = parse_checkpoint_body(body)
        except IntegrityError as exc:
            findings.append(Finding(kind=FindingKind.BAD_CHECKPOINT, message=f"{g.label}: {exc}"))
            continue
        if known is None:  # signatures not checked (no keys given): roots still compared
            cp = Checkpoint(
                origin=parsed.origin,
                size=parsed.size,
                root=parsed.root,
                text=g.note,
                signers=(),
                extensions=parsed.extensions,
            )
            valid.append(_Valid(g.label, cp))
            continue
        if not any((s.name, s.key_id) in known for s in sigs):
            names = ", ".join(sorted({s.name for s in sigs})) or "nobody"
            findings.append(
                Finding(
                    kind=FindingKind.UNKNOWN_KEY,
                    message=f"{g.label} (size {parsed.size}) is signed by no trusted key "
                    f"(signed by: {names}); give the log's key with --vkey",
                    checkpoint_size=parsed.size,
                )
            )
            continue
        try:
            open_note(g.note, verifiers or ())
        except IntegrityError as exc:
            findings.append(
                Finding(
                    kind=FindingKind.BAD_CHECKPOINT,
                    message=f"{g.label} (size {parsed.size}): {exc}",
                    checkpoint_size=parsed.size,
                )
            )
            continue
        valid.append(_Valid(g.label, Checkpoint.parse(g.note, verifiers or ())))
    return valid


def verify_stored(source: object) -> VerifyResult | None:
    """:func:`verify_ledger` of ``source`` against its stored tree and checkpoints,
    without keys (signatures unchecked, roots compared), or None when ``source`` keeps
    no Merkle log (a JSONL or in-memory reader): what ``ledger report`` and ``ledger db
    check`` include."""
    if not isinstance(source, LeafSource) or not getattr(source, "keeps_head", False):
        return None
    return verify_ledger(source, None)


def log_statement(result: VerifyResult | None) -> str:
    """One sentence on a report: the log verified, not verified (and why), or absent."""
    if result is None:
        return "tamper-evident log: none (not a SQL ledger); nothing verified"
    if result.ok:
        return f"tamper-evident log {result.summary()}"
    first = result.errors[0].message
    return f"VIOLATION: tamper-evident log {result.summary()}; first: {first}"


def verify_ledger(
    source: LeafSource,
    verifiers: Iterable[NoteVerifier] | None,
    checkpoints: Iterable[str] = (),
    *,
    labels: Sequence[str] | None = None,
    progress: Callable[[int], None] | None = None,
    origin: str | None = None,
) -> VerifyResult:
    """Verify every row of ``source`` against its stored tree and the checkpoints.

    ``verifiers`` are the trusted log keys; ``None`` checks no signature (the roots of
    the stored checkpoints are still compared, e.g. for a report run without keys).
    ``checkpoints`` are signed notes from outside the ledger (``labels`` names them in
    findings, e.g. their file names); the source's stored checkpoints are checked too.
    ``origin`` is the expected log identity (default: the source's stored origin).
    ``progress(rows_done)`` is called now and then. Raises nothing for what it finds:
    each problem is a :class:`Finding`; a source that cannot be read raises
    ``StorageError``. A source that can hold its reads to one snapshot
    (``snapshot()``: PostgreSQL, where every commit moves the stored head) is read in
    one, so rows committed during the check are not taken for rows inserted outside the
    ledger.
    """
    snapshot = getattr(source, "snapshot", None)
    with snapshot() if callable(snapshot) else contextlib.nullcontext():
        return _verify_ledger(source, verifiers, checkpoints, labels, progress, origin)


def _verify_ledger(
    source: LeafSource,
    verifiers: Iterable[NoteVerifier] | None,
    checkpoints: Iterable[str],
    labels: Sequence[str] | None,
    progress: Callable[[int], None] | None,
    origin: str | None,
) -> VerifyResult:
    """:func:`verify_ledger` within the source's snapshot, when it has one."""
    keys = None if verifiers is None else list(verifiers)
    findings: list[Finding] = []
    notes = list(checkpoints)
    names = (
        list(labels) if labels is not None else [f"checkpoint #{i + 1}" for i in range(len(notes))]
    )
    given = [_Given(label, note) for label, note in zip(names, notes, strict=True)]
    given += [
        _Given(f"stored checkpoint #{i + 1}", n) for i, n in enumerate(source.checkpoint_notes())
    ]
    valid = _check_notes(given, keys, findings)
    try:
        stored = source.stored_head()
    except (TypeError, ValueError) as exc:  # a head row of the wrong types, written by hand
        stored = None
        findings.append(
            Finding(
                kind=FindingKind.HEAD,
                message=f"the stored tree head cannot be read ({exc}): the tree_head row was "
                "changed outside the ledger",
            )
        )
    if stored is None and getattr(source, "keeps_head", False) and not findings:
        findings.append(
            Finding(
                kind=FindingKind.HEAD,
                message="the ledger has no stored tree head (the tree_head row was deleted "
                "outside the ledger)",
            )
        )
    log_origin = origin or (stored[0] if stored else None)
    if log_origin is None and valid:
        # no stored identity (a JSONL file): the one its first event gives, when a
        # checkpoint names it, else the first checkpoint's
        guess = getattr(source, "origin_guess", None)
        named = guess() if callable(guess) else None
        origins = {v.cp.origin for v in valid}
        log_origin = named if named in origins else valid[0].cp.origin
    kept: list[_Valid] = []
    for v in valid:
        if log_origin is not None and v.cp.origin != log_origin:
            findings.append(
                Finding(
                    kind=FindingKind.BAD_CHECKPOINT,
                    message=f"{v.label} is for the log {v.cp.origin!r}, not this ledger "
                    f"({log_origin!r})",
                    checkpoint_size=v.cp.size,
                )
            )
        else:
            kept.append(v)
    heads = _distinct_heads(kept, findings)
    sizes = sorted(heads)
    pairs = list(itertools.pairwise(sizes))
    wanted: set[tuple[int, int]] = set()
    for a, b in pairs:
        wanted.update(consistency_nodes(a, b))
    want_roots = set(sizes)
    if stored is not None:
        want_roots.add(stored[1].size)

    erased = ErasedRows()
    scan = _scan(source, want_roots, wanted, findings, progress, erased)
    if erased.records or erased.unsigned:
        _erased_findings(source, erased, findings)
        scan.row_findings = scan.row_findings or any(f.severity == "error" for f in findings)
    n = scan.frontier.size
    root = scan.frontier.root()
    scan.roots.setdefault(n, root)  # the rows' own head (a lagging stored head is older)
    verified: list[int] = []
    suspicious = False
    for size in sizes:
        cp = heads[size]
        if size > max(n, scan.highest):
            suspicious = True
            findings.append(
                Finding(
                    kind=FindingKind.TRUNCATED,
                    message=f"the ledger has {n} leaves but checkpoint {size} was signed: "
                    f"{size - n} or more rows were cut off the end, or an old backup was "
                    "restored",
                    checkpoint_size=size,
                )
            )
        elif size > n or scan.roots.get(size) != cp.root:
            suspicious = True
            findings.append(
                Finding(
                    kind=FindingKind.MISMATCH,
                    message=f"the first {size} rows do not lead to checkpoint {size}'s root: "
                    f"a row among them was changed, deleted, reordered or inserted",
                    checkpoint_size=size,
                )
            )
        else:
            verified.append(size)
    for a, b in pairs:
        # Only when the rows vouch for the larger checkpoint is a failed proof a fork
        # (the log signed two histories); when they do not, the rows may have changed
        # (the mismatch or truncation finding says so) and the pair proves nothing.
        if b in verified and not _consistent(heads[a], heads[b], scan, n, source):
            findings.append(
                Finding(
                    kind=FindingKind.FORK,
                    message=f"checkpoints {a} and {b} are not consistent: they show two "
                    "different histories of the log (a fork)",
                    checkpoint_size=b,
                )
            )
    # where the stored head lags (a mark the log reached, as on SQLite) it may be behind
    # the rows but never ahead of them, and the rows must lead to it at its size
    lags = bool(getattr(source, "head_lags", False))
    head_ok = False
    if stored is not None:
        head = stored[1]
        head_ok = (head.size == n or (lags and head.size < n)) and scan.roots.get(
            head.size
        ) == head.root
        if not head_ok:
            suspicious = True
            cut = lags and head.size > n
            findings.append(
                Finding(
                    kind=FindingKind.HEAD,
                    message=f"the stored tree head records {head.size} leaves but the rows "
                    f"give {n}: rows were cut off the end, or an old backup was restored"
                    if cut
                    else f"the stored tree head (size {head.size}) does not match the "
                    f"rows ({n} leaves): rows or tree tables were changed outside the ledger",
                )
            )
    if head_ok:
        good = sorted({n, max(verified, default=n)})  # two queries, however many checkpoints
        suspicious = _check_stored_roots(source, good, scan.roots, findings) or suspicious
    if suspicious or scan.row_findings:
        _localize(source, findings)
    if not any(f.severity == "error" for f in findings):
        findings.extend(coverage_findings(n, verified))
    return VerifyResult(
        origin=log_origin,
        size=n,
        root=root,
        rows=scan.rows,
        checkpoints_verified=tuple(verified),
        findings=tuple(findings),
        signatures_checked=keys is not None,
    )


def _check_stored_roots(
    source: LeafSource, sizes: Sequence[int], roots: dict[int, bytes], findings: list[Finding]
) -> bool:
    """The rows verified at ``sizes``: check that the stored tree nodes (what proofs,
    roots and the next commit are computed from) lead to the same roots, from
    ``popcount(size)`` stored nodes each. True when one does not (a ``head`` finding)."""
    stored_root = getattr(source, "tree_root", None)
    if stored_root is None:
        return False
    for size in sizes:
        try:
            got = stored_root(size)
        except (IntegrityError, ValidationError, StorageError, TypeError, ValueError) as exc:
            # TypeError / ValueError: a nodes value of another type, written by hand
            problem = f"cannot give the root of size {size} ({exc})"
        else:
            if got == roots.get(size):
                continue
            problem = f"lead to another root for size {size} than the rows do"
        findings.append(
            Finding(
                kind=FindingKind.HEAD,
                message=f"the stored tree nodes (events.nodes) {problem}: they were changed "
                "outside the ledger; proofs and the next commit would use them (a commit "
                "is refused). Restore the database from a backup",
                checkpoint_size=size,
            )
        )
        return True
    return False


def coverage_findings(size: int, verified: Sequence[int]) -> list[Finding]:
    """The warnings on what the verified checkpoints (their sizes, ``verified``) leave
    uncovered of a log of ``size`` leaves: nothing signed yet, or rows after the last.

    >>> [f.kind.value for f in coverage_findings(5, [3])]
    ['uncovered']
    """
    covered = max(verified, default=0)
    if not verified and size:
        return [
            Finding(
                kind=FindingKind.NO_CHECKPOINT,
                message=f"no checkpoint covers the ledger: nothing signed its {size} rows "
                "(their tree was recomputed from them); run `ledger checkpoint`",
            )
        ]
    if covered < size:
        return [
            Finding(
                kind=FindingKind.UNCOVERED,
                message=f"rows at leaf indexes {covered}..{size - 1} ({size - covered}) are "
                "not yet covered by any checkpoint",
                leaf_index=covered,
            )
        ]
    return []


def _distinct_heads(kept: list[_Valid], findings: list[Finding]) -> dict[int, Checkpoint]:
    heads: dict[int, Checkpoint] = {}
    for v in kept:
        other = heads.get(v.cp.size)
        if other is None:
            heads[v.cp.size] = v.cp
        elif other.root != v.cp.root:
            findings.append(
                Finding(
                    kind=FindingKind.FORK,
                    message=f"two checkpoints of size {v.cp.size} with different roots "
                    f"({v.label} and another): the log showed two histories",
                    checkpoint_size=v.cp.size,
                )
            )
    return heads


@dataclass(slots=True)
class _Scan:
    frontier: Frontier
    roots: dict[int, bytes]
    nodes: dict[tuple[int, int], bytes]
    rows: int = 0
    row_findings: bool = False
    highest: int = 0  # one past the largest leaf index seen


def _batches(source: LeafSource) -> Iterator[Sequence[LeafRow]]:
    """The source's rows in lists (its own ``leaf_batches()`` when it has one)."""
    batched = getattr(source, "leaf_batches", None)
    if batched is not None:
        yield from batched()
        return
    batch: list[LeafRow] = []
    for row in source.leaf_rows():
        batch.append(row)
        if len(batch) >= 2000:
            yield batch
            batch = []
    if batch:
        yield batch


class _Fold:
    """Leaf hashes folded into the frontier, a list at a time, cut at each size whose
    root is wanted; the wanted nodes are captured on the way."""

    __slots__ = ("frontier", "keep", "scan", "stops")

    def __init__(self, scan: _Scan, want_roots: set[int], wanted: set[tuple[int, int]]) -> None:
        self.scan, self.frontier = scan, scan.frontier
        self.keep: dict[int, list[int]] = {}  # the wanted nodes, {level: indexes}
        for level, idx in wanted:
            self.keep.setdefault(level, []).append(idx)
        if 0 in want_roots:
            scan.roots[0] = EMPTY_ROOT
        self.stops = sorted(s for s in want_roots if s > 0)

    def feed(self, hashes: list[bytes]) -> None:
        frontier, stops, keep, scan = self.frontier, self.stops, self.keep, self.scan
        start = 0
        while start < len(hashes):
            room = stops[0] - frontier.size if stops else len(hashes)
            part = hashes[start : start + room] if room > 0 else hashes[start:]
            found = frontier.extend(part, keep=keep)
            if found:
                scan.nodes.update(found)
            start += len(part)
            while stops and frontier.size >= stops[0]:
                if frontier.size == stops[0]:
                    scan.roots[stops[0]] = frontier.root()
                stops.pop(0)


_ERASED_MARK = b'"erased":{'  # in every tombstone (ledger.model.erasure)
_ADMIN_MARK = b'"run_id":"' + ADMIN_RUN_PREFIX.encode()  # in every retention run's row


def _fast_scan(
    source: LeafSource,
    want_roots: set[int],
    wanted: set[tuple[int, int]],
    progress: Callable[[int], None] | None,
    erased: ErasedRows | None = None,
) -> _Scan | None:
    """The pass for the common ledger (every row in leaf order, no tombstone), over a
    source's ``prefixed_leaf_batches()``: ``(leaf index, 0x00 + stored bytes)`` rows,
    the least the fold needs. None, as soon as a row is out of order or may be a
    tombstone (or the source has no such batches): :func:`_scan` then does it all.
    The rare rows of retention runs are read by ``erased`` (a policy change is checked
    even where nothing was erased)."""
    batches = getattr(source, "prefixed_leaf_batches", None)
    if batches is None:
        return None
    erased = erased if erased is not None else ErasedRows()
    scan = _Scan(frontier=Frontier(), roots={}, nodes={})
    fold = _Fold(scan, want_roots, wanted)
    sha256, mark, admin = hashlib.sha256, _ERASED_MARK, _ADMIN_MARK
    expected = 0
    for batch in batches():
        n = len(batch)
        if [r[0] for r in batch] != list(range(expected, expected + n)):
            return None
        data = [r[1] for r in batch]
        odd = [i for i, d in enumerate(data) if mark in d or admin in d]
        if odd:
            if [i for i in odd if mark in data[i]]:
                return None
            for i in odd:
                erased.retention_record(data[i][1:], "", batch[i][0])
        fold.feed([sha256(d).digest() for d in data])
        expected += n
        if progress is not None:
            progress(expected)
    scan.rows = scan.highest = expected
    return scan


def _scan(
    source: LeafSource,
    want_roots: set[int],
    wanted: set[tuple[int, int]],
    findings: list[Finding],
    progress: Callable[[int], None] | None,
    erased: ErasedRows | None = None,
) -> _Scan:
    """The one pass over the rows, a batch at a time: when a batch's leaf indexes are
    the expected run (the common case) its leaves are hashed in one comprehension and
    folded into the frontier in one call, cut at each size whose root is wanted. The
    lean :func:`_fast_scan` is tried first."""
    erased = erased if erased is not None else ErasedRows()
    fast = _fast_scan(source, want_roots, wanted, progress, erased)
    if fast is not None:
        return fast
    erased.reset()  # the full pass reads every row again
    scan = _Scan(frontier=Frontier(), roots={}, nodes={})
    fold = _Fold(scan, want_roots, wanted)
    feed = fold.feed
    sha256 = hashlib.sha256
    records, mark, admin = erased.records, _ERASED_MARK, _ADMIN_MARK

    def leaf_of(r: Sequence[Any]) -> bytes:
        """A row's leaf: a tombstone's kept hash (tallied by ``erased``), else computed."""
        data = r[3]
        if admin in data:
            erased.retention_record(data, r[1], r[2])
        if records and r[1] in records:
            erased.see(r[1], data, r[2])
        kept = erased.leaf(r[2], data, r[1]) if mark in data else None
        return kept if kept is not None else sha256(b"\x00" + data).digest()

    named = 0
    rows = 0
    expected = 0  # the leaf index the next row should have

    for batch in _batches(source):
        rows += len(batch)
        if (
            batch[0][2] == expected
            and batch[-1][2] == expected + len(batch) - 1
            and [r[2] for r in batch] == list(range(expected, expected + len(batch)))
        ):
            feed(
                [
                    leaf_of(r)
                    if records or mark in r[3] or admin in r[3]
                    else sha256(b"\x00" + r[3]).digest()
                    for r in batch
                ]
            )
            expected += len(batch)
        else:
            hashes: list[bytes] = []
            for row in batch:
                index = row[2]
                if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
                    # a leaf index of another type (SQLite keeps whatever an UPDATE gave)
                    if named < _MAX_NAMED:
                        findings.append(_not_an_index(LeafRow(*row)))
                        named += 1
                    scan.row_findings = True
                    continue
                if index != expected:
                    if named < _MAX_NAMED:
                        findings.append(_index_finding(LeafRow(*row), expected))
                        named += 1
                    scan.row_findings = True
                    if index is None:
                        continue  # a row the ledger never committed is left out
                    scan.highest = max(scan.highest, expected)
                expected = index + 1
                hashes.append(leaf_of(row))
            feed(hashes)
        if progress is not None:
            progress(rows)
    scan.highest = max(scan.highest, expected)
    if named >= _MAX_NAMED:
        findings.append(
            Finding(
                kind=FindingKind.UNREADABLE,
                message=f"more than {_MAX_NAMED} rows are out of place; only the first "
                f"{_MAX_NAMED} are named",
            )
        )
    scan.rows = rows
    if progress is not None:
        progress(rows)
    return scan


def _place(row: LeafRow) -> str:
    """How a finding names a row: its ``seq`` and, when it has one, its event id."""
    return f"row seq={row.seq}" + (f" (event {row.event_id})" if row.event_id else "")


def _not_an_index(row: LeafRow) -> Finding:
    where = _place(row)
    return Finding(
        kind=FindingKind.CHANGED,
        message=f"{where} holds the leaf index {row.leaf_index!r}, not a leaf index: its row "
        "was changed outside the ledger",
        seq=row.seq,
        event_id=row.event_id or None,
    )


def _index_finding(row: LeafRow, expected: int) -> Finding:
    where = _place(row)
    index = row.leaf_index
    if index is None:
        return Finding(
            kind=FindingKind.INSERTED,
            message=f"{where} has no leaf index: it was inserted outside the ledger",
            seq=row.seq,
            event_id=row.event_id or None,
        )
    if index > expected:
        gap = index - expected
        span = f"leaf {expected}" if gap == 1 else f"leaves {expected}..{index - 1}"
        return Finding(
            kind=FindingKind.DELETED,
            message=f"{span} ({gap} row(s)) missing before {where}: deleted",
            seq=row.seq,
            event_id=row.event_id or None,
            leaf_index=expected,
        )
    return Finding(
        kind=FindingKind.REORDERED,
        message=f"{where} is leaf {index} but comes after leaf {expected - 1}: rows were "
        "reordered, or a leaf index was reused by an inserted row",
        seq=row.seq,
        event_id=row.event_id or None,
        leaf_index=index,
    )


def _consistent(a: Checkpoint, b: Checkpoint, scan: _Scan, n: int, source: LeafSource) -> bool:
    """True when some consistency proof (from the rows, else the stored nodes) links
    ``a`` to ``b``."""
    proofs: list[Sequence[bytes]] = []
    if b.size <= n:
        with contextlib.suppress(KeyError):  # a node the scan did not reach
            proofs.append(consistency_path(a.size, b.size, _NodeDict(scan.nodes)))
    try:
        stored = source.stored_consistency_proof(a.size, b.size)
    except (TypeError, ValueError):  # stored nodes of another type, written by hand
        stored = None
    if stored is not None:
        proofs.append(stored)
    if not proofs:
        return True  # nothing to judge by: the truncation finding covers it
    for proof in proofs:
        try:
            verify_consistency(a.size, b.size, a.root, b.root, proof)
            return True
        except IntegrityError:
            continue
    return False


class _NodeDict:
    """Subtree hashes from the nodes captured during the scan."""

    __slots__ = ("_nodes",)

    def __init__(self, nodes: dict[tuple[int, int], bytes]) -> None:
        self._nodes = nodes

    def subtree(self, start: int, end: int) -> bytes:
        return subtree_from_nodes(start, end, lambda level, idx: self._nodes[(level, idx)])


def _localize(source: LeafSource, findings: list[Finding]) -> None:
    """Second pass, only when something is wrong: compare each row's leaf with the leaf
    stored when it was committed, to name changed, moved and deleted rows."""
    try:
        stored = dict(source.stored_leaf_hashes())
    except (StorageError, TypeError, ValueError) as exc:
        findings.append(
            Finding(
                kind=FindingKind.UNREADABLE,
                message=f"the stored leaf hashes cannot be read ({exc}), so the rows are not "
                "named one by one: events.nodes was changed outside the ledger",
            )
        )
        return
    if not stored:
        return
    where_is = {h: i for i, h in stored.items()}
    seen: set[int] = set()
    named = 0
    for raw in source.leaf_rows():
        row = LeafRow(*raw)
        index = row.leaf_index
        if index is None:
            continue
        seen.add(index)
        h = ErasedRows().leaf(index, row.data) or leaf_hash(row.data)
        committed = stored.get(index)
        if committed == h or named >= _MAX_NAMED:
            continue
        where = _place(row)
        other = where_is.get(h)
        if committed is None:
            finding = Finding(
                kind=FindingKind.INSERTED,
                message=f"{where} claims leaf {index}, for which the ledger keeps no leaf "
                "hash: it was inserted outside the ledger, or its stored nodes were removed",
                seq=row.seq,
                event_id=row.event_id or None,
                leaf_index=index,
            )
        elif other is not None and other != index:
            finding = Finding(
                kind=FindingKind.REORDERED,
                message=f"{where} at leaf {index} holds the bytes committed as leaf {other}: "
                "rows were reordered, or renumbered after a deletion",
                seq=row.seq,
                event_id=row.event_id or None,
                leaf_index=index,
            )
        else:
            finding = Finding(
                kind=FindingKind.CHANGED,
                message=f"{where}: its bytes changed after it was committed as leaf {index} "
                "(whatever its content hash says)",
                seq=row.seq,
                event_id=row.event_id or None,
                leaf_index=index,
            )
        findings.append(finding)
        named += 1
    missing = sorted(set(stored) - seen)
    if missing and not any(f.kind is FindingKind.DELETED for f in findings):
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        findings.append(
            Finding(
                kind=FindingKind.DELETED,
                message=f"{len(missing)} committed leaf/leaves have no row (deleted): {shown}",
                leaf_index=missing[0],
            )
        )


def _erased_findings(source: LeafSource, erased: ErasedRows, findings: list[Finding]) -> None:
    """The erased-row rule: each tombstone accounted for by its erasure record (else a
    ``changed`` finding), and one ``erased`` (info) finding per record."""
    for subject, message, index in erased.problems(source.stored_leaf_hashes()):
        findings.append(
            Finding(
                kind=FindingKind.CHANGED,
                message=message,
                event_id=subject or None,
                leaf_index=index if index >= 0 else None,
            )
        )
    for record, rows, first in erased.summaries():
        findings.append(
            Finding(
                kind=FindingKind.ERASED,
                message=f"{rows} row(s) erased (hash kept) by erasure record {record}, "
                f"from leaf {first}",
                event_id=record,
                leaf_index=first if first >= 0 else None,
                rows=rows,
            )
        )

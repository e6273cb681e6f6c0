"""The report's check of the tamper-evident log: the window's rows, bound to the stored
tree head and checkpoints, in O(window + log n).

>>> check = LeafRange(start=0)                         # doctest: +SKIP
>>> for row in window_rows: check.row(index, data, nodes)  # doctest: +SKIP
>>> result, scope = check.result(reader)               # doctest: +SKIP

A SQL ledger keeps with each row the hashes of the tree nodes its leaf completes
(``events.nodes``, :mod:`ledger.sinks.tree`). The report's one pass over the window's
rows (a contiguous stretch of leaves ``a .. b - 1``, every row committed between the
window's first and last) recomputes each row's leaf from its stored bytes and every node
it completes, starting from the stored compact range of the leaves before ``a``
(``popcount(a)`` stored nodes), and compares them with the row's stored nodes. It then
folds the tree's root from the recomputed range and the stored nodes after it
(``O(log n)`` of them) and compares it with the stored head; each stored checkpoint is
then checked against the head by a consistency proof from the stored nodes. When all of
this holds, every row of the window is the one committed at its leaf, in a tree whose
root is the stored head and extends each stored checkpoint: what a full rebuild proves
of those rows, at the cost of the window instead of the ledger.

Rows outside the window are not re-read: ``ledger verify`` rebuilds the whole log (and
the report says so, :meth:`LogScope.statement`). Anything that does not fit -- a leaf
index out of order, a row without stored nodes, an erased row (its leaf is the kept
hash), a recomputed node or root that differs, a checkpoint that does not check, and an
erasure record in the window that erased rows -- makes the report run the full
:func:`~ledger.integrity.verify.verify_ledger` instead, which names what is wrong. An
erasure made in the window is judged so against the policy and the holds that stood in
the log when it was made (its tombstones, mostly older rows outside the window, are
found by the full pass), as is one whose rows were put back since; a report of a period
in which something was erased therefore costs a pass over the ledger.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from ledger.errors import IntegrityError, LedgerError
from ledger.integrity.checkpoint import parse_checkpoint_body
from ledger.integrity.merkle import (
    EMPTY_ROOT,
    Frontier,
    node_hash,
    root_from_nodes,
    verify_consistency,
)
from ledger.integrity.note import parse_signatures
from ledger.integrity.verify import (
    VerifyResult,
    coverage_findings,
    verify_ledger,
)
from ledger.model.erasure import ERASE_TOOL, record_summary

__all__ = ["LeafRange", "LogScope", "window_log_check"]

log = logging.getLogger(__name__)

_ERASED = b'"erased":{'
_ERASE_RECORD = b'"tool":"' + ERASE_TOOL.encode() + b'"'


@dataclass(frozen=True, slots=True, kw_only=True)
class LogScope:
    """Which rows the report's log check re-read: ``rows`` rows, leaves ``first_leaf``
    to ``last_leaf`` (inclusive; None when the window holds none), of a tree of ``size``
    leaves. ``whole`` is True when they are every row of the ledger."""

    rows: int
    first_leaf: int | None
    last_leaf: int | None
    size: int

    @property
    def whole(self) -> bool:
        last = -1 if self.last_leaf is None else self.last_leaf
        return self.first_leaf in (0, None) and last + 1 >= self.size

    def statement(self) -> str:
        """One sentence for the report's integrity section."""
        if self.whole and self.rows:
            leaves = "leaf" if self.rows == 1 else "leaves"
            return f"every row re-read ({self.rows} {leaves} recomputed)"
        if not self.rows:
            return (
                "no row in the window: the stored head and checkpoints were checked; "
                "`ledger verify` rebuilds the whole log"
            )
        return (
            f"the window's {self.rows} rows re-read (leaves {self.first_leaf}.."
            f"{self.last_leaf} recomputed and folded with the stored nodes into the "
            f"stored head of {self.size} leaves); rows outside the window were not "
            "re-read: `ledger verify` rebuilds the whole log"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "first_leaf": self.first_leaf,
            "last_leaf": self.last_leaf,
            "size": self.size,
            "whole": self.whole,
            "statement": self.statement(),
        }


class LeafRange:
    """Recompute the leaves ``start, start + 1, ...`` and the nodes they complete while
    a pass reads their rows (:meth:`row`), from the stored compact range before
    ``start`` (``prefix``)."""

    __slots__ = ("_frontier", "erasures", "expected", "failed", "rows", "start")

    def __init__(self, start: int, prefix: Frontier) -> None:
        self.start = start
        self.expected = start
        self.rows = 0
        self.failed = ""
        self._frontier = prefix
        self.erasures: list[bytes] = []  # the rows that may be erasure records (rare)

    def row(self, index: Any, data: bytes, nodes: Any, leaf: bytes | None = None) -> None:
        """One row of the stretch, in commit order (``leaf``: its leaf hash, when the
        caller computed it already)."""
        self.rows += 1
        if self.failed:
            return
        if index != self.expected or nodes is None or _ERASED in data:
            self.failed = (
                f"leaf index {index!r} where {self.expected} was expected"
                if index != self.expected
                else f"leaf {index} has no stored nodes"
                if nodes is None
                else f"leaf {index} is an erased row"
            )
            return
        if _ERASE_RECORD in data:
            self.erasures.append(data)
        if leaf is None:
            leaf = hashlib.sha256(b"\x00" + data).digest()
        owned = self._frontier.append_owned(leaf)
        if owned != nodes:
            self.failed = f"leaf {index}: its bytes or stored nodes differ from the recomputed"
            return
        self.expected += 1

    def root(self, size: int, stored: dict[tuple[int, int], bytes]) -> bytes:
        """The root of ``size`` leaves: the recomputed range, the stored nodes after it
        (``stored``, from :meth:`after_keys`), nodes straddling its end recomputed."""
        held = {(level, index): h for level, index, h in self._frontier.nodes}
        end = self.expected

        def node(level: int, index: int) -> bytes:
            found = held.get((level, index))
            if found is not None:
                return found
            first = index << level
            if first < end <= first + (1 << level) - 1:  # straddles the range's end
                return node_hash(node(level - 1, 2 * index), node(level - 1, 2 * index + 1))
            return stored[(level, index)]

        return root_from_nodes(size, node)

    def after_keys(self, size: int) -> list[tuple[int, int]]:
        """The stored nodes :meth:`root` reads (those after the recomputed range)."""
        wanted: list[tuple[int, int]] = []

        class _Record(dict[tuple[int, int], bytes]):
            def __missing__(self, key: tuple[int, int]) -> bytes:
                wanted.append(key)
                return bytes(32)

        self.root(size, _Record())
        return wanted


def _prefix(reader: Any, start: int) -> Frontier:
    """The stored compact range of the leaves before ``start``."""
    from ledger.integrity.merkle import root_nodes

    if start == 0:
        return Frontier()
    found = _nodes(reader, root_nodes(start))
    return Frontier.from_nodes(start, lambda level, index: found[(level, index)])


def _nodes(reader: Any, keys: list[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    from ledger.sinks.tree import fetch_nodes

    if not keys:
        return {}
    with reader._reading() as conn:
        found: dict[tuple[int, int], bytes] = fetch_nodes(conn, reader._trees, keys)
    missing = [k for k in keys if k not in found]
    if missing:
        raise IntegrityError(f"the stored tree has no node {missing[0]}")
    return found


def start_range(reader: Any, start: int) -> LeafRange:
    """A :class:`LeafRange` from leaf ``start`` of ``reader``'s stored tree; one marked
    ``failed`` (the report then runs the full check) when the stored nodes before
    ``start`` are not all there or do not make a range."""
    try:
        return LeafRange(start, _prefix(reader, start))
    except (LedgerError, KeyError, ValueError) as exc:
        failed = LeafRange(start, Frontier())
        failed.failed = f"the stored nodes before leaf {start}: {exc}"
        return failed


def _full(reader: Any, why: str) -> tuple[VerifyResult, None]:
    log.info("compliance report: the log check rebuilds every row (%s)", why)
    return verify_ledger(reader, None), None


def window_log_check(
    reader: Any, checked: LeafRange | None, head: tuple[str, Any] | None
) -> tuple[VerifyResult, LogScope | None]:
    """The log check of the report from the window's recomputed stretch ``checked``
    (None: the window holds no row) and the stored ``head`` read before the pass;
    ``(full verify_ledger result, None)`` when anything does not fit (see the module
    docstring)."""
    if head is None:
        return _full(reader, "no stored head")
    origin, tree = head
    size, root = tree.size, tree.root
    if checked is None:
        checked = start_range(reader, size)
    if checked.failed:
        return _full(reader, checked.failed)
    if checked.expected > size:
        return _full(reader, "rows beyond the stored head")
    if _erasing_records(checked):
        return _full(reader, "an erasure record in the window, judged with its tombstones")
    try:
        if checked.root(size, _nodes(reader, checked.after_keys(size))) != root:
            return _full(reader, "the recomputed root differs from the stored head")
        verified = _checkpoints(reader, origin, size, root)
    except (LedgerError, KeyError) as exc:
        return _full(reader, str(exc))
    if verified is None:
        return _full(reader, "a stored checkpoint does not check")
    findings = coverage_findings(size, verified)
    scope = LogScope(
        rows=checked.expected - checked.start,
        first_leaf=checked.start if checked.expected > checked.start else None,
        last_leaf=checked.expected - 1 if checked.expected > checked.start else None,
        size=size,
    )
    result = VerifyResult(
        origin=origin,
        size=size,
        root=root,
        rows=scope.rows,
        checkpoints_verified=tuple(verified),
        findings=tuple(findings),
        signatures_checked=False,  # the stored checkpoints' roots, as verify_stored
    )
    return result, scope


def _erasing_records(checked: LeafRange) -> bool:
    """True when ``checked`` holds an erasure record that erased rows: whether the
    policy and holds of its time allowed it, and whether its tombstones are still there,
    is known only from its tombstones, which the full check finds and judges."""
    for data in checked.erasures:
        summary = record_summary(data)
        if summary is not None and summary.events > 0:
            return True
    return False


def _checkpoints(reader: Any, origin: str, size: int, root: bytes) -> list[int] | None:
    """The sizes of the stored checkpoints, each consistent with the head ``(size,
    root)`` by a proof from the stored nodes; None when one is not (or is malformed, of
    another log, or larger than the tree)."""
    verified: list[int] = []
    for note in reader.checkpoint_notes():
        try:
            body, _ = parse_signatures(note)
            cp = parse_checkpoint_body(body)
        except IntegrityError:
            return None
        if cp.origin != origin or cp.size > size:
            return None
        if cp.size == size:
            if cp.root != root:
                return None
        elif not cp.size:
            if cp.root != EMPTY_ROOT:
                return None
        else:
            proof = reader.stored_consistency_proof(cp.size, size)
            if proof is None:
                return None
            try:
                verify_consistency(cp.size, size, cp.root, root, proof)
            except IntegrityError:
                return None
        verified.append(cp.size)
    return sorted(set(verified))

"""The RFC 9162 Merkle tree: hashes, proof verification and proof generation.

The tree is the one of RFC 9162 §2.1 (the same as RFC 6962): a leaf hash is
``SHA-256(0x00 || data)``, an inner node ``SHA-256(0x01 || left || right)``, the tree of
``n`` leaves splits at ``k``, the largest power of two below ``n``, and the empty tree's
root is ``SHA-256(b"")``::

    >>> leaf_hash(b"").hex()
    '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d'
    >>> root_hash([]).hex()
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'

Verification (:func:`verify_inclusion`, :func:`verify_consistency`) follows the
algorithms of RFC 9162 §2.1.3.2 and §2.1.4.2 step by step, after checking that the proof
has exactly the length the sizes call for; both raise :class:`IntegrityError` with the
precise reason.

Generation is written once, in :func:`inclusion_path` and :func:`consistency_path`, over
a *hash source*: anything with ``subtree(start, end)`` (:class:`SubtreeHashes`). Every
subtree they ask for is a node of the RFC 9162 tree shape: ``start`` is a multiple of a
power of two ``2**h >= end - start``, and the subtree is either *complete* (``end - start
== 2**h``) or ends at the tree's right border. A store that keeps each complete aligned
node once, keyed by ``(level, index)`` for leaves ``[index * 2**level, (index + 1) *
2**level)`` -- the nodes :meth:`Frontier.append` reports -- serves every such subtree from
a few lookups (:func:`subtree_from_nodes` folds the complete nodes of a border subtree
right to left). :class:`NodeHashes` wraps a ``node(level, index)`` lookup into a hash
source; :class:`MemoryTree` is the in-memory store, built the same way. A database that
prefers one query per proof asks :func:`inclusion_nodes`, :func:`consistency_nodes` or
:func:`root_nodes` which ``(level, index)`` keys to fetch, then builds the proof from a
dictionary of the rows.

Cost, for a tree of ``n`` leaves (``L = ceil(log2 n)``): an inclusion or consistency
path has at most ``L`` hashes, at most one of them a border subtree; from stored complete
nodes it takes at most ``2 * L + 2`` node lookups (usually about ``L``), and a root takes
``popcount(n)`` lookups.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Final, Protocol, runtime_checkable

from ledger.errors import IntegrityError, ValidationError

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "Frontier",
    "MemoryTree",
    "Node",
    "NodeHashes",
    "NodeLookup",
    "SubtreeHashes",
    "consistency_nodes",
    "consistency_path",
    "consistency_proof_size",
    "inclusion_nodes",
    "inclusion_path",
    "inclusion_proof_size",
    "leaf_hash",
    "node_hash",
    "node_owner",
    "root_from_nodes",
    "root_hash",
    "root_nodes",
    "subtree_from_nodes",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE: Final = 32
"""Bytes in every hash of the tree (SHA-256)."""

EMPTY_ROOT: Final = hashlib.sha256(b"").digest()
"""The root of the empty tree, ``SHA-256(b"")``."""

_sha256 = hashlib.sha256
_LEAF: Final = b"\x00"
_NODE: Final = b"\x01"

Node = tuple[int, int, bytes]
"""A complete aligned subtree: ``(level, index, hash)``, covering leaves
``[index * 2**level, (index + 1) * 2**level)``."""

NodeLookup = Callable[[int, int], bytes]
"""``node(level, index) -> hash`` of a stored complete aligned subtree."""


# --- hashing -------------------------------------------------------------------------


def leaf_hash(data: bytes) -> bytes:
    """Return the leaf hash of ``data``: ``SHA-256(0x00 || data)``, 32 bytes.

    >>> leaf_hash(bytes.fromhex("00")).hex()
    '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7'
    """
    return _sha256(_LEAF + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Return the inner node hash ``SHA-256(0x01 || left || right)``.

    >>> node_hash(leaf_hash(b""), leaf_hash(b"\\x00")).hex()
    'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125'
    """
    return _sha256(_NODE + left + right).digest()


def _split(width: int) -> int:
    """The largest power of two strictly below ``width`` (``width >= 2``)."""
    return 1 << ((width - 1).bit_length() - 1)


def root_hash(leaf_hashes: Sequence[bytes]) -> bytes:
    """Return the RFC 9162 Merkle tree hash over ``leaf_hashes`` (already leaf-hashed).

    The empty tree's root is ``SHA-256(b"")``. Runs in one pass with a stack of at most
    ``log2 n`` perfect subtrees (the :class:`Frontier`), ``n - 1`` node hashes.

    >>> leaves = [leaf_hash(bytes.fromhex(h)) for h in ("", "00", "10", "2021",
    ...           "3031", "40414243", "5051525354555657",
    ...           "606162636465666768696a6b6c6d6e6f")]
    >>> root_hash(leaves).hex()
    '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328'
    >>> root_hash(leaves[:1]) == leaves[0]
    True
    """
    frontier = Frontier()
    for h in leaf_hashes:
        frontier.push(h)
    return frontier.root()


# --- verification (RFC 9162 §2.1.3.2 and §2.1.4.2) -----------------------------------


def inclusion_proof_size(index: int, size: int) -> int:
    """Return how many hashes the inclusion proof of leaf ``index`` in a tree of ``size``
    leaves has (``0 <= index < size``).

    The path splits where the paths to ``index`` and to ``size - 1`` meet: below, one
    sibling per level (``inner``); above, one left sibling per set bit (``border``).

    >>> [inclusion_proof_size(i, 5) for i in range(5)]
    [3, 3, 3, 3, 1]
    """
    if not 0 <= index < size:
        raise ValidationError(f"leaf index {index} is not in a tree of size {size}")
    inner = (index ^ (size - 1)).bit_length()
    return inner + (index >> inner).bit_count()


def consistency_proof_size(size1: int, size2: int) -> int:
    """Return how many hashes the consistency proof from ``size1`` to ``size2`` has.

    Zero when ``size1 == 0`` or ``size1 == size2``; otherwise the inclusion path of leaf
    ``size1 - 1`` in the tree of ``size2`` leaves, started at the level of the largest
    complete subtree ending at ``size1``, plus that subtree's own hash unless it is the
    whole old tree (``size1`` a power of two).

    >>> consistency_proof_size(1, 8), consistency_proof_size(6, 8), consistency_proof_size(3, 3)
    (3, 3, 0)
    """
    if not 0 <= size1 <= size2:
        raise ValidationError(f"no consistency proof from size {size1} to size {size2}")
    if size1 == 0 or size1 == size2:
        return 0
    last = size1 - 1
    inner = (last ^ (size2 - 1)).bit_length()
    border = (last >> inner).bit_count()
    shift = (size1 & -size1).bit_length() - 1  # trailing zero bits of size1
    seed = 0 if size1 == 1 << shift else 1
    return seed + inner - shift + border


def _check_hash(what: str, value: object) -> None:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise IntegrityError(f"{what} is a {type(value).__name__}, not a 32-byte SHA-256 hash")
    if len(value) != HASH_SIZE:
        raise IntegrityError(f"{what} is {len(value)} bytes, not a {HASH_SIZE}-byte SHA-256 hash")


def _check_hashes(what: str, proof: Sequence[bytes]) -> None:
    for i, h in enumerate(proof):
        if not isinstance(h, bytes) or len(h) != HASH_SIZE:
            _check_hash(f"{what} hash {i}", h)


def _check_size(what: str, value: object) -> int:
    """An integer (a tree size or leaf index; not a bool, str or float), else IntegrityError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise IntegrityError(f"{what} must be an integer, not {value!r}")
    return value


def _check_root(what: str, value: object) -> None:
    """A root is bytes (its length is left to the comparison: RFC 9162 vectors of equal
    sizes compare roots that are not hashes)."""
    if not isinstance(value, bytes | bytearray | memoryview):
        raise IntegrityError(f"{what} is a {type(value).__name__}, not a 32-byte SHA-256 hash")


def _proof_hashes(what: str, proof: object) -> Sequence[bytes]:
    """The proof as a sequence of 32-byte hashes (any iterable of them), else IntegrityError."""
    if isinstance(proof, list | tuple):
        hashes: Sequence[Any] = proof
    elif isinstance(proof, Iterable) and not isinstance(
        proof, str | bytes | bytearray | memoryview
    ):
        hashes = tuple(proof)
    else:
        raise IntegrityError(
            f"{what} must be a sequence of 32-byte hashes, not a {type(proof).__name__}"
        )
    _check_hashes(what, hashes)
    return hashes


def verify_inclusion(
    leaf_hash: bytes, index: int, tree_size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``tree_size`` leaves whose
    root is ``root``; raise :class:`IntegrityError` saying why not.

    The proof must have exactly :func:`inclusion_proof_size` hashes of 32 bytes; then
    RFC 9162 §2.1.3.2 runs as written.

    >>> tree = MemoryTree.of(leaf_hash(bytes([i])) for i in range(5))
    >>> proof = tree.inclusion_proof(2)
    >>> verify_inclusion(tree.leaf(2), 2, 5, proof, tree.root())
    >>> verify_inclusion(tree.leaf(2), 3, 5, proof, tree.root())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ledger.errors.IntegrityError: inclusion proof for leaf 3 of tree size 5 does not lead to ...
    """
    index = _check_size("inclusion proof: leaf index", index)
    tree_size = _check_size("inclusion proof: tree size", tree_size)
    if index < 0 or index >= tree_size:
        raise IntegrityError(
            f"inclusion proof: leaf index {index} is not in a tree of size {tree_size}"
        )
    _check_hash("leaf hash", leaf_hash)
    _check_root("root", root)
    proof = _proof_hashes("inclusion proof", proof)
    inner = (index ^ (tree_size - 1)).bit_length()
    want = inner + (index >> inner).bit_count()
    if len(proof) != want:
        raise IntegrityError(
            f"inclusion proof for leaf {index} of tree size {tree_size} has {len(proof)}"
            f" hashes; it must have {want}"
        )
    sha256 = _sha256
    fn = index
    sn = tree_size - 1
    r = leaf_hash
    for p in proof:
        if sn == 0:  # unreachable after the length check; kept as the RFC states it
            raise IntegrityError("inclusion proof is longer than the path to the root")
        if fn & 1 or fn == sn:
            r = sha256(_NODE + p + r).digest()
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = sha256(_NODE + r + p).digest()
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise IntegrityError("inclusion proof is shorter than the path to the root")
    if r != root:
        _check_hashes("inclusion proof", proof)
        raise IntegrityError(
            f"inclusion proof for leaf {index} of tree size {tree_size} does not lead to"
            " the expected root"
        )


def verify_consistency(
    size1: int, size2: int, root1: bytes, root2: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree of ``size2`` leaves with root ``root2`` extends the tree of
    ``size1`` leaves with root ``root1``; raise :class:`IntegrityError` saying why not.

    For ``0 < size1 < size2`` the proof must have exactly :func:`consistency_proof_size`
    hashes of 32 bytes; then RFC 9162 §2.1.4.2 runs as written. The edge cases, which
    the RFC leaves out:

    - ``size1 > size2``: refused (a log never shrinks).
    - ``size1 == 0``: ``root1`` must be the empty tree's root ``SHA-256(b"")`` and the
      proof empty; every tree extends the empty tree, so ``root2`` is only checked to be
      a 32-byte hash (or, when ``size2 == 0`` too, to equal ``root1``).
    - ``size1 == size2 > 0``: the proof must be empty and the two roots identical.

    >>> tree = MemoryTree.of(leaf_hash(bytes([i])) for i in range(7))
    >>> verify_consistency(3, 7, tree.root(3), tree.root(7), tree.consistency_proof(3, 7))
    >>> verify_consistency(3, 7, tree.root(4), tree.root(7), tree.consistency_proof(3, 7))
    Traceback (most recent call last):
    ...
    ledger.errors.IntegrityError: consistency proof from size 3 to size 7 does not match the ...
    """
    size1 = _check_size("consistency proof: old size", size1)
    size2 = _check_size("consistency proof: new size", size2)
    if size1 < 0:
        raise IntegrityError(f"consistency proof: old size {size1} is negative")
    if size2 < size1:
        raise IntegrityError(
            f"consistency: tree size {size2} cannot follow size {size1} (a log only grows)"
        )
    _check_root("old root", root1)
    _check_root("new root", root2)
    proof = _proof_hashes("consistency proof", proof)
    if size1 == 0:
        if proof:
            raise IntegrityError(
                f"consistency proof from the empty tree must be empty, not {len(proof)} hashes"
            )
        if root1 != EMPTY_ROOT:
            raise IntegrityError("the root of a tree of size 0 must be SHA-256 of nothing")
        if size2 == 0:
            if root2 != root1:
                raise IntegrityError("the root of a tree of size 0 must be SHA-256 of nothing")
        else:
            _check_hash("new root", root2)
        return
    if size1 == size2:
        if proof:
            raise IntegrityError(
                f"consistency proof between equal sizes must be empty, not {len(proof)} hashes"
            )
        if root1 != root2:
            raise IntegrityError(f"two different roots for the same tree size {size1}")
        return
    want = consistency_proof_size(size1, size2)
    if len(proof) != want:
        raise IntegrityError(
            f"consistency proof from size {size1} to size {size2} has {len(proof)} hashes;"
            f" it must have {want}"
        )
    sha256 = _sha256
    path: Sequence[bytes] = proof
    if size1 & (size1 - 1) == 0:  # an exact power of 2: the old root starts the path
        path = [root1, *proof]
    fn = size1 - 1
    sn = size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:  # unreachable after the length check; kept as the RFC states it
            raise IntegrityError("consistency proof is longer than the path to the root")
        if fn & 1 or fn == sn:
            fr = sha256(_NODE + c + fr).digest()
            sr = sha256(_NODE + c + sr).digest()
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = sha256(_NODE + sr + c).digest()
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise IntegrityError("consistency proof is shorter than the path to the root")
    if fr != root1:
        raise IntegrityError(
            f"consistency proof from size {size1} to size {size2} does not match the old root"
        )
    if sr != root2:
        raise IntegrityError(
            f"consistency proof from size {size1} to size {size2} does not match the new root"
        )


# --- generation: the one place proofs are built --------------------------------------


@runtime_checkable
class SubtreeHashes(Protocol):
    """A hash source: the RFC 9162 hash of leaves ``[start, end)``.

    :func:`inclusion_path`, :func:`consistency_path` and :func:`root_from_nodes` only ask
    for subtrees of the tree shape (``start`` a multiple of a power of two at least
    ``end - start``), complete or ending at the right border of the tree.
    """

    def subtree(self, start: int, end: int) -> bytes:
        """Return the hash of leaves ``[start, end)`` (``start < end``)."""
        ...


def inclusion_path(index: int, size: int, hashes: SubtreeHashes) -> list[bytes]:
    """Return the inclusion proof (RFC 9162 §2.1.3.1) of leaf ``index`` in the tree of
    ``size`` leaves, asking ``hashes`` for one subtree per level: at most
    ``ceil(log2 size)`` requests, each a complete aligned subtree except at most one
    that ends at ``size``.

    >>> tree = MemoryTree.of(leaf_hash(bytes([i])) for i in range(8))
    >>> len(inclusion_path(5, 8, tree)), inclusion_path(0, 1, tree)
    (3, [])
    """
    if not 0 <= index < size:
        raise ValidationError(f"leaf index {index} is not in a tree of size {size}")
    path: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        mid = start + _split(end - start)
        if index < mid:
            path.append(hashes.subtree(mid, end))
            end = mid
        else:
            path.append(hashes.subtree(start, mid))
            start = mid
    path.reverse()
    return path


def consistency_path(old: int, new: int, hashes: SubtreeHashes) -> list[bytes]:
    """Return the consistency proof (RFC 9162 §2.1.4.1) from the tree of ``old`` leaves
    to the tree of ``new`` leaves; empty when ``old`` is 0 or equals ``new``.

    Asks ``hashes`` for one subtree per level of the new tree, plus the old tree's last
    complete subtree when ``old`` is not a power of two: at most ``ceil(log2 new) + 1``
    requests, all complete aligned subtrees except at most one that ends at ``new``.

    >>> tree = MemoryTree.of(leaf_hash(bytes([i])) for i in range(8))
    >>> len(consistency_path(6, 8, tree)), consistency_path(0, 8, tree)
    (3, [])
    """
    if not 0 <= old <= new:
        raise ValidationError(f"no consistency proof from size {old} to size {new}")
    if old == 0 or old == new:
        return []
    path: list[bytes] = []
    start, end = 0, new
    whole_old_tree = True  # RFC 9162 SUBPROOF's flag b
    while end != old:
        mid = start + _split(end - start)
        if old <= mid:
            path.append(hashes.subtree(mid, end))
            end = mid
        else:
            path.append(hashes.subtree(start, mid))
            start = mid
            whole_old_tree = False
    if not whole_old_tree:
        path.append(hashes.subtree(start, end))
    path.reverse()
    return path


def subtree_from_nodes(start: int, end: int, node: NodeLookup) -> bytes:
    """Return the hash of leaves ``[start, end)`` from stored complete aligned nodes.

    A complete aligned range is one lookup; otherwise the range splits the RFC way
    (left part of the largest power of two below its width) and the parts fold right to
    left. For a range of the tree shape (``start`` a multiple of a power of two at least
    the width) that is ``popcount(end - start)`` lookups; other ranges are answered too,
    with more lookups.

    >>> tree = MemoryTree.of(leaf_hash(bytes([i])) for i in range(6))
    >>> subtree_from_nodes(0, 6, tree.node) == tree.root()
    True
    """
    width = end - start
    if width <= 0:
        raise ValidationError(f"empty or reversed leaf range [{start}, {end})")
    if width & (width - 1) == 0 and start % width == 0:
        level = width.bit_length() - 1
        return node(level, start >> level)
    mid = start + _split(width)
    return node_hash(subtree_from_nodes(start, mid, node), subtree_from_nodes(mid, end, node))


def root_from_nodes(size: int, node: NodeLookup) -> bytes:
    """Return the root of the first ``size`` leaves from stored complete aligned nodes,
    in ``popcount(size)`` lookups (the empty tree needs none).

    >>> tree = MemoryTree.of(leaf_hash(i.to_bytes(2, "big")) for i in range(300))
    >>> lookups = []
    >>> def node(level, index):
    ...     lookups.append((level, index))
    ...     return tree.node(level, index)
    >>> root_from_nodes(300, node) == tree.root(), lookups
    (True, [(8, 0), (5, 8), (3, 36), (2, 74)])
    """
    if size < 0:
        raise ValidationError(f"tree size {size} is negative")
    if size == 0:
        return EMPTY_ROOT
    return subtree_from_nodes(0, size, node)


class _NodeRecorder:
    """A node lookup that records what it is asked for and answers a dummy hash."""

    __slots__ = ("wanted",)

    def __init__(self) -> None:
        self.wanted: dict[tuple[int, int], None] = {}

    def __call__(self, level: int, index: int) -> bytes:
        self.wanted[(level, index)] = None
        return EMPTY_ROOT


def root_nodes(size: int) -> list[tuple[int, int]]:
    """The ``(level, index)`` of the stored nodes :func:`root_from_nodes` reads for
    ``size`` leaves, in the order it reads them, so a database can fetch them in one
    query. (The same holds for :func:`inclusion_nodes` and :func:`consistency_nodes`.)

    >>> root_nodes(300)
    [(8, 0), (5, 8), (3, 36), (2, 74)]
    """
    recorder = _NodeRecorder()
    root_from_nodes(size, recorder)
    return list(recorder.wanted)


def inclusion_nodes(index: int, size: int) -> list[tuple[int, int]]:
    """The ``(level, index)`` of the stored nodes the inclusion proof of leaf ``index``
    in ``size`` leaves is built from (fetch them, then :func:`inclusion_path` over
    :class:`NodeHashes` of a dictionary lookup).

    >>> inclusion_nodes(2, 5)
    [(0, 4), (1, 0), (0, 3)]
    """
    recorder = _NodeRecorder()
    inclusion_path(index, size, NodeHashes(recorder))
    return list(recorder.wanted)


def consistency_nodes(old: int, new: int) -> list[tuple[int, int]]:
    """The ``(level, index)`` of the stored nodes the consistency proof from ``old`` to
    ``new`` leaves is built from.

    >>> consistency_nodes(6, 8)
    [(2, 0), (1, 3), (1, 2)]
    """
    recorder = _NodeRecorder()
    consistency_path(old, new, NodeHashes(recorder))
    return list(recorder.wanted)


def node_owner(level: int, index: int) -> int:
    """The leaf whose append completes node ``(level, index)`` -- its last leaf,
    ``(index + 1) * 2**level - 1``. Every complete aligned node has exactly one owner,
    and the nodes leaf ``i`` owns are the levels ``0 .. t`` above it, ``t`` the trailing
    one bits of ``i``: a store can keep a leaf's nodes with the leaf
    (:meth:`Frontier.append_owned`), and find node ``(level, index)`` at byte
    ``32 * level`` of its owner's.

    >>> node_owner(0, 5), node_owner(1, 0), node_owner(3, 2)
    (5, 1, 23)
    """
    return ((index + 1) << level) - 1


class NodeHashes:
    """A :class:`SubtreeHashes` over a ``node(level, index)`` lookup of stored complete
    aligned subtrees -- how a database serves proofs from the nodes it stored once.

    >>> tree = MemoryTree.of(leaf_hash(bytes([i])) for i in range(5))
    >>> inclusion_path(4, 5, NodeHashes(tree.node)) == tree.inclusion_proof(4)
    True
    """

    __slots__ = ("_node",)

    def __init__(self, node: NodeLookup) -> None:
        self._node = node

    def subtree(self, start: int, end: int) -> bytes:
        """Return the hash of leaves ``[start, end)`` (see :func:`subtree_from_nodes`)."""
        return subtree_from_nodes(start, end, self._node)


# --- the compact range and the in-memory tree ----------------------------------------


class Frontier:
    """The compact range of leaves ``[0, n)``: the roots of the perfect subtrees covering
    them, largest first (one per set bit of ``n``).

    :meth:`append` returns the complete aligned nodes each new leaf creates (the leaf
    itself, then each subtree it completes), so a store can keep each node once, keyed
    by ``(level, index)``; every root and proof is then a few lookups away.

    >>> f = Frontier()
    >>> [(level, index) for level, index, _ in f.append(leaf_hash(b"a"))]
    [(0, 0)]
    >>> [(level, index) for level, index, _ in f.append(leaf_hash(b"b"))]
    [(0, 1), (1, 0)]
    >>> f.size, f.root() == root_hash([leaf_hash(b"a"), leaf_hash(b"b")])
    (2, True)
    """

    __slots__ = ("_hashes", "_levels", "_size")

    def __init__(self) -> None:
        self._size = 0
        self._levels: list[int] = []
        self._hashes: list[bytes] = []

    @classmethod
    def from_nodes(cls, size: int, node: NodeLookup) -> Frontier:
        """Rebuild the frontier of ``size`` leaves from stored nodes (``popcount(size)``
        lookups), e.g. when a database is reopened.

        >>> tree = MemoryTree.of(leaf_hash(bytes([i])) for i in range(11))
        >>> Frontier.from_nodes(11, tree.node).root() == tree.root()
        True
        """
        if size < 0:
            raise ValidationError(f"tree size {size} is negative")
        frontier = cls()
        start = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                frontier._levels.append(level)
                frontier._hashes.append(node(level, start >> level))
                start += 1 << level
        frontier._size = size
        return frontier

    @property
    def size(self) -> int:
        """The number of leaves covered."""
        return self._size

    def copy(self) -> Frontier:
        """An independent copy (to extend tentatively)."""
        other = Frontier()
        other._size = self._size
        other._levels = list(self._levels)
        other._hashes = list(self._hashes)
        return other

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The covering perfect subtrees as ``(level, index, hash)``, left to right."""
        out: list[Node] = []
        start = 0
        for level, h in zip(self._levels, self._hashes, strict=True):
            out.append((level, start >> level, h))
            start += 1 << level
        return tuple(out)

    def push(self, leaf_hash: bytes) -> None:
        """Add the next leaf without reporting new nodes (what :func:`root_hash` uses)."""
        if len(leaf_hash) != HASH_SIZE:
            raise ValidationError(f"a leaf hash is {HASH_SIZE} bytes, not {len(leaf_hash)}")
        self.append_owned(leaf_hash)

    def extend(
        self, leaf_hashes: Iterable[bytes], *, keep: Mapping[int, Collection[int]] | None = None
    ) -> dict[tuple[int, int], bytes]:
        """Add many leaves (as :meth:`push` each; no check of the hashes' length: the
        caller made them with :func:`leaf_hash`); return the hashes of the complete
        nodes named in ``keep`` (``{level: indexes}``) that these leaves create.

        >>> f, g = Frontier(), Frontier()
        >>> hashes = [leaf_hash(bytes([i])) for i in range(13)]
        >>> for h in hashes:
        ...     f.push(h)
        >>> kept = g.extend(hashes, keep={2: [1]})
        >>> (g.size, g.nodes) == (f.size, f.nodes), kept == {(2, 1): root_hash(hashes[4:8])}
        (True, True)
        """
        # Level by level, each level's parents in one comprehension: ``cur`` holds the
        # new nodes of one level, the first at index ``start`` (the size shifted down to
        # that level). An odd ``start`` means the frontier's subtree of that level is
        # their left sibling; an odd one out at the end stays a subtree of the frontier.
        cur = list(leaf_hashes)
        hashes = self._hashes
        n = self._size + len(cur)
        start = self._size
        sha256, node = _sha256, _NODE
        kept: list[bytes] = []  # the new frontier's subtrees below the untouched ones
        found: dict[tuple[int, int], bytes] = {}
        level = 0
        while cur:
            if start & 1:
                cur = [hashes.pop(), *cur]
                start -= 1
            if keep:
                for idx in keep.get(level, ()):
                    if start <= idx < start + len(cur):
                        found[(level, idx)] = cur[idx - start]
            if len(cur) & 1:
                kept.append(cur.pop())
            pairs = iter(cur)  # even length here: (0, 1), (2, 3), ...
            cur = [sha256(node + a + b).digest() for a, b in zip(pairs, pairs, strict=True)]
            start >>= 1
            level += 1
        hashes.extend(reversed(kept))
        self._size = n
        self._levels = [level for level in range(n.bit_length() - 1, -1, -1) if n >> level & 1]
        return found

    def append(self, leaf_hash: bytes) -> list[Node]:
        """Add the next leaf; return the complete aligned nodes it creates, lowest first:
        ``(0, n, leaf_hash)`` and one parent per subtree it completes.
        """
        if len(leaf_hash) != HASH_SIZE:
            raise ValidationError(f"a leaf hash is {HASH_SIZE} bytes, not {len(leaf_hash)}")
        levels, hashes = self._levels, self._hashes
        index = self._size
        h, level = leaf_hash, 0
        created: list[Node] = [(0, index, h)]
        while levels and levels[-1] == level:
            levels.pop()
            h = _sha256(_NODE + hashes.pop() + h).digest()
            level += 1
            index >>= 1
            created.append((level, index, h))
        levels.append(level)
        hashes.append(h)
        self._size += 1
        return created

    def append_owned(self, leaf_hash: bytes) -> bytes:
        """Add the next leaf (a hash made by :func:`leaf_hash`, not checked again);
        return the hashes of the nodes it creates, lowest level first, concatenated:
        what a store keeps with the leaf (see :func:`node_owner`).

        >>> f = Frontier()
        >>> f.append_owned(leaf_hash(b"a")) == leaf_hash(b"a")
        True
        >>> len(f.append_owned(leaf_hash(b"b")))          # the leaf and its parent
        64
        """
        levels, hashes = self._levels, self._hashes
        h, level = leaf_hash, 0
        owned = [h]
        while levels and levels[-1] == level:
            levels.pop()
            h = _sha256(_NODE + hashes.pop() + h).digest()
            level += 1
            owned.append(h)
        levels.append(level)
        hashes.append(h)
        self._size += 1
        return b"".join(owned)

    def root(self) -> bytes:
        """The root of the ``size`` leaves: the covering subtrees folded right to left."""
        hashes = self._hashes
        if not hashes:
            return EMPTY_ROOT
        h = hashes[-1]
        for left in reversed(hashes[:-1]):
            h = _sha256(_NODE + left + h).digest()
        return h


class MemoryTree:
    """An append-only Merkle tree in memory, keeping every complete aligned node once.

    Roots and proofs of any earlier size come from :func:`root_from_nodes`,
    :func:`inclusion_path` and :func:`consistency_path`, as they would from a database.

    >>> tree = MemoryTree.of(leaf_hash(data) for data in (b"a", b"b", b"c"))
    >>> tree.size, tree.root() == root_hash([leaf_hash(d) for d in (b"a", b"b", b"c")])
    (3, True)
    >>> verify_inclusion(tree.leaf(1), 1, 3, tree.inclusion_proof(1), tree.root())
    >>> verify_consistency(2, 3, tree.root(2), tree.root(), tree.consistency_proof(2))
    """

    __slots__ = ("_frontier", "_levels")

    def __init__(self) -> None:
        self._levels: list[list[bytes]] = []
        self._frontier = Frontier()

    @classmethod
    def of(cls, leaf_hashes: Iterable[bytes]) -> MemoryTree:
        """A tree holding ``leaf_hashes`` in order."""
        tree = cls()
        for h in leaf_hashes:
            tree.append(h)
        return tree

    @property
    def size(self) -> int:
        """The number of leaves."""
        return self._frontier.size

    def append(self, leaf_hash: bytes) -> int:
        """Add a leaf hash (see :func:`leaf_hash`); return its index."""
        index = self._frontier.size
        for level, _, h in self._frontier.append(leaf_hash):
            if level == len(self._levels):
                self._levels.append([])
            self._levels[level].append(h)
        return index

    def leaf(self, index: int) -> bytes:
        """The leaf hash at ``index``."""
        if not 0 <= index < self.size:
            raise ValidationError(f"leaf index {index} is not in a tree of size {self.size}")
        return self._levels[0][index]

    def node(self, level: int, index: int) -> bytes:
        """The complete aligned subtree hash at ``(level, index)`` (a :data:`NodeLookup`)."""
        try:
            if level < 0 or index < 0:
                raise IndexError
            return self._levels[level][index]
        except IndexError:
            raise ValidationError(
                f"no complete subtree at level {level}, index {index} in a tree of size {self.size}"
            ) from None

    def subtree(self, start: int, end: int) -> bytes:
        """The hash of leaves ``[start, end)`` (a :class:`SubtreeHashes`)."""
        if not 0 <= start < end <= self.size:
            raise ValidationError(
                f"leaf range [{start}, {end}) is not in a tree of size {self.size}"
            )
        return subtree_from_nodes(start, end, self.node)

    def _size_or_current(self, size: int | None) -> int:
        if size is None:
            return self.size
        if not 0 <= size <= self.size:
            raise ValidationError(f"tree size {size} is not between 0 and {self.size}")
        return size

    def root(self, size: int | None = None) -> bytes:
        """The root of the first ``size`` leaves (default: all)."""
        n = self._size_or_current(size)
        if n == self.size:
            return self._frontier.root()
        return root_from_nodes(n, self.node)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """The inclusion proof of leaf ``index`` in the tree of ``size`` leaves."""
        return inclusion_path(index, self._size_or_current(size), self)

    def consistency_proof(self, old: int, new: int | None = None) -> list[bytes]:
        """The consistency proof from ``old`` leaves to ``new`` leaves (default: all)."""
        return consistency_path(old, self._size_or_current(new), self)

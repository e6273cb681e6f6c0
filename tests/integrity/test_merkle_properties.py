"""Properties of proof generation and verification over random trees."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import IntegrityError
from ledger.integrity import (
    EMPTY_ROOT,
    Frontier,
    MemoryTree,
    NodeHashes,
    consistency_nodes,
    consistency_path,
    inclusion_nodes,
    inclusion_path,
    leaf_hash,
    root_from_nodes,
    root_hash,
    root_nodes,
    verify_consistency,
    verify_inclusion,
)

MAX_LEAVES = 600
_LEAVES = [leaf_hash(i.to_bytes(4, "big")) for i in range(MAX_LEAVES)]
_TREE = MemoryTree.of(_LEAVES)


def _flip(proof: list[bytes], which: int, byte: int, bit: int) -> list[bytes]:
    changed = list(proof)
    h = bytearray(changed[which])
    h[byte] ^= 1 << bit
    changed[which] = bytes(h)
    return changed


def _flip_hash(h: bytes, byte: int, bit: int) -> bytes:
    out = bytearray(h)
    out[byte] ^= 1 << bit
    return bytes(out)


class _Ranges:
    """A hash source that records the leaf ranges a proof is built from."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []

    def subtree(self, start: int, end: int) -> bytes:
        self.ranges.append((start, end))
        return bytes(32)


def _inclusion_shape(index: int, size: int) -> tuple[str, ...]:
    """Which side each proof hash is on, lowest first: what a verifier computes from
    ``(index, size)``. Two claims with the same shape accept the same proofs."""
    ranges = _Ranges()
    inclusion_path(index, size, ranges)
    return tuple("L" if end <= index else "R" for _, end in reversed(ranges.ranges))


def _consistency_shape(old: int, new: int) -> tuple[str, ...]:
    """The old tree's last subtree (S), left (L) and right (R) siblings, lowest first."""
    ranges = _Ranges()
    consistency_path(old, new, ranges)
    tags = []
    for start, end in reversed(ranges.ranges):
        tags.append("S" if end == old else "L" if end < old else "R")
        assert start >= old or end <= old
    return tuple(tags)


sizes = st.integers(min_value=1, max_value=MAX_LEAVES)
bytes_pos = st.integers(min_value=0, max_value=31)
bits = st.integers(min_value=0, max_value=7)


@st.composite
def leaf_in_tree(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(sizes)
    return draw(st.integers(min_value=0, max_value=size - 1)), size


@st.composite
def two_sizes(draw: st.DrawFn) -> tuple[int, int]:
    new = draw(sizes)
    return draw(st.integers(min_value=1, max_value=new)), new


@settings(max_examples=300, deadline=None)
@given(leaf_in_tree(), bytes_pos, bits, st.data())
def test_inclusion_proofs_verify_and_any_change_is_refused(
    case: tuple[int, int], byte: int, bit: int, data: st.DataObject
) -> None:
    index, size = case
    proof = _TREE.inclusion_proof(index, size)
    root = _TREE.root(size)
    leaf = _LEAVES[index]
    verify_inclusion(leaf, index, size, proof, root)

    with pytest.raises(IntegrityError):
        verify_inclusion(_flip_hash(leaf, byte, bit), index, size, proof, root)
    with pytest.raises(IntegrityError):
        verify_inclusion(leaf, index, size, proof, _flip_hash(root, byte, bit))
    if proof:
        which = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
        with pytest.raises(IntegrityError):
            verify_inclusion(leaf, index, size, _flip(proof, which, byte, bit), root)
        with pytest.raises(IntegrityError):
            verify_inclusion(leaf, index, size, proof[:-1], root)
    with pytest.raises(IntegrityError):
        verify_inclusion(leaf, index, size, [*proof, root], root)
    other_index = data.draw(st.integers(min_value=0, max_value=size))
    if other_index != index:
        with pytest.raises(IntegrityError):
            verify_inclusion(leaf, other_index, size, proof, root)
    other_size = data.draw(st.integers(min_value=1, max_value=2 * MAX_LEAVES))
    if other_size != size:
        if index < other_size and _inclusion_shape(index, other_size) == _inclusion_shape(
            index, size
        ):
            verify_inclusion(leaf, index, other_size, proof, root)  # see test below
        else:
            with pytest.raises(IntegrityError):
                verify_inclusion(leaf, index, other_size, proof, root)


@settings(max_examples=300, deadline=None)
@given(two_sizes(), bytes_pos, bits, st.data())
def test_consistency_proofs_verify_and_any_change_is_refused(
    case: tuple[int, int], byte: int, bit: int, data: st.DataObject
) -> None:
    old, new = case
    proof = _TREE.consistency_proof(old, new)
    root1, root2 = _TREE.root(old), _TREE.root(new)
    verify_consistency(old, new, root1, root2, proof)

    with pytest.raises(IntegrityError):
        verify_consistency(old, new, _flip_hash(root1, byte, bit), root2, proof)
    with pytest.raises(IntegrityError):
        verify_consistency(old, new, root1, _flip_hash(root2, byte, bit), proof)
    if proof:
        which = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
        with pytest.raises(IntegrityError):
            verify_consistency(old, new, root1, root2, _flip(proof, which, byte, bit))
        with pytest.raises(IntegrityError):
            verify_consistency(old, new, root1, root2, proof[1:])
    with pytest.raises(IntegrityError):
        verify_consistency(old, new, root1, root2, [*proof, root2])
    other_old = data.draw(st.integers(min_value=0, max_value=new))
    if other_old != old:
        with pytest.raises(IntegrityError):
            verify_consistency(other_old, new, root1, root2, proof)
    other_new = data.draw(st.integers(min_value=old, max_value=2 * MAX_LEAVES))
    if other_new != new:
        if _consistency_shape(old, other_new) == _consistency_shape(old, new):
            verify_consistency(old, other_new, root1, root2, proof)  # see test below
        else:
            with pytest.raises(IntegrityError):
                verify_consistency(old, other_new, root1, root2, proof)


@settings(max_examples=200, deadline=None)
@given(two_sizes())
def test_consistency_between_unrelated_trees_is_refused(case: tuple[int, int]) -> None:
    old, new = case
    forked = MemoryTree.of([*_LEAVES[: old - 1], leaf_hash(b"forked"), *_LEAVES[old:new]])
    with pytest.raises(IntegrityError):
        verify_consistency(
            old, new, forked.root(old), _TREE.root(new), _TREE.consistency_proof(old, new)
        )


def test_a_proof_binds_the_tree_size_only_through_its_shape() -> None:
    """RFC 9162 proofs do not encode the tree size: the proof of leaf 0 in 130 leaves
    also proves leaf 0 in 129 leaves, under the same root -- the claims have the same
    shape. What binds the size to the root is the signed checkpoint. A wrong leaf index
    or a wrong old size, by contrast, always changes the shape."""
    proof = _TREE.inclusion_proof(0, 130)
    verify_inclusion(_LEAVES[0], 0, 129, proof, _TREE.root(130))
    with pytest.raises(IntegrityError):
        verify_inclusion(_LEAVES[0], 0, 128, proof, _TREE.root(130))
    cproof = _TREE.consistency_proof(1, 514)
    verify_consistency(1, 513, _TREE.root(1), _TREE.root(514), cproof)
    for size in range(1, 70):
        assert len({_inclusion_shape(i, size) for i in range(size)}) == size
        assert len({_consistency_shape(old, size) for old in range(1, size)}) == size - 1


class CountingNodes:
    """A node lookup over the shared tree that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, level: int, index: int) -> bytes:
        self.calls += 1
        return _TREE.node(level, index)


def _bound(n: int) -> int:
    return 2 * math.ceil(math.log2(n)) + 2 if n > 1 else 2


@settings(max_examples=400, deadline=None)
@given(leaf_in_tree())
def test_inclusion_proof_needs_few_node_lookups(case: tuple[int, int]) -> None:
    index, size = case
    counter = CountingNodes()
    proof = inclusion_path(index, size, NodeHashes(counter))
    assert proof == _TREE.inclusion_proof(index, size)
    assert counter.calls <= _bound(size)


@settings(max_examples=400, deadline=None)
@given(two_sizes())
def test_consistency_proof_needs_few_node_lookups(case: tuple[int, int]) -> None:
    old, new = case
    counter = CountingNodes()
    proof = consistency_path(old, new, NodeHashes(counter))
    assert proof == _TREE.consistency_proof(old, new)
    assert counter.calls <= _bound(new)


def test_lookup_bound_holds_for_every_proof_up_to_130_leaves() -> None:
    for size in range(1, 131):
        for index in range(size):
            counter = CountingNodes()
            inclusion_path(index, size, NodeHashes(counter))
            assert counter.calls <= _bound(size), (index, size)
        for old in range(size + 1):
            counter = CountingNodes()
            consistency_path(old, size, NodeHashes(counter))
            assert counter.calls <= _bound(size), (old, size)


def test_frontier_and_node_roots_equal_root_hash_for_every_size_up_to_300() -> None:
    frontier = Frontier()
    stored: dict[tuple[int, int], bytes] = {}
    lookup: Callable[[int, int], bytes] = lambda level, index: stored[(level, index)]  # noqa: E731
    assert frontier.root() == EMPTY_ROOT == root_from_nodes(0, lookup)
    for n in range(1, 301):
        created = frontier.append(_LEAVES[n - 1])
        assert created[0] == (0, n - 1, _LEAVES[n - 1])
        for level, index, h in created:
            assert (level, index) not in stored  # each complete node is created once
            assert h == root_hash(_LEAVES[index << level : (index + 1) << level])
            stored[(level, index)] = h
        want = root_hash(_LEAVES[:n])
        assert frontier.size == n
        assert frontier.root() == want
        assert root_from_nodes(n, lookup) == want
        assert _TREE.root(n) == want
        assert Frontier.from_nodes(n, lookup).root() == want
        assert [lvl for lvl, _, _ in frontier.nodes] == [
            b for b in range(n.bit_length() - 1, -1, -1) if n >> b & 1
        ]
    # every complete aligned node of 300 leaves was stored, and nothing else
    assert len(stored) == sum(300 >> level for level in range(9))


def test_subtree_of_memory_tree_matches_root_hash() -> None:
    tree = MemoryTree.of(_LEAVES[:40])
    for start in range(40):
        for end in range(start + 1, 41):
            assert tree.subtree(start, end) == root_hash(_LEAVES[start:end])


class _ShapeChecker:
    """A hash source that checks every request is a node of the RFC 9162 tree shape."""

    def __init__(self, size: int) -> None:
        self.size = size

    def subtree(self, start: int, end: int) -> bytes:
        width = end - start
        assert width > 0 and end <= self.size
        aligned_to = 1 << (width - 1).bit_length()  # the smallest power of two >= width
        assert start % aligned_to == 0, (start, end)
        assert width == aligned_to or end == self.size, (start, end)
        return _TREE.subtree(start, end)


def test_proofs_only_ask_for_complete_aligned_or_border_subtrees() -> None:
    for size in range(1, 140):
        for index in range(size):
            assert inclusion_path(index, size, _ShapeChecker(size)) == _TREE.inclusion_proof(
                index, size
            )
        for old in range(size + 1):
            assert consistency_path(old, size, _ShapeChecker(size)) == _TREE.consistency_proof(
                old, size
            )


@settings(max_examples=200, deadline=None)
@given(two_sizes(), st.data())
def test_one_query_per_proof_fetches_exactly_the_needed_nodes(
    case: tuple[int, int], data: st.DataObject
) -> None:
    old, new = case
    index = data.draw(st.integers(min_value=0, max_value=new - 1))

    def inclusion(hashes: NodeHashes) -> list[bytes]:
        return inclusion_path(index, new, hashes)

    def consistency(hashes: NodeHashes) -> list[bytes]:
        return consistency_path(old, new, hashes)

    builds: list[tuple[list[tuple[int, int]], Callable[[NodeHashes], list[bytes]]]] = [
        (inclusion_nodes(index, new), inclusion),
        (consistency_nodes(old, new), consistency),
    ]
    for wanted, build in builds:
        fetched = {key: _TREE.node(*key) for key in wanted}  # one "SELECT ... IN (...)"
        counter = CountingNodes()
        assert build(NodeHashes(_lookup(fetched))) == build(NodeHashes(counter))
        assert len(wanted) == counter.calls
    rows = {key: _TREE.node(*key) for key in root_nodes(new)}
    assert root_from_nodes(new, _lookup(rows)) == _TREE.root(new)
    assert len(rows) == new.bit_count()


def _lookup(rows: dict[tuple[int, int], bytes]) -> Callable[[int, int], bytes]:
    return lambda level, index: rows[(level, index)]


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.integers(0, 70), max_size=8))
def test_extend_in_chunks_is_pushing_each_leaf(chunks: list[int]) -> None:
    """``Frontier.extend`` (level by level) leaves the same subtrees, size and root as
    pushing the same leaves one at a time, from any starting size."""
    one, many = Frontier(), Frontier()
    leaves: list[bytes] = []
    for k in chunks:
        part = [leaf_hash(len(leaves).to_bytes(4, "big") + bytes([i])) for i in range(k)]
        leaves += part
        for h in part:
            one.push(h)
        many.extend(part)
        assert (many.size, many.nodes, many.root()) == (one.size, one.nodes, one.root())
    assert many.root() == root_hash(leaves)


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(st.integers(0, 70), max_size=8),
    wanted=st.sets(st.tuples(st.integers(0, 8), st.integers(0, 300)), max_size=12),
)
def test_extend_keeps_the_wanted_nodes_it_creates(
    chunks: list[int], wanted: set[tuple[int, int]]
) -> None:
    """The nodes ``extend(keep=...)`` hands back, over any chunking, are exactly the
    wanted ones that appending the same leaves one at a time creates, with their hashes."""
    one, many = Frontier(), Frontier()
    keep: dict[int, list[int]] = {}
    for level, idx in wanted:
        keep.setdefault(level, []).append(idx)
    created: dict[tuple[int, int], bytes] = {}
    kept: dict[tuple[int, int], bytes] = {}
    n = 0
    for k in chunks:
        part = [leaf_hash(n.to_bytes(4, "big") + bytes([i])) for i in range(k)]
        n += k
        for h in part:
            created.update({(lv, i): x for lv, i, x in one.append(h) if (lv, i) in wanted})
        kept.update(many.extend(part, keep=keep))
    assert kept == created

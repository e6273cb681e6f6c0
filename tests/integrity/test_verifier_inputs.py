"""The pure verifiers refuse malformed input with an IntegrityError that says why: a
None, a string, a bool or a float where a size, an index, a hash or a proof belongs
(never a TypeError), and they take any iterable of hashes as the proof."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.errors import IntegrityError, LedgerError
from ledger.integrity import leaf_hash, verify_consistency, verify_inclusion
from ledger.integrity.merkle import MemoryTree

TREE = MemoryTree.of(leaf_hash(bytes([i])) for i in range(13))
LEAF = TREE.leaf(4)
PROOF = tuple(TREE.inclusion_proof(4))
ROOT = TREE.root()
OLD = TREE.root(5)
CPROOF = tuple(TREE.consistency_proof(5, 13))


def test_the_good_inputs_verify_and_any_iterable_proof_is_taken() -> None:
    verify_inclusion(LEAF, 4, 13, PROOF, ROOT)
    verify_inclusion(LEAF, 4, 13, list(PROOF), ROOT)
    verify_inclusion(LEAF, 4, 13, (h for h in PROOF), ROOT)
    verify_consistency(5, 13, OLD, ROOT, CPROOF)
    verify_consistency(5, 13, OLD, ROOT, iter(CPROOF))


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ((None, 4, 13, PROOF, ROOT), "leaf hash is a NoneType"),
        (("x" * 32, 4, 13, PROOF, ROOT), "leaf hash is a str"),
        ((LEAF, None, 13, PROOF, ROOT), "leaf index must be an integer"),
        ((LEAF, True, 13, PROOF, ROOT), "leaf index must be an integer, not True"),
        ((LEAF, "4", 13, PROOF, ROOT), "leaf index must be an integer"),
        ((LEAF, 4.0, 13, PROOF, ROOT), "leaf index must be an integer"),
        ((LEAF, 4, None, PROOF, ROOT), "tree size must be an integer"),
        ((LEAF, 4, 13.0, PROOF, ROOT), "tree size must be an integer"),
        ((LEAF, 4, 2**80, PROOF, ROOT), "it must have 80"),
        ((LEAF, 4, 13, None, ROOT), "not a NoneType"),
        ((LEAF, 4, 13, b"".join(PROOF), ROOT), "not a bytes"),
        ((LEAF, 4, 13, "abc", ROOT), "not a str"),
        ((LEAF, 4, 13, (None, *PROOF[1:]), ROOT), "hash 0 is a NoneType"),
        ((LEAF, 4, 13, (PROOF[0][:5], *PROOF[1:]), ROOT), "hash 0 is 5 bytes"),
        ((LEAF, 4, 13, 7, ROOT), "not a int"),
        ((LEAF, 4, 13, PROOF, None), "root is a NoneType"),
    ],
)
def test_inclusion_refuses_malformed_input(args: tuple[Any, ...], reason: str) -> None:
    with pytest.raises(IntegrityError, match=reason) as caught:
        verify_inclusion(*args)
    assert isinstance(caught.value, LedgerError)


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ((None, 13, OLD, ROOT, CPROOF), "old size must be an integer"),
        ((True, 13, OLD, ROOT, CPROOF), "old size must be an integer, not True"),
        (("5", 13, OLD, ROOT, CPROOF), "old size must be an integer"),
        ((5.0, 13, OLD, ROOT, CPROOF), "old size must be an integer"),
        ((5, None, OLD, ROOT, CPROOF), "new size must be an integer"),
        ((-1, 13, OLD, ROOT, CPROOF), "old size -1 is negative"),
        ((13, 5, ROOT, OLD, CPROOF), "only grows"),
        ((5, 2**80, OLD, ROOT, CPROOF), "it must have 81"),
        ((5, 13, None, ROOT, CPROOF), "old root is a NoneType"),
        ((5, 13, OLD, "x", CPROOF), "new root is a str"),
        ((5, 13, OLD, ROOT, None), "not a NoneType"),
        ((5, 13, OLD, ROOT, (None, *CPROOF[1:])), "hash 0 is a NoneType"),
        ((5, 13, OLD, ROOT, (CPROOF[0][:3], *CPROOF[1:])), "hash 0 is 3 bytes"),
    ],
)
def test_consistency_refuses_malformed_input(args: tuple[Any, ...], reason: str) -> None:
    with pytest.raises(IntegrityError, match=reason):
        verify_consistency(*args)

"""RFC 9162 verification against the transparency-dev/merkle vectors and the reference tree."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import IntegrityError, ValidationError
from ledger.integrity import (
    EMPTY_ROOT,
    MemoryTree,
    consistency_proof_size,
    inclusion_proof_size,
    leaf_hash,
    node_hash,
    root_hash,
    verify_consistency,
    verify_inclusion,
)

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "rfc9162"

# The reference tree of RFC 6962 / transparency-dev: leaf data in hex, and the root of
# each prefix of 1..8 leaves.
REFERENCE_LEAVES = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
]
REFERENCE_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


def _load(name: str) -> list[dict[str, Any]]:
    with (VECTORS / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _b(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def _proof(case: dict[str, Any]) -> list[bytes]:
    return [_b(p) for p in case["proof"] or []]


INCLUSION = _load("inclusion.jsonl")
CONSISTENCY = _load("consistency.jsonl")


def test_vector_files_hold_both_kinds_of_case() -> None:
    for cases in (INCLUSION, CONSISTENCY):
        assert len(cases) == 98
        assert {c["wantErr"] for c in cases} == {True, False}


@pytest.mark.parametrize("case", INCLUSION, ids=lambda c: c["file"])
def test_inclusion_vector(case: dict[str, Any]) -> None:
    args = (_b(case["leafHash"]), case["leafIdx"], case["treeSize"], _proof(case), _b(case["root"]))
    if case["wantErr"]:
        with pytest.raises(IntegrityError):
            verify_inclusion(*args)
    else:
        verify_inclusion(*args)


@pytest.mark.parametrize("case", CONSISTENCY, ids=lambda c: c["file"])
def test_consistency_vector(case: dict[str, Any]) -> None:
    args = (case["size1"], case["size2"], _b(case["root1"]), _b(case["root2"]), _proof(case))
    if case["wantErr"]:
        with pytest.raises(IntegrityError):
            verify_consistency(*args)
    else:
        verify_consistency(*args)


def _reference_tree() -> list[bytes]:
    return [leaf_hash(bytes.fromhex(h)) for h in REFERENCE_LEAVES]


def test_reference_root_of_eight_leaves() -> None:
    assert root_hash(_reference_tree()).hex() == (
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"
    )


@pytest.mark.parametrize("size", range(1, 9))
def test_reference_roots_of_every_prefix(size: int) -> None:
    leaves = _reference_tree()
    assert root_hash(leaves[:size]).hex() == REFERENCE_ROOTS[size - 1]
    assert MemoryTree.of(leaves).root(size).hex() == REFERENCE_ROOTS[size - 1]


def test_generated_proofs_match_the_vectors() -> None:
    """Our generator builds exactly the happy-path proofs of the vector files."""
    tree = MemoryTree.of(_reference_tree())
    checked = 0
    for case in INCLUSION:
        size = case["treeSize"]
        if not case["wantErr"] and size <= 8 and _b(case["root"]) == tree.root(size):
            assert tree.inclusion_proof(case["leafIdx"], size) == _proof(case)
            checked += 1
    for case in CONSISTENCY:
        size = case["size2"]
        if not case["wantErr"] and size <= 8 and _b(case["root2"]) == tree.root(size):
            assert tree.consistency_proof(case["size1"], size) == _proof(case)
            checked += 1
    assert checked >= 8


def test_hash_primitives() -> None:
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert root_hash([]) == EMPTY_ROOT
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    assert root_hash([a, b]) == node_hash(a, b)
    assert root_hash([a, b, a]) == node_hash(node_hash(a, b), a)


def test_root_hash_refuses_a_leaf_hash_of_the_wrong_length() -> None:
    with pytest.raises(ValidationError):
        root_hash([b"short"])


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        (lambda: verify_inclusion(EMPTY_ROOT, 0, 0, [], EMPTY_ROOT), "not in a tree of size 0"),
        (lambda: verify_inclusion(EMPTY_ROOT, -1, 3, [], EMPTY_ROOT), "not in a tree"),
        (lambda: verify_inclusion(b"x", 0, 1, [], b"x"), "leaf hash is 1 bytes"),
        (lambda: verify_inclusion(EMPTY_ROOT, 0, 2, [], EMPTY_ROOT), "it must have 1"),
        (lambda: verify_inclusion(EMPTY_ROOT, 0, 2, [b"y"], EMPTY_ROOT), "hash 0 is 1 bytes"),
        (lambda: verify_consistency(2, 1, EMPTY_ROOT, EMPTY_ROOT, []), "only grows"),
        (lambda: verify_consistency(0, 3, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT]), "must be empty"),
        (lambda: verify_consistency(0, 3, b"\0" * 32, EMPTY_ROOT, []), "size 0"),
        (lambda: verify_consistency(3, 3, EMPTY_ROOT, b"\0" * 32, []), "two different roots"),
        (lambda: verify_consistency(3, 3, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT]), "must be empty"),
        (lambda: verify_consistency(3, 5, EMPTY_ROOT, EMPTY_ROOT, []), "it must have 4"),
        (lambda: verify_consistency(2, 3, EMPTY_ROOT, EMPTY_ROOT, [b"z"]), "hash 0 is 1 bytes"),
    ],
)
def test_refusals_say_why(call: Any, reason: str) -> None:
    with pytest.raises(IntegrityError, match=reason):
        call()


def test_consistency_from_the_empty_tree() -> None:
    tree = MemoryTree.of(_reference_tree())
    verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    verify_consistency(0, 8, EMPTY_ROOT, tree.root(), [])
    with pytest.raises(IntegrityError):
        verify_consistency(0, 8, EMPTY_ROOT, b"short", [])


def test_proof_sizes_match_generated_proofs() -> None:
    tree = MemoryTree.of(leaf_hash(i.to_bytes(2, "big")) for i in range(130))
    for n in range(1, 131):
        for i in range(n):
            assert len(tree.inclusion_proof(i, n)) == inclusion_proof_size(i, n)
        for m in range(n + 1):
            assert len(tree.consistency_proof(m, n)) == consistency_proof_size(m, n)


def test_huge_sizes_are_plain_integers() -> None:
    # sizes beyond 2**64 are still refused with a reason, not an overflow
    with pytest.raises(IntegrityError, match="must have"):
        verify_inclusion(EMPTY_ROOT, 2**70, 2**71, [], EMPTY_ROOT)

"""Checkpoints (C2SP tlog-checkpoint), tree heads and inclusion proofs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import IntegrityError, ValidationError
from ledger.integrity import (
    EMPTY_ROOT,
    Checkpoint,
    InclusionProof,
    MemoryTree,
    Signer,
    TreeHead,
    Verifier,
    checkpoint_body,
    generate_key,
    leaf_hash,
    parse_checkpoint_body,
    sign_note,
)
from ledger.integrity._keytext import b64encode

GOLDEN = json.loads(
    (Path(__file__).resolve().parents[1] / "vectors" / "signed-note" / "golden.json").read_text(
        encoding="utf-8"
    )
)
ORIGIN = "example.com/agent-log"
_SKEY, _VKEY = generate_key(ORIGIN)
SIGNER, VERIFIER = Signer.from_key(_SKEY), Verifier.from_key(_VKEY)
ROOT = leaf_hash(b"root")


def test_golden_tree_note_body() -> None:
    golden = GOLDEN["tree_note_golden"]
    body = parse_checkpoint_body(golden["text"])
    assert body.origin == "go.sum database tree"
    assert body.size == golden["size"] == 123456789012
    assert b64encode(body.root) == golden["hash_base64"]
    assert body.extensions == ()
    assert body.text == golden["text"]


def test_sign_and_parse_round_trip() -> None:
    head = TreeHead(size=3, root=ROOT)
    cp = Checkpoint.sign(ORIGIN, head, SIGNER)
    parsed = Checkpoint.parse(cp.text, [VERIFIER])
    assert parsed == cp
    assert (parsed.origin, parsed.size, parsed.root, parsed.signers) == (ORIGIN, 3, ROOT, (ORIGIN,))
    assert parsed.head == head
    assert parsed.text.startswith(f"{ORIGIN}\n3\n{b64encode(ROOT)}\n\n\u2014 {ORIGIN} ")
    assert Checkpoint.parse(cp.text.encode(), [VERIFIER]) == cp


def test_extension_lines_are_signed_and_kept() -> None:
    cp = Checkpoint.sign(ORIGIN, TreeHead(size=1, root=ROOT), SIGNER, extensions=["ext one"])
    parsed = Checkpoint.parse(cp.text, [VERIFIER])
    assert parsed.extensions == ("ext one",)
    assert parsed.body == checkpoint_body(ORIGIN, 1, ROOT, ["ext one"])
    tampered = cp.text.replace("ext one", "ext two")
    with pytest.raises(IntegrityError):
        Checkpoint.parse(tampered, [VERIFIER])


def test_the_empty_tree_has_a_checkpoint() -> None:
    cp = Checkpoint.sign(ORIGIN, TreeHead(size=0, root=EMPTY_ROOT), SIGNER)
    assert Checkpoint.parse(cp.text, [VERIFIER]).size == 0


def test_a_checkpoint_by_an_unknown_key_is_refused() -> None:
    cp = Checkpoint.sign(ORIGIN, TreeHead(size=3, root=ROOT), SIGNER)
    _, other = generate_key(ORIGIN)  # same name, another key: ignored, so unsigned
    with pytest.raises(IntegrityError, match="not signed by any known key"):
        Checkpoint.parse(cp.text, [Verifier.from_key(other)])


def test_a_changed_size_or_root_is_refused() -> None:
    cp = Checkpoint.sign(ORIGIN, TreeHead(size=3, root=ROOT), SIGNER)
    with pytest.raises(IntegrityError):
        Checkpoint.parse(cp.text.replace("\n3\n", "\n4\n", 1), [VERIFIER])
    other_root = b64encode(leaf_hash(b"other"))
    with pytest.raises(IntegrityError):
        Checkpoint.parse(cp.text.replace(b64encode(ROOT), other_root, 1), [VERIFIER])


_B64_ROOT = b64encode(ROOT)
MALFORMED_BODIES = {
    "two lines": f"{ORIGIN}\n3\n",
    "empty origin": f"\n3\n{_B64_ROOT}\n",
    "leading zero": f"{ORIGIN}\n03\n{_B64_ROOT}\n",
    "plus sign": f"{ORIGIN}\n+3\n{_B64_ROOT}\n",
    "minus sign": f"{ORIGIN}\n-3\n{_B64_ROOT}\n",
    "space in size": f"{ORIGIN}\n 3\n{_B64_ROOT}\n",
    "non-ASCII digit": f"{ORIGIN}\n\u0663\n{_B64_ROOT}\n",
    "size too large": f"{ORIGIN}\n{2**63}\n{_B64_ROOT}\n",
    "root not base64": f"{ORIGIN}\n3\n{_B64_ROOT[:-1]}\n",
    "root of 31 bytes": f"{ORIGIN}\n3\n{b64encode(ROOT[:31])}\n",
    "empty extension line": f"{ORIGIN}\n3\n{_B64_ROOT}\n\nx\n",
    "no final newline": f"{ORIGIN}\n3\n{_B64_ROOT}",
}


@pytest.mark.parametrize("body", MALFORMED_BODIES.values(), ids=MALFORMED_BODIES.keys())
def test_malformed_bodies_are_refused(body: str) -> None:
    with pytest.raises(IntegrityError, match="malformed checkpoint"):
        parse_checkpoint_body(body)


@pytest.mark.parametrize(
    "body", [b for k, b in MALFORMED_BODIES.items() if k not in {"no final newline"}]
)
def test_signed_malformed_bodies_are_refused(body: str) -> None:
    if "\n\n" in body:  # a blank line in the text: sign_note allows it, the body does not
        note = body + "\n" + sign_note(body, [SIGNER]).rsplit("\n\n", 1)[1]
    else:
        note = sign_note(body, [SIGNER])
    with pytest.raises(IntegrityError):
        Checkpoint.parse(note, [VERIFIER])


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=2**63 - 1), st.binary(min_size=32, max_size=32))
def test_any_size_and_root_round_trip(size: int, root: bytes) -> None:
    body = checkpoint_body(ORIGIN, size, root)
    parsed = parse_checkpoint_body(body)
    assert (parsed.size, parsed.root) == (size, root)


@pytest.mark.parametrize(
    "call",
    [
        lambda: TreeHead(size=-1, root=ROOT),
        lambda: TreeHead(size=2**63, root=ROOT),
        lambda: TreeHead(size=1, root=b"short"),
        lambda: TreeHead(size=True, root=ROOT),
        lambda: checkpoint_body("", 1, ROOT),
        lambda: checkpoint_body("two\nlines", 1, ROOT),
        lambda: checkpoint_body(ORIGIN, 1, ROOT, [""]),
        lambda: InclusionProof(leaf_index=0, tree_size=1, leaf_hash=b"x", hashes=()),
    ],
)
def test_bad_values_are_refused_at_construction(call: object) -> None:
    with pytest.raises(ValidationError):
        call()  # type: ignore[operator]


def test_tree_heads_and_inclusion_proofs_verify() -> None:
    tree = MemoryTree.of(leaf_hash(bytes([i])) for i in range(9))
    old, new = TreeHead(size=4, root=tree.root(4)), TreeHead(size=9, root=tree.root())
    old.verify_consistency(new, tree.consistency_proof(4))
    with pytest.raises(IntegrityError):
        new.verify_consistency(old, tree.consistency_proof(4))
    proof = InclusionProof(
        leaf_index=7, tree_size=9, leaf_hash=tree.leaf(7), hashes=tuple(tree.inclusion_proof(7))
    )
    proof.verify(new.root)
    with pytest.raises(IntegrityError):
        proof.verify(old.root)


def test_values_are_frozen_and_take_design_md_signatures() -> None:
    head = TreeHead(size=1, root=ROOT)
    with pytest.raises(AttributeError):
        head.size = 2  # type: ignore[misc]
    assert TreeHead(1, ROOT) == head  # DESIGN.md: TreeHead(size: int, root: bytes)

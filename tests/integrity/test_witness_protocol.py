"""The tlog-witness add-checkpoint formats and the witness's decision rules."""

from __future__ import annotations

import pytest

from ledger.errors import IntegrityError, ValidationError
from ledger.integrity import (
    Checkpoint,
    CosignatureSigner,
    CosignatureVerifier,
    MemoryTree,
    Signer,
    TreeHead,
    Verifier,
    add_signature_lines,
    generate_key,
    generate_witness_key,
    leaf_hash,
    sign_note,
    verify_cosignature,
)
from ledger.integrity.witness_protocol import (
    CONTENT_TYPE_SIZE,
    MAX_PROOF_LINES,
    AddCheckpointRequest,
    WitnessDecision,
    decide_add_checkpoint,
    format_add_checkpoint,
    format_cosignatures,
    format_size,
    parse_add_checkpoint,
    parse_cosignatures,
    parse_size,
)

ORIGIN = "example.com/log"
_SKEY, _VKEY = generate_key(ORIGIN)
LOG, LOG_V = Signer.from_key(_SKEY), Verifier.from_key(_VKEY)
_WSKEY, _WVKEY = generate_witness_key("witness.example/w1")
WITNESS, WITNESS_V = CosignatureSigner.from_key(_WSKEY), CosignatureVerifier.from_key(_WVKEY)
TREE = MemoryTree.of(leaf_hash(i.to_bytes(2, "big")) for i in range(40))
NOW = 1_700_000_000


def _checkpoint(size: int, tree: MemoryTree = TREE) -> Checkpoint:
    return Checkpoint.sign(ORIGIN, TreeHead(size=size, root=tree.root(size)), LOG)


def _decide(
    old: int, size: int, proof: list[bytes] | None = None, latest: TreeHead | None = None
) -> WitnessDecision:
    if proof is None:
        proof = TREE.consistency_proof(old, size) if old else []
    body = format_add_checkpoint(old, proof, _checkpoint(size).text)
    return decide_add_checkpoint(
        body,
        logs={ORIGIN: [LOG_V]},
        latest={ORIGIN: latest} if latest else {},
        witness=WITNESS,
        now=NOW,
    )


def test_request_round_trip() -> None:
    proof = TREE.consistency_proof(10, 30)
    note = _checkpoint(30).text
    body = format_add_checkpoint(10, proof, note)
    assert body.startswith(b"old 10\n")
    assert parse_add_checkpoint(body) == AddCheckpointRequest(
        old_size=10, proof=tuple(proof), checkpoint=note
    )
    assert parse_add_checkpoint(format_add_checkpoint(0, [], note)).proof == ()


BAD_REQUESTS = {
    "no empty line": b"old 0\n",
    "no old line": b"new 0\n\ncheckpoint",
    "leading zero": b"old 01\n\ncheckpoint",
    "negative": b"old -1\n\ncheckpoint",
    "two spaces": b"old  1\n\ncheckpoint",
    "proof not base64": b"old 1\nnot base64!\n\ncheckpoint",
    "short hash": b"old 1\nAAAA\n\ncheckpoint",
    "not UTF-8": b"old 1\n\n\xff",
    "too many proof lines": b"old 1\n" + b"A" * 43 + b"=\n" * (MAX_PROOF_LINES + 1) + b"\nx",
}


@pytest.mark.parametrize("body", BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
def test_malformed_requests_are_refused(body: bytes) -> None:
    with pytest.raises(ValidationError):
        parse_add_checkpoint(body)


def test_format_refuses_bad_arguments() -> None:
    with pytest.raises(ValidationError):
        format_add_checkpoint(-1, [], "x")
    with pytest.raises(ValidationError):
        format_add_checkpoint(1, [b"short"], "x")
    with pytest.raises(ValidationError):
        format_add_checkpoint(1, [bytes(32)] * (MAX_PROOF_LINES + 1), "x")


def test_size_and_cosignature_bodies() -> None:
    assert parse_size(format_size(20852014)) == 20852014
    for bad in (b"12", b"012\n", b"x\n"):
        with pytest.raises(ValidationError):
            parse_size(bad)
    line = WITNESS.signature_line(_checkpoint(3).body, timestamp=NOW)
    assert parse_cosignatures(format_cosignatures([line, line.removesuffix("\n")])) == (line, line)
    with pytest.raises(IntegrityError):
        parse_cosignatures(b"not a signature line\n")
    with pytest.raises(ValidationError):
        format_cosignatures([])


def test_first_checkpoint_is_cosigned() -> None:
    decision = _decide(0, 5)
    assert decision.status == 200
    assert decision.checkpoint is not None and decision.checkpoint.size == 5
    lines = parse_cosignatures(decision.body)
    note = add_signature_lines(_checkpoint(5).text, lines)
    assert verify_cosignature(note, WITNESS_V).timestamp == NOW


def test_a_consistent_update_is_cosigned() -> None:
    latest = TreeHead(size=5, root=TREE.root(5))
    decision = _decide(5, 33, latest=latest)
    assert decision.status == 200
    assert decision.checkpoint is not None and decision.checkpoint.head.size == 33


def test_the_same_checkpoint_again_is_cosigned() -> None:
    latest = TreeHead(size=5, root=TREE.root(5))
    assert _decide(5, 5, latest=latest).status == 200


def test_a_stale_old_size_gets_409_with_the_latest_size() -> None:
    latest = TreeHead(size=7, root=TREE.root(7))
    decision = _decide(5, 33, latest=latest)
    assert decision.status == 409
    assert decision.content_type == CONTENT_TYPE_SIZE
    assert parse_size(decision.body) == 7
    assert decision.checkpoint is None
    assert parse_size(_decide(3, 33).body) == 0  # never cosigned: the latest size is 0


def test_a_fork_at_the_same_size_gets_409() -> None:
    latest = TreeHead(size=5, root=leaf_hash(b"another root"))
    assert _decide(5, 5, latest=latest).status == 409


def test_a_bad_consistency_proof_gets_422() -> None:
    latest = TreeHead(size=5, root=TREE.root(5))
    assert _decide(5, 33, proof=TREE.consistency_proof(6, 33), latest=latest).status == 422
    forked = TreeHead(size=5, root=leaf_hash(b"forked"))
    assert _decide(5, 33, latest=forked).status == 422
    assert _decide(0, 5, proof=[bytes(32)]).status == 422  # from size 0 the proof is empty


def test_an_old_size_above_the_checkpoint_gets_400() -> None:
    latest = TreeHead(size=8, root=TREE.root(8))
    assert _decide(8, 5, proof=[], latest=latest).status == 400


def test_unknown_origin_gets_404_and_bad_signature_403() -> None:
    body = format_add_checkpoint(0, [], _checkpoint(5).text)

    def decide(body: bytes, logs: dict[str, list[Verifier]]) -> int:
        return decide_add_checkpoint(body, logs=logs, latest={}, witness=WITNESS, now=NOW).status

    assert decide(body, {"other.example/log": [LOG_V]}) == 404
    _, other_vkey = generate_key(ORIGIN)
    assert decide(body, {ORIGIN: [Verifier.from_key(other_vkey)]}) == 403
    tampered = format_add_checkpoint(0, [], _checkpoint(5).text.replace("\n5\n", "\n6\n"))
    assert decide(tampered, {ORIGIN: [LOG_V]}) == 403


def test_malformed_checkpoints_get_400() -> None:
    logs = {ORIGIN: [LOG_V]}
    for note in ("", f"{ORIGIN}\n5\n", f"{ORIGIN}\nnot a note"):
        body = format_add_checkpoint(0, [], note)
        decision = decide_add_checkpoint(body, logs=logs, latest={}, witness=WITNESS, now=NOW)
        assert decision.status == 400, note
    note = sign_note(f"{ORIGIN}\n05\nxx\n", [LOG])  # a signed note that is no checkpoint
    decision = decide_add_checkpoint(
        format_add_checkpoint(0, [], note), logs=logs, latest={}, witness=WITNESS, now=NOW
    )
    assert decision.status == 400
    garbage = decide_add_checkpoint(b"garbage", logs=logs, latest={}, witness=WITNESS, now=NOW)
    assert garbage.status == 400

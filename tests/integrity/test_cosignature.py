"""Witness cosignatures (C2SP tlog-cosignature, cosignature/v1 with Ed25519)."""

from __future__ import annotations

import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.errors import IntegrityError, ValidationError
from ledger.integrity import (
    Checkpoint,
    CosignatureSigner,
    CosignatureVerifier,
    Signer,
    TreeHead,
    Verifier,
    add_signature_lines,
    cosigned_message,
    generate_key,
    generate_witness_key,
    leaf_hash,
    open_note,
    parse_signatures,
    sign_note,
    verify_cosignature,
)
from ledger.integrity._keytext import b64decode, b64encode

ORIGIN = "example.com/behind-the-sofa"
LOG_SKEY, LOG_VKEY = generate_key(ORIGIN)
LOG, LOG_V = Signer.from_key(LOG_SKEY), Verifier.from_key(LOG_VKEY)
W_SKEY, W_VKEY = generate_witness_key("witness.example.com/w1")
WITNESS, WITNESS_V = CosignatureSigner.from_key(W_SKEY), CosignatureVerifier.from_key(W_VKEY)
CHECKPOINT = Checkpoint.sign(ORIGIN, TreeHead(size=20852163, root=leaf_hash(b"r")), LOG)


def test_the_signed_message_is_header_time_and_body() -> None:
    assert cosigned_message("body\n", 1679315147) == b"cosignature/v1\ntime 1679315147\nbody\n"
    for bad in (-1, 2**63):
        with pytest.raises(ValidationError):
            cosigned_message("body\n", bad)


def test_witness_keys_use_type_byte_4() -> None:
    name, hex_id, b64 = W_VKEY.split("+", 2)
    raw = b64decode(b64)
    assert raw[0] == 0x04 and len(raw) == 33
    want = hashlib.sha256(name.encode() + b"\n\x04" + raw[1:]).digest()[:4]
    assert int(hex_id, 16) == int.from_bytes(want, "big") == WITNESS.key_id
    assert W_SKEY.startswith("PRIVATE+KEY+witness.example.com/w1+" + hex_id + "+")
    assert WITNESS.verifier() == WITNESS_V
    assert WITNESS_V.key_text == W_VKEY
    # a witness key is not a note key, and the other way round
    with pytest.raises(IntegrityError):
        Verifier.from_key(W_VKEY)
    with pytest.raises(IntegrityError):
        CosignatureVerifier.from_key(LOG_VKEY)
    with pytest.raises(IntegrityError):
        CosignatureSigner.from_key(LOG_SKEY)


def test_the_payload_is_key_id_timestamp_and_signature() -> None:
    line = WITNESS.signature_line(CHECKPOINT.body, timestamp=1679315147)
    (sig,) = parse_signatures("x\n\n" + line)[1]
    assert sig.name == "witness.example.com/w1"
    assert sig.key_id == WITNESS.key_id
    assert len(sig.signature) == 72
    assert int.from_bytes(sig.signature[:8], "big") == 1679315147
    # the signature is plain Ed25519 over the cosigned message
    Ed25519PublicKey.from_public_bytes(WITNESS_V.public_key).verify(
        sig.signature[8:], cosigned_message(CHECKPOINT.body, 1679315147)
    )


def test_cosign_a_checkpoint_and_verify_it() -> None:
    note = add_signature_lines(
        CHECKPOINT.text, WITNESS.signature_line(CHECKPOINT.body, timestamp=1700000000)
    )
    cosig = verify_cosignature(note, WITNESS_V)
    assert (cosig.name, cosig.key_id, cosig.timestamp) == (WITNESS.name, WITNESS.key_id, 1700000000)
    # the log's checkpoint still verifies, and the witness is one more known signer
    assert Checkpoint.parse(note, [LOG_V]).signers == (ORIGIN,)
    assert Checkpoint.parse(note, [LOG_V, WITNESS_V]).signers == (ORIGIN, WITNESS.name)


def test_a_cosignature_over_another_body_or_time_is_refused() -> None:
    line = WITNESS.signature_line(CHECKPOINT.body, timestamp=1700000000)
    other = Checkpoint.sign(ORIGIN, TreeHead(size=20852164, root=leaf_hash(b"r")), LOG)
    with pytest.raises(IntegrityError):
        verify_cosignature(add_signature_lines(other.text, line), WITNESS_V)
    prefix, b64 = line.removesuffix("\n").rsplit(" ", 1)
    raw = bytearray(b64decode(b64))
    raw[11] ^= 1  # the last byte of the timestamp
    forged = f"{prefix} {b64encode(bytes(raw))}\n"
    with pytest.raises(IntegrityError, match="does not verify"):
        verify_cosignature(add_signature_lines(CHECKPOINT.text, forged), WITNESS_V)


def test_a_missing_cosignature_is_refused() -> None:
    with pytest.raises(IntegrityError, match="not signed by any known key"):
        verify_cosignature(CHECKPOINT.text, WITNESS_V)


def test_verify_rejects_wrong_lengths_and_huge_timestamps() -> None:
    body = CHECKPOINT.body.encode()
    good = WITNESS.cosign(CHECKPOINT.body, timestamp=5)
    assert WITNESS_V.verify(body, good)
    assert not WITNESS_V.verify(body, good[:-1])
    assert not WITNESS_V.verify(body, good[8:])
    assert not WITNESS_V.verify(b"\xff", good)
    assert not WITNESS_V.verify(body, (2**63).to_bytes(8, "big") + good[8:])


def test_a_witness_key_signs_notes_with_its_clock() -> None:
    witness = CosignatureSigner.from_key(W_SKEY, clock=lambda: 1234.9)
    note = sign_note(CHECKPOINT.body, [LOG, witness])
    assert verify_cosignature(note, WITNESS_V).timestamp == 1234
    assert open_note(note, [LOG_V, WITNESS_V]).signers == (ORIGIN, WITNESS.name)
    assert "witness.example.com/w1" in repr(witness)

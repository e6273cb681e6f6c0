"""Keys and notes of the wrong type are refused with a LedgerError that says what was
given (never an AttributeError or TypeError): a key that is not text, a note that is
not text, verifiers that are not a list of keys; a signature of the wrong type does not
verify, and a signer (a KMS or HSM plug-in) that returns no bytes is refused."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.errors import IntegrityError, LedgerError, ValidationError
from ledger.integrity import Checkpoint, Signer, TreeHead, Verifier, generate_key

SKEY, VKEY = generate_key("test.example/log")
HEAD = TreeHead(size=1, root=b"\0" * 32)


@pytest.mark.parametrize("value", [None, 5, b"key"])
def test_a_key_that_is_not_text_is_refused(value: Any) -> None:
    for read in (Signer.from_key, Verifier.from_key):
        with pytest.raises(ValidationError, match="key is text"):
            read(value)
    with pytest.raises(ValidationError, match="invalid key name"):
        generate_key(value)


@pytest.mark.parametrize("value", [None, 5])
def test_a_note_that_is_not_text_is_refused(value: Any) -> None:
    with pytest.raises(IntegrityError, match="a note is text"):
        Checkpoint.parse(value, [Verifier.from_key(VKEY)])


def test_verifiers_that_are_not_a_list_of_keys_are_refused() -> None:
    note = Checkpoint.sign("o", HEAD, Signer.from_key(SKEY)).text
    for bad in (None, VKEY):
        with pytest.raises(ValidationError, match="list of verifier keys"):
            Checkpoint.parse(note, bad)  # type: ignore[arg-type]


def test_a_signature_of_the_wrong_type_does_not_verify() -> None:
    v = Verifier.from_key(VKEY)
    assert v.verify(b"m", None) is False  # type: ignore[arg-type]
    assert v.verify(None, b"\0" * 64) is False  # type: ignore[arg-type]


def test_a_signer_that_returns_no_bytes_is_refused() -> None:
    class Broken:
        name = "kms.example/log"
        key_id = 0x12345678

        def sign(self, message: bytes) -> Any:
            return None

    with pytest.raises(LedgerError, match="returned no signature bytes"):
        Checkpoint.sign("o", HEAD, Broken())

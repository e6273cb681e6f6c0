"""Signed notes and their keys: the sumdb/note golden example, round trips, tampering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import IntegrityError, ValidationError
from ledger.integrity import (
    NoteSigner,
    NoteVerifier,
    OpenedNote,
    Signer,
    Verifier,
    add_signature_lines,
    generate_key,
    key_id,
    open_note,
    parse_signatures,
    sign_note,
)
from ledger.integrity._keytext import b64decode, b64encode, is_valid_key_name
from ledger.integrity.note import MAX_SIGNATURES

GOLDEN: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "vectors" / "signed-note" / "golden.json").read_text(
        encoding="utf-8"
    )
)
TEXT: str = GOLDEN["text"]
PETER_V = Verifier.from_key(GOLDEN["verifier_keys"]["PeterNeumann"])
ENOCH_V = Verifier.from_key(GOLDEN["verifier_keys"]["EnochRoot"])
PETER_S = Signer.from_key(GOLDEN["signer_keys"]["PeterNeumann"])
PETER_LINE: str = GOLDEN["signature_lines"]["PeterNeumann"]
ENOCH_LINE: str = GOLDEN["signature_lines"]["EnochRoot"]
SIGNED: str = GOLDEN["signed_note_peter"]


# --- the golden example --------------------------------------------------------------


def test_golden_verifier_keys_and_ids() -> None:
    for name, text in GOLDEN["verifier_keys"].items():
        v = Verifier.from_key(text)
        assert v.name == name
        assert f"{v.key_id:08x}" == GOLDEN["key_ids"][name]
        assert v.key_text == text
        assert isinstance(v, NoteVerifier)


def test_golden_signer_key_matches_its_verifier() -> None:
    assert PETER_S.name == "PeterNeumann"
    assert f"{PETER_S.key_id:08x}" == "c74f20a3"
    assert PETER_S.verifier() == PETER_V
    assert PETER_S.verifier().key_text == GOLDEN["verifier_keys"]["PeterNeumann"]
    assert isinstance(PETER_S, NoteSigner)


def test_golden_signature_is_reproduced_exactly() -> None:
    # Ed25519 is deterministic, so signing the text gives the golden note byte for byte.
    assert sign_note(TEXT, [PETER_S]) == SIGNED == TEXT + "\n" + PETER_LINE


def test_golden_note_opens() -> None:
    assert open_note(SIGNED, [PETER_V]) == OpenedNote(TEXT, ("PeterNeumann",), ())
    assert open_note(SIGNED.encode("utf-8"), [PETER_V, ENOCH_V]).signers == ("PeterNeumann",)


def test_golden_note_with_both_signatures() -> None:
    both = TEXT + "\n" + PETER_LINE + ENOCH_LINE
    assert open_note(both, [PETER_V, ENOCH_V]).signers == ("PeterNeumann", "EnochRoot")
    only_enoch = open_note(both, [ENOCH_V])
    assert only_enoch.signers == ("EnochRoot",)
    assert only_enoch.unknown == (PETER_LINE.removesuffix("\n"),)


def test_key_id_is_sha256_of_name_newline_type_and_key() -> None:
    assert key_id("PeterNeumann", 0x01, PETER_V.public_key) == 0xC74F20A3
    assert key_id("EnochRoot", 0x01, ENOCH_V.public_key) == 0xAF0CFE78


# --- round trips ---------------------------------------------------------------------

note_texts = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], min_codepoint=0x20) | st.just("\n"),
    max_size=200,
).map(lambda t: t + "\n")
key_names = st.text(
    alphabet=st.characters(exclude_categories=["Cs", "Zs", "Zl", "Zp", "Cc"], min_codepoint=0x21),
    min_size=1,
    max_size=30,
).filter(lambda n: "+" not in n and is_valid_key_name(n))

_KEYS: dict[str, tuple[Signer, Verifier]] = {}


def _key(name: str) -> tuple[Signer, Verifier]:
    if name not in _KEYS:
        skey, vkey = generate_key(name)
        _KEYS[name] = (Signer.from_key(skey), Verifier.from_key(vkey))
    return _KEYS[name]


@settings(max_examples=150, deadline=None)
@given(note_texts, key_names)
def test_sign_then_open_round_trips(text: str, name: str) -> None:
    signer, verifier = _key(name)
    note = sign_note(text, [signer])
    opened = open_note(note, [verifier])
    assert opened.text == text
    assert opened.signers == (name,)
    assert opened.unknown == ()


@settings(max_examples=150, deadline=None)
@given(note_texts, st.data())
def test_any_change_to_the_text_is_refused(text: str, data: st.DataObject) -> None:
    signer, verifier = _key("example.com/log")
    note = sign_note(text, [signer])
    at = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    replacement = data.draw(st.sampled_from(["a", "b", "\n", "é", ""]))
    changed_text = text[:at] + replacement + text[at + 1 :]
    if not changed_text.endswith("\n") or changed_text == text:
        return
    with pytest.raises(IntegrityError):
        open_note(changed_text + note[len(text) :], [verifier])


@settings(max_examples=100, deadline=None)
@given(key_names)
def test_generated_keys_parse_back(name: str) -> None:
    skey, vkey = generate_key(name)
    signer, verifier = Signer.from_key(skey), Verifier.from_key(vkey)
    assert signer.name == verifier.name == name
    assert signer.key_id == verifier.key_id
    assert verifier.key_text == vkey
    assert verifier.verify(b"m", signer.sign(b"m"))
    assert not verifier.verify(b"n", signer.sign(b"m"))


def test_a_signer_held_elsewhere_plugs_in() -> None:
    class KmsSigner:
        """A key held by a service: only name, key id and a sign call."""

        name = PETER_S.name
        key_id = PETER_S.key_id

        def sign(self, message: bytes) -> bytes:
            return PETER_S.sign(message)

    assert isinstance(KmsSigner(), NoteSigner)
    assert sign_note(TEXT, [KmsSigner()]) == SIGNED


# --- tampering and malformed notes ---------------------------------------------------


def _flip_sig_byte(line: str) -> str:
    prefix, b64 = line.removesuffix("\n").rsplit(" ", 1)
    raw = bytearray(b64decode(b64))
    raw[10] ^= 1
    return f"{prefix} {b64encode(bytes(raw))}\n"


REFUSED = {
    "extra line in the text": TEXT + "extra\n\n" + PETER_LINE,
    "changed byte in the text": TEXT.replace("answer", "Answer") + "\n" + PETER_LINE,
    "changed byte in the signature": TEXT + "\n" + _flip_sig_byte(PETER_LINE),
    "unknown key only": TEXT + "\n" + ENOCH_LINE,
    "known name, other key id": TEXT + "\n" + PETER_LINE.replace("x08go", "x08gp"),
    "missing final newline": SIGNED.removesuffix("\n"),
    "bad base64": TEXT + "\n" + PETER_LINE.replace("=\n", "\n"),
    "base64 with a space": TEXT + "\n" + PETER_LINE.replace("x08go", "x08 go"),
    "no blank line": TEXT + PETER_LINE,
    "empty signature block": TEXT + "\n",
    "blank line after the signatures": SIGNED + "\n",
    "hyphen instead of EM DASH": TEXT + "\n" + PETER_LINE.replace("\u2014", "-"),
    "no space after the dash": TEXT + "\n" + PETER_LINE.replace("\u2014 ", "\u2014"),
    "no signature after the name": TEXT + "\n\u2014 PeterNeumann\n",
    "empty name": TEXT + "\n\u2014  " + PETER_LINE.split(" ")[2],
    "name with a plus": TEXT + "\n" + PETER_LINE.replace("PeterNeumann", "Peter+Neumann"),
    "name with a no-break space": TEXT + "\n" + PETER_LINE.replace("PeterNeumann", "Peter\xa0N"),
    "signature of four bytes": TEXT + "\n\u2014 PeterNeumann x08gow==\n",
    "carriage return": SIGNED.replace("\n\n", "\r\n\n"),
    "control character": "\x07" + SIGNED,
    "lone surrogate": "\ud800" + SIGNED,
    "a good and a bad known signature": TEXT + "\n" + ENOCH_LINE + _flip_sig_byte(PETER_LINE),
    "too many signatures": TEXT
    + "\n"
    + "".join(f"\u2014 k{i} AAAAAAA=\n" for i in range(MAX_SIGNATURES))
    + PETER_LINE,
}


@pytest.mark.parametrize("note", REFUSED.values(), ids=REFUSED.keys())
def test_tampered_or_malformed_notes_are_refused(note: str) -> None:
    with pytest.raises(IntegrityError):
        open_note(note, [PETER_V, ENOCH_V] if "good and a bad" in note else [PETER_V])


def test_a_bad_signature_by_a_known_key_is_refused_even_with_a_good_one() -> None:
    note = TEXT + "\n" + ENOCH_LINE + _flip_sig_byte(PETER_LINE)
    with pytest.raises(IntegrityError, match="PeterNeumann"):
        open_note(note, [PETER_V, ENOCH_V])


def test_invalid_utf8_bytes_are_refused() -> None:
    with pytest.raises(IntegrityError, match="UTF-8"):
        open_note(b"\xff" + SIGNED.encode(), [PETER_V])


def test_unknown_signatures_are_returned_once_and_a_repeated_known_one_ignored() -> None:
    note = SIGNED + ENOCH_LINE + ENOCH_LINE + _flip_sig_byte(PETER_LINE)
    opened = open_note(note, [PETER_V])  # the second Peter line is not even checked
    assert opened.signers == ("PeterNeumann",)
    assert opened.unknown == (ENOCH_LINE.removesuffix("\n"),)


def test_exactly_the_maximum_number_of_signatures_is_accepted() -> None:
    filler = "".join(f"\u2014 k{i} AAAAAAA=\n" for i in range(MAX_SIGNATURES - 1))
    assert open_note(SIGNED + filler, [PETER_V]).signers == ("PeterNeumann",)


def test_text_may_contain_blank_lines() -> None:
    text = "a\n\nb\n\n"
    note = sign_note(text, [PETER_S])
    assert open_note(note, [PETER_V]).text == text


def test_two_different_verifiers_with_one_name_and_id_are_a_usage_error() -> None:
    impostor = Verifier(name=PETER_V.name, key_id=PETER_V.key_id, public_key=ENOCH_V.public_key)
    with pytest.raises(ValidationError):
        open_note(SIGNED, [PETER_V, impostor])
    assert open_note(SIGNED, [PETER_V, PETER_V]).signers == ("PeterNeumann",)


# --- key texts -----------------------------------------------------------------------

PETER_VKEY: str = GOLDEN["verifier_keys"]["PeterNeumann"]
PETER_SKEY: str = GOLDEN["signer_keys"]["PeterNeumann"]

BAD_VERIFIER_KEYS = {
    "key id not matching the name": PETER_VKEY.replace("PeterNeumann", "PeterNeumanm"),
    "key id changed": PETER_VKEY.replace("c74f20a3", "c74f20a4"),
    "key id too short": PETER_VKEY.replace("c74f20a3", "c74f20a"),
    "key id with a sign": PETER_VKEY.replace("c74f20a3", "+74f20a3"),
    "key id with 0x": PETER_VKEY.replace("c74f20a3", "0x4f20a3"),
    "bad base64": PETER_VKEY + "=",
    "wrong type byte": PETER_VKEY.replace("+ARpc", "+AhpC"),
    "no key": "PeterNeumann+c74f20a3",
    "empty name": PETER_VKEY.replace("PeterNeumann", ""),
    "signer key given": PETER_SKEY,
}


@pytest.mark.parametrize("text", BAD_VERIFIER_KEYS.values(), ids=BAD_VERIFIER_KEYS.keys())
def test_bad_verifier_keys_are_refused(text: str) -> None:
    with pytest.raises(IntegrityError):
        Verifier.from_key(text)


BAD_SIGNER_KEYS = {
    "key id not matching the name": PETER_SKEY.replace("PeterNeumann", "PeterNeumanm"),
    "key id changed": PETER_SKEY.replace("c74f20a3", "c74f20a4"),
    "not private": PETER_SKEY.replace("PRIVATE+", "PUBLIC+"),
    "verifier key given": PETER_VKEY,
    "short seed": PETER_SKEY[:-4],
}


@pytest.mark.parametrize("text", BAD_SIGNER_KEYS.values(), ids=BAD_SIGNER_KEYS.keys())
def test_bad_signer_keys_are_refused(text: str) -> None:
    with pytest.raises(IntegrityError):
        Signer.from_key(text)


def test_uppercase_hex_key_ids_are_read_as_go_does() -> None:
    assert Verifier.from_key(PETER_VKEY.replace("c74f20a3", "C74F20A3")) == PETER_V


@pytest.mark.parametrize("name", ["", "a b", "a+b", "a\tb", "a\u3000b", "a\u2028b", "a\x01b"])
def test_generate_key_refuses_invalid_names(name: str) -> None:
    with pytest.raises(ValidationError):
        generate_key(name)


# --- signing -------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["no newline", "bell\x07\n", "\ud800\n"])
def test_sign_note_refuses_bad_text(text: str) -> None:
    with pytest.raises(ValidationError):
        sign_note(text, [PETER_S])


def test_sign_note_needs_distinct_signers() -> None:
    with pytest.raises(ValidationError):
        sign_note(TEXT, [])
    with pytest.raises(ValidationError):
        sign_note(TEXT, [PETER_S, PETER_S])


def test_multiple_signers_sign_in_order() -> None:
    other, other_v = _key("example.com/other")
    note = sign_note(TEXT, [PETER_S, other])
    assert open_note(note, [PETER_V, other_v]).signers == ("PeterNeumann", "example.com/other")
    _, sigs = parse_signatures(note)
    assert [s.name for s in sigs] == ["PeterNeumann", "example.com/other"]


def test_add_signature_lines_appends_new_lines_only() -> None:
    note = add_signature_lines(SIGNED, [ENOCH_LINE, PETER_LINE])
    assert note == SIGNED + ENOCH_LINE
    assert open_note(note, [PETER_V, ENOCH_V]).signers == ("PeterNeumann", "EnochRoot")
    with pytest.raises(IntegrityError):
        add_signature_lines(SIGNED, ["- not a signature line"])

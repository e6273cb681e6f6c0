"""Conformance and refusal tests for ledger.canonical (both profiles)."""

from __future__ import annotations

import gzip
import hashlib
import json
import struct
from collections import OrderedDict
from pathlib import Path
from typing import Any

import orjson
import pytest

from ledger.canonical import (
    GHAW_MAX_DEPTH,
    PROFILES,
    CanonicalizationError,
    Profile,
    _exact,
    canonical_bytes,
    canonicalize,
    format_number,
    sha256_hex,
    sha256_of,
)
from ledger.errors import LedgerError

VECTORS = Path(__file__).parent / "vectors"
RFC = VECTORS / "rfc8785"
RFC_NAMES = sorted(p.stem for p in (RFC / "input").glob("*.json"))
GHAW_LINES = (VECTORS / "ghaw" / "canonical.jsonl").read_bytes().decode("utf-8").split("\n")[:-1]


def nested_lists(levels: int, inner: object) -> object:
    """``levels`` lists around ``inner``: ``inner`` sits at depth ``levels``."""
    value = inner
    for _ in range(levels):
        value = [value]
    return value


# --- RFC 8785 vectors -------------------------------------------------------------------


def test_rfc_vectors_present() -> None:
    assert RFC_NAMES == ["arrays", "french", "structures", "unicode", "values", "weird"]


@pytest.mark.parametrize("name", RFC_NAMES)
def test_rfc8785_output(name: str) -> None:
    value = json.loads((RFC / "input" / f"{name}.json").read_text(encoding="utf-8"))
    expected = (RFC / "output" / f"{name}.json").read_bytes()
    assert canonical_bytes(value) == expected
    assert canonicalize(value) == expected.decode("utf-8")
    assert _exact(value, False) == expected.decode("utf-8")
    assert sha256_of(value) == "sha256:" + hashlib.sha256(expected).hexdigest()


@pytest.mark.parametrize("name", RFC_NAMES)
def test_rfc8785_outhex(name: str) -> None:
    value = json.loads((RFC / "input" / f"{name}.json").read_text(encoding="utf-8"))
    hex_text = "".join((RFC / "outhex" / f"{name}.txt").read_text(encoding="ascii").split())
    assert canonical_bytes(value) == bytes.fromhex(hex_text)


def test_es6_numbers_100k() -> None:
    path = RFC / "es6-numbers-100k.txt.gz"
    count = 0
    failures: list[str] = []
    with gzip.open(path, "rt", encoding="ascii") as lines:
        for line in lines:
            hex_ieee, expected = line.rstrip("\n").split(",")
            (x,) = struct.unpack(">d", bytes.fromhex(hex_ieee.rjust(16, "0")))
            got = format_number(x)
            if got != expected or canonical_bytes([x]) != f"[{expected}]".encode():
                failures.append(f"{hex_ieee}: expected {expected}, got {got}")
            count += 1
    assert count == 100_000
    assert failures == []


# --- gh-aw vectors ----------------------------------------------------------------------


def test_ghaw_vectors_present() -> None:
    assert len(GHAW_LINES) == 200


@pytest.mark.parametrize("line", GHAW_LINES, ids=[f"line{i + 1}" for i in range(200)])
def test_ghaw_vector(line: str) -> None:
    vector = json.loads(line)
    value = json.loads(vector["input"])
    assert canonicalize(value, profile="gh-aw") == vector["ghaw"]
    assert canonicalize(value, profile="rfc8785") == vector["jcs"]
    assert _exact(value, True) == vector["ghaw"]
    assert _exact(value, False) == vector["jcs"]
    assert canonical_bytes(value, "gh-aw") == vector["ghaw"].encode("utf-8")
    assert sha256_of(value, profile="gh-aw") == vector["sha256"]
    assert sha256_hex(vector["ghaw"]) == vector["sha256"]


# --- specific rules ---------------------------------------------------------------------


def test_ghaw_array_index_keys_first() -> None:
    value = {"b": 1, "10": 1, "2": 1, "a": 1}
    assert canonicalize(value, "gh-aw") == '{"2":1,"10":1,"a":1,"b":1}'
    assert canonicalize(value) == '{"10":1,"2":1,"a":1,"b":1}'
    # Not array indices: leading zero, sign, 2**32-1 and beyond, non-ASCII digits.
    keys = {"4294967294": 0, "4294967295": 0, "01": 0, "-1": 0, "1.5": 0, "١": 0, "": 0, "0": 0}
    assert list(json.loads(canonicalize(keys, "gh-aw"))) == [
        "0",
        "4294967294",
        "",
        "-1",
        "01",
        "1.5",
        "4294967295",
        "١",
    ]


@pytest.mark.parametrize("profile", PROFILES)
def test_utf16_key_order(profile: Profile) -> None:
    value = {"\uffff": 1, "\U00010000": 2, "a": 3, "\ue000": 4}
    assert canonicalize(value, profile) == '{"a":3,"\U00010000":2,"\ue000":4,"\uffff":1}'


@pytest.mark.parametrize("profile", PROFILES)
def test_string_escapes(profile: Profile) -> None:
    text = "".join(map(chr, range(0x20))) + '"\\/\x7f\u2028\u2029é😀'
    expected = (
        '"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r'
        "\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018"
        '\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\\"\\\\/\x7f\u2028\u2029é😀"'
    )
    assert canonicalize(text, profile) == expected
    assert canonicalize([text], profile) == f"[{expected}]"  # the orjson path


def test_orjson_escapes_every_code_point_like_the_exact_encoder() -> None:
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    assert orjson.dumps(text) == _exact(text, False).encode()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1"),
        (-0.0, "0"),
        (0.0, "0"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (1e16, "10000000000000000"),
        (0.000001, "0.000001"),
        (123456789012345680000.0, "123456789012345680000"),
        (2.0**53, "9007199254740992"),
        (-1.5e-300, "-1.5e-300"),
        (0.1 + 0.2, "0.30000000000000004"),
        (2**53 - 1, "9007199254740991"),
        (-(2**53 - 1), "-9007199254740991"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
    ],
)
@pytest.mark.parametrize("profile", PROFILES)
def test_scalars(value: object, expected: str, profile: Profile) -> None:
    assert canonicalize(value, profile) == expected
    assert canonicalize({"k": [value]}, profile) == '{"k":[' + expected + "]}"


def test_bool_is_not_a_number() -> None:
    assert canonicalize([True, 1, False, 0]) == "[true,1,false,0]"
    with pytest.raises(CanonicalizationError):
        format_number(True)


def test_format_number_accepts_int() -> None:
    assert format_number(10**21) == "1e+21"
    assert format_number(2**60) == "1152921504606847000"  # as JavaScript prints 2 ** 60


def test_tuples_and_subclasses() -> None:
    value = OrderedDict([("b", (1, 2)), ("a", [])])
    assert canonicalize(value) == '{"a":[],"b":[1,2]}'


def test_shared_reference_is_not_a_cycle() -> None:
    shared = {"x": 1}
    assert canonicalize([shared, shared, {"s": shared}]) == '[{"x":1},{"x":1},{"s":{"x":1}}]'


def test_ghaw_surrogates_like_javascript() -> None:
    assert canonicalize("a\ud800b\udfff", "gh-aw") == '"a\\ud800b\\udfff"'
    assert canonicalize(["\ud83d\ude00"], "gh-aw") == '["😀"]'  # a pair is one character
    assert canonical_bytes({"\udead": "x"}, "gh-aw") == b'{"\\udead":"x"}'


def test_sha256_helpers() -> None:
    assert sha256_of({"a": 1}) == "sha256:" + hashlib.sha256(b'{"a":1}').hexdigest()
    assert sha256_hex("é") == "sha256:" + hashlib.sha256("é".encode()).hexdigest()
    assert sha256_hex(b"\x00") == "sha256:" + hashlib.sha256(b"\x00").hexdigest()
    with pytest.raises(CanonicalizationError):
        sha256_hex("\ud800")


def test_ghaw_depth_limit_accepts_depth_32() -> None:
    assert canonicalize(nested_lists(GHAW_MAX_DEPTH, 1), "gh-aw") == "[" * 32 + "1" + "]" * 32
    # 33 lists in all: the innermost, empty, sits at depth 32.
    assert canonicalize(nested_lists(GHAW_MAX_DEPTH, []), "gh-aw") == "[" * 33 + "]" * 33
    deep = nested_lists(200, 1)
    assert canonicalize(deep) == "[" * 200 + "1" + "]" * 200  # no limit in rfc8785


# --- refusals ---------------------------------------------------------------------------


def _cyclic_dict() -> dict[str, Any]:
    d: dict[str, Any] = {"a": {"b": []}}
    d["a"]["b"].append(d)
    return d


def _cyclic_list() -> list[Any]:
    a: list[Any] = [1, {"k": None}]
    a[1]["k"] = a
    return a


REFUSALS = [
    pytest.param({"a": [0, 1, 2, float("nan")]}, "$.a[3]", "nan", id="nan"),
    pytest.param({"x": float("inf")}, "$.x", "inf", id="inf"),
    pytest.param([float("-inf")], "$[0]", "-inf", id="-inf"),
    pytest.param({"n": 2**53}, "$.n", "9007199254740992", id="2**53"),
    pytest.param({"n": -(2**53)}, "$.n", "-9007199254740992", id="-(2**53)"),
    pytest.param({"n": [10**30]}, "$.n[0]", "string", id="10**30"),
    pytest.param({"a": {1: "x"}}, "$.a", "key 1 is int", id="int-key"),
    pytest.param({"a": {None: "x"}}, "$.a", "None", id="none-key"),
    pytest.param({"a": {(1, 2): "x"}}, "$.a", "tuple", id="tuple-key"),
    pytest.param(_cyclic_dict(), "$.a.b[0]", "cycle", id="dict-cycle"),
    pytest.param(_cyclic_list(), "$[1].k", "cycle", id="list-cycle"),
    pytest.param({"s": {1, 2}}, "$.s", "set", id="set"),
    pytest.param({"b": b"x"}, "$.b", "bytes", id="bytes"),
    pytest.param({"o": [object()]}, "$.o[0]", "object", id="object"),
    pytest.param({"weird key": float("nan")}, '$["weird key"]', "nan", id="quoted-path"),
    pytest.param(float("nan"), "$", "nan", id="top-level"),
]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(("value", "path", "fragment"), REFUSALS)
def test_refusals(value: object, path: str, fragment: str, profile: Profile) -> None:
    for function in (canonicalize, canonical_bytes, sha256_of):
        with pytest.raises(CanonicalizationError) as caught:
            function(value, profile)
        message = str(caught.value)
        assert f"cannot canonicalize {path} ({profile} profile)" in message
        assert fragment in message
        assert isinstance(caught.value, LedgerError)
        assert isinstance(caught.value, ValueError)


def test_ghaw_depth_33_refused() -> None:
    with pytest.raises(CanonicalizationError, match="nesting depth 33") as caught:
        canonicalize(nested_lists(GHAW_MAX_DEPTH + 1, 1), "gh-aw")
    assert "$" + "[0]" * 33 in str(caught.value)
    with pytest.raises(CanonicalizationError, match="nesting depth 33"):
        canonicalize({"a": nested_lists(GHAW_MAX_DEPTH, 1)}, "gh-aw")
    with pytest.raises(CanonicalizationError, match="nesting depth 33"):
        canonicalize(nested_lists(GHAW_MAX_DEPTH + 1, []), "gh-aw")  # a container counts too
    assert canonicalize(nested_lists(GHAW_MAX_DEPTH + 1, 1)) == "[" * 33 + "1" + "]" * 33


def test_rfc8785_refuses_surrogates() -> None:
    with pytest.raises(CanonicalizationError, match=r"\$\.a.*U\+D800"):
        canonicalize({"a": "x\ud800"})
    with pytest.raises(CanonicalizationError, match="U\\+DC00"):
        canonicalize({"\udc00": 1})


def test_ghaw_refuses_keys_equal_after_joining_pairs() -> None:
    with pytest.raises(CanonicalizationError, match="same JavaScript string"):
        canonicalize({"😀": 1, "\ud83d\ude00": 2}, "gh-aw")


def test_unknown_profile() -> None:
    with pytest.raises(CanonicalizationError, match="unknown canonical JSON profile"):
        canonicalize({}, "jcs")  # type: ignore[arg-type]


def test_too_deep_for_python_is_refused_cleanly() -> None:
    with pytest.raises(CanonicalizationError, match="recursion limit"):
        canonicalize(nested_lists(100_000, 1))


def test_docstring_examples() -> None:
    import doctest

    import ledger._canonical_numbers
    import ledger.canonical

    for module in (ledger.canonical, ledger._canonical_numbers):
        failed, attempted = doctest.testmod(module)
        assert attempted > 0
        assert failed == 0

"""Property tests for ledger.canonical: against the rfc8785 package, the exact encoder and
(when ``node`` is installed) JavaScript's own ``JSON.stringify``."""

from __future__ import annotations

import json
import math
import random
import shutil
import struct
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.canonical import (
    PROFILES,
    CanonicalizationError,
    Profile,
    _exact,
    canonicalize,
    format_number,
)

MAX_SAFE = 2**53 - 1

# Keys chosen to exercise every ordering rule: array indices and near misses, UTF-16 vs
# code-point order, and JavaScript's special "__proto__".
TRICKY_KEYS = ["", "a", "B", "0", "1", "2", "10", "01", "-1", "1.5", "4294967294",
               "4294967295", "__proto__", "é", "\ue000", "\uffff", "\U00010000", "😀"]  # fmt: skip

NUMBERS = st.one_of(
    st.integers(-MAX_SAFE, MAX_SAFE),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1e21, 1e-7, 1e-6, 1e16, 1e15, 1e-4, 0.5, 2.0**53, 5e-324]),
)


def json_values(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), NUMBERS, text)
    keys = st.one_of(text, st.sampled_from(TRICKY_KEYS), st.integers(0, 2**32).map(str))
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=6),
            st.dictionaries(keys, inner, max_size=6),
        ),
        max_leaves=40,
    )


UNICODE_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
ANY_TEXT = st.text(max_size=12)  # lone surrogates included
SETTINGS = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(function: Callable[..., str], *args: Any) -> str:
    try:
        return "ok:" + function(*args)
    except CanonicalizationError:
        return "refused"


@SETTINGS
@given(json_values(UNICODE_TEXT))
def test_rfc8785_profile_equals_rfc8785_package(value: Any) -> None:
    assert canonicalize(value) == rfc8785.dumps(value).decode("utf-8")


@SETTINGS
@given(json_values(ANY_TEXT), st.sampled_from(PROFILES))
def test_fast_path_equals_exact_encoder(value: Any, profile: Profile) -> None:
    ghaw = profile == "gh-aw"
    assert outcome(canonicalize, value, profile) == outcome(_exact, value, ghaw)


@SETTINGS
@given(json_values(ANY_TEXT), st.sampled_from(PROFILES))
def test_canonical_form_is_a_fixed_point(value: Any, profile: Profile) -> None:
    try:
        text = canonicalize(value, profile)
    except CanonicalizationError:
        assert profile == "rfc8785"  # only surrogates can be refused here
        return
    # As in JavaScript, an integer-valued number beyond 2**53 (printed from a float) is a
    # float; Python's json would make it an int, which canonical JSON refuses.
    again = json.loads(text, parse_int=lambda s: int(s) if abs(int(s)) <= MAX_SAFE else float(s))
    assert canonicalize(again, profile) == text


@SETTINGS
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_number_round_trips(x: float) -> None:
    text = format_number(x)
    assert float(text) == x
    assert canonicalize([x]) == f"[{text}]"


@given(st.integers(min_value=0, max_value=2**64 - 1))
@settings(max_examples=2000)
def test_format_number_on_random_doubles(bits: int) -> None:
    (x,) = struct.unpack(">d", bits.to_bytes(8, "big"))
    if math.isfinite(x):
        assert format_number(x) == rfc8785.dumps(x).decode()
        assert canonicalize({"x": x}) == '{"x":' + format_number(x) + "}"


# --- cross-check with JavaScript ----------------------------------------------------------

NODE_REFERENCE = r"""
const values = JSON.parse(require("fs").readFileSync(0, "utf8"));
function canonicalJSON(value) {
  function normalize(item, depth) {
    if (depth > 32) throw new TypeError("Ledger JSON exceeds maximum nesting depth");
    if (item === null || typeof item !== "object") return item;
    if (Array.isArray(item)) return item.map((entry) => normalize(entry, depth + 1));
    const result = {};
    for (const key of Object.keys(item).sort()) {
      Object.defineProperty(result, key, {
        value: normalize(item[key], depth + 1), enumerable: true, configurable: true,
      });
    }
    return result;
  }
  return JSON.stringify(normalize(value, 0));
}
const out = values.map((v) => { try { return canonicalJSON(v); } catch (e) { return null; } });
process.stdout.write(JSON.stringify(out));
"""

CHARS = [*"aZ09 /\"\\\x00\x08\x09\x0a\x0c\x0d\x1f\x7f", "\u2028", "é", "\uffff", "\U0001f600",
         "\ud800", "\udc00", "\ud83d", "\ude00"]  # fmt: skip


def _random_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth < 4 and roll < 0.3:
        if rng.random() < 0.5:
            return [_random_value(rng, depth + 1) for _ in range(rng.randrange(5))]
        keys = rng.sample(TRICKY_KEYS, rng.randrange(6)) + [
            "".join(rng.choices(CHARS, k=rng.randrange(4))) for _ in range(rng.randrange(3))
        ]
        # Keys that JavaScript reads as one string (a surrogate pair vs the character it
        # encodes) would be a duplicate key there: keep one of each.
        unique = {key.encode("utf-16", "surrogatepass"): key for key in keys}
        return {key: _random_value(rng, depth + 1) for key in unique.values()}
    if roll < 0.45:
        return "".join(rng.choices(CHARS, k=rng.randrange(8)))
    if roll < 0.6:
        return rng.choice([None, True, False])
    if roll < 0.75:
        return rng.randint(-MAX_SAFE, MAX_SAFE) // 10 ** rng.randrange(16)
    if roll < 0.85:
        return rng.uniform(-1, 1) * 10.0 ** rng.randint(-25, 25)
    (x,) = struct.unpack(">d", rng.getrandbits(64).to_bytes(8, "big"))
    return x if math.isfinite(x) else -0.0


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run JavaScript")
def test_ghaw_profile_equals_javascript() -> None:
    rng = random.Random(8785)
    values: list[Any] = [_random_value(rng, 0) for _ in range(3000)]
    nest: Any = 1
    for _ in range(34):
        values.append(nest)
        nest = [nest] if len(values) % 2 else {"k": nest}
    node = shutil.which("node")
    assert node is not None
    done = subprocess.run(
        [node, "-e", NODE_REFERENCE],
        input=json.dumps(values),  # ensure_ascii: surrogates travel as \\uXXXX escapes
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    expected = json.loads(done.stdout)
    assert len(expected) == len(values)
    wanted = ["refused" if want is None else "ok:" + want for want in expected]
    mismatches = [
        (value, want, got)
        for value, want in zip(values, wanted, strict=True)
        if (got := outcome(canonicalize, value, "gh-aw")) != want
    ]
    assert mismatches == []

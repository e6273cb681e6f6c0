"""Properties of the default redactor, on hostile generated text: a secret placed anywhere
never survives, redacting twice changes nothing, text without secrets is kept, and the
JSON shape of a value is kept. (Its running time is measured by benchmarks/gate.py.)"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.gate import REDACTED, redact_secrets, redact_text

# Pieces of the patterns the redactor looks for, so that generated text keeps landing
# on their edges: prefixes without bodies, separators, quotes, escapes, half blocks.
FRAGMENTS = [
    "a-", "password", "pass", "pwd=", "token: ", "Authorization: ", "Bearer ", "sk-", "ghp_",
    "AKIA", "eyJ", "://", "://u:", "@", ":", "=", '"', "'", "\\", "\\\"", "<", ">", "</",
    "<password>", "<![CDATA[", "]]>", "-----BEGIN PRIVATE KEY-----", "-----END", "|\n  ",
    "\n", " ", "\t", "--password ", "-u ", "key=\"", "value=\"", "Q~", "1Q~", "xoxb-", "{", "}",
    "[", "]", ",", ";", "&", "#", "api_key", "Cookie: ", "DB_", "x", "Z", "9", "é", "ñ",
]  # fmt: skip
hostile = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=40).map(
    "".join
)

ALNUM = string.ascii_letters + string.digits


def body(n: int) -> st.SearchStrategy[str]:
    """A random key body of ``n`` characters that mixes digits and both cases."""
    return st.text(ALNUM, min_size=n, max_size=n).filter(
        lambda b: any(c.isdigit() for c in b) and b.lower() != b and b.upper() != b
    )


shaped = st.one_of(
    body(36).map(lambda b: "ghp_" + b),
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16).map(lambda b: "AKIA" + b),
    body(40).map(lambda b: "sk-ant-api03-" + b),
    body(48).map(lambda b: "sk-" + b),
    body(32).map(lambda b: "sk_live_" + b),
    body(24).map(lambda b: f"xoxb-1234567890-{b}"),
    body(35).map(lambda b: "AIza" + b),
    body(40).map(lambda b: f"eyJ{b[:20]}.eyJ{b[20:]}.{b}"),
)
# where a shaped secret must be found: after a separator (some formats also glued)
separators = st.sampled_from([" ", "\n", "=", ": ", '"', "'", "(", ",", "/", "\t"])


@settings(max_examples=300, deadline=None)
@given(before=hostile, after=hostile, secret=shaped, sep=separators, sep2=separators)
def test_a_shaped_secret_never_survives(
    before: str, after: str, secret: str, sep: str, sep2: str
) -> None:
    out = redact_text(before + sep + secret + sep2 + after)
    assert secret not in out
    assert secret[-12:] not in out  # nor its random tail


key_word = st.sampled_from(
    ["password", "passwd", "pwd", "secret", "token", "api_key", "apiKey", "auth",
     "access_token", "client_secret", "private_key", "credentials", "passphrase", "pin"]
)  # fmt: skip
key_prefix = st.sampled_from(["", "db_", "DB_", "x-", "my.", "user", "AWS_"])
casing: st.SearchStrategy[Callable[[str], str]] = st.sampled_from(
    [str.lower, str.upper, lambda s: s]
)
plain_secret = st.text(ALNUM + "!$%*+/@^~", min_size=6, max_size=30)


def key_name(prefix: str, word: str, case: Callable[[str], str]) -> str:
    if prefix == "user":  # camel case: userPassword, userApi_key
        return prefix + word[:1].upper() + word[1:]
    return prefix + case(word)


@settings(max_examples=300, deadline=None)
@given(
    prefix=key_prefix,
    word=key_word,
    case=casing,
    secret=plain_secret,
    shape=st.sampled_from(["{k}={v}", "{k}: {v}", '"{k}": "{v}"', "{k} = '{v}'", "<{k}>{v}</{k}>"]),
    before=hostile,
)
def test_a_shapeless_secret_under_a_telling_name_never_survives(
    prefix: str, word: str, case: Callable[[str], str], secret: str, shape: str, before: str
) -> None:
    key = key_name(prefix, word, case)
    assert redact_secrets({key: secret}) == {key: REDACTED}
    text = before + "\n" + shape.format(k=key, v=secret) + "\n"
    assert secret not in redact_text(text)


@settings(max_examples=400, deadline=None)
@given(hostile)
def test_redacting_twice_changes_nothing(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


WORDS = ["the", "notes", "file", "author", "wrote", "a", "bucket", "read", "path", "token",
         "of", "key", "value", "name", "list", "tasks", "bypass", "spin", "session",
         "2024"]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=30), st.sampled_from([" ", "\n", ", "]))
def test_text_without_secrets_is_kept(words: list[str], sep: str) -> None:
    text = sep.join(words)
    assert redact_text(text) == text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | hostile,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(hostile, inner, max_size=5),
    max_leaves=30,
)


def same_shape(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and len(a) == len(b)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same_shape, a, b))
    if isinstance(a, str):
        return isinstance(b, str)
    return bool(b in (a, REDACTED))  # a number under a secret's name is masked


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_the_json_shape_is_kept(value: Any) -> None:
    out = redact_secrets(value)
    assert same_shape(value, out)

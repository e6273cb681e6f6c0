"""The nesting limit of ``args``/``result``, found at C speed (``nested_deeper``), is the
depth a walk over the value finds, whatever its strings hold (brackets, quotes,
backslashes) and however the JSON is laid out."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.model import Event
from ledger.model.values import MAX_NESTING, nested_deeper

_TRICKY = st.text(alphabet='[]{}"\\ax\n\u2028é', max_size=6)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TRICKY, inner, max_size=3),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


@settings(max_examples=400)
@given(value=_VALUES, limit=st.integers(0, 8), spaced=st.booleans())
def test_the_depth_found_is_the_depth_of_the_value(value: Any, limit: int, spaced: bool) -> None:
    raw = json.dumps(value, indent=1).encode() if spaced else orjson.dumps(value)
    assert nested_deeper(raw, limit) == (_depth(value) > limit)


def test_a_stored_event_past_the_limit_is_refused_on_both_paths() -> None:
    """Both decoders (the compact one and the exact one) refuse what the constructor
    refuses, and accept a wide value of many containers that is not deep."""
    deep = "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1)
    wide = orjson.dumps([{"id": i, "tags": ["a", "]"]} for i in range(300)]).decode()
    ok = Event(kind="tool_result", run_id="r", call_id="c", tool="t", result=wide)
    assert Event.from_json(ok.to_json()) == ok
    text = ok.to_json().replace(wide, deep)
    for form in (text, text.replace(',"', ', "')):
        try:
            Event.from_json(form)
        except ValueError as exc:
            assert "nested" in str(exc)
        else:
            raise AssertionError("a value nested past the limit was read back")

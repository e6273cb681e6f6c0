"""Property: hostile tool calls never raise, and an accepted queue always normalizes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.typed.config import parse_config
from ledger.typed.intents import IntentQueue
from ledger.typed.tools import tool_definitions
from ledger.typed.transactions import validate_artifact

CONFIG = parse_config(
    {
        "log": {"type": "log"},
        "tbl": {"type": "table", "key": "id", "schema": {"type": "object"}},
        "cnt": {"type": "counter"},
        "m": {"type": "map"},
        "kn": {"type": "notes"},
        "raw": {},
    }
)
TOOLS = [t.name for t in tool_definitions(CONFIG)] + ["nope"]
FIELDS = [
    "ledger",
    "operation",
    "value",
    "key",
    "patch",
    "name",
    "amount",
    "record",
    "temp_id",
    "subject",
    "note",
    "reason",
    "citations",
    "note_id",
    "vote",
    "id",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            "log",
            "tbl",
            "cnt",
            "m",
            "kn",
            "raw",
            "append",
            "insert",
            "note",
            "vote",
            "up",
            "#t1",
            "t1",
            "../x",
            "README.md",
            "",
        ]
    ),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=4)), inner, max_size=4),
    ),
    max_leaves=10,
)
arguments = st.one_of(st.dictionaries(st.sampled_from(FIELDS), values, max_size=6), values)


@settings(max_examples=150, deadline=None)
@given(calls=st.lists(st.tuples(st.sampled_from(TOOLS), arguments), max_size=8))
def test_submit_never_raises_and_the_queue_always_normalizes(
    calls: list[tuple[str, Any]],
) -> None:
    queue = IntentQueue(CONFIG)
    accepted = 0
    for tool, args in calls:
        answer = queue.submit(tool, args)
        assert answer["success"] in (True, False)
        if answer["success"]:
            assert answer == {"success": True, "queued": True}
            accepted += 1
        else:
            assert isinstance(answer["error"], str) and answer["error"]
    assert len(queue) == accepted
    appends = validate_artifact(CONFIG, queue.artifact("prop:1"))
    assert len(appends) == accepted

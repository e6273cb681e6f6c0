"""The sink roles and ``validate_action``: each self-explaining rule on its own."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.errors import NotSelfExplaining, ValidationError
from ledger.model import Event, Kind, Ref
from ledger.sinks import DiscardSink, DurableSink, JSONLSink, Reader, Sink, validate_action

from .factories import action


def test_a_complete_action_passes() -> None:
    validate_action(action("r1"))


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"kind": "tool_request"}, "kind is 'tool_request', must be 'action'"),
        ({"run_id": ""}, "run_id is empty"),
        ({"call_id": ""}, "call_id is empty"),
        ({"tool": ""}, "tool is empty"),
        ({"args": None}, "args is missing"),
        ({"args": "null"}, "args must be a JSON object"),
        ({"args": "[1,2]"}, "args must be a JSON object"),
        ({"args": '"rm -rf"'}, "args must be a JSON object"),
        ({"verdict": None}, "verdict is missing, must be 'allowed'"),
        ({"verdict": "denied"}, "verdict is 'denied', must be 'allowed'"),
        ({"verdict": "needs_approval"}, "verdict is 'needs_approval'"),
        ({"refs": []}, "refs is empty"),
        ({"refs": [Ref(source="tool", id="")]}, "no ref has a known source"),
        ({"refs": [Ref(source="web", id="x")]}, "no ref has a known source"),
    ],
)
def test_each_rule_is_enforced_alone(changes: dict[str, Any], named: str) -> None:
    with pytest.raises(NotSelfExplaining) as info:
        validate_action(action("r1", **changes))
    assert len(info.value.problems) == 1
    assert named in info.value.problems[0]
    assert named in str(info.value)


def test_every_missing_part_is_named_at_once() -> None:
    with pytest.raises(NotSelfExplaining) as info:
        validate_action(Event(kind=Kind.PROMPT))
    text = str(info.value)
    for part in ("kind", "run_id", "call_id", "tool", "args", "verdict", "refs"):
        assert part in text
    assert len(info.value.problems) == 7


def test_one_good_ref_among_bad_ones_is_enough() -> None:
    refs = [Ref(source="web", id="x"), Ref(source="memory", id="m1")]
    validate_action(action("r1", refs=refs))


def test_a_non_event_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        validate_action({"kind": "action"})  # type: ignore[arg-type]


def test_roles_are_runtime_checkable(tmp_path: Any) -> None:
    plain = [DiscardSink(), JSONLSink(tmp_path / "x.jsonl")]
    for sink in plain:
        assert isinstance(sink, Sink)
        assert not isinstance(sink, DurableSink)  # type: ignore[unreachable]
        assert not isinstance(sink, Reader)
        assert not hasattr(sink, "commit_action")
        sink.close()

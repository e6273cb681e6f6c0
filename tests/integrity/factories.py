"""Events for the sink tests."""

from __future__ import annotations

from typing import Any

from ledger.model import Event, Kind, Ref

__all__ = ["BAD", "action", "good_action", "request_event", "result_event"]


def action(run: str, call: str = "c1", **changes: Any) -> Event:
    """A self-explaining action (every rule satisfied); ``changes`` break it."""
    fields: dict[str, Any] = {
        "kind": Kind.ACTION,
        "run_id": run,
        "call_id": call,
        "tool": "delete_file",
        "args": '{"path":"/tmp/x"}',
        "verdict": "allowed",
        "reason": "the user asked to clean up",
        "refs": [Ref(source="tool", id="01J000000000000000000000RQ", hash="")],
    }
    fields.update(changes)
    return Event(**fields)


def request_event(run_id: str, text: str = "clean up /tmp") -> Event:
    """A run's request (its chain head)."""
    return Event(kind=Kind.REQUEST, run_id=run_id, args=f'"{text}"')


def result_event(run: str, call: str = "c1", **changes: Any) -> Event:
    """A tool result for call ``call``."""
    fields: dict[str, Any] = {
        "kind": Kind.TOOL_RESULT,
        "run_id": run,
        "call_id": call,
        "tool": "delete_file",
        "result": '{"ok":true}',
    }
    fields.update(changes)
    return Event(**fields)


def BAD(value: object) -> Any:
    """A deliberately wrong argument (typed ``Any`` so mypy lets a test pass it)."""
    return value


def good_action(run: str, call: str = "c1", **changes: Any) -> Event:
    """A self-explaining action written as a new user would (plain strings, a dict)."""
    fields: dict[str, Any] = {
        "kind": "action",
        "run_id": run,
        "call_id": call,
        "tool": "send_mail",
        "args": {"to": "ops@example.com"},
        "verdict": "allowed",
        "refs": [Ref(source="tool", id="msg-1")],
    }
    fields.update(changes)
    return Event(**fields)

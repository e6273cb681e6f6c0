"""Who: the agent, the principal and the approver of an event, read defensively.

Ledgers written before structured identity carry only ``agent_path``; newer events may
carry a principal and agent id/version (directly, or on an ``actor``) and an approval
(approver, time, reason). These accessors read whichever is there and give ``""`` /
``None`` for what is not, so the viewer reads old and new ledgers alike.

>>> from ledger.model import Event
>>> e = Event(kind="action", agent_path="planner/coder")
>>> agent_of(e), principal_of(e), approval_of(e)
('planner/coder', '', None)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ledger.model.event import Event

__all__ = ["ApprovalView", "agent_of", "approval_of", "principal_of"]


def _text(obj: object, name: str) -> str:
    found = getattr(obj, name, "") if obj is not None else ""
    return found if isinstance(found, str) else ""


def principal_of(event: Event) -> str:
    """The principal the event's run acts for ("" when not recorded)."""
    return _text(event, "principal") or _text(getattr(event, "actor", None), "principal")


def agent_of(event: Event) -> str:
    """The agent: its path, then its id and version when recorded (``path (id v1)``)."""
    actor = getattr(event, "actor", None)
    agent_id = _text(event, "agent_id") or _text(actor, "agent_id")
    version = _text(event, "agent_version") or _text(actor, "agent_version")
    extra = " ".join(p for p in (agent_id, f"v{version}" if version else "") if p)
    path = event.agent_path
    if path and extra:
        return f"{path} ({extra})"
    return path or extra


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalView:
    """An approval as shown: who, when (None when not recorded) and why."""

    approver: str
    time: datetime | None
    reason: str


def approval_of(event: Event) -> ApprovalView | None:
    """The approval recorded on an event, or None."""
    found = getattr(event, "approval", None)
    approver = _text(found, "approver") if found is not None else _text(event, "approver")
    if not approver:
        return None
    source = found if found is not None else event
    moment = getattr(source, "time" if found is not None else "approval_time", None)
    return ApprovalView(
        approver=approver,
        time=moment if isinstance(moment, datetime) else None,
        reason=_text(source, "reason" if found is not None else "approval_reason"),
    )

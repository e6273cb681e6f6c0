"""Denials: how a refused call is carried inside the gate, reported to the caller and
made the final word of the record.

>>> exc = denied_error("write_file", "not on the allow list", "call_1")
>>> str(exc), exc.reason, exc.tool
('action "write_file" denied: not on the allow list', 'not on the allow list', 'write_file')

- :class:`Denied` is internal: the call flow raises it with the events that record why.
- :func:`denied_error` is the :class:`~ledger.errors.ToolDenied` the caller gets.
- :func:`policy_failed` is the decision that stands in for a policy that raised.
- :func:`overruled` makes a stored decision the final one: a call the policy allowed and
  the gate then denied is stored with a ``denied`` decision, so the decision and the
  action of one call never disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ledger.errors import ToolDenied
from ledger.gate.policy import Decision
from ledger.gate.values import PREVIEW_LIMIT, bounded
from ledger.model.event import Event
from ledger.model.values import Kind, Verdict

__all__ = ["Denied", "denied_error", "overruled", "policy_failed"]

log = logging.getLogger("ledger.gate")


class Denied(Exception):
    """Internal: a call is refused; carries the events that record why, or a function
    that builds them (so that redacting a large attempt can wait for a worker thread).
    ``reason`` is what is recorded; the caller's :class:`ToolDenied` says
    ``action "<tool>" denied: `` before it."""

    def __init__(self, reason: str, events: list[Event] | Callable[[], list[Event]]) -> None:
        super().__init__(reason)
        self.reason = reason
        self._events = events

    @property
    def events(self) -> list[Event]:
        """The events to record (built on first use)."""
        if callable(self._events):
            self._events = self._events()
        return self._events


def denied_error(tool: str, reason: str, call_id: str) -> ToolDenied:
    """The caller's exception: ``str(exc)`` is ``'action "<tool>" denied: <reason>'``;
    ``exc.reason`` is the why alone (the policy's or the gate's reason, as recorded), and
    ``exc.tool`` and ``exc.call_id`` name the call."""
    exc = ToolDenied(f'action "{tool}" denied: {reason}', tool=tool, call_id=call_id)
    exc.reason = reason  # ToolDenied(message) sets reason = message; keep the why alone
    return exc


def policy_failed(exc: Exception, redact: Callable[[Any], Any]) -> Decision:
    """The denial that stands in for a policy that raised."""
    log.warning("ledger: the gate policy raised %s; denying", type(exc).__name__)
    detail = bounded(f"{type(exc).__name__}: {exc}", PREVIEW_LIMIT)
    try:
        detail = str(redact(detail))
    except Exception:
        detail = type(exc).__name__
    return Decision(
        verdict=Verdict.DENIED, reason=f"policy error ({detail}); fail-closed", policy_id="gate"
    )


def overruled(event: Event, call_id: str, reason: str) -> Event:
    """``event``, or, when it is the gate decision allowing call ``call_id``, the same
    decision (same id, so the same place in the chain) turned into the denial it became:
    the stored decision is the final one, whatever the policy said first."""
    if not (
        event.kind is Kind.GATE_DECISION
        and event.verdict is Verdict.ALLOWED
        and event.call_id == call_id
    ):
        return event
    why = f"{event.reason}; then denied: {reason}" if event.reason else f"denied: {reason}"
    return event.replace(verdict=Verdict.DENIED, reason=why)

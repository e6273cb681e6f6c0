"""The values a compliance report is made of (see :mod:`ledger.report`).

Each has ``to_dict()`` with stable field names; times are RFC 3339 in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.sinks.base import RunSummary
from ledger.timefmt import format_time

__all__ = [
    "Denial",
    "Finding",
    "TimeBucket",
    "ToolStats",
    "run_dict",
    "run_outcome",
    "time_text",
]


def time_text(value: datetime | None) -> str | None:
    """RFC 3339 text of a time, or None."""
    return format_time(value) if value is not None else None


def run_outcome(run: RunSummary) -> str:
    """``ended`` or ``open`` (no run_end/abort seen), with ``errors`` when any."""
    base = "ended" if run.ended else "open"
    return f"{base} with errors" if run.errors else base


def run_dict(run: RunSummary) -> dict[str, Any]:
    """A run summary with stable field names (``ledger runs --json``, the report)."""
    return {
        "run_id": run.run_id,
        "first_time": time_text(run.first_time),
        "last_time": time_text(run.last_time),
        "events": run.events,
        "actions": run.actions,
        "denials": run.denials,
        "errors": run.errors,
        "ended": run.ended,
    }


@dataclass(slots=True, kw_only=True)
class ToolStats:
    """Per tool: allowed actions, denials, and the results of its calls."""

    tool: str
    actions: int = 0
    denials: int = 0
    succeeded: int = 0
    failed: int = 0
    safe_reads: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "actions": self.actions,
            "denials": self.denials,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "safe_reads": self.safe_reads,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Denial:
    """A denied attempt, with the reason the gate gave."""

    run_id: str
    call_id: str
    tool: str
    time: datetime
    verdict: str
    reason: str
    event_id: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "time": time_text(self.time),
            "verdict": self.verdict,
            "reason": self.reason,
            "event_id": self.event_id,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """An event that needs attention: an action without a result, or a result that ran
    without a committed intent."""

    run_id: str
    call_id: str
    tool: str
    time: datetime
    event_id: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "time": time_text(self.time),
            "event_id": self.event_id,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeBucket:
    """Actions and denials in ``[start, end)``: one bar group of the HTML chart."""

    start: datetime
    end: datetime
    actions: int
    denials: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": time_text(self.start),
            "end": time_text(self.end),
            "actions": self.actions,
            "denials": self.denials,
        }

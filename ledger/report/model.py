"""The values a compliance report is made of (see :mod:`ledger.report.build`).

Each has ``to_dict()`` with stable field names; times are RFC 3339 in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from ledger.sinks.base import RunSummary
from ledger.timefmt import format_time_us

__all__ = [
    "ApprovalGroup",
    "Denial",
    "Finding",
    "Listed",
    "TimeBucket",
    "ToolStats",
    "run_dict",
    "run_outcome",
    "time_text",
]


def time_text(value: datetime | None) -> str | None:
    """RFC 3339 text of a time (one width: microseconds always), or None."""
    return format_time_us(value) if value is not None else None


def plain_dict(value: Any) -> dict[str, Any]:
    """A dataclass as ``{field: value}`` in field order, times as RFC 3339 text: the
    stable machine form of every report row."""
    return {
        f.name: time_text(v) if isinstance(v := getattr(value, f.name), datetime) else v
        for f in fields(value)
    }


def run_outcome(run: RunSummary) -> str:
    """``ended`` or ``open`` (no run_end/abort seen), with ``errors`` when any."""
    base = "ended" if run.ended else "open"
    return f"{base} with errors" if run.errors else base


def run_dict(run: RunSummary) -> dict[str, Any]:
    """A run summary with stable field names (``ledger runs --json``, the report)."""
    return plain_dict(run)


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
        return plain_dict(self)


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
        return plain_dict(self)


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
        return plain_dict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeBucket:
    """Actions and denials in ``[start, end)``: one bar group of the HTML chart."""

    start: datetime
    end: datetime
    actions: int
    denials: int

    def to_dict(self) -> dict[str, Any]:
        return plain_dict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovedAction:
    """An allowed non-safe action: who or which policy allowed it, when, citing what.

    ``approver`` is the person (or system) an approval names, "" when a policy allowed
    the call on its own; ``policy`` is the deciding policy's id (the gate decision's
    label); ``approved_at`` the approver's answer time when it was recorded;
    ``evidence`` the refs the action cited (``source:id``)."""

    run_id: str
    call_id: str
    tool: str
    time: datetime
    principal: str
    agent: str
    policy: str
    approver: str
    approved_at: datetime | None
    reason: str
    evidence: tuple[str, ...]
    event_id: str

    def to_dict(self) -> dict[str, Any]:
        out = plain_dict(self)
        out["evidence"] = list(self.evidence)
        return out


@dataclass(slots=True, kw_only=True)
class WhoStats:
    """Actions and denials of one agent or one principal (``who`` is "" when the
    records do not say)."""

    who: str
    actions: int = 0
    denials: int = 0
    runs: int = 0

    def to_dict(self) -> dict[str, Any]:
        return plain_dict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalGroup:
    """How many allowed non-safe actions one approver (or, ``approver`` "", a policy on
    its own) allowed on one tool under one policy: the report's count of every approved
    action, beside the first ones it lists."""

    approver: str
    tool: str
    policy: str
    count: int

    def to_dict(self) -> dict[str, Any]:
        return plain_dict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class Listed:
    """How many items each of the report's listings holds in the window; the report
    lists the first :data:`~ledger.report.listing.MAX_LISTED` of each in time order."""

    runs: int = 0
    denials: int = 0
    missing_results: int = 0
    unsafe_without_intent: int = 0
    approved: int = 0
    outside_runs: int = 0

    def to_dict(self) -> dict[str, Any]:
        return plain_dict(self)

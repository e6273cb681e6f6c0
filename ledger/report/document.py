"""The report as a document: :class:`ComplianceReport` and its forms.

>>> from ledger.report import build_report
>>> from ledger.sinks import MemoryReader
>>> report = build_report(MemoryReader([]))
>>> report.to_dict()["compliant"], report.to_csv().splitlines()[0]
(True, 'section,run_id,call_id,tool,time,count,detail')

:func:`~ledger.report.build.build_report` makes it; :mod:`ledger.report.render` writes its
CSV and HTML forms.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.integrity.verify import VerifyResult, log_statement
from ledger.report.hashes import HashCheck
from ledger.report.listing import MAX_LISTED, full_listing
from ledger.report.logcheck import LogScope
from ledger.report.model import (
    ApprovalGroup,
    ApprovedAction,
    Denial,
    Finding,
    Listed,
    TimeBucket,
    ToolStats,
    WhoStats,
    run_dict,
    run_outcome,
    time_text,
)
from ledger.report.render import render_csv, render_html
from ledger.report.retention import RetentionSection
from ledger.sinks.base import RunSummary

__all__ = ["ComplianceReport"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ComplianceReport:
    """Everything the compliance officer shows for one window of time.

    The listings (``runs``, ``denials``, ``missing_results``, ``unsafe_without_intent``,
    ``approved``, ``outside_runs``) hold at most ``list_limit`` items each
    (:data:`~ledger.report.listing.MAX_LISTED` unless ``build_report`` was given another
    ``listed``), the first in time order; :attr:`counts` says how many each has in the
    window, and ``approval_groups`` counts every approved action per approver, tool and
    policy."""

    generated_at: datetime
    since: datetime | None
    until: datetime | None
    events: int
    runs: tuple[RunSummary, ...]
    tools: tuple[ToolStats, ...]
    denials: tuple[Denial, ...]
    missing_results: tuple[Finding, ...]
    unsafe_without_intent: tuple[Finding, ...]
    oldest_record: datetime | None
    newest_record: datetime | None
    hash_check: HashCheck
    timeline: tuple[TimeBucket, ...] = ()
    approved: tuple[ApprovedAction, ...] = ()
    agents: tuple[WhoStats, ...] = ()
    principals: tuple[WhoStats, ...] = ()
    outside_runs: tuple[Finding, ...] = ()
    ledger: str = ""
    log_check: VerifyResult | None = None  # the Merkle log (see log_scope)
    retention: RetentionSection | None = None  # policy, holds, erasures (ledger.report.retention)
    listed: Listed | None = None  # the listings' totals (None: each listing is complete)
    approval_groups: tuple[ApprovalGroup, ...] = ()
    log_scope: LogScope | None = None  # which rows the log check re-read (None: every row)
    list_limit: int = MAX_LISTED  # the most items a listing holds (build_report's listed)

    @property
    def counts(self) -> Listed:
        """How many items each listing has in the window (listed or not)."""
        if self.listed is not None:
            return self.listed
        return Listed(
            runs=len(self.runs),
            denials=len(self.denials),
            missing_results=len(self.missing_results),
            unsafe_without_intent=len(self.unsafe_without_intent),
            approved=len(self.approved),
            outside_runs=len(self.outside_runs),
        )

    def listing(self) -> dict[str, Any]:
        """The listings' limit, how many items each leaves out, and the command that
        lists them all from the ledger."""
        counts = self.counts.to_dict()
        shown = {
            "runs": len(self.runs),
            "denials": len(self.denials),
            "missing_results": len(self.missing_results),
            "unsafe_without_intent": len(self.unsafe_without_intent),
            "approved": len(self.approved),
            "outside_runs": len(self.outside_runs),
        }
        more = {k: counts[k] - n for k, n in shown.items() if counts[k] > n}
        return {
            "limit": self.list_limit,
            "more": more,
            "full": {
                k: full_listing(k, self.since, self.until, counts[k], self.ledger) for k in more
            },
        }

    @property
    def actions(self) -> int:
        """Allowed actions in the window."""
        return sum(t.actions for t in self.tools)

    @property
    def compliant(self) -> bool:
        """No action ran without a committed intent, no content hash mismatched, the
        tamper-evident log verified (when the ledger keeps one), and the retention
        tables are the log's records (when it keeps them)."""
        return (
            not self.counts.unsafe_without_intent
            and not self.hash_check.mismatch_count
            and (self.log_check is None or self.log_check.ok)
            and (self.retention is None or not self.retention.tables_changed)
        )

    def log_statement(self) -> str:
        """The sentence on the tamper-evident log, and which rows its check re-read."""
        said = log_statement(self.log_check)
        if self.log_scope is not None and self.log_check is not None:
            said = f"{said}; {self.log_scope.statement()}"
        return said

    def to_dict(self) -> dict[str, Any]:
        """Machine form with stable field names (the ``--format json`` output)."""
        counts = self.counts
        return {
            "ledger": self.ledger,
            "generated_at": time_text(self.generated_at),
            "window": {"since": time_text(self.since), "until": time_text(self.until)},
            "compliant": self.compliant,
            "totals": {
                "events": self.events,
                "runs": counts.runs,
                "actions": self.actions,
                "denials": counts.denials,
                "missing_results": counts.missing_results,
                "unsafe_without_intent": counts.unsafe_without_intent,
                "approved_actions": counts.approved,
                "outside_runs": counts.outside_runs,
            },
            "records_held": {
                "oldest": time_text(self.oldest_record),
                "newest": time_text(self.newest_record),
            },
            "runs": [run_dict(r) | {"outcome": run_outcome(r)} for r in self.runs],
            "tools": [t.to_dict() for t in self.tools],
            "denials": [d.to_dict() for d in self.denials],
            "missing_results": [f.to_dict() for f in self.missing_results],
            "unsafe_without_intent": {
                "count": counts.unsafe_without_intent,
                "statement": self.unsafe_statement(),
                "items": [f.to_dict() for f in self.unsafe_without_intent],
            },
            "approved_actions": [a.to_dict() for a in self.approved],
            "approval_groups": [g.to_dict() for g in self.approval_groups],
            "who": {
                "agents": [w.to_dict() for w in self.agents],
                "principals": [w.to_dict() for w in self.principals],
            },
            "outside_runs": [f.to_dict() for f in self.outside_runs],
            "hash_check": self.hash_check.to_dict(),
            "log_check": None if self.log_check is None else self.log_check.to_dict(),
            "log_statement": self.log_statement(),
            "log_scope": None if self.log_scope is None else self.log_scope.to_dict(),
            "timeline": [b.to_dict() for b in self.timeline],
            "retention": None if self.retention is None else self.retention.to_dict(),
            "listing": self.listing(),
        }

    def unsafe_statement(self) -> str:
        """The explicit sentence on non-safe actions that ran without a committed intent."""
        n = self.counts.unsafe_without_intent
        if n == 0:
            return "zero non-safe actions ran without a committed intent"
        return f"VIOLATION: {n} non-safe action(s) ran without a committed intent"

    def to_csv(self) -> str:
        """One long table: ``section,run_id,call_id,tool,time,count,detail``."""
        return render_csv(self)

    def to_html(self) -> str:
        """One self-contained HTML page with an inline SVG chart; no external assets."""
        return render_html(self)

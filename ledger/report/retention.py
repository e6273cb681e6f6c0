"""The compliance report's retention section: the policy in force, its changes, the
legal holds and the erasures of the report's window.

>>> section = retention_section(reader, since=start, until=end)     # doctest: +SKIP
>>> section.to_dict()["erasures"][0]["reason"]                      # doctest: +SKIP
'GDPR Art. 17 request 42'

Read from the ledger's retention tables (:mod:`ledger.retention`), after checking them
against the retention records in the log (``tables_changed`` says why they disagree: a
report showing a floor or holds forged by SQL is then not compliant); None for a ledger
that keeps none (JSONL, memory). Holds are listed when they stood at any time in the
window; policy changes when they were made in it; erasures when they were made in it or
erased events of it (a window of last year's events shows this year's erasure of them).
The policy is the one in force at the window's end; when none was but one was set later,
``current`` is that one (the erasures of the window were made under it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime
from html import escape
from typing import Any

from ledger.errors import LedgerError
from ledger.integrity.verify import Finding, FindingKind, VerifyResult
from ledger.model.shown import one_line
from ledger.retention.rules import Hold
from ledger.retention.store import ErasureRecord, PolicyState, Retention, TablesChanged
from ledger.timefmt import format_time_us

__all__ = ["RetentionSection", "retention_section", "with_retention_tables"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionSection:
    """What the report shows about retention for its window."""

    policy: PolicyState | None
    changes: tuple[PolicyState, ...]
    holds: tuple[Hold, ...]
    erasures: tuple[ErasureRecord, ...]
    # why the retention tables (what this section shows) are not the log's records, or ""
    tables_changed: str = ""
    # the policy in force now, when none was at the window's end (set after it), else None
    current: PolicyState | None = None
    # how many holds and erasures the window has (``holds`` and ``erasures`` list the
    # first ``--listed`` of them), and the sum of every erasure's count; None: as listed
    hold_count: int | None = None
    erasure_count: int | None = None
    erased_events: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Stable field names (the report's ``retention`` member)."""
        return {
            "tables_changed": self.tables_changed,
            "policy": None if self.policy is None else self.policy.to_dict(),
            "policy_set_after_window": None if self.current is None else self.current.to_dict(),
            "policy_changes": [p.to_dict() for p in self.changes],
            "holds": [h.to_dict() for h in self.holds],
            "hold_count": self._holds,
            "erasures": [e.to_dict() for e in self.erasures],
            "erasure_count": self._erasures,
            "erased_events": (
                sum(e.events for e in self.erasures)
                if self.erased_events is None
                else self.erased_events
            ),
        }

    @property
    def _holds(self) -> int:
        return len(self.holds) if self.hold_count is None else self.hold_count

    @property
    def _erasures(self) -> int:
        return len(self.erasures) if self.erasure_count is None else self.erasure_count

    def lines(self, rows: int | None = None) -> list[str]:
        """The section as plain lines (the text and CSV reports), each one line
        whatever the reasons and names in it hold (:func:`one_line`); at most ``rows``
        holds and erasures each (None: every one listed), then how many more.

        >>> RetentionSection(policy=None, changes=(), holds=(), erasures=()).lines()[0]
        'retention policy: none set (nothing may be erased)'
        """
        return [one_line(line) for line in self._lines(rows)]

    def _lines(self, rows: int | None) -> list[str]:
        warning = [f"RETENTION TABLES CHANGED: {self.tables_changed}"] * bool(self.tables_changed)
        if self.policy is None and self.current is not None:
            c = self.current
            p = c.policy.to_dict()
            out = [
                *warning,
                f"retention policy: none in force in the window; v{c.version} was set after "
                f"it, {format_time_us(c.set_at)} by {c.set_by}: keep {p['keep']}, floor "
                f"{p['floor']} ({c.reason})",
            ]
        elif self.policy is None:
            out = [*warning, "retention policy: none set (nothing may be erased)"]
        else:
            p = self.policy.policy.to_dict()
            out = [
                *warning,
                f"retention policy: keep {p['keep']}, floor {p['floor']} (version "
                f"{self.policy.version}, set {format_time_us(self.policy.set_at)} by "
                f"{self.policy.set_by}: {self.policy.reason})",
            ]
        out += [
            f"policy change v{c.version} {format_time_us(c.set_at)} by {c.set_by}: keep "
            f"{c.policy.to_dict()['keep']}, floor {c.policy.to_dict()['floor']}"
            f"{', signed by ' + c.signed_by if c.signed_by else ''}: {c.reason}"
            for c in self.changes
        ] or ["no policy change in the window"]
        holds, erasures = self.holds[:rows], self.erasures[:rows]
        out += [
            f"legal hold {h.hold_id} {h.describe()}: {h.reason} "
            f"({'standing' if h.active else 'released ' + _t(h.released)})"
            for h in holds
        ] or ["no legal hold" if not self._holds else ""]
        out += _more(self._holds - len(holds), "legal holds", "holds")
        out += [
            f"erasure {e.record_id} {format_time_us(e.at)} by {e.by}: {_selection(e.selection)}, "
            f"{e.events} event(s), fields {', '.join(e.fields)}: {e.reason}"
            for e in erasures
        ] or ["no erasure in the window" if not self._erasures else ""]
        out += _more(self._erasures - len(erasures), "erasures", "erasures")
        return [line for line in out if line]

    def to_html(self) -> str:
        """The section of the HTML page."""
        if self.policy is None and self.current is not None:
            c = self.current
            policy = (
                f"<p>No retention policy was in force in the window; version {c.version} was "
                f"set after it, {escape(format_time_us(c.set_at))} by {escape(c.set_by)}: keep "
                f"{escape(str(c.policy.to_dict()['keep']))}, floor "
                f"{escape(str(c.policy.to_dict()['floor']))} ({escape(c.reason)}).</p>"
            )
        elif self.policy is None:
            policy = "<p>No retention policy is set: nothing may be erased.</p>"
        else:
            p = self.policy.policy.to_dict()
            policy = (
                f"<p>Keep {escape(str(p['keep']))}, floor {escape(str(p['floor']))} (version "
                f"{self.policy.version}, set {escape(format_time_us(self.policy.set_at))} by "
                f"{escape(self.policy.set_by)}: {escape(self.policy.reason)}).</p>"
            )
        changes = "".join(
            f"<li>v{c.version} {escape(format_time_us(c.set_at))} by {escape(c.set_by)}: keep "
            f"{escape(str(c.policy.to_dict()['keep']))}, floor "
            f"{escape(str(c.policy.to_dict()['floor']))}"
            f"{', signed by ' + escape(c.signed_by) if c.signed_by else ''}: "
            f"{escape(c.reason)}</li>"
            for c in self.changes
        )
        holds = "".join(
            f"<li><code>{escape(h.hold_id)}</code> {escape(h.describe())}: {escape(h.reason)} "
            f"({'standing' if h.active else 'released ' + escape(_t(h.released))})</li>"
            for h in self.holds
        )
        erasures = "".join(
            f"<tr><td>{escape(format_time_us(e.at))}</td><td>{escape(e.by)}</td>"
            f"<td>{escape(_selection(e.selection))}</td><td>{escape(', '.join(e.fields))}</td>"
            f"<td>{e.events}</td><td>{escape(e.reason)}</td><td><code>{escape(e.record_id)}"
            f"</code></td></tr>"
            for e in self.erasures
        )
        changed = (
            f'<p class="bad"><strong>The retention tables were changed outside the ledger'
            f"</strong>: {escape(self.tables_changed)}. What follows is what the tables "
            "say, not what the log recorded.</p>"
            if self.tables_changed
            else ""
        )
        return "".join(
            [
                '<h2 id="retention">Retention, legal holds and erasures</h2>',
                changed,
                policy,
                f"<p>Policy changes in the window:</p><ul>{changes}</ul>"
                if changes
                else "<p>No policy change in the window.</p>",
                f"<p>Legal holds:</p><ul>{holds}</ul>"
                if holds
                else ("<p>No legal hold.</p>" if not self._holds else ""),
                *(f"<p>{escape(line)}</p>" for line in _more(
                    self._holds - len(self.holds), "legal holds", "holds")),
                "<table><tr><th>when (UTC)</th><th>by</th><th>what</th><th>fields</th>"
                f"<th>events</th><th>why</th><th>record</th></tr>{erasures}</table>"
                if erasures
                else ("<p>No erasure in the window.</p>" if not self._erasures else ""),
                *(f"<p>{escape(line)}</p>" for line in _more(
                    self._erasures - len(self.erasures), "erasures", "erasures")),
            ]
        )  # fmt: skip


def _more(hidden: int, what: str, member: str) -> list[str]:
    """The line saying ``hidden`` more items of a listing are not shown, and where."""
    if hidden <= 0:
        return []
    return [
        f"… and {hidden} more {what} (`ledger report --json --listed N` lists them, under "
        f"retention.{member})"
    ]


def _t(value: datetime | None) -> str:
    return "" if value is None else format_time_us(value)


def _selection(selection: dict[str, Any]) -> str:
    if "run_id" in selection:
        return f"run {selection['run_id']}"
    if "before" in selection:
        return f"events before {selection['before']}"
    return f"{len(selection.get('event_ids', []))} event(s) by id"


def _in(when: datetime, since: datetime | None, until: datetime | None) -> bool:
    return (since is None or when >= since) and (until is None or when < until)


def retention_section(
    reader: Any,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    listed: int | None = None,
) -> RetentionSection | None:
    """The retention section for ``[since, until)``, or None when ``reader`` keeps no
    retention tables; its holds and erasures list the first ``listed`` (None: all),
    with their counts."""
    if not hasattr(reader, "_tree_writing"):
        return None
    try:
        r = Retention(reader)
        # not the scan of every row for deleted data keys: a report over a window reads
        # the window's rows only (ledger verify reads them all, and scans)
        changed = r.tables_changed(scan=False)
    except LedgerError as exc:  # a ledger without the retention tables, say
        log.debug("the report has no retention section: %s", exc)
        return None
    history: list[PolicyState] = []
    holds: list[Hold] = []
    erasures: list[ErasureRecord] = []
    try:
        history = r.policies()
        holds = [
            h
            for h in r.holds(released=True)
            if (until is None or h.created is None or h.created < until)
            and (since is None or h.released is None or h.released >= since)
        ]
        erasures = r.erasures(since=since, until=until, touching=True)
    except LedgerError as exc:  # a table row SQL made unreadable: shown as changed
        changed = changed or (exc.what if isinstance(exc, TablesChanged) else str(exc))
    in_force = [p for p in history if until is None or p.set_at < until]
    return RetentionSection(
        policy=in_force[-1] if in_force else None,  # as it stood at the window's end
        current=history[-1] if history and not in_force else None,
        changes=tuple(p for p in history if _in(p.set_at, since, until)),
        holds=tuple(holds[:listed]),
        erasures=tuple(erasures[:listed]),
        tables_changed=changed,
        hold_count=len(holds),
        erasure_count=len(erasures),
        erased_events=sum(e.events for e in erasures),
    )


def with_retention_tables(sink: Any, result: VerifyResult) -> VerifyResult:
    """``result`` (a verification of ``sink``'s log) and a ``retention-tables`` finding
    when the retention tables (policy, holds, erasures, destroyed data keys) disagree
    with the retention records in the log: what erasures then refuse, and what
    ``ledger verify`` and ``ledger db check`` report. ``result`` as it is for a ledger
    without the retention tables. Reads every row (the scan for deleted data keys)."""
    try:
        changed = Retention(sink).tables_changed()
    except LedgerError as exc:  # a ledger without the retention tables
        log.debug("no retention tables to check: %s", exc)
        return result
    if not changed:
        return result
    found = Finding(
        kind=FindingKind.RETENTION_TABLES,
        message=f"the retention tables disagree with the retention records in the log "
        f"({changed}): the policy, holds, erasures or destroyed data keys they show were "
        "changed outside the ledger",
    )
    return replace(result, findings=(*result.findings, found))

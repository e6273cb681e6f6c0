"""The compliance report: a year of decisions, as a library call.

>>> from ledger.report.build import build_report
>>> with open_sink("sqlite:///ledger.db") as reader:           # doctest: +SKIP
...     report = build_report(reader, since=start, until=end)
>>> report.to_dict()["unsafe_without_intent"]["count"]          # doctest: +SKIP
0
>>> Path("report.html").write_text(report.to_html())            # doctest: +SKIP

One pass over ``reader.events(since=, until=)`` (the window is half-open: ``since``
inclusive, ``until`` exclusive, either may be open) gathers:

* runs and their outcomes (from ``reader.runs``), actions per tool, every denial with its
  reason, allowed actions with no recorded result;
* **non-safe actions that ran without a committed intent** (must be zero): a
  ``tool_result`` whose call has no *preceding* allowed ``action`` in its run and that the
  gate did not record as a safe read, as :func:`ledger.chain.parts.unintended_reason`
  decides (the one rule, which chains apply too: ``ledger chain`` flags the same results).
  A result with no gate decision at all, or whose decision is not marked safe, is a
  violation: unclassified means non-safe, as in the reference's fail-safe rule. A result
  without a call id cannot be paired and is counted as a violation too.
* calls cut by the window's edges are settled by reading just the runs concerned again: a
  result whose intent (or safe-read decision) was recorded before ``since`` is not a
  violation, and an intent whose result came at or after ``until`` is not "no result";
* the oldest and newest record held by the store (any run, whole store, not only the
  window);
* a content-hash check of every event in the window: the stored ``sha256:`` hash against
  the RFC 8785 hash recomputed from the stored event JSON (see :mod:`ledger.report.hashes`).

The result, :class:`ComplianceReport`, renders as a dict (stable field names), CSV and a
self-contained HTML page (:mod:`ledger.report.render`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from ledger.chain.parts import DecisionMark, decision_mark, unintended_reason
from ledger.errors import CorruptRecord
from ledger.model.event import Event
from ledger.model.values import Approval, Kind, Verdict, outside_any_run
from ledger.report.document import ComplianceReport
from ledger.report.hashes import check_hashes, each_event, with_unreadable
from ledger.report.model import (
    ApprovedAction,
    Denial,
    Finding,
    ToolStats,
    WhoStats,
)
from ledger.report.timeline import bucket
from ledger.sinks import Reader
from ledger.sinks.url import shown_url
from ledger.timefmt import utc_now

__all__ = ["build_report"]

log = logging.getLogger(__name__)

Progress = Callable[[int], None]
_PROGRESS_EVERY = 5000


# --- the one pass ------------------------------------------------------------------------


@dataclass(slots=True)
class _Pass:
    """State of the single streaming pass over the window's events."""

    tools: dict[str, ToolStats] = field(default_factory=dict)
    denials: list[Denial] = field(default_factory=list)
    allowed: dict[tuple[str, str], _Intent] = field(default_factory=dict)
    before: set[tuple[str, str]] = field(default_factory=set)  # committed before the window
    results: set[tuple[str, str]] = field(default_factory=set)
    marks: dict[tuple[str, str], DecisionMark] = field(default_factory=dict)  # first decisions
    not_allowed: set[tuple[str, str]] = field(default_factory=set)  # calls with other actions
    orphans: list[Event] = field(default_factory=list)
    action_times: list[datetime] = field(default_factory=list)
    denial_times: list[datetime] = field(default_factory=list)
    skipped: list[CorruptRecord] = field(default_factory=list)  # rows that did not read
    decided: dict[tuple[str, str], tuple[str, Approval | None]] = field(default_factory=dict)
    agents: dict[str, WhoStats] = field(default_factory=dict)
    principals: dict[str, WhoStats] = field(default_factory=dict)
    who_runs: set[tuple[str, str, str]] = field(default_factory=set)
    outside: list[Finding] = field(default_factory=list)  # calls outside any run
    events: int = 0
    first: datetime | None = None
    last: datetime | None = None

    def tool(self, name: str) -> ToolStats:
        stats = self.tools.get(name)
        if stats is None:
            stats = self.tools[name] = ToolStats(tool=name or "(none)")
        return stats

    def add(self, e: Event) -> None:
        self.events += 1
        if self.first is None or e.time < self.first:
            self.first = e.time
        if self.last is None or e.time > self.last:
            self.last = e.time
        if e.kind is Kind.ACTION:
            self._action(e)
        elif e.kind is Kind.TOOL_RESULT:
            self._result(e)
        elif e.kind is Kind.GATE_DECISION and e.call_id:
            key = (e.run_id, e.call_id)
            self.marks.setdefault(key, decision_mark(e))
            self.decided.setdefault(key, (e.label, e.approval))

    def _who(self, e: Event, allowed: bool) -> None:
        agent = (e.actor.agent_id if e.actor is not None else "") or e.agent_path
        for table, who, kind in ((self.agents, agent, "a"), (self.principals, e.principal, "p")):
            stats = table.get(who)
            if stats is None:
                stats = table[who] = WhoStats(who=who)
            if allowed:
                stats.actions += 1
            else:
                stats.denials += 1
            if (kind, who, e.run_id) not in self.who_runs:
                self.who_runs.add((kind, who, e.run_id))
                stats.runs += 1

    def _action(self, e: Event) -> None:
        if outside_any_run(e.run_id):
            detail = f"a call outside any run was denied: {e.reason or '(no reason recorded)'}"
            self.outside.append(_finding(e, detail))
            return
        stats = self.tool(e.tool)
        self._who(e, e.verdict is Verdict.ALLOWED)
        if e.verdict is Verdict.ALLOWED:
            stats.actions += 1
            self.action_times.append(e.time)
            self.allowed.setdefault((e.run_id, e.call_id), _Intent.of(e))
            return
        self.not_allowed.add((e.run_id, e.call_id))
        stats.denials += 1
        self.denial_times.append(e.time)
        self.denials.append(
            Denial(
                run_id=e.run_id,
                call_id=e.call_id,
                tool=e.tool,
                time=e.time,
                verdict=str(e.verdict) if e.verdict else "none",
                reason=e.reason or "(no reason recorded)",
                event_id=str(e.event_id),
            )
        )

    def _result(self, e: Event) -> None:
        key = (e.run_id, e.call_id)
        intent = self.allowed.get(key) if e.call_id else None
        stats = self.tool(e.tool or (intent.tool if intent is not None else ""))
        if intent is not None:
            self.results.add(key)
            if e.err:
                stats.failed += 1
            else:
                stats.succeeded += 1
            return
        self.orphans.append(e)

    def unsafe(self) -> list[Finding]:
        """Results with no preceding allowed action that the gate did not mark safe."""
        found: list[Finding] = []
        for e in self.orphans:
            key = (e.run_id, e.call_id)
            if e.call_id and key in self.before:
                continue  # its intent was committed just before the window: not a violation
            if e.call_id and key in self.allowed:
                found.append(_finding(e, "the result was recorded before its intent was committed"))
                continue
            why = unintended_reason(
                call_id=e.call_id,
                allowed_intent=False,
                denied_intent=key in self.not_allowed,
                decision=self.marks.get(key),
            )
            if why is None:
                self.tool(e.tool).safe_reads += 1
            else:
                found.append(_finding(e, why))
        return found

    def missing(self) -> list[Finding]:
        """Allowed actions whose call has no recorded result."""
        detail = "allowed, but no result was recorded (crash, still running, or lost)"
        return [
            Finding(
                run_id=run, call_id=call, tool=i.tool, time=i.time, event_id=i.event_id,
                detail=detail,
            )
            for (run, call), i in self.allowed.items()
            if (run, call) not in self.results
        ]  # fmt: skip

    def look_across(self, reader: Reader, since: datetime | None, until: datetime | None) -> None:
        """Settle calls cut by the window's edges: a result whose intent (or safe-read
        decision) was recorded before ``since``, an intent whose result came at or after
        ``until``. Only the runs concerned are read again."""
        if since is not None:
            settled = self.marks.keys() | self.allowed.keys()
            cut = {e.run_id for e in self.orphans if (e.run_id, e.call_id) not in settled}
            for run in sorted(cut):
                for e in each_event(reader, self.skipped, run_id=run, until=since):
                    key = (e.run_id, e.call_id)
                    if e.kind is Kind.ACTION and e.verdict is Verdict.ALLOWED:
                        self.before.add(key)
                    elif e.kind is Kind.ACTION:
                        self.not_allowed.add(key)
                    elif e.kind is Kind.GATE_DECISION and e.call_id:
                        self.marks.setdefault(key, decision_mark(e))
        if until is not None:
            open_runs = {run for (run, call) in self.allowed if (run, call) not in self.results}
            for run in sorted(open_runs):
                for e in each_event(
                    reader, self.skipped, run_id=run, kind=Kind.TOOL_RESULT, since=until
                ):
                    self.results.add((e.run_id, e.call_id))


class _Intent(NamedTuple):
    """What the report keeps of an allowed action (not the whole event)."""

    tool: str
    time: datetime
    event_id: str
    principal: str
    agent: str
    reason: str
    approval: Approval | None
    evidence: tuple[str, ...]

    @classmethod
    def of(cls, e: Event) -> _Intent:
        agent = (e.actor.agent_id if e.actor is not None else "") or e.agent_path
        cited = tuple(f"{r.source}:{r.id}" for r in e.refs)
        return cls(e.tool, e.time, str(e.event_id), e.principal, agent, e.reason,
                   e.approval, cited)  # fmt: skip


def _approved(state: _Pass) -> list[ApprovedAction]:
    """Each allowed non-safe action with who or which policy allowed it, in time order."""
    out = []
    for (run, call), i in state.allowed.items():
        policy, approval = state.decided.get((run, call), ("", None))
        approval = i.approval or approval
        out.append(
            ApprovedAction(
                run_id=run,
                call_id=call,
                tool=i.tool,
                time=i.time,
                principal=i.principal,
                agent=i.agent,
                policy=policy,
                approver=approval.approver if approval is not None else "",
                approved_at=approval.time if approval is not None else None,
                reason=(approval.reason if approval is not None and approval.reason else i.reason),
                evidence=i.evidence,
                event_id=i.event_id,
            )
        )
    return sorted(out, key=lambda a: (a.time, a.event_id))


def _finding(e: Event, detail: str) -> Finding:
    return Finding(
        run_id=e.run_id,
        call_id=e.call_id,
        tool=e.tool,
        time=e.time,
        event_id=str(e.event_id),
        detail=detail,
    )


def _records_held(reader: Reader) -> tuple[datetime | None, datetime | None]:
    """The oldest and newest event time of any run in the whole store."""
    oldest: datetime | None = None
    newest: datetime | None = None
    for s in reader.runs():
        oldest = s.first_time if oldest is None else min(oldest, s.first_time)
        newest = s.last_time if newest is None else max(newest, s.last_time)
    return oldest, newest


def build_report(
    reader: Reader,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    progress: Progress | None = None,
    ledger: str = "",
) -> ComplianceReport:
    """Build the compliance report over ``[since, until)`` from ``reader``; ``ledger``
    names the ledger it covers (its URL; a password in it is never shown).

    ``progress``, when given, is called with the number of events read so far (every few
    thousand events and at the end), for a progress display.
    """
    state = _Pass()
    for e in each_event(reader, state.skipped, since=since, until=until):
        state.add(e)
        if progress is not None and state.events % _PROGRESS_EVERY == 0:
            progress(state.events)
    if progress is not None:
        progress(state.events)
    state.look_across(reader, since, until)
    runs = tuple(r for r in reader.runs(since=since, until=until) if not outside_any_run(r.run_id))
    oldest, newest = _records_held(reader)
    timeline = bucket(
        state.action_times, state.denial_times, since or state.first, until or state.last
    )
    report = ComplianceReport(
        generated_at=utc_now(),
        since=since,
        until=until,
        events=state.events,
        runs=runs,
        tools=tuple(sorted(state.tools.values(), key=lambda t: t.tool)),
        denials=tuple(sorted(state.denials, key=lambda d: (d.time, d.event_id))),
        missing_results=_in_time_order(state.missing()),
        unsafe_without_intent=_in_time_order(state.unsafe()),
        approved=tuple(_approved(state)),
        agents=tuple(sorted(state.agents.values(), key=lambda w: w.who)),
        principals=tuple(sorted(state.principals.values(), key=lambda w: w.who)),
        outside_runs=_in_time_order(state.outside),
        ledger=shown_url(ledger) if ledger else "",
        oldest_record=oldest,
        newest_record=newest,
        hash_check=with_unreadable(check_hashes(reader, since=since, until=until), state.skipped),
        timeline=timeline,
    )
    log.info("compliance report: %d events, %d runs", report.events, len(report.runs))
    return report


def _in_time_order(found: list[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(found, key=lambda f: (f.time, f.event_id)))

"""The report's per-call rules, over the window's events in commit order.

>>> state = CallPass()                       # doctest: +SKIP
>>> for e in events: state.add(e)            # doctest: +SKIP
>>> state.unsafe(), state.missing()          # doctest: +SKIP

One state machine for both ways of building the report (:mod:`ledger.report.build`): fed
with whole :class:`~ledger.model.event.Event` objects by the streaming build (any
reader), or with :class:`Fact` rows made from a SQL row's columns and its parsed JSON by
the database build (:mod:`ledger.report.aggregate`), which then leaves the counts and
the timeline to SQL (``counting=False``). Either way the same rules decide: which result
had a preceding allowed action, which was a safe read, which allowed action has no result,
what was approved by whom.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol, cast

import sqlalchemy as sa

from ledger.chain.parts import DecisionMark, decision_mark, unintended_reason
from ledger.errors import CorruptRecord
from ledger.model.erasure import Erasure, erased_text
from ledger.model.event import Event
from ledger.model.marks import failed
from ledger.model.values import Actor, Approval, Kind, Verdict, outside_any_run
from ledger.report.hashes import HashMismatch, each_checked_event, each_event
from ledger.report.listing import MAX_LISTED, Capped
from ledger.report.model import (
    ApprovalGroup,
    ApprovedAction,
    Denial,
    Finding,
    Listed,
    ToolStats,
    WhoStats,
)
from ledger.sinks.base import Reader
from ledger.sinks.sql import SQLReader

__all__ = [
    "CallPass",
    "Fact",
    "FactRef",
    "Record",
    "Tally",
    "listed_of",
    "look_across",
    "tally_parts",
]


class FactRef(NamedTuple):
    """What the report reads of a ref: its source and id."""

    source: str
    id: str


class Record(Protocol):
    """The fields of an event the report reads (an ``Event`` or a :class:`Fact`)."""

    @property
    def kind(self) -> Kind: ...
    @property
    def event_id(self) -> Any: ...
    @property
    def run_id(self) -> str: ...
    @property
    def call_id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def verdict(self) -> Verdict | None: ...
    @property
    def time(self) -> datetime: ...
    @property
    def reason(self) -> str: ...
    @property
    def err(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def agent_path(self) -> str: ...
    @property
    def actor(self) -> Actor | None: ...
    @property
    def approval(self) -> Approval | None: ...
    @property
    def refs(self) -> Sequence[Any]: ...
    @property
    def principal(self) -> str: ...
    @property
    def erased(self) -> Erasure | None: ...


class Fact(NamedTuple):
    """An event as the database build reads it: the row's columns and the few JSON
    members the report uses (never a whole ``Event``)."""

    kind: Kind
    event_id: str
    run_id: str
    call_id: str
    tool: str
    verdict: Verdict | None
    time: datetime
    reason: str = ""
    err: str = ""
    label: str = ""
    agent_path: str = ""
    actor: Actor | None = None
    approval: Approval | None = None
    refs: tuple[FactRef, ...] = ()
    erased: Erasure | None = None

    @property
    def principal(self) -> str:
        return self.actor.principal if self.actor is not None else ""


def _reason(e: Record) -> str:
    """A denial's reason as the report shows it: erased, recorded, or said to be absent."""
    return erased_text(e, "reason") or e.reason or "(no reason recorded)"


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
    approval_erased: str = ""  # "[erased: <reason>]" when its approval was erased

    @classmethod
    def of(cls, e: Record) -> _Intent:
        cited = tuple(f"{r.source}:{r.id}" for r in e.refs)
        if not cited and (gone := erased_text(e, "refs")):  # it cited what was erased,
            cited = (gone,)  # not nothing
        # an erased part reads as erased (in both builds alike), never as "" or missing
        reason = erased_text(e, "reason") or e.reason
        return cls(e.tool, e.time, str(e.event_id), _principal(e), _agent(e), reason,
                   e.approval, cited, erased_text(e, "approval"))  # fmt: skip


def _agent(e: Record) -> str:
    """The agent an event names (its actor's agent id, else its agent path), or the
    erasure mark when those were erased."""
    found = (e.actor.agent_id if e.actor is not None else "") or e.agent_path
    return found or erased_text(e, "actor", "agent_path")


def _principal(e: Record) -> str:
    """The principal an event acts for, or the erasure mark when its actor was erased."""
    return e.principal or erased_text(e, "actor")


def finding(e: Record, detail: str) -> Finding:
    return Finding(
        run_id=e.run_id,
        call_id=e.call_id,
        tool=e.tool,
        time=e.time,
        event_id=str(e.event_id),
        detail=detail,
    )


def _by_time(item: Denial | Finding | ApprovedAction) -> tuple[datetime, str]:
    return item.time, item.event_id


@dataclass(slots=True)
class Tally:
    """What the pass gathers over every run of the window, in bounded memory: counts per
    tool, agent and principal, and the findings, denials and approved actions as
    :class:`~ledger.report.listing.Capped` listings (their totals, the first ones in time
    order), approved actions also counted per approver, tool and policy."""

    listed: int = MAX_LISTED  # how many items each listing keeps (the first in time)
    tools: dict[str, ToolStats] = field(default_factory=dict)
    agents: dict[str, WhoStats] = field(default_factory=dict)
    principals: dict[str, WhoStats] = field(default_factory=dict)
    groups: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    skipped: list[CorruptRecord] = field(default_factory=list)  # rows that did not read
    # problems of rows outside the window read to settle calls its edges cut
    beyond: list[HashMismatch] = field(default_factory=list)
    denials: Capped[Denial] = field(init=False)
    outside: Capped[Finding] = field(init=False)
    missing: Capped[Finding] = field(init=False)
    unsafe: Capped[Finding] = field(init=False)
    approved: Capped[ApprovedAction] = field(init=False)

    def __post_init__(self) -> None:
        self.denials = Capped(limit=self.listed, key=_by_time)
        self.outside = Capped(limit=self.listed, key=_by_time)
        self.missing = Capped(limit=self.listed, key=_by_time)
        self.unsafe = Capped(limit=self.listed, key=_by_time)
        self.approved = Capped(limit=self.listed, key=_by_time)

    def tool(self, name: str) -> ToolStats:
        stats = self.tools.get(name)
        if stats is None:
            stats = self.tools[name] = ToolStats(tool=name)  # "" for no tool, as elsewhere
        return stats

    def approval_groups(self) -> tuple[ApprovalGroup, ...]:
        return tuple(
            ApprovalGroup(approver=a, tool=t, policy=p, count=n)
            for (a, t, p), n in sorted(self.groups.items())
        )


def listed_of(tally: Tally, runs: int) -> Listed:
    """The listings' totals of a report (``runs`` its runs)."""
    return Listed(
        runs=runs,
        denials=tally.denials.total,
        missing_results=tally.missing.total,
        unsafe_without_intent=tally.unsafe.total,
        approved=tally.approved.total,
        outside_runs=tally.outside.total,
    )


def tally_parts(tally: Tally, runs: int) -> dict[str, Any]:
    """The :class:`~ledger.report.document.ComplianceReport` fields a tally decides
    (``runs`` the report's run count): what both builds of the report share."""
    return {
        "tools": tuple(sorted(tally.tools.values(), key=lambda t: t.tool)),
        "denials": tally.denials.items(),
        "missing_results": tally.missing.items(),
        "unsafe_without_intent": tally.unsafe.items(),
        "approved": tally.approved.items(),
        "agents": tuple(sorted(tally.agents.values(), key=lambda w: w.who)),
        "principals": tuple(sorted(tally.principals.values(), key=lambda w: w.who)),
        "outside_runs": tally.outside.items(),
        "listed": listed_of(tally, runs),
        "list_limit": tally.listed,
        "approval_groups": tally.approval_groups(),
    }


@dataclass(slots=True)
class CallPass:
    """State of the pass over the window's events (see the module docstring): the
    per-call state of the runs being read, and the :class:`Tally` it feeds.

    :meth:`finish` settles the calls read so far (results without an intent, intents
    without a result, approved actions) into the tally and forgets them: the database
    build reads the window run by run and finishes each run, so it holds one run's
    calls at a time; the streaming build finishes once, at the end. With
    ``counting=False`` the pass leaves out what SQL counts (events, first and last
    time, allowed actions and denials per tool, the timeline's times)."""

    counting: bool = True
    tally: Tally = field(default_factory=Tally)
    allowed: dict[tuple[str, str], _Intent] = field(default_factory=dict)
    before: set[tuple[str, str]] = field(default_factory=set)  # committed before the window
    results: set[tuple[str, str]] = field(default_factory=set)
    marks: dict[tuple[str, str], DecisionMark] = field(default_factory=dict)  # first decisions
    not_allowed: set[tuple[str, str]] = field(default_factory=set)  # calls with other actions
    orphans: list[Record] = field(default_factory=list)
    # runs whose first record in the window is a request (their start, unless a run id
    # serves many), and the runs seen
    started: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)
    early_marks: set[tuple[str, str]] = field(default_factory=set)  # decided before it
    # each call's first decision: its policy (label), approval, and the erasure mark of
    # an erased approval ("" when none was)
    decided: dict[tuple[str, str], tuple[str, Approval | None, str]] = field(default_factory=dict)
    who_runs: set[tuple[str, str, str]] = field(default_factory=set)
    action_times: list[datetime] = field(default_factory=list)
    denial_times: list[datetime] = field(default_factory=list)
    events: int = 0
    first: datetime | None = None
    last: datetime | None = None

    @property
    def skipped(self) -> list[CorruptRecord]:
        return self.tally.skipped

    def tool(self, name: str) -> ToolStats:
        return self.tally.tool(name)

    def add(self, e: Record) -> None:
        if self.counting:
            self.events += 1
            if self.first is None or e.time < self.first:
                self.first = e.time
            if self.last is None or e.time > self.last:
                self.last = e.time
        kind = e.kind
        if e.run_id not in self.touched:
            self.touched.add(e.run_id)
            if kind is Kind.REQUEST:
                self.started.add(e.run_id)
        if kind is Kind.ACTION:
            self._action(e)
        elif kind is Kind.TOOL_RESULT:
            self._result(e)
        elif kind is Kind.GATE_DECISION and e.call_id:
            key = (e.run_id, e.call_id)
            if key not in self.marks:
                self.marks[key] = decision_mark(cast(Event, e))
            self.decided.setdefault(key, _decision(e))

    def _who(self, e: Record, allowed: bool) -> None:
        for table, who, kind in (
            (self.tally.agents, _agent(e), "a"),
            (self.tally.principals, _principal(e), "p"),
        ):
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

    def _action(self, e: Record) -> None:
        if outside_any_run(e.run_id):
            detail = f"a call outside any run was denied: {_reason(e)}"
            self.tally.outside.add(finding(e, detail))
            return
        stats = self.tool(e.tool)
        self._who(e, e.verdict is Verdict.ALLOWED)
        if e.verdict is Verdict.ALLOWED:
            if self.counting:
                stats.actions += 1
                self.action_times.append(e.time)
            self.allowed.setdefault((e.run_id, e.call_id), _Intent.of(e))
            return
        self.not_allowed.add((e.run_id, e.call_id))
        if self.counting:
            stats.denials += 1
            self.denial_times.append(e.time)
        self.tally.denials.add(
            Denial(
                run_id=e.run_id,
                call_id=e.call_id,
                tool=e.tool,
                time=e.time,
                verdict=str(e.verdict) if e.verdict else "none",
                reason=_reason(e),
                event_id=str(e.event_id),
            )
        )

    def _result(self, e: Record) -> None:
        key = (e.run_id, e.call_id)
        intent = self.allowed.get(key) if e.call_id else None
        stats = self.tool(e.tool or (intent.tool if intent is not None else ""))
        if intent is not None:
            self.results.add(key)
            if failed(e):
                stats.failed += 1
            else:
                stats.succeeded += 1
            return
        self.orphans.append(e)

    def outside_window(self, e: Record) -> None:
        """An event of a run cut by the window's start, recorded before it: the intent
        or safe-read decision of a result in the window."""
        key = (e.run_id, e.call_id)
        if e.kind is Kind.ACTION and e.verdict is Verdict.ALLOWED:
            self.before.add(key)
        elif e.kind is Kind.ACTION:
            self.not_allowed.add(key)
        elif e.kind is Kind.GATE_DECISION and e.call_id and key not in self.early_marks:
            # read in commit order: the first decision before the window is the call's
            # first, ahead of any in the window (its mark, and its policy and approval)
            self.early_marks.add(key)
            self.marks[key] = decision_mark(cast(Event, e))
            self.decided[key] = _decision(e)

    def cut_calls(self) -> set[tuple[str, str]]:
        """The calls of results with no allowed action before them in the window whose
        actions and decisions before the window's start are read
        (:meth:`outside_window`): in a run that started before the window (its request
        is not in it), every such call, whatever the window holds of it after the
        result (a safe-read decision, an allowed action), so it is judged as over the
        whole history; in a run whose request is in the window, a call the window does
        not settle (no safe-read decision, no allowed action: a run id may serve many
        requests, and a call of an earlier turn can end after a later turn's request);
        and every allowed action in a run that started before the window, whose first
        decision (the policy, the approval the report lists) may lie before it."""
        safe = {k for k, m in self.marks.items() if m is DecisionMark.SAFE}
        settled = safe | self.allowed.keys() | self.before
        started = self.started
        # and every allowed action of a run that started before the window: the call's
        # first decision (its policy, its approval) may lie before the window
        return {k for k in self.allowed if k[0] not in started} | {
            (e.run_id, e.call_id)
            for e in self.orphans
            if e.run_id not in started or (e.run_id, e.call_id) not in settled
        }

    def open_calls(self) -> set[tuple[str, str]]:
        """Allowed actions with no result yet: their runs are read again after the
        window. A result recorded before its intent answers it (:meth:`_unsafe` lists
        that)."""
        answered = self.results | {(e.run_id, e.call_id) for e in self.orphans if e.call_id}
        return set(self.allowed.keys()) - answered

    def cut(self, since: datetime | None, until: datetime | None) -> bool:
        """True when a call of these runs may be settled by events outside the window
        ``[since, until)`` (:func:`look_across` reads them)."""
        return bool(since is not None and self.cut_calls()) or bool(
            until is not None and self.allowed and self.open_calls()
        )

    def finish(self) -> None:
        """Settle the calls read so far into the tally (see the class docstring)."""
        tally = self.tally
        for f in self._unsafe():
            tally.unsafe.add(f)
        for f in self._missing():
            tally.missing.add(f)
        for a in self._approved():
            tally.groups[(a.approver, a.tool, a.policy)] += 1
            tally.approved.add(a)
        for held in (self.allowed, self.marks, self.decided):
            held.clear()
        for keys in (self.before, self.results, self.not_allowed, self.who_runs, self.started,
                     self.touched, self.early_marks):  # fmt: skip
            keys.clear()
        self.orphans.clear()

    def _unsafe(self) -> list[Finding]:
        """Results with no preceding allowed action that the gate did not mark safe."""
        found: list[Finding] = []
        for e in self.orphans:
            key = (e.run_id, e.call_id)
            if e.call_id and key in self.before:
                # its intent was committed before the window: a result, as in the window
                stats = self.tool(e.tool)
                if failed(e):
                    stats.failed += 1
                else:
                    stats.succeeded += 1
                continue
            if e.call_id and key in self.allowed:
                found.append(finding(e, "the result was recorded before its intent was committed"))
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
                found.append(finding(e, why))
        return found

    def _missing(self) -> list[Finding]:
        """Allowed actions whose call has no recorded result (one recorded before its
        intent is a result all the same: :meth:`_unsafe` lists it)."""
        detail = "allowed, but no result was recorded (crash, still running, or lost)"
        early = {(e.run_id, e.call_id) for e in self.orphans if e.call_id}
        return [
            Finding(
                run_id=run, call_id=call, tool=i.tool, time=i.time, event_id=i.event_id,
                detail=detail,
            )
            for (run, call), i in self.allowed.items()
            if (run, call) not in self.results and (run, call) not in early
        ]  # fmt: skip

    def _approved(self) -> list[ApprovedAction]:
        """Each allowed non-safe action with who or which policy allowed it."""
        out = []
        for (run, call), i in self.allowed.items():
            policy, approval, erased = self.decided.get((run, call), ("", None, ""))
            approval = i.approval or approval
            gone = (i.approval_erased or erased) if approval is None else ""
            out.append(
                ApprovedAction(
                    run_id=run,
                    call_id=call,
                    tool=i.tool,
                    time=i.time,
                    principal=i.principal,
                    agent=i.agent,
                    policy=policy,
                    approver=approval.approver if approval is not None else gone,
                    approved_at=approval.time if approval is not None else None,
                    reason=(
                        approval.reason if approval is not None and approval.reason else i.reason
                    ),
                    evidence=i.evidence,
                    event_id=i.event_id,
                )
            )
        return out


def _decision(e: Record) -> tuple[str, Approval | None, str]:
    """A gate decision's policy (label: one erased reads as erased, never as none), its
    approval, and the erasure mark of an erased approval ("" when none was)."""
    return e.label or erased_text(e, "label"), e.approval, erased_text(e, "approval")


def look_across(
    state: CallPass, reader: Reader, since: datetime | None, until: datetime | None
) -> None:
    """Settle calls cut by the window's edges: a result whose intent (or safe-read
    decision) was recorded before ``since``, an intent whose result came at or after
    ``until``. Only the runs concerned are read again.

    Only those two directions: with clocks that run forward, an intent dated after the
    window's end belongs to a result committed before it (a violation), and a result
    dated before the window's start cannot answer an intent in it. A clock that stepped
    back inside a run can break that (docs/cli.md says so)."""
    if since is not None:  # the intents and decisions of the cut calls alone are kept
        kinds = (Kind.ACTION, Kind.GATE_DECISION)
        for e in _across(state.tally, reader, state.cut_calls(), kinds, until=since):
            state.outside_window(e)
    if until is not None:
        wanted = state.open_calls()
        for e in _across(state.tally, reader, wanted, (Kind.TOOL_RESULT,), since=until):
            state.results.add((e.run_id, e.call_id))


def _across(
    tally: Tally,
    reader: Reader,
    wanted: set[tuple[str, str]],
    kinds: tuple[Kind, ...],
    **window: datetime,
) -> Iterator[Record]:
    """The events of ``kinds`` (kind by kind) of the calls ``wanted`` in ``window``
    (before the window's start, or from its end on), in commit order for each call. A
    SQL reader, whose rows are indexed by run, reads each run of them that has rows
    there (found by one query for 500 runs), and each row of a wanted call is checked
    as the window's rows are (a problem goes to ``tally.beyond``: the report relies on
    the row); any other reader is read once a kind."""
    if not wanted:
        return
    if isinstance(reader, SQLReader):
        runs = _runs_with_rows(reader, sorted({run for run, _ in wanted}), **window)
        side = "before the window" if "until" in window else "after the window"
        where = f"a row {side}, read for a call the window's edge cut"

        def keep(columns: dict[str, Any]) -> bool:
            return (columns["run_id"], columns["call_id"]) in wanted

        for kind in kinds:
            for run in runs:
                rows = each_checked_event(
                    reader, tally.beyond, keep, where, run_id=run, kind=kind.value, **window
                )
                for e in rows:
                    if (e.run_id, e.call_id) in wanted:
                        yield e
        return
    skipped = tally.skipped
    for kind in kinds:
        for e in each_event(reader, skipped, kind=kind, **window):
            if (e.run_id, e.call_id) in wanted:
                yield e


def _runs_with_rows(reader: SQLReader, runs: list[str], **window: datetime) -> list[str]:
    """Those of ``runs`` that have rows in ``window`` (``since`` or ``until``)."""
    t = reader._table
    where = reader._window(window.get("since"), window.get("until"))
    found: set[str] = set()
    with reader._reading() as conn:
        for first in range(0, len(runs), 500):
            part = runs[first : first + 500]
            query = sa.select(t.c.run_id).where(t.c.run_id.in_(part), *where).distinct()
            found.update(run for (run,) in conn.execute(query))
    return sorted(found)

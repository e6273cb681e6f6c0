"""Rebuild one run from its events: the request, what was available, each action.

>>> chain = assemble_chain(events)          # pure; events of one run, in event order
>>> chain.request.args                      # the run's input (the chain head)
>>> [a.intent.tool for a in chain.actions]  # every action, allowed or denied
>>> print(chain.why("c1"))                  # one action explained, read backward

Pairing follows the reference: an ``action`` and the ``tool_result`` with the same call id
form one :class:`Action`; results whose call id belongs to no action are safe reads and
land in ``available`` as tool refs, interleaved in event order with the refs of
``retrieved`` events. Unlike the reference nothing is resolved silently: more
than one request, several results for one call, results without a call id, allowed
actions without a result, results recorded before their intent, and denied attempts are
reported in ``anomalies``. The first request is the head; a call's first result pairs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from ledger.errors import CallNotFound
from ledger.explain import Explanation
from ledger.model import Event, Kind, Ref, RefSource, Verdict

__all__ = ["Action", "Anomaly", "AnomalyCode", "Chain", "Explanation", "assemble_chain"]


class AnomalyCode(StrEnum):
    """The oddities a chain reports instead of hiding."""

    NO_REQUEST = "no_request"
    MULTIPLE_REQUESTS = "multiple_requests"
    MIXED_RUNS = "mixed_runs"
    DENIED_ATTEMPT = "denied_attempt"
    ACTION_WITHOUT_CALL_ID = "action_without_call_id"
    DUPLICATE_ACTION = "duplicate_action"
    ACTION_WITHOUT_RESULT = "action_without_result"
    DUPLICATE_RESULT = "duplicate_result"
    RESULT_WITHOUT_CALL_ID = "result_without_call_id"
    RESULT_BEFORE_INTENT = "result_before_intent"


@dataclass(frozen=True, slots=True, kw_only=True)
class Anomaly:
    """One oddity in a run, with the events it concerns."""

    code: AnomalyCode
    detail: str
    event_ids: tuple[str, ...] = ()
    call_id: str = ""

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """One effectful call: its intent (target, verdict, embedded why), its result, and
    the evidence it rested on. A denied attempt is an action whose outcome is a denial."""

    intent: Event
    result: Event | None = None
    evidence: tuple[Ref, ...] = ()

    @property
    def call_id(self) -> str:
        return self.intent.call_id

    @property
    def tool(self) -> str:
        return self.intent.tool

    @property
    def verdict(self) -> Verdict | None:
        return self.intent.verdict

    @property
    def denied(self) -> bool:
        """True when the intent was refused (the tool did not run)."""
        return self.intent.verdict in (Verdict.DENIED, Verdict.NEEDS_APPROVAL)

    @property
    def outcome(self) -> str:
        """``denied``, ``failed`` (the tool raised), ``succeeded`` or ``no_result``."""
        if self.denied:
            return "denied"
        if self.result is None:
            return "no_result"
        return "failed" if self.result.err else "succeeded"


@dataclass(frozen=True, slots=True, kw_only=True)
class Chain:
    """One run reconstructed. Read backward it answers *why*."""

    run_id: str = ""
    request: Event | None = None
    available: tuple[Ref, ...] = ()
    actions: tuple[Action, ...] = ()
    anomalies: tuple[Anomaly, ...] = ()
    events: tuple[Event, ...] = ()

    @property
    def denied(self) -> tuple[Action, ...]:
        """The denied attempts, in event order."""
        return tuple(a for a in self.actions if a.denied)

    def action(self, call_id: str) -> Action:
        """The action for ``call_id`` (the allowed one when several share it)."""
        found = [a for a in self.actions if a.call_id == call_id] if call_id else []
        if not found:
            known = ", ".join(repr(a.call_id) for a in self.actions) or "none"
            raise CallNotFound(
                f"call id {call_id!r} has no action in run {self.run_id!r} "
                f"(call ids present: {known})"
            )
        allowed = [a for a in found if not a.denied]
        return (allowed or found)[0]

    def why(self, call_id: str) -> Explanation:
        """Explain one action backward: verdict and reason, evidence, the request."""
        action = self.action(call_id)
        decision = next(
            (
                e
                for e in self.events
                if e.kind is Kind.GATE_DECISION and e.call_id == call_id and call_id
            ),
            None,
        )
        return Explanation(
            action=action,
            request=self.request,
            decision=decision,
            anomalies=tuple(a for a in self.anomalies if a.call_id == call_id),
        )


def result_ref(result: Event) -> Ref:
    """The tool ref of a safe read: the result's event id and the SHA-256 of its raw
    result text (empty when it has none)."""
    digest = ""
    if result.result is not None:
        digest = "sha256:" + hashlib.sha256(result.result.encode("utf-8")).hexdigest()
    return Ref(source=RefSource.TOOL, id=str(result.event_id), hash=digest)


class _Builder:
    def __init__(self, events: list[Event]) -> None:
        self.events = events
        self.anomalies: list[Anomaly] = []
        self.action_calls = {e.call_id for e in events if e.kind is Kind.ACTION and e.call_id}

    def flag(self, code: AnomalyCode, detail: str, events: Iterable[Event], call: str = "") -> None:
        ids = tuple(str(e.event_id) for e in events)
        self.anomalies.append(Anomaly(code=code, detail=detail, event_ids=ids, call_id=call))

    def results(self) -> dict[str, Event]:
        by_call: dict[str, list[Event]] = {}
        for e in self.events:
            if e.kind is Kind.TOOL_RESULT and e.call_id:
                by_call.setdefault(e.call_id, []).append(e)
        for call, found in by_call.items():
            if len(found) > 1:
                self.flag(
                    AnomalyCode.DUPLICATE_RESULT,
                    f"{len(found)} results recorded for call {call!r}; the first is paired",
                    found,
                    call,
                )
        return {call: found[0] for call, found in by_call.items()}

    def request(self) -> Event | None:
        requests = [e for e in self.events if e.kind is Kind.REQUEST]
        if not requests:
            self.flag(AnomalyCode.NO_REQUEST, "no request event: the chain has no head", ())
            return None
        if len(requests) > 1:
            self.flag(
                AnomalyCode.MULTIPLE_REQUESTS,
                f"{len(requests)} request events; the first is the head",
                requests,
            )
        return requests[0]

    def actions(self, results: dict[str, Event]) -> list[Action]:
        actions: list[Action] = []
        seen: dict[str, Event] = {}
        position = {id(e): i for i, e in enumerate(self.events)}
        for e in self.events:
            if e.kind is not Kind.ACTION:
                continue
            call = e.call_id
            result = results.get(call) if call else None
            actions.append(Action(intent=e, result=result, evidence=e.refs))
            self._check_action(e, result, seen, position)
            if call:
                seen.setdefault(call, e)
        return actions

    def _check_action(
        self, e: Event, result: Event | None, seen: dict[str, Event], position: dict[int, int]
    ) -> None:
        call, tool = e.call_id, e.tool or "?"
        denied = e.verdict in (Verdict.DENIED, Verdict.NEEDS_APPROVAL)
        if denied:
            reason = e.reason or "no reason recorded"
            self.flag(AnomalyCode.DENIED_ATTEMPT, f"{tool} was denied: {reason}", [e], call)
        if not call:
            self.flag(AnomalyCode.ACTION_WITHOUT_CALL_ID, f"{tool} action has no call id", [e])
        elif call in seen:
            self.flag(
                AnomalyCode.DUPLICATE_ACTION,
                f"call {call!r} has more than one action record",
                [seen[call], e],
                call,
            )
        if call and result is None and not denied:
            self.flag(
                AnomalyCode.ACTION_WITHOUT_RESULT,
                f"{tool} (call {call!r}) was allowed but no result was recorded",
                [e],
                call,
            )
        if result is not None and position[id(result)] < position[id(e)]:
            self.flag(
                AnomalyCode.RESULT_BEFORE_INTENT,
                f"the result of call {call!r} was recorded before its intent",
                [result, e],
                call,
            )

    def available(self) -> list[Ref]:
        refs: list[Ref] = []
        for e in self.events:
            if e.kind is Kind.RETRIEVED:
                refs.extend(e.refs)
            elif e.kind is Kind.TOOL_RESULT and e.call_id not in self.action_calls:
                refs.append(result_ref(e))
                if not e.call_id:
                    self.flag(
                        AnomalyCode.RESULT_WITHOUT_CALL_ID,
                        f"a {e.tool or 'tool'} result has no call id; kept as a read",
                        [e],
                    )
        return refs

    def run_id(self) -> str:
        runs = list(dict.fromkeys(e.run_id for e in self.events if e.run_id))
        if len(runs) > 1:
            self.flag(
                AnomalyCode.MIXED_RUNS,
                f"events of {len(runs)} runs were assembled together: {', '.join(runs)}",
                (),
            )
        return runs[0] if runs else ""


def assemble_chain(events: Iterable[Event]) -> Chain:
    """Reconstruct one run from its events (in event order). Pure: no I/O."""
    ordered = list(events)
    b = _Builder(ordered)
    run_id = b.run_id()
    request = b.request()
    results = b.results()
    actions = b.actions(results)
    available = b.available()
    return Chain(
        run_id=run_id,
        request=request,
        available=tuple(available),
        actions=tuple(actions),
        anomalies=tuple(b.anomalies),
        events=tuple(ordered),
    )

"""Rebuild one run from its events: the request, what was available, each action.

>>> from ledger.model import Event
>>> events = [
...     Event(kind="request", run_id="r1", args='"tidy the notes"'),
...     Event(kind="action", run_id="r1", call_id="c1", tool="write_file",
...           args={"path": "notes.txt"}, verdict="allowed", reason="allow-list",
...           refs=[{"source": "memory", "id": "m1"}]),
...     Event(kind="tool_result", run_id="r1", call_id="c1", tool="write_file", result='"ok"'),
... ]
>>> chain = assemble_chain(events)          # pure; events of one run, in event order
>>> chain.request.args                      # the run's input (the chain head)
'"tidy the notes"'
>>> [(a.tool, a.outcome) for a in chain.actions]  # every action, allowed or denied
[('write_file', 'succeeded')]
>>> print(chain.why("c1"))                  # doctest: +ELLIPSIS
write_file (call c1) in run r1: allowed
...

Pairing follows the reference: an ``action`` and the ``tool_result`` with the same call id
form one :class:`Action`; results whose call id belongs to no action are safe reads and
land in ``available`` as tool refs, interleaved in event order with the refs of
``retrieved`` events. Unlike the reference nothing is resolved silently: more
than one request, several results for one call, results without a call id, allowed
actions without a result, results recorded before their intent, results of calls that had
no allowed intent, and denied attempts are reported in ``anomalies``. The first request is
the head; a call's first result pairs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ledger.canonical import sha256_hex
from ledger.chain.explain import Explanation
from ledger.chain.parts import (
    DENIED,
    UNINTENDED,
    Action,
    Anomaly,
    AnomalyCode,
    DecisionMark,
    decision_mark,
    made_action,
    unintended_reason,
)
from ledger.chain.views import chain_dict, render_chain
from ledger.errors import CallNotFound
from ledger.ids import ulid_text
from ledger.model.codec import checked_ref
from ledger.model.erasure import erased_text
from ledger.model.event import Event
from ledger.model.values import Kind, Ref, RefSource, Verdict

__all__ = ["Chain", "assemble_chain", "result_ref"]


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

    def to_dict(self) -> dict[str, Any]:
        """The chain with stable field names: what ``ledger chain --json`` prints
        (:func:`ledger.chain.views.chain_dict`)."""
        return chain_dict(self)

    def render(self, width: int = 80) -> str:
        """The chain as readable text wrapped to ``width``: what ``ledger chain`` shows
        (:func:`ledger.chain.views.render_chain`)."""
        return render_chain(self, width)

    @property
    def unintended(self) -> tuple[Event, ...]:
        """Results that ran without a committed intent (no call id, no allowed action and
        no safe-read decision, or recorded before their intent), in event order: what the
        compliance report counts as ``unsafe_without_intent`` for this run."""
        flagged = {a.event_ids[0] for a in self.anomalies if a.code in UNINTENDED and a.event_ids}
        return tuple(
            e
            for e in self.events
            if e.kind is Kind.TOOL_RESULT and ulid_text(e.event_id) in flagged
        )

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
        ids = {r.id for r in action.evidence}
        return Explanation(
            action=action,
            request=self.request,
            decision=decision,
            anomalies=tuple(a for a in self.anomalies if a.call_id == call_id),
            cited=tuple(
                e for e in self.events if e.kind is Kind.TOOL_RESULT and str(e.event_id) in ids
            ),
        )


def result_ref(result: Event) -> Ref:
    """The tool ref of a safe read: the result's event id and the SHA-256 of its raw
    result text (empty when it has none)."""
    digest = "" if result.result is None else sha256_hex(result.result)
    return checked_ref(RefSource.TOOL, ulid_text(result.event_id), digest)  # ASCII texts


def _flag(
    out: list[Anomaly], code: AnomalyCode, detail: str, events: Iterable[Event], call: str = ""
) -> None:
    ids = tuple([ulid_text(e.event_id) for e in events])
    out.append(Anomaly(code=code, detail=detail, event_ids=ids, call_id=call))


def assemble_chain(events: Iterable[Event]) -> Chain:
    """Reconstruct one run from its events (in event order). Pure: no I/O.

    One pass sorts the events into what each rule needs (run ids, requests, results by
    call, actions, the sources of ``available``); the rules then run over those short
    lists. Anomalies come in a fixed order: mixed runs, the request, duplicate results
    (by call, first seen first), each action's problems (in event order), results that
    ran without an allowed intent, results without a call id.

    A denied action is never paired with a result (the tool did not run); a result of a
    call whose intent was denied, or whose gate decision was not a safe allowance, is a
    ``result_without_intent`` anomaly.
    """
    ordered = tuple(events)
    runs: dict[str, None] = {}
    requests: list[Event] = []
    by_call: dict[str, list[Event]] = {}
    last: dict[int, int] = {}  # id(action or result event) -> its last position
    intents: list[Event] = []
    sources: list[Event] = []  # retrieved events and tool results, in event order
    decisions: dict[str, DecisionMark] = {}  # call id -> its first gate decision
    decision, result, action = Kind.GATE_DECISION, Kind.TOOL_RESULT, Kind.ACTION
    for i, e in enumerate(ordered):  # the kinds a gate writes most, first
        run, kind, call = e.run_id, e.kind, e.call_id
        if run:
            runs[run] = None
        if kind is decision:
            if call and call not in decisions:
                decisions[call] = decision_mark(e)
        elif kind is result:
            sources.append(e)
            last[id(e)] = i
            if call:
                if call in by_call:
                    by_call[call].append(e)
                else:
                    by_call[call] = [e]
        elif kind is action:
            intents.append(e)
            last[id(e)] = i
        elif kind is Kind.RETRIEVED:
            sources.append(e)
        elif kind is Kind.REQUEST:
            requests.append(e)
    anomalies: list[Anomaly] = []
    run_id = _run_id(list(runs), anomalies)
    request = _request(requests, anomalies)
    results = _results(by_call, anomalies)
    actions = _actions(intents, results, last, anomalies)
    _unintended(by_call, intents, decisions, anomalies)
    reads = _available(sources, {e.call_id for e in intents if e.call_id}, anomalies)
    return Chain(
        run_id=run_id,
        request=request,
        available=tuple(reads),
        actions=tuple(actions),
        anomalies=tuple(anomalies),
        events=ordered,
    )


def _run_id(runs: list[str], out: list[Anomaly]) -> str:
    if len(runs) > 1:
        detail = f"events of {len(runs)} runs were assembled together: {', '.join(runs)}"
        _flag(out, AnomalyCode.MIXED_RUNS, detail, ())
    return runs[0] if runs else ""


def _request(requests: list[Event], out: list[Anomaly]) -> Event | None:
    if not requests:
        _flag(out, AnomalyCode.NO_REQUEST, "no request event: the chain has no head", ())
        return None
    if len(requests) > 1:
        detail = f"{len(requests)} request events; the first is the head"
        _flag(out, AnomalyCode.MULTIPLE_REQUESTS, detail, requests)
    return requests[0]


def _results(by_call: dict[str, list[Event]], out: list[Anomaly]) -> dict[str, Event]:
    for call, found in by_call.items():
        if len(found) > 1:
            detail = f"{len(found)} results recorded for call {call!r}; the first is paired"
            _flag(out, AnomalyCode.DUPLICATE_RESULT, detail, found, call)
    return {call: found[0] for call, found in by_call.items()}


def _actions(
    intents: list[Event],
    results: dict[str, Event],
    last: dict[int, int],
    out: list[Anomaly],
) -> list[Action]:
    actions: list[Action] = []
    seen: dict[str, Event] = {}
    for e in intents:
        call, tool = e.call_id, e.tool or "?"
        denied = e.verdict in DENIED
        result = results.get(call) if call and not denied else None  # a denial never ran
        actions.append(made_action(e, result))
        if denied:
            reason = erased_text(e, "reason") or e.reason or "no reason recorded"
            _flag(out, AnomalyCode.DENIED_ATTEMPT, f"{tool} was denied: {reason}", [e], call)
        if not call:
            _flag(out, AnomalyCode.ACTION_WITHOUT_CALL_ID, f"{tool} action has no call id", [e])
            continue
        if call in seen:
            detail = f"call {call!r} has more than one action record"
            _flag(out, AnomalyCode.DUPLICATE_ACTION, detail, [seen[call], e], call)
        else:
            seen[call] = e
        if result is None:
            if not denied:
                detail = f"{tool} (call {call!r}) was allowed but no result was recorded"
                _flag(out, AnomalyCode.ACTION_WITHOUT_RESULT, detail, [e], call)
        elif last[id(result)] < last[id(e)]:
            detail = f"the result of call {call!r} was recorded before its intent"
            _flag(out, AnomalyCode.RESULT_BEFORE_INTENT, detail, [result, e], call)
    return actions


def _unintended(
    by_call: dict[str, list[Event]],
    intents: list[Event],
    decisions: dict[str, DecisionMark],
    out: list[Anomaly],
) -> None:
    """Flag results that ran without an allowed intent, as :func:`unintended_reason`
    decides (the rule the compliance report applies too)."""
    allowed = {e.call_id for e in intents if e.call_id and e.verdict is Verdict.ALLOWED}
    denied = {e.call_id for e in intents if e.call_id} - allowed
    for call, found in by_call.items():
        if call in allowed:  # the rule's first answer for a call id (never "" here)
            continue
        why = unintended_reason(
            call_id=call,
            allowed_intent=call in allowed,
            denied_intent=call in denied,
            decision=decisions.get(call),
        )
        if why is None:
            continue
        for result in found:
            tool = result.tool or "?"
            detail = f"{tool} (call {call!r}) has a result but {why}: it ran without an intent"
            _flag(out, AnomalyCode.RESULT_WITHOUT_INTENT, detail, [result], call)


def _available(sources: list[Event], action_calls: set[str], out: list[Anomaly]) -> list[Ref]:
    refs: list[Ref] = []
    for e in sources:
        if e.kind is Kind.RETRIEVED:
            refs.extend(e.refs)
        elif e.call_id not in action_calls:
            refs.append(result_ref(e))
            if not e.call_id:
                detail = f"a {e.tool or 'tool'} result has no call id; kept as a read"
                _flag(out, AnomalyCode.RESULT_WITHOUT_CALL_ID, detail, [e])
    return refs

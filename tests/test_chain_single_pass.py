"""The single-pass ``assemble_chain`` against the previous multi-pass one (kept here,
verbatim, as the oracle): the same chain, anomalies in the same order, on random runs
that mix every kind, shared and missing call ids, repeated event objects and denials."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.chain import Action, Anomaly, AnomalyCode, Chain, assemble_chain, result_ref
from ledger.model import Event, Kind, Ref, Verdict


class _ReferenceBuilder:
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


def reference_assemble(events: Iterable[Event]) -> Chain:
    ordered = list(events)
    b = _ReferenceBuilder(ordered)
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


_refs = st.lists(
    st.builds(
        Ref, source=st.sampled_from(["tool", "memory", "web"]), id=st.sampled_from(["a", "b"])
    ),
    max_size=2,
)
_events = st.builds(
    Event,
    kind=st.sampled_from(
        [
            Kind.REQUEST,
            Kind.ACTION,
            Kind.TOOL_RESULT,
            Kind.RETRIEVED,
            Kind.GATE_DECISION,
            Kind.PROMPT,
        ]
    ),
    run_id=st.sampled_from(["r1", "r1", "r1", "", "r2"]),
    call_id=st.sampled_from(["", "c1", "c2", "c3"]),
    tool=st.sampled_from(["", "read", "write"]),
    verdict=st.none() | st.sampled_from(list(Verdict)),
    reason=st.sampled_from(["", "policy"]),
    result=st.none() | st.just('{"ok": true}'),
    err=st.sampled_from(["", "boom"]),
    refs=_refs,
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_events, max_size=12), st.data())
def test_single_pass_equals_the_reference(events: list[Event], data: st.DataObject) -> None:
    if events:  # the same object more than once, as a caller may pass it
        extra = data.draw(st.lists(st.sampled_from(events), max_size=3))
        positions = data.draw(
            st.lists(st.integers(0, len(events)), min_size=len(extra), max_size=len(extra))
        )
        for item, at in zip(extra, positions, strict=True):
            events.insert(at, item)
    assert assemble_chain(events) == reference_assemble(events)


def test_repeated_objects_take_their_last_position_as_before() -> None:
    req = Event(kind=Kind.REQUEST, run_id="r1")
    act = Event(kind=Kind.ACTION, run_id="r1", call_id="c1", tool="t", verdict="allowed")
    res = Event(kind=Kind.TOOL_RESULT, run_id="r1", call_id="c1", result="1")
    for events in ([req, res, act, res], [req, act, res, act], [res, act, res, act, req]):
        assert assemble_chain(events) == reference_assemble(events)

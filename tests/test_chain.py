"""Chains: one run reassembled (conformance items 8, 9, 31, 32; defects 2, 3, 7, 8, 9 fixed)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import (
    Action,
    AnomalyCode,
    CallNotFound,
    Chain,
    Event,
    Explanation,
    Kind,
    LedgerError,
    Ref,
    RefSource,
    Verdict,
    assemble_chain,
    content_hash,
)
from ledger.timefmt import format_time_us

RUN = "run-1"


def request(text: str = "tidy the notes", **kw: Any) -> Event:
    return Event(kind=Kind.REQUEST, run_id=kw.pop("run_id", RUN), args=f'"{text}"', **kw)


def retrieved(*refs: Ref, **kw: Any) -> Event:
    return Event(kind=Kind.RETRIEVED, run_id=kw.pop("run_id", RUN), refs=refs, **kw)


def action(call: str, tool: str = "write_file", **kw: Any) -> Event:
    kw.setdefault("args", {"path": f"/tmp/{call or 'x'}"})
    kw.setdefault("verdict", Verdict.ALLOWED)
    kw.setdefault("reason", "the why")
    return Event(kind=Kind.ACTION, run_id=kw.pop("run_id", RUN), call_id=call, tool=tool, **kw)


def result(call: str, text: str | None = '"ok"', tool: str = "write_file", **kw: Any) -> Event:
    return Event(
        kind=Kind.TOOL_RESULT,
        run_id=kw.pop("run_id", RUN),
        call_id=call,
        tool=tool,
        result=text,
        **kw,
    )


def codes(chain: Chain) -> list[AnomalyCode]:
    return [a.code for a in chain.anomalies]


MEM = Ref(source=RefSource.MEMORY, id="m1", hash=content_hash("the notes live in /tmp"))


def safe_decision(call: str, tool: str = "list_files", **kw: Any) -> Event:
    """The gate's record of a safe read (what makes its result covered)."""
    return Event(
        kind=Kind.GATE_DECISION,
        run_id=kw.pop("run_id", RUN),
        call_id=call,
        tool=tool,
        verdict=Verdict.ALLOWED,
        label="safe:read-only",
        reason="safe tool",
        **kw,
    )


def clean_run() -> list[Event]:
    req = request()
    return [
        req,
        retrieved(MEM),
        safe_decision("read-1"),
        result("read-1", '"notes.txt"', tool="list_files"),
        action("c1", refs=[Ref(source="tool", id=str(req.event_id))]),
        result("c1", '"written"', duration_ms=3),
    ]


# --- the reference's conformance items ------------------------------------------------


def test_item8_actions_pair_with_results_by_call_id() -> None:
    events = [request(), action("c1"), result("c1"), action("c2"), result("c2")]
    chain = assemble_chain(events)
    assert chain.request is not None
    assert chain.request.kind is Kind.REQUEST
    assert len(chain.actions) == 2
    first, second = chain.actions
    assert first.result is not None
    assert first.intent.call_id == first.result.call_id == "c1"
    assert first.intent.call_id != second.intent.call_id


def test_item9_retrieved_refs_and_safe_reads_are_available() -> None:
    req = request()
    read = result("read-1", None, tool="read_file")
    chain = assemble_chain([req, retrieved(Ref(source="memory", id="m1", hash="h1")), read])
    assert chain.available == (
        Ref(source=RefSource.MEMORY, id="m1", hash="h1"),
        Ref(source=RefSource.TOOL, id=str(read.event_id), hash=""),
    )
    assert chain.actions == ()


def test_item31_lost_head_keeps_the_actions_and_their_why() -> None:
    act = action("c1", tool="delete_file", args='{"path":"/tmp/x"}', reason="the why")
    chain = assemble_chain([act])
    assert chain.request is None
    assert len(chain.actions) == 1
    kept = chain.actions[0].intent
    assert kept.tool == "delete_file"
    assert kept.args == '{"path":"/tmp/x"}'
    assert kept.reason == "the why"
    assert AnomalyCode.NO_REQUEST in codes(chain)
    text = str(chain.why("c1"))
    assert "delete_file" in text
    assert "the why" in text
    assert "missing" in text  # the account says the head is missing


def test_item32_each_action_pairs_with_its_own_result() -> None:
    events = [request(), action("c1"), action("c2"), result("c2"), result("c1")]
    chain = assemble_chain(events)
    assert len(chain.actions) == 2
    ids = []
    for act in chain.actions:
        assert act.result is not None
        assert act.intent.call_id == act.result.call_id
        assert act.intent.call_id
        ids.append(act.intent.call_id)
    assert ids == ["c1", "c2"]
    assert chain.actions[0].result is events[4]
    assert chain.actions[1].result is events[3]


# --- a clean run -----------------------------------------------------------------------


def test_clean_run_has_no_anomalies() -> None:
    events = clean_run()
    chain = assemble_chain(events)
    assert chain.anomalies == ()
    assert chain.run_id == RUN
    assert chain.request is events[0]
    assert chain.events == tuple(events)
    read = events[3]
    assert chain.available == (
        MEM,
        Ref(source=RefSource.TOOL, id=str(read.event_id), hash=content_hash('"notes.txt"')),
    )
    (act,) = chain.actions
    assert act.intent is events[4]
    assert act.result is events[5]
    assert act.evidence == events[4].refs
    assert act.outcome == "succeeded"
    assert not act.denied
    assert chain.denied == ()


def test_safe_read_hash_is_sha256_of_the_raw_result_bytes() -> None:
    raw = '{"b": 1,  "a": "é"}'
    read = result("r", raw, tool="read")
    (ref,) = assemble_chain([request(), read]).available
    assert ref.hash == "sha256:" + hashlib.sha256(raw.encode("utf-8")).hexdigest()
    assert ref.source is RefSource.TOOL
    assert ref.id == str(read.event_id)


def test_available_interleaves_reads_and_retrieved_refs_in_event_order() -> None:
    m1, m2, m3 = (Ref(source="memory", id=f"m{i}", hash=f"h{i}") for i in (1, 2, 3))
    s1, s2 = result("s1", '"a"'), result("s2", '"b"')
    events = [request(), s1, retrieved(m1, m2), s2, retrieved(m3), retrieved(m1)]
    chain = assemble_chain(events)
    assert [r.id for r in chain.available] == [
        str(s1.event_id),
        "m1",
        "m2",
        str(s2.event_id),
        "m3",
        "m1",  # no deduplication: it was put in front of the model twice
    ]


def test_assembly_is_deterministic() -> None:
    reads = [result(f"s{i}", f'"{i}"') for i in range(30)]
    mems = [retrieved(Ref(source="memory", id=f"m{i}")) for i in range(30)]
    events = [request()] + [e for pair in zip(reads, mems, strict=True) for e in pair]
    first = assemble_chain(events)
    for _ in range(50):
        assert assemble_chain(events) == first
        assert assemble_chain(iter(events)) == first
        assert assemble_chain(tuple(events)).available == first.available


def test_event_order_is_the_input_order_not_the_time_field() -> None:
    # defect 7: producer times can disagree with the order events were minted in;
    # assembly never re-sorts by time
    later = datetime(2026, 1, 2, 12, tzinfo=UTC)
    earlier = later - timedelta(hours=1)
    first_read = result("s1", '"a"', time=later)
    memory = retrieved(Ref(source="memory", id="m1"), time=earlier)
    chain = assemble_chain([request(time=later), safe_decision("s1"), first_read, memory])
    assert [r.id for r in chain.available] == [str(first_read.event_id), "m1"]
    assert chain.anomalies == ()


def test_kinds_outside_the_chain_are_ignored() -> None:
    others = [
        Event(kind=k, run_id=RUN, call_id="c1", tool="x", verdict=Verdict.ALLOWED)
        for k in (
            Kind.PROMPT,
            Kind.MODEL_RESPONSE,
            Kind.TOOL_REQUEST,
            Kind.GATE_DECISION,
            Kind.ABORT,
            Kind.RUN_END,
        )
    ]
    base = clean_run()
    chain = assemble_chain(base[:1] + others + base[1:])
    reference = assemble_chain(base)
    assert chain.actions == reference.actions
    assert chain.available == reference.available
    assert chain.anomalies == ()
    assert chain.events[1:7] == tuple(others)


def test_empty_input_gives_an_empty_chain_that_says_so() -> None:
    chain = assemble_chain([])
    assert chain.request is None
    assert chain.available == ()
    assert chain.actions == ()
    assert chain.run_id == ""
    assert codes(chain) == [AnomalyCode.NO_REQUEST]


# --- every anomaly, from a minimal input -----------------------------------------------

ANOMALY_CASES: dict[AnomalyCode, Any] = {
    AnomalyCode.NO_REQUEST: lambda: [action("c1"), result("c1")],
    AnomalyCode.MULTIPLE_REQUESTS: lambda: [request("first"), request("second")],
    AnomalyCode.MIXED_RUNS: lambda: [request(), request(run_id="run-2")],
    AnomalyCode.DENIED_ATTEMPT: lambda: [request(), action("c1", verdict="denied")],
    AnomalyCode.ACTION_WITHOUT_CALL_ID: lambda: [request(), action("", tool="rm")],
    AnomalyCode.DUPLICATE_ACTION: lambda: [request(), action("c1"), action("c1"), result("c1")],
    AnomalyCode.ACTION_WITHOUT_RESULT: lambda: [request(), action("c1")],
    AnomalyCode.DUPLICATE_RESULT: lambda: [request(), action("c1"), result("c1"), result("c1")],
    AnomalyCode.RESULT_WITHOUT_CALL_ID: lambda: [request(), result("")],
    AnomalyCode.RESULT_BEFORE_INTENT: lambda: [request(), result("c1"), action("c1")],
    AnomalyCode.RESULT_WITHOUT_INTENT: lambda: [
        request(),
        action("c1", verdict="denied"),
        result("c1"),
    ],
}


def test_every_anomaly_code_has_a_case() -> None:
    assert set(ANOMALY_CASES) == set(AnomalyCode)


@pytest.mark.parametrize("code", list(AnomalyCode), ids=lambda c: c.value)
def test_each_anomaly_is_reported_for_its_minimal_input(code: AnomalyCode) -> None:
    events = ANOMALY_CASES[code]()
    chain = assemble_chain(events)
    assert codes(chain).count(code) == 1
    anomaly = next(a for a in chain.anomalies if a.code is code)
    assert anomaly.detail
    assert str(anomaly).startswith(f"{code.value}: ")
    known = {str(e.event_id) for e in events}
    assert set(anomaly.event_ids) <= known


@pytest.mark.parametrize("code", list(AnomalyCode), ids=lambda c: c.value)
def test_no_anomaly_is_reported_for_a_clean_run(code: AnomalyCode) -> None:
    assert code not in codes(assemble_chain(clean_run()))


def test_multiple_requests_keep_the_first_as_head_and_name_all() -> None:
    first, second = request("first"), request("second")
    chain = assemble_chain([first, second, action("c1"), result("c1")])
    assert chain.request is first
    (anomaly,) = chain.anomalies
    assert anomaly.event_ids == (str(first.event_id), str(second.event_id))


def test_mixed_runs_name_every_run() -> None:
    chain = assemble_chain([request(), request(run_id="run-2")])
    mixed = next(a for a in chain.anomalies if a.code is AnomalyCode.MIXED_RUNS)
    assert "run-1" in mixed.detail
    assert "run-2" in mixed.detail
    assert chain.run_id == "run-1"


def test_events_without_run_id_do_not_count_as_another_run() -> None:
    chain = assemble_chain([request(), result("s", run_id="")])
    assert AnomalyCode.MIXED_RUNS not in codes(chain)


def test_duplicate_result_pairs_the_first_and_names_both() -> None:
    act, r1, r2 = action("c1"), result("c1", '"one"'), result("c1", '"two"')
    chain = assemble_chain([request(), act, r1, r2])
    assert chain.actions[0].result is r1
    dup = next(a for a in chain.anomalies if a.code is AnomalyCode.DUPLICATE_RESULT)
    assert dup.event_ids == (str(r1.event_id), str(r2.event_id))
    assert dup.call_id == "c1"


def test_duplicate_action_keeps_both_actions() -> None:
    a1, a2, res = action("c1"), action("c1", tool="other"), result("c1")
    chain = assemble_chain([request(), a1, a2, res])
    assert [a.intent for a in chain.actions] == [a1, a2]
    assert all(a.result is res for a in chain.actions)
    dup = next(a for a in chain.anomalies if a.code is AnomalyCode.DUPLICATE_ACTION)
    assert dup.event_ids == (str(a1.event_id), str(a2.event_id))


def test_result_without_call_id_is_reported_and_kept_as_a_read() -> None:
    read = result("", '"lost"', tool="search")
    chain = assemble_chain([request(), read])
    assert chain.available == (
        Ref(source="tool", id=str(read.event_id), hash=content_hash('"lost"')),
    )
    (anomaly,) = chain.anomalies
    assert anomaly.code is AnomalyCode.RESULT_WITHOUT_CALL_ID
    assert anomaly.event_ids == (str(read.event_id),)
    assert "search" in anomaly.detail


def test_action_without_call_id_never_pairs_with_a_result_without_one() -> None:
    act, read = action(""), result("")
    chain = assemble_chain([request(), act, read])
    assert chain.actions[0].result is None
    assert chain.available[0].id == str(read.event_id)
    assert AnomalyCode.ACTION_WITHOUT_CALL_ID in codes(chain)
    assert AnomalyCode.RESULT_WITHOUT_CALL_ID in codes(chain)


def test_result_before_intent_still_pairs() -> None:
    res, act = result("c1"), action("c1")
    chain = assemble_chain([request(), res, act])
    assert chain.actions[0].result is res
    assert chain.available == ()
    assert codes(chain) == [AnomalyCode.RESULT_BEFORE_INTENT]


def test_action_without_result_is_flagged_with_its_call() -> None:
    chain = assemble_chain([request(), action("c7", tool="deploy")])
    (anomaly,) = chain.anomalies
    assert anomaly.code is AnomalyCode.ACTION_WITHOUT_RESULT
    assert anomaly.call_id == "c7"
    assert "deploy" in anomaly.detail
    assert chain.actions[0].outcome == "no_result"


# --- denied attempts -------------------------------------------------------------------


@pytest.mark.parametrize("verdict", [Verdict.DENIED, Verdict.NEEDS_APPROVAL])
def test_denied_attempt_is_an_action_with_outcome_denied(verdict: Verdict) -> None:
    denied = action("c1", tool="rm_rf", verdict=verdict, reason="denied by approver: no")
    chain = assemble_chain([request(), denied])
    (act,) = chain.actions
    assert act.intent is denied
    assert act.denied
    assert act.outcome == "denied"
    assert act.verdict is verdict
    assert chain.denied == (act,)
    assert codes(chain) == [AnomalyCode.DENIED_ATTEMPT]  # but not "without result"
    assert "denied by approver: no" in chain.anomalies[0].detail
    text = str(chain.why("c1"))
    assert "rm_rf" in text
    assert "did not run" in text


def test_action_properties_and_outcomes() -> None:
    ok = Action(intent=action("c1"), result=result("c1"))
    failed = Action(intent=action("c2"), result=result("c2", None, err="disk full"))
    pending = Action(intent=action("c3", tool="deploy"))
    assert (ok.call_id, ok.tool, ok.verdict) == ("c1", "write_file", Verdict.ALLOWED)
    assert ok.outcome == "succeeded"
    assert failed.outcome == "failed"
    assert pending.outcome == "no_result"
    assert pending.tool == "deploy"


def test_action_lookup_prefers_the_allowed_action_of_a_call() -> None:
    denied, allowed = action("c1", verdict="denied"), action("c1")
    chain = assemble_chain([request(), denied, allowed, result("c1")])
    assert chain.action("c1").intent is allowed
    only_denied = assemble_chain([request(), denied])
    assert only_denied.action("c1").intent is denied


# --- why -------------------------------------------------------------------------------


def test_why_explains_an_action_backward() -> None:
    req = request("tidy the notes")
    evidence = Ref(source="tool", id=str(req.event_id))
    act = action(
        "c1",
        tool="write_file",
        args='{"path":"notes.txt"}',
        reason="policy allow-list: write_file",
        refs=[evidence, MEM],
    )
    decision = Event(
        kind=Kind.GATE_DECISION,
        run_id=RUN,
        call_id="c1",
        verdict=Verdict.ALLOWED,
        reason="approver ok",
    )
    chain = assemble_chain(
        [req, retrieved(MEM), decision, act, result("c1", '"done"', duration_ms=3)]
    )
    exp = chain.why("c1")
    assert isinstance(exp, Explanation)
    assert exp.tool == "write_file"
    assert exp.reason == "policy allow-list: write_file"
    assert exp.evidence == (evidence, MEM)
    assert exp.request is req
    assert exp.decision is decision
    assert exp.to_dict()["decision"] == {"verdict": "allowed", "reason": "approver ok"}
    text = str(exp)
    for expected in (
        "write_file",
        "c1",
        RUN,
        "allowed",
        "policy allow-list: write_file",
        '{"path":"notes.txt"}',
        "succeeded in 3 ms",
        str(req.event_id),
        "memory m1 " + MEM.hash,
        "tidy the notes",
        "approver ok",
    ):
        assert expected in text, f"{expected!r} missing from:\n{text}"


def test_why_of_a_failed_call_shows_the_error() -> None:
    chain = assemble_chain([request(), action("c1"), result("c1", None, err="disk full")])
    text = str(chain.why("c1"))
    assert "failed" in text
    assert "disk full" in text


def test_why_mentions_missing_evidence_hashes_and_anomalies() -> None:
    chain = assemble_chain([request(), action("c1", refs=[Ref(source="tool", id="e1")])])
    exp = chain.why("c1")
    text = str(exp)
    assert "tool e1 (no hash captured)" in text
    assert "no result recorded" in text
    assert [a.code for a in exp.anomalies] == [AnomalyCode.ACTION_WITHOUT_RESULT]
    assert "action_without_result" in text


def test_why_of_an_unknown_call_raises_call_not_found() -> None:
    chain = assemble_chain(clean_run())
    with pytest.raises(CallNotFound, match="'nope'") as info:
        chain.why("nope")
    assert isinstance(info.value, LedgerError)
    assert isinstance(info.value, LookupError)
    assert "'c1'" in str(info.value)  # the message lists the calls that exist
    with pytest.raises(CallNotFound):
        chain.why("read-1")  # a safe read is not an action


EXPLANATION_KEYS = [
    "run_id",
    "call_id",
    "tool",
    "principal",
    "args",
    "verdict",
    "reason",
    "outcome",
    "approval",
    "result",
    "err",
    "duration_ms",
    "evidence",
    "decision",
    "request",
    "anomalies",
]


def test_explanation_to_dict_has_stable_keys_and_values() -> None:
    events = clean_run()
    data = assemble_chain(events).why("c1").to_dict()
    assert list(data) == EXPLANATION_KEYS
    req = events[0]
    assert data == {
        "run_id": RUN,
        "call_id": "c1",
        "tool": "write_file",
        "principal": "",
        "args": {"path": "/tmp/c1"},  # the JSON values, as `ledger why --json` prints them
        "verdict": "allowed",
        "reason": "the why",
        "outcome": "succeeded",
        "approval": None,
        "result": "written",
        "err": "",
        "duration_ms": 3,
        "evidence": [{"source": "tool", "id": str(req.event_id), "hash": ""}],
        "decision": None,
        "request": {
            "event_id": str(req.event_id),
            "args": "tidy the notes",
            "time": format_time_us(req.time),  # the fixed-width machine form
        },
        "anomalies": [],
    }


def test_explanation_to_dict_of_a_denied_headless_action() -> None:
    chain = assemble_chain([action("c1", verdict="denied", reason="no")])
    data = chain.why("c1").to_dict()
    assert list(data) == EXPLANATION_KEYS
    assert data["outcome"] == "denied"
    assert data["request"] is None
    assert data["result"] is None
    assert data["duration_ms"] is None
    assert any(a.startswith("denied_attempt") for a in data["anomalies"])


# --- properties over random runs -------------------------------------------------------

CALLS = ["", "c1", "c2", "c3"]
RUN_KINDS = [
    Kind.REQUEST,
    Kind.RETRIEVED,
    Kind.ACTION,
    Kind.TOOL_RESULT,
    Kind.GATE_DECISION,
    Kind.RUN_END,
]


@st.composite
def run_events(draw: st.DrawFn) -> list[Event]:
    n = draw(st.integers(min_value=0, max_value=14))
    out: list[Event] = []
    for _ in range(n):
        kind = draw(st.sampled_from(RUN_KINDS))
        call = draw(st.sampled_from(CALLS))
        if kind is Kind.ACTION:
            verdict = draw(
                st.sampled_from([Verdict.ALLOWED, Verdict.DENIED, Verdict.NEEDS_APPROVAL])
            )
            refs = [Ref(source="memory", id=f"m{i}") for i in range(draw(st.integers(0, 2)))]
            out.append(action(call, verdict=verdict, refs=refs))
        elif kind is Kind.TOOL_RESULT:
            out.append(result(call, draw(st.sampled_from([None, '"x"', "[1, 2]"]))))
        elif kind is Kind.RETRIEVED:
            ids = draw(st.lists(st.sampled_from(["m1", "m2", "m3"]), max_size=3))
            out.append(retrieved(*(Ref(source="memory", id=i) for i in ids)))
        elif kind is Kind.REQUEST:
            out.append(request())
        else:
            out.append(Event(kind=kind, run_id=RUN, call_id=call))
    return out


def _tool_refs(chain: Chain) -> Iterator[str]:
    return (r.id for r in chain.available if r.source is RefSource.TOOL)


@settings(max_examples=200, deadline=None)
@given(run_events())
def test_every_action_appears_exactly_once_in_order(events: list[Event]) -> None:
    chain = assemble_chain(events)
    assert [a.intent for a in chain.actions] == [e for e in events if e.kind is Kind.ACTION]
    for act in chain.actions:
        assert act.evidence == act.intent.refs
        if act.result is not None:
            assert act.result.kind is Kind.TOOL_RESULT
            assert act.result.call_id == act.intent.call_id != ""


@settings(max_examples=200, deadline=None)
@given(run_events())
def test_no_tool_result_is_silently_dropped(events: list[Event]) -> None:
    chain = assemble_chain(events)
    paired = {id(a.result) for a in chain.actions if a.result is not None}
    available = set(_tool_refs(chain))
    named = (AnomalyCode.DUPLICATE_RESULT, AnomalyCode.RESULT_WITHOUT_INTENT)
    duplicates = {i for a in chain.anomalies if a.code in named for i in a.event_ids}
    for e in events:
        if e.kind is Kind.TOOL_RESULT:
            eid = str(e.event_id)
            # paired with its action, or a read in available, or named by an anomaly (a
            # later duplicate, or the result of a denied call): never silently dropped
            assert id(e) in paired or eid in available or eid in duplicates, e


@settings(max_examples=200, deadline=None)
@given(run_events())
def test_available_keeps_event_order(events: list[Event]) -> None:
    chain = assemble_chain(events)
    action_calls = {e.call_id for e in events if e.kind is Kind.ACTION and e.call_id}
    expected: list[str] = []
    for e in events:
        if e.kind is Kind.RETRIEVED:
            expected.extend(r.id for r in e.refs)
        elif e.kind is Kind.TOOL_RESULT and e.call_id not in action_calls:
            expected.append(str(e.event_id))
    assert [r.id for r in chain.available] == expected


@settings(max_examples=100, deadline=None)
@given(run_events())
def test_same_input_gives_the_same_chain(events: list[Event]) -> None:
    first = assemble_chain(events)
    copies = [Event.from_json(e.to_json()) for e in events]
    again = assemble_chain(copies)
    assert again == first
    assert assemble_chain(iter(events)) == first


@settings(max_examples=200, deadline=None)
@given(run_events())
def test_anomalies_are_consistent_with_the_chain(events: list[Event]) -> None:
    chain = assemble_chain(events)
    found = codes(chain)
    requests = [e for e in events if e.kind is Kind.REQUEST]
    assert (AnomalyCode.NO_REQUEST in found) == (not requests)
    assert (AnomalyCode.MULTIPLE_REQUESTS in found) == (len(requests) > 1)
    assert chain.request is (requests[0] if requests else None)
    assert found.count(AnomalyCode.DENIED_ATTEMPT) == len(chain.denied)
    assert AnomalyCode.MIXED_RUNS not in found
    known = {str(e.event_id) for e in events}
    for anomaly in chain.anomalies:
        assert set(anomaly.event_ids) <= known
    for act in chain.actions:
        if act.outcome == "no_result" and act.call_id:
            assert any(
                a.code is AnomalyCode.ACTION_WITHOUT_RESULT and a.call_id == act.call_id
                for a in chain.anomalies
            )


def test_a_denied_action_is_never_paired_with_a_result() -> None:
    # The gate refuses a reused call id: the second (denied) attempt must not show the
    # first attempt's result as if it had run.
    chain = assemble_chain([request(), action("c1"), result("c1"), action("c1", verdict="denied")])
    allowed, denied = chain.actions
    assert allowed.result is not None and allowed.outcome == "succeeded"
    assert denied.result is None and denied.outcome == "denied"
    assert AnomalyCode.RESULT_WITHOUT_INTENT not in codes(chain)


def test_a_result_whose_gate_decision_was_a_denial_is_flagged() -> None:
    denied = Event(kind=Kind.GATE_DECISION, run_id=RUN, call_id="c9", tool="rm", verdict="denied")
    chain = assemble_chain([request(), denied, result("c9", tool="rm")])
    (flag,) = [a for a in chain.anomalies if a.code is AnomalyCode.RESULT_WITHOUT_INTENT]
    assert flag.call_id == "c9" and "denied" in flag.detail


def test_a_result_of_a_call_not_marked_safe_without_an_action_is_flagged() -> None:
    def decision(label: str) -> Event:
        return Event(
            kind=Kind.GATE_DECISION,
            run_id=RUN,
            call_id="c9",
            tool="rm",
            verdict="allowed",
            label=label,
        )

    unsafe = assemble_chain([request(), decision("allow-all"), result("c9", tool="rm")])
    safe = assemble_chain([request(), decision("safe:allow-all"), result("c9", tool="rm")])
    bare = assemble_chain([request(), result("c9", tool="rm")])  # unclassified: non-safe
    assert AnomalyCode.RESULT_WITHOUT_INTENT in codes(unsafe)
    assert AnomalyCode.RESULT_WITHOUT_INTENT not in codes(safe)
    assert AnomalyCode.RESULT_WITHOUT_INTENT in codes(bare)  # fail-safe, as the report says
    assert len(unsafe.available) == len(safe.available) == len(bare.available) == 1
    assert [e.call_id for e in bare.unintended] == ["c9"]
    assert safe.unintended == ()

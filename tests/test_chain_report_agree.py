"""``ledger chain`` and ``ledger report`` agree on which results ran without a committed
intent, on every run of a generated corpus: safe reads whose decisions spell "safe" in
every way the gate and the reference do (and ways that are not safe), denials, results
with no decision, no call id, or recorded before their intent."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.chain import assemble_chain
from ledger.ids import ulid_text
from ledger.model import Event, Kind, Ref
from ledger.report import build_report
from ledger.sinks import MemoryReader

EVIDENCE = [Ref(source="memory", id="m1")]

# (label, reason, verdict) of a gate decision
DECISIONS = st.sampled_from(
    [
        ("safe:read-only", "safe tool", "allowed"),
        ("safe", "", "allowed"),
        ("SAFE", "", "allowed"),
        ("Safe:Policy", "", "allowed"),
        ("", "safe tool", "allowed"),
        ("", "Safe tool (reference wording)", "allowed"),
        ("safety-net", "", "allowed"),  # not a safe mark
        ("unsafe:x", "", "allowed"),
        ("allow-all", "allowed by policy", "allowed"),
        ("safe:read-only", "", "denied"),
        ("safe", "", "needs_approval"),
    ]
)

STEP = st.one_of(
    st.tuples(st.just("safe_read"), DECISIONS),
    st.tuples(st.just("bare_result"), st.none()),
    st.tuples(st.just("no_call_id"), st.none()),
    st.tuples(st.just("allowed_call"), st.none()),
    st.tuples(st.just("denied_then_ran"), st.none()),
    st.tuples(st.just("result_first"), st.none()),
    st.tuples(st.just("action_no_verdict"), st.none()),
    st.tuples(st.just("two_results_no_intent"), st.none()),
)


def _events(run: str, steps: list[tuple[str, object]]) -> list[Event]:
    out = [Event(kind=Kind.REQUEST, run_id=run, args='"go"')]
    for i, (what, extra) in enumerate(steps):
        call = f"{run}-c{i}"

        def result(c: str = call) -> Event:
            return Event(kind="tool_result", run_id=run, call_id=c, result='"x"')

        def action(verdict: str | None, c: str = call) -> Event:
            return Event(
                kind="action", run_id=run, call_id=c, tool="t", args={},
                verdict=verdict, refs=EVIDENCE,
            )  # fmt: skip

        if what == "safe_read":
            assert isinstance(extra, tuple)
            label, reason, verdict = extra
            out.append(
                Event(kind="gate_decision", run_id=run, call_id=call, tool="read",
                      verdict=verdict, label=label, reason=reason)
            )  # fmt: skip
            out.append(result())
        elif what == "bare_result":
            out.append(result())
        elif what == "no_call_id":
            out.append(result(""))
        elif what == "allowed_call":
            out += [action("allowed"), result()]
        elif what == "denied_then_ran":
            out += [action("denied"), result()]
        elif what == "result_first":
            out += [result(), action("allowed")]
        elif what == "action_no_verdict":
            out += [action(None), result()]
        else:
            out += [result(), result()]
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(STEP, max_size=6), min_size=1, max_size=4))
def test_chain_and_report_flag_the_same_results(runs: list[list[tuple[str, object]]]) -> None:
    events: list[Event] = []
    for n, steps in enumerate(runs):
        events += _events(f"run{n}", steps)
    report = build_report(MemoryReader(events))
    reported = {f.event_id for f in report.unsafe_without_intent}
    chained: set[str] = set()
    for n in range(len(runs)):
        run = [e for e in events if e.run_id == f"run{n}"]
        chained |= {ulid_text(e.event_id) for e in assemble_chain(run).unintended}
    assert chained == reported
    assert report.compliant == (not chained)


def test_the_corpus_can_tell_them_apart() -> None:
    steps: list[tuple[str, object]] = [
        ("safe_read", ("SAFE", "", "allowed")),  # covered
        ("safe_read", ("safety-net", "", "allowed")),  # flagged: not a safe mark
        ("bare_result", None),  # flagged: no decision, no action
        ("no_call_id", None),  # flagged
        ("allowed_call", None),  # covered
        ("denied_then_ran", None),  # flagged
        ("result_first", None),  # flagged: recorded before its intent
    ]
    events = _events("r", steps)
    flagged = assemble_chain(events).unintended
    assert len(flagged) == 5
    report = build_report(MemoryReader(events))
    assert {f.event_id for f in report.unsafe_without_intent} == {
        ulid_text(e.event_id) for e in flagged
    }
    assert not report.compliant

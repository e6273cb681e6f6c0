"""A report over a window judges each call as a report over the whole history does:
the results in the window without an intent (``unsafe_without_intent``) and the
allowed actions in the window without a result (``missing_results``) are those of the
whole ledger's report that lie in the window, however the window's edges cut the calls
(an intent before the window and its result in it, a safe-read decision in the window
after a denied action before it, a result after the window's end). Clocks run forward
within a run; a call's decisions (before its actions) and actions come in any number
before its result (a result with no allowed action before it is the violation judged). A result
recorded before its intent, across the window's start, is judged otherwise by the two
(the window lists the intent without a result, the whole history the result before its
intent): that case is left out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.model import Event, Ref
from ledger.report import build_report
from ledger.sinks import MemoryReader, SQLiteSink

T0 = datetime(2026, 1, 1, tzinfo=UTC)
REF = [Ref(source="tool", id="01J00000000000000000000000", hash="sha256:ab")]

# one call: the records the gate may leave for it, in the order they are recorded
_STEPS = st.lists(
    st.sampled_from(["safe", "unsafe", "allowed", "denied", "result", "request", "prompt"]),
    min_size=1,
    max_size=5,
)  # "request": the run id serves another request meanwhile (a new turn); "prompt": a
# record of the run that is no call's (a run's first record in a window may be one)


def _run(run: str, start: int, calls: list[list[str]], request: bool) -> list[Event]:
    """A run from second ``start`` on, one second a record (clocks run forward)."""
    events: list[Event] = []
    at = iter(T0 + timedelta(seconds=start + i) for i in range(10_000))
    if request:
        events.append(Event(kind="request", run_id=run, time=next(at), args='"go"'))
    for n, steps in enumerate(calls):
        call = f"c{n}"
        for i, step in enumerate(steps):
            if step not in ("result", "request", "prompt") and "result" in steps[:i]:
                continue  # the gate decides and records the action before the tool runs
            if step in ("safe", "unsafe") and {"allowed", "denied"} & set(steps[:i]):
                continue  # and decides before it records the action
            when = next(at)
            if step == "request":
                events.append(Event(kind="request", run_id=run, time=when, args='"more"'))
            elif step == "prompt":
                events.append(Event(kind="prompt", run_id=run, time=when, args='"think"'))
            elif step in ("safe", "unsafe"):
                label = "safe:read" if step == "safe" else "policy:writes"
                events.append(
                    Event(kind="gate_decision", run_id=run, call_id=call, tool="t",
                          verdict="allowed", label=label, reason="r", time=when)
                )  # fmt: skip
            elif step in ("allowed", "denied"):
                events.append(
                    Event(kind="action", run_id=run, call_id=call, tool="t",
                          verdict=step, args={}, refs=REF, reason="r", time=when)
                )  # fmt: skip
            else:
                events.append(Event(kind="tool_result", run_id=run, call_id=call, tool="t",
                                    result="1", time=when))  # fmt: skip
    return events


_LEDGERS = st.lists(
    st.tuples(st.integers(0, 40), st.lists(_STEPS, min_size=1, max_size=4), st.booleans()),
    min_size=1,
    max_size=4,
).map(
    lambda runs: sorted(
        (e for i, (start, calls, req) in enumerate(runs) for e in _run(f"r{i}", start, calls, req)),
        key=lambda e: e.time,
    )
)


def _keys(findings: Any, since: datetime, until: datetime | None) -> set[tuple[str, str]]:
    return {
        (f.run_id, f.call_id)
        for f in findings
        if since <= f.time and (until is None or f.time < until)
    }


def _approved(report: Any, since: datetime, until: datetime | None) -> set[Any]:
    return {
        (a.run_id, a.call_id, a.policy, a.approver)
        for a in report.approved
        if since <= a.time and (until is None or a.time < until)
    }


def _judged(reader: Any, since: datetime, until: datetime | None) -> tuple[Any, ...]:
    report = build_report(reader, since=since, until=until)
    return (
        _keys(report.unsafe_without_intent, since, until),
        _keys(report.missing_results, since, until),
        sum(t.succeeded for t in report.tools),
        _approved(report, since, until),
    )


def _answered(events: list[Event], since: datetime, until: datetime | None) -> int:
    """The results in the window that answer an allowed action recorded before them."""
    allowed: set[tuple[str, str]] = set()
    count = 0
    for e in events:
        if e.kind == "action" and e.verdict == "allowed":
            allowed.add((e.run_id, e.call_id))
        inside = since <= e.time and (until is None or e.time < until)
        if e.kind == "tool_result" and inside and (e.run_id, e.call_id) in allowed:
            count += 1
    return count


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(events=_LEDGERS, cut=st.integers(0, 60), span=st.one_of(st.none(), st.integers(1, 40)))
def test_a_window_judges_calls_as_the_whole_history_does(
    tmp_path_factory: pytest.TempPathFactory, events: list[Event], cut: int, span: int | None
) -> None:
    since = T0 + timedelta(seconds=cut)
    until = None if span is None else since + timedelta(seconds=span)
    whole = build_report(MemoryReader(events))
    want = (
        _keys(whole.unsafe_without_intent, since, until),
        _keys(whole.missing_results, since, until),
    )
    # a call allowed twice is missing its result from its first intent on: a window
    # holding only the second one lists it (where the whole history dates it earlier)
    allowed = [
        (e.run_id, e.call_id) for e in events if e.kind == "action" and e.verdict == "allowed"
    ]
    twice = len(allowed) != len(set(allowed))
    path: Path = tmp_path_factory.mktemp("w") / "l.db"
    with SQLiteSink(path) as sink:
        sink.record_many(events)
        for reader in (MemoryReader(events), sink):
            unsafe, missing, succeeded, approved = _judged(reader, since, until)
            assert unsafe == want[0]
            if not twice:
                assert missing == want[1]
                assert approved == _approved(whole, since, until)  # policy as first decided
            assert succeeded == _answered(events, since, until)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_call_of_an_earlier_turn_ending_in_the_window_is_read_back(
    tmp_path: Path, backend: str
) -> None:
    """One run id serving two requests (a conversation): the first turn's call, allowed
    before the window, ends in it after the second turn's request."""

    def at(s: int) -> datetime:
        return T0 + timedelta(seconds=s)

    events = [
        Event(kind="request", run_id="conv", time=at(0), args='"one"'),
        Event(kind="action", run_id="conv", call_id="c1", tool="t", verdict="allowed",
              args={}, refs=REF, reason="r", time=at(1)),
        Event(kind="request", run_id="conv", time=at(11), args='"two"'),
        Event(kind="tool_result", run_id="conv", call_id="c1", tool="t", result="1",
              time=at(12)),
    ]  # fmt: skip
    reader: Any = MemoryReader(events)
    if backend == "sqlite":
        reader = SQLiteSink(tmp_path / "l.db")
        reader.record_many(events)
    report = build_report(reader, since=at(10))
    assert report.unsafe_without_intent == ()
    assert [t.succeeded for t in report.tools] == [1]

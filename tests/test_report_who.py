"""The approval trail and "who" in the compliance report, and the counts a new user
found wrong: a result recorded without ``tool=`` counts under its action's tool; calls
outside any run are their own finding, not open runs; every list is in time order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ledger.model import Actor, Approval, Event, Ref
from ledger.report import build_report
from ledger.sinks import MemoryReader

T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)
CITED = [Ref(source="memory", id="m1", hash="sha256:aa")]


def _run(run: str, principal: str, agent: str, start: int) -> list[Event]:
    who = Actor(principal=principal, agent_id=agent, agent_version="1.0")

    def at(i: int) -> datetime:
        return T0 + timedelta(minutes=start + i)

    return [
        Event(kind="request", run_id=run, time=at(0), args='"go"', actor=who),
        Event(kind="action", run_id=run, call_id="c1", tool="deploy", time=at(1), args={},
              verdict="allowed", reason="change approved", refs=CITED, actor=who,
              approval=Approval(approver="bob", time=at(1) - timedelta(seconds=30),
                                reason="ticket 7")),
        Event(kind="gate_decision", run_id=run, call_id="c1", tool="deploy", time=at(1),
              verdict="allowed", label="ops-approver", actor=who),
        Event(kind="tool_result", run_id=run, call_id="c1", time=at(2), result='"ok"',
              duration_ms=5, actor=who),  # no tool=: it counts under deploy
        Event(kind="action", run_id=run, call_id="c2", tool="rm", time=at(3), args={},
              verdict="denied", reason="not on the list", actor=who),
        Event(kind="action", run_id=run, call_id="c3", tool="write", time=at(4), args={},
              verdict="allowed", reason="allow-list", refs=CITED, actor=who),
        Event(kind="gate_decision", run_id=run, call_id="c3", tool="write", time=at(4),
              verdict="allowed", label="allow-list", actor=who),
        Event(kind="tool_result", run_id=run, call_id="c3", tool="write", time=at(5),
              result='"ok"', actor=who),
        Event(kind="run_end", run_id=run, time=at(6), actor=who),
    ]  # fmt: skip


def test_approved_actions_say_who_allowed_them_when_and_citing_what() -> None:
    events = _run("r1", "alice", "deploy-bot", 0)
    report = build_report(MemoryReader(events), ledger="postgresql://u:secret@db/prod")
    assert report.ledger == "postgresql://u:***@db/prod"
    first, second = report.approved
    assert (first.tool, first.approver, first.policy, first.principal) == (
        "deploy", "bob", "ops-approver", "alice",
    )  # fmt: skip
    assert first.approved_at == T0 + timedelta(minutes=1, seconds=-30)
    assert first.reason == "ticket 7" and first.evidence == ("memory:m1",)
    assert (second.tool, second.approver, second.policy) == ("write", "", "allow-list")
    data = report.to_dict()
    assert data["totals"]["approved_actions"] == 2
    assert data["approved_actions"][0]["approved_at"].endswith("Z")


def test_who_counts_actions_and_denials_per_agent_and_principal() -> None:
    events = _run("r1", "alice", "deploy-bot", 0) + _run("r2", "carol", "deploy-bot", 30)
    report = build_report(MemoryReader(events))
    agents = {w.who: (w.runs, w.actions, w.denials) for w in report.agents}
    principals = {w.who: (w.runs, w.actions, w.denials) for w in report.principals}
    assert agents == {"deploy-bot": (2, 4, 2)}
    assert principals == {"alice": (1, 2, 1), "carol": (1, 2, 1)}


def test_a_result_without_tool_counts_under_its_action() -> None:
    report = build_report(MemoryReader(_run("r1", "alice", "bot", 0)))
    tools = {t.tool: t for t in report.tools}
    assert "(none)" not in tools and "" not in tools
    assert tools["deploy"].succeeded == 1 and tools["deploy"].actions == 1


def test_calls_outside_any_run_are_a_finding_not_an_open_run() -> None:
    outside = Event(kind="action", run_id="norun-01JABC", call_id="x", tool="rm", args={},
                    verdict="denied", reason="called outside any run", time=T0)  # fmt: skip
    report = build_report(MemoryReader([*_run("r1", "alice", "bot", 0), outside]))
    assert [r.run_id for r in report.runs] == ["r1"]
    (finding,) = report.outside_runs
    assert finding.run_id == "norun-01JABC" and "outside any run" in finding.detail
    assert all(d.run_id != "norun-01JABC" for d in report.denials)
    assert report.compliant


def test_every_section_is_in_time_order() -> None:
    events = _run("late", "a", "b", 60) + _run("early", "a", "b", 0)
    report = build_report(MemoryReader(events))
    for rows in (report.denials, report.approved):
        times = [r.time for r in rows]
        assert times == sorted(times) and len(times) >= 2


def test_the_html_names_the_ledger_and_shows_the_trail() -> None:
    html = build_report(
        MemoryReader(_run("r1", "alice", "bot", 0)), ledger="sqlite:///x.db"
    ).to_html()
    assert 'id="ledger-named"' in html and "sqlite:///x.db" in html
    assert "Approved actions" in html and "bob" in html and "ops-approver" in html
    assert "Who: actions and denials per agent and per principal" in html

"""Who: a run's principal and agent identity on every event, and an approver's answer
recorded with who gave it, when and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import Approver, Decision, Gate, ToolDenied
from ledger.model import Approval, Kind
from ledger.sinks import SQLiteSink


def test_every_event_of_a_run_says_who_it_acts_for(tmp_path: Path) -> None:
    sink = SQLiteSink(tmp_path / "l.db")
    gate = Gate(sink, policy=Approver(lambda call: True, name="ops", approver="bob"))

    @gate.tool(safe=True)
    def read(path: str) -> str:
        return "text"

    @gate.tool()
    def write(path: str) -> int:
        return 1

    with gate.run("tidy", principal="alice@example.com", agent_id="tidy-bot",
                  agent_version="2.1") as run:  # fmt: skip
        read(path="a")
        write(path="a")
    events = list(sink.events(run_id=run.run_id))
    assert events and all(e.principal == "alice@example.com" for e in events)
    assert {e.actor.agent_id for e in events if e.actor} == {"tidy-bot"}
    action = next(e for e in events if e.kind is Kind.ACTION)
    assert action.approval is not None and action.approval.approver == "bob"
    assert action.approval.time is not None
    chain = sink.chain(run.run_id)
    assert "approved by: bob" in chain.render(100) and "acting for: alice" in chain.render(100)
    assert chain.why(action.call_id).to_dict()["approval"]["approver"] == "bob"
    sink.close()


@pytest.mark.parametrize(
    ("answer", "approver", "reason"),
    [
        ((True, "ticket 7", "carol"), "carol", "ticket 7"),
        ((True, "ok"), "default-approver", "ok"),
        (True, "default-approver", ""),
        (
            Decision("allowed", "fine", approval=Approval(approver="dave", reason="fine")),
            "dave",
            "fine",
        ),
    ],
)
def test_an_approvers_answer_is_recorded_with_who_gave_it(
    tmp_path: Path, answer: object, approver: str, reason: str
) -> None:
    sink = SQLiteSink(tmp_path / "l.db")
    gate = Gate(sink, policy=Approver(lambda call: answer, approver="default-approver"))  # type: ignore[arg-type,return-value]

    @gate.tool()
    def deploy() -> str:
        return "done"

    with gate.run("ship it") as run:
        deploy()
    decision = next(e for e in sink.events(run_id=run.run_id, kind="gate_decision"))
    assert decision.approval is not None
    assert (decision.approval.approver, decision.approval.reason) == (approver, reason)
    sink.close()


def test_a_refusal_names_who_refused(tmp_path: Path) -> None:
    sink = SQLiteSink(tmp_path / "l.db")
    gate = Gate(sink, policy=Approver(lambda call: (False, "not today", "erin")))

    @gate.tool()
    def deploy() -> str:
        return "done"

    with gate.run("ship it") as run, pytest.raises(ToolDenied):
        deploy()
    denial = next(e for e in sink.events(run_id=run.run_id, kind="action"))
    assert denial.approval is not None and denial.approval.approver == "erin"
    sink.close()


def test_identities_are_checked(tmp_path: Path) -> None:
    gate = Gate(SQLiteSink(tmp_path / "l.db"))
    with pytest.raises(TypeError, match="principal"):
        gate.run("x", principal=3)  # type: ignore[arg-type]
    with pytest.raises(Exception, match="approver"):
        Approver(lambda call: True, approver="  ")

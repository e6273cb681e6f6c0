"""Policies: the built-ins, approvers (sync and async), and policies that misbehave."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ledger.errors import ToolDenied, ValidationError
from ledger.gate import AllowAll, AllowList, Approver, Decision, DenyNonSafe, Gate, ToolCall
from ledger.model import Kind, Verdict
from ledger.sinks import SQLiteSink


def call(tool: str, safe: bool = False, **args: Any) -> ToolCall:
    return ToolCall(tool=tool, args=args, call_id="c", run_id="r", safe=safe)


def test_values_are_frozen_and_validated() -> None:
    decision = Decision(verdict="allowed", reason="ok")
    assert decision.verdict is Verdict.ALLOWED and decision.policy_id == ""
    with pytest.raises(ValidationError):
        Decision(verdict="maybe", reason="")
    c = call("t", path="a")
    with pytest.raises(TypeError):
        c.args["path"] = "b"  # type: ignore[index]
    with pytest.raises(AttributeError):
        c.tool = "u"  # type: ignore[misc]


def test_builtin_policies() -> None:
    assert DenyNonSafe().decide(call("read", safe=True)).verdict is Verdict.ALLOWED
    assert DenyNonSafe().decide(call("write")).verdict is Verdict.NEEDS_APPROVAL
    assert AllowAll().decide(call("write")).verdict is Verdict.ALLOWED
    policy = AllowList(["search"], when={"write": lambda a: a["path"].startswith("out/")})
    assert policy.decide(call("search", q="x")).verdict is Verdict.ALLOWED
    assert policy.decide(call("write", path="out/a")).verdict is Verdict.ALLOWED
    assert policy.decide(call("write", path="/etc/passwd")).verdict is Verdict.DENIED
    assert policy.decide(call("shell")).verdict is Verdict.DENIED
    assert policy.decide(call("read", safe=True)).verdict is Verdict.ALLOWED
    ask = AllowList(["search"], otherwise="needs_approval")
    assert ask.decide(call("shell")).verdict is Verdict.NEEDS_APPROVAL
    with pytest.raises(ValidationError):
        AllowList("search")


def test_approver_answers_and_reasons() -> None:
    answers: list[Any] = [
        True,
        False,
        (True, "fine"),
        Decision(verdict=Verdict.DENIED, reason="no"),
    ]
    approver = Approver(lambda c: answers.pop(0), name="bob")
    first = approver.decide(call("w"))
    assert first.verdict is Verdict.ALLOWED and first.policy_id == "bob"
    assert first.reason == "non-safe tool 'w' needs approval; approved by bob"
    assert approver.decide(call("w")).reason.endswith("denied by bob")
    assert approver.decide(call("w")).reason.endswith("approved by bob: fine")
    assert approver.decide(call("w")).verdict is Verdict.DENIED
    assert approver.decide(call("r", safe=True)).reason == "safe tool"  # never asked
    assert answers == []
    with pytest.raises(ValidationError):
        Approver(lambda c: "yes").decide(call("w"))  # type: ignore[arg-type, return-value]


def test_async_approver_from_sync_and_async_code(sqlite_sink: SQLiteSink) -> None:
    async def yes(c: ToolCall) -> tuple[bool, str]:
        await asyncio.sleep(0)
        return True, "async yes"

    gate = Gate(sqlite_sink, policy=Approver(yes))
    with gate.run("sync run, no loop") as run:
        assert run.call("w", {}, lambda: 1) == 1

    async def main() -> None:
        async with gate.run("async run") as arun:
            assert await arun.acall("w", {}, lambda: 2) == 2
            with pytest.raises(ToolDenied, match="use acall"):
                arun.call("w", {}, lambda: 3)  # sync call inside a running loop

    asyncio.run(main())


def test_allow_list_through_the_gate(sqlite_sink: SQLiteSink) -> None:
    policy = Approver(
        lambda c: (False, "not today"),
        policy=AllowList(["search"], otherwise="needs_approval"),
        name="ops",
    )
    gate = Gate(sqlite_sink, policy=policy)
    with gate.run("x") as run:
        assert run.call("search", {"q": "a"}, lambda q: q) == "a"
        with pytest.raises(ToolDenied, match="denied by ops: not today"):
            run.call("deploy", {}, lambda: None, call_id="d")
    decision = next(
        e for e in sqlite_sink.events(run_id=run.run_id, kind="gate_decision") if e.call_id == "d"
    )
    assert decision.label == "ops" and decision.verdict is Verdict.DENIED


class Raises:
    def decide(self, c: ToolCall) -> Decision:
        raise RuntimeError("policy store down, token=abcdefgh12345")


class ReturnsJunk:
    def decide(self, c: ToolCall) -> Decision:
        return "allowed"  # type: ignore[return-value]


@pytest.mark.parametrize("policy", [Raises(), ReturnsJunk()])
def test_a_broken_policy_denies(sqlite_sink: SQLiteSink, policy: Any) -> None:
    gate = Gate(sqlite_sink, policy=policy, safe_tools={"read"})
    ran: list[int] = []
    with gate.run("x") as run:
        for tool in ("read", "write"):
            with pytest.raises(ToolDenied, match="policy error") as info:
                run.call(tool, {}, lambda: ran.append(1))
            assert "abcdefgh12345" not in info.value.reason
    assert ran == []
    chain = sqlite_sink.chain(run.run_id)
    assert len(chain.denied) == 2
    assert all(e.verdict is Verdict.DENIED for e in chain.events if e.kind is Kind.GATE_DECISION)


def test_gate_rejects_bad_configuration(sqlite_sink: SQLiteSink) -> None:
    with pytest.raises(TypeError):
        Gate(sqlite_sink, policy=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Gate(sqlite_sink, safe_tools="read")
    with pytest.raises(TypeError):
        Gate(object())  # type: ignore[arg-type]

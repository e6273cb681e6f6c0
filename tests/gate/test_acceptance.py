"""A new user's walk through the gate's public contract, exactly as DESIGN.md writes it:
every name, in its documented call form, on every sink, checking the stored chain after
each (request head, verdicts, paired results, only the expected anomalies, and a
``why(call_id)`` that names the tool, the args, the reason and the request)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger import (
    AllowAll,
    AllowList,
    AnomalyCode,
    Approver,
    Chain,
    Decision,
    DenyNonSafe,
    Event,
    Gate,
    Kind,
    LedgerError,
    Policy,
    Ref,
    RefSource,
    ToolCall,
    ToolDenied,
    Verdict,
    assemble_chain,
)
from ledger.canonical import sha256_of
from ledger.sinks import (
    DiscardSink,
    DurableSink,
    JSONLSink,
    PostgresSink,
    Reader,
    SQLiteSink,
    read_jsonl,
)

REQUEST = "Find the Q3 report and file a summary"


def check_chain(
    chain: Chain,
    *,
    request_id: str,
    allowed: dict[str, str] = {},  # noqa: B006  call id -> tool (read-only defaults)
    denied: dict[str, str] = {},  # noqa: B006
    safe: dict[str, str] = {},  # noqa: B006
) -> None:
    """What every stored chain of a gated run must show."""
    events = list(chain.events)
    assert chain.request is not None and str(chain.request.event_id) == request_id
    assert events[0].kind is Kind.REQUEST and events[-1].kind in (Kind.RUN_END, Kind.ABORT)
    position = {e.event_id: i for i, e in enumerate(events)}
    for call_id, tool in allowed.items():
        action = chain.action(call_id)
        assert action.intent.verdict is Verdict.ALLOWED and action.intent.tool == tool
        assert action.result is not None and action.result.call_id == call_id
        assert position[action.intent.event_id] < position[action.result.event_id]
        assert action.evidence and action.evidence[0].id == request_id
    for call_id, tool in denied.items():
        action = chain.action(call_id)
        assert action.denied and action.result is None and action.intent.tool == tool
    for call_id, tool in safe.items():
        assert not [a for a in chain.actions if a.call_id == call_id]
        result = next(e for e in events if e.kind is Kind.TOOL_RESULT and e.call_id == call_id)
        assert result.tool == tool
        assert any(
            r.source is RefSource.TOOL and r.id == str(result.event_id) for r in chain.available
        )
    for call_id in {**allowed, **denied, **safe}:  # every call has its decision, with its id
        decisions = [e for e in events if e.kind is Kind.GATE_DECISION and e.call_id == call_id]
        assert len(decisions) == 1
    expected = {(AnomalyCode.DENIED_ATTEMPT, c) for c in denied}
    assert {(a.code, a.call_id) for a in chain.anomalies} == expected
    assert_no_action_without_record(events)


def assert_no_action_without_record(events: list[Event]) -> None:
    """For every non-safe tool that ran, an allowed action with the same call id precedes
    its tool_result (safe calls are marked ``safe:`` in their decision's label)."""
    safe_calls = {
        e.call_id for e in events if e.kind is Kind.GATE_DECISION and e.label.startswith("safe:")
    }
    committed: set[str] = set()
    for e in events:
        if e.kind is Kind.ACTION and e.verdict is Verdict.ALLOWED:
            committed.add(e.call_id)
        if e.kind is Kind.TOOL_RESULT and e.call_id not in safe_calls:
            assert e.call_id in committed, f"{e.tool} ran without a committed action"


def check_why(chain: Chain, call_id: str, *, tool: str, arg: str, reason: str) -> None:
    text = str(chain.why(call_id))
    for part in (tool, arg, reason, REQUEST):
        assert part in text, f"{part!r} missing from why({call_id}):\n{text}"


# --- the values ------------------------------------------------------------------------


def test_the_values_in_their_documented_forms() -> None:
    call = ToolCall("search", {"q": "q3"}, "c1", "r1", False)
    assert (call.tool, dict(call.args), call.call_id, call.run_id, call.safe) == (
        "search",
        {"q": "q3"},
        "c1",
        "r1",
        False,
    )
    ok = Decision("allowed", "ok")
    assert ok.verdict is Verdict.ALLOWED and ok.reason == "ok" and ok.policy_id == ""
    assert Decision("denied", "no", "p1").policy_id == "p1"
    with pytest.raises(LedgerError):
        Decision("maybe", "?")
    assert AllowAll().decide(call).verdict is Verdict.ALLOWED
    assert DenyNonSafe().decide(call).verdict is Verdict.NEEDS_APPROVAL
    assert DenyNonSafe().decide(ToolCall("read", {}, "c", "r", True)).verdict is Verdict.ALLOWED
    assert AllowList(["search"]).decide(call).verdict is Verdict.ALLOWED
    assert (
        AllowList(["search"]).decide(ToolCall("rm", {}, "c", "r", False)).verdict is Verdict.DENIED
    )
    assert Approver(lambda call: True).decide(call).verdict is Verdict.ALLOWED
    assert Approver(lambda call: False).decide(call).verdict is Verdict.DENIED
    assert issubclass(ToolDenied, LedgerError)
    assert ToolDenied("because").reason == "because"


class OnlyDrafts:
    """A user's own policy: writes into drafts/ are fine, anything else is refused."""

    def decide(self, call: ToolCall) -> Decision:
        if call.safe:  # the policy decides every call, reads marked safe too
            return Decision("allowed", "reads are fine", "only-drafts")
        if call.tool == "write_file" and str(call.args.get("path", "")).startswith("drafts/"):
            return Decision("allowed", "drafts are fair game", "only-drafts")
        return Decision("denied", f"{call.tool} is not a draft write", "only-drafts")


def test_a_custom_policy_class_is_a_policy() -> None:
    assert isinstance(OnlyDrafts(), Policy)


# --- one run on each sink --------------------------------------------------------------


def walk(gate: Gate) -> tuple[Any, dict[str, list[Any]], dict[str, str]]:
    """One run: a memory shown to the model, a safe read, an allowed write, a denied
    delete. Returns the run, what each tool received and each call's id."""
    received: dict[str, list[Any]] = {"read": [], "write": [], "delete": []}

    @gate.tool(safe=True)
    def read_file(path: str) -> str:
        received["read"].append(path)
        return "Q3 revenue rose 4%"

    @gate.tool
    def delete_file(path: str) -> None:
        received["delete"].append(path)

    def write_file(path: str, text: str) -> int:
        received["write"].append((path, text))
        return len(text)

    memory = Ref(source="memory", id="m1", hash=sha256_of("the user prefers short summaries"))
    ids: dict[str, str] = {}
    with gate.run(REQUEST, agent_path="planner/writer") as run:
        assert run.run_id and run.request_id
        run.retrieved([memory])
        assert read_file(path="reports/q3.txt") == "Q3 revenue rose 4%"
        ids["read"] = run.last_call_id
        ids["write"] = "w1"
        out = run.call(
            "write_file",
            {"path": "drafts/q3.md", "text": "Revenue +4%"},
            write_file,
            call_id="w1",
            evidence=[memory],
        )
        assert out == len("Revenue +4%")
        with pytest.raises(ToolDenied) as info:
            delete_file(path="reports/q3.txt")
        assert info.value.reason and info.value.call_id
        ids["delete"] = info.value.call_id
    return run, received, ids


def check_walk(chain: Chain, run: Any, received: dict[str, list[Any]], ids: dict[str, str]) -> None:
    assert received == {
        "read": ["reports/q3.txt"],
        "write": [("drafts/q3.md", "Revenue +4%")],
        "delete": [],
    }
    check_chain(
        chain,
        request_id=run.request_id,
        allowed={ids["write"]: "write_file"},
        denied={ids["delete"]: "delete_file"},
        safe={ids["read"]: "read_file"},
    )
    assert Ref(
        source=RefSource.MEMORY, id="m1", hash=sha256_of("the user prefers short summaries")
    ) in (chain.available)
    check_why(
        chain, ids["write"], tool="write_file", arg="drafts/q3.md", reason="drafts are fair game"
    )
    check_why(chain, ids["delete"], tool="delete_file", arg="reports/q3.txt", reason="not a draft")
    assert json.loads(chain.action(ids["write"]).intent.args or "") == {
        "path": "drafts/q3.md",
        "text": "Revenue +4%",
    }


def test_sqlite_sink(tmp_path: Path) -> None:
    sink = SQLiteSink(tmp_path / "ledger.db")
    assert isinstance(sink, DurableSink) and isinstance(sink, Reader)
    run, received, ids = walk(Gate(sink, policy=OnlyDrafts()))
    check_walk(sink.chain(run.run_id), run, received, ids)
    sink.close()


@pytest.fixture
def pg_sink(pg_dsn: str) -> Iterator[PostgresSink]:
    sink = PostgresSink.open(pg_dsn)
    yield sink
    sink.close()


def test_postgres_sink(pg_sink: PostgresSink) -> None:
    run, received, ids = walk(Gate(pg_sink, policy=OnlyDrafts()))
    check_walk(pg_sink.chain(run.run_id), run, received, ids)


def test_jsonl_sink_is_not_durable(tmp_path: Path) -> None:
    """A JSONL ledger records everything, but cannot commit: the write is refused."""
    path = tmp_path / "ledger.jsonl"
    with JSONLSink(path) as sink:
        gate = Gate(sink, policy=OnlyDrafts())
        with pytest.raises(ToolDenied, match="not durable"):
            walk(gate)
    chain = assemble_chain(read_jsonl(path).events)
    write = chain.action("w1")
    assert write.denied and "not durable" in write.intent.reason and write.result is None
    assert chain.request is not None and chain.request.kind is Kind.REQUEST


def test_jsonl_sink_safe_tools_and_denials(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with JSONLSink(path) as sink:
        gate = Gate(sink, safe_tools=("search",))
        with gate.run(REQUEST) as run:
            assert run.call("search", {"q": "q3"}, lambda q: [q], call_id="s1") == ["q3"]
            with pytest.raises(ToolDenied, match="needs approval"):
                run.call("send_email", {"to": "boss"}, lambda to: None, call_id="e1")
    chain = assemble_chain(read_jsonl(path).events)
    check_chain(
        chain, request_id=run.request_id, denied={"e1": "send_email"}, safe={"s1": "search"}
    )


def test_discard_sink_runs_safe_tools_only() -> None:
    gate = Gate(DiscardSink(), policy=AllowAll(), safe_tools=["search"])
    ran: list[str] = []
    with gate.run(REQUEST) as run:
        run.call("search", {"q": "x"}, lambda q: ran.append(q))
        with pytest.raises(ToolDenied, match="not durable"):
            run.call("write_file", {"path": "a"}, lambda path: ran.append(path))
    assert ran == ["x"]


# --- the decorator in all its forms, sync and async, with and async with ---------------


def test_decorator_forms_and_policies(tmp_path: Path) -> None:
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList(["search"]))

        @gate.tool
        def search(q: str) -> list[str]:
            return [q]

        @gate.tool()
        def shout(text: str) -> str:
            return text.upper()

        def impl(x: int) -> int:
            return x * 2

        double = gate.tool(name="x")(impl)

        with gate.run(REQUEST) as run:
            assert search(q="q3") == ["q3"]
            search_id = run.last_call_id
            for tool in (lambda: shout(text="hi"), lambda: double(x=2)):
                with pytest.raises(ToolDenied, match="not on the allow-list"):
                    tool()
        chain = sink.chain(run.run_id)
        assert {a.intent.tool for a in chain.denied} == {"shout", "x"}
        check_chain(
            chain,
            request_id=run.request_id,
            allowed={search_id: "search"},
            denied={a.call_id: a.intent.tool for a in chain.denied},
        )
        check_why(chain, search_id, tool="search", arg="q3", reason="on the allow-list")


def test_async_tools_async_with_and_approvers(tmp_path: Path) -> None:
    asked: list[str] = []

    async def operator(call: ToolCall) -> bool:
        asked.append(call.tool)
        await asyncio.sleep(0)
        return call.tool in ("send_email", "search")

    async def main(sink: SQLiteSink) -> tuple[Any, str, str]:
        gate = Gate(sink, policy=Approver(operator))

        @gate.tool(name="send_email")
        async def send(to: str) -> str:
            await asyncio.sleep(0)
            return f"sent to {to}"

        @gate.tool()
        async def wipe(disk: str) -> None:
            raise AssertionError("never runs")

        def sync_search(q: str) -> list[str]:
            return [q]

        async with gate.run(REQUEST) as run:
            assert await send(to="boss@example.com") == "sent to boss@example.com"
            sent = run.last_call_id
            with pytest.raises(ToolDenied, match="denied by approver"):
                await wipe(disk="/dev/sda")
            wiped = run.last_call_id
            assert await run.acall("search", {"q": "q3"}, sync_search, call_id="s1") == ["q3"]
        return run, sent, wiped

    with SQLiteSink(tmp_path / "l.db") as sink:
        run, sent, wiped = asyncio.run(main(sink))
        chain = sink.chain(run.run_id)
    assert asked == ["send_email", "wipe", "search"]  # "search" is not marked safe
    check_chain(
        chain,
        request_id=run.request_id,
        allowed={sent: "send_email", "s1": "search"},
        denied={wiped: "wipe"},
    )
    check_why(chain, sent, tool="send_email", arg="boss@example.com", reason="approved by approver")


def test_sync_approvers_in_sync_calls(tmp_path: Path) -> None:
    async def async_yes(call: ToolCall) -> bool:
        return True

    with SQLiteSink(tmp_path / "l.db") as sink:
        for policy in (Approver(lambda call: True), Approver(async_yes)):
            gate = Gate(sink, policy=policy)
            with gate.run(REQUEST) as run:
                assert run.call("deploy", {"env": "staging"}, lambda env: env, call_id="d1") == (
                    "staging"
                )
            chain = sink.chain(run.run_id)
            check_chain(chain, request_id=run.request_id, allowed={"d1": "deploy"})
            check_why(chain, "d1", tool="deploy", arg="staging", reason="approved")


def test_the_default_policy_denies_non_safe_tools(tmp_path: Path) -> None:
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink)
        ran: list[str] = []
        with gate.run(REQUEST) as run, pytest.raises(ToolDenied) as info:
            run.call("deploy", {"env": "prod"}, lambda env: ran.append(env), call_id="d1")
        assert ran == [] and info.value.call_id == "d1" and "approv" in info.value.reason
        chain = sink.chain(run.run_id)
        check_chain(chain, request_id=run.request_id, denied={"d1": "deploy"})
        check_why(chain, "d1", tool="deploy", arg="prod", reason="needs approval")

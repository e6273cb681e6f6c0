"""One tool call through the gate: the checklist items of the audit middleware (17-20),
the gate (22-26), wiring (28-29) and the defects the reference left (3, 4, 5, 10)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ledger.drift import content_hash
from ledger.errors import ToolDenied
from ledger.gate import AllowAll, Approver, Gate
from ledger.model import Event, Kind, Ref, RefSource, Verdict
from ledger.sinks import DiscardSink, JSONLSink, SQLiteSink, read_jsonl

from .conftest import FlakyCommits, kinds, of_call


class Tool:
    """A tool that remembers whether it ran."""

    def __init__(self, result: Any = "ok") -> None:
        self.calls: list[dict[str, Any]] = []
        self.result = result

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return self.result


def test_safe_tool_runs_on_a_plain_sink(jsonl_sink: JSONLSink, tmp_path: Path) -> None:
    gate = Gate(jsonl_sink, safe_tools={"read_file"})
    read = Tool("text")
    with gate.run("read it") as run:
        assert run.call("read_file", {"path": "a"}, read) == "text"
    assert read.calls == [{"path": "a"}]
    events = read_jsonl(tmp_path / "l.jsonl").events
    assert kinds(events) == ["request", "gate_decision", "tool_result", "run_end"]
    decision = events[1]
    assert decision.verdict is Verdict.ALLOWED and decision.reason == "safe tool"
    assert decision.call_id == events[2].call_id != ""


@pytest.mark.parametrize("kind", ["discard", "jsonl"])
def test_non_safe_tool_with_non_durable_sink_is_denied(kind: str, tmp_path: Path) -> None:
    sink: DiscardSink | JSONLSink = (
        DiscardSink() if kind == "discard" else JSONLSink(tmp_path / "l.jsonl")
    )
    gate = Gate(sink, policy=AllowAll())
    write = Tool()
    with gate.run("write") as run, pytest.raises(ToolDenied, match="not durable") as info:
        run.call("write_file", {"path": "a"}, write)
    assert write.calls == []
    assert info.value.tool == "write_file" and info.value.call_id.startswith("call_")
    if isinstance(sink, JSONLSink):
        events = read_jsonl(tmp_path / "l.jsonl").events
        denial = [e for e in events if e.kind is Kind.ACTION]
        assert len(denial) == 1 and denial[0].verdict is Verdict.DENIED
        assert "not durable" in denial[0].reason
        assert denial[0].call_id == info.value.call_id
    sink.close()


def test_allowed_non_safe_call_commits_one_self_explaining_action(
    sqlite_sink: SQLiteSink,
) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())
    write = Tool("done")
    with gate.run("restart the web service", agent_path="ops") as run:
        out = run.call("restart_service", {"name": "web"}, write, call_id="c1")
    assert out == "done" and write.calls == [{"name": "web"}]
    chain = sqlite_sink.chain(run.run_id)
    assert [e.kind for e in chain.events].count(Kind.ACTION) == 1
    action = chain.action("c1")
    intent = action.intent
    assert intent.verdict is Verdict.ALLOWED and intent.run_id == run.run_id
    assert intent.args == '{"name":"web"}' and intent.refs and intent.agent_path == "ops"
    assert intent.refs[0] == Ref(source=RefSource.TOOL, id=run.request_id, hash="")
    assert "allow-all" in intent.reason and "restart the web service" in intent.reason
    assert action.result is not None and action.result.result == '"done"'
    assert action.outcome == "succeeded" and chain.anomalies == ()
    # The chain reads in event-id order: the decision, made first, comes before the action
    # it allowed even though it was stored after it (batched with the result).
    assert kinds(of_call(chain.events, "c1")) == ["gate_decision", "action", "tool_result"]
    assert chain.request is not None and str(chain.request.event_id) == run.request_id


def test_default_policy_denies_non_safe_and_records_the_attempt(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink)
    shell = Tool()
    with gate.run("clean up") as run, pytest.raises(ToolDenied) as info:
        run.call("shell", {"command": "rm -rf /"}, shell, call_id="c9")
    assert shell.calls == []
    assert "needs approval" in info.value.reason and "fail-closed" in info.value.reason
    chain = sqlite_sink.chain(run.run_id)
    decision, denial = of_call(chain.events, "c9")
    assert decision.kind is Kind.GATE_DECISION and decision.verdict is Verdict.DENIED
    assert denial.kind is Kind.ACTION and denial.verdict is Verdict.DENIED
    assert denial.run_id == run.run_id and denial.args == '{"command":"rm -rf /"}'
    assert chain.action("c9").denied and chain.denied[0].call_id == "c9"
    assert chain.why("c9").decision == decision
    (summary,) = [s for s in sqlite_sink.runs() if s.run_id == run.run_id]
    assert summary.denials == 1 and summary.actions == 1 and summary.ended


def test_approver_allows_and_its_answer_is_recorded(sqlite_sink: SQLiteSink) -> None:
    asked: list[str] = []

    def approve(call: Any) -> tuple[bool, str]:
        asked.append(call.tool)
        return True, "operator said yes"

    gate = Gate(sqlite_sink, policy=Approver(approve, name="alice"))
    write = Tool()
    with gate.run("write the report") as run:
        run.call("write_file", {"path": "r.txt"}, write, call_id="w1")
    assert asked == ["write_file"] and len(write.calls) == 1
    chain = sqlite_sink.chain(run.run_id)
    why = chain.why("w1")
    assert why.decision is not None and why.decision.label == "alice"
    assert "approved by alice: operator said yes" in why.decision.reason
    assert "approved by alice: operator said yes" in why.reason
    assert "write the report" in str(why)


def test_commit_failure_denies_and_records_why(sqlite_sink: SQLiteSink) -> None:
    flaky = FlakyCommits(sqlite_sink)
    gate = Gate(flaky, policy=AllowAll())
    tool = Tool()
    with gate.run("two writes") as run:
        run.call("write_file", {"path": "a"}, tool, call_id="ok")
        with pytest.raises(ToolDenied, match="record not durable: StorageError: disk full"):
            run.call("write_file", {"path": "b"}, tool, call_id="bad")
    assert tool.calls == [{"path": "a"}]
    chain = sqlite_sink.chain(run.run_id)
    bad = chain.action("bad")
    assert bad.denied and "record not durable" in bad.intent.reason
    assert chain.action("ok").outcome == "succeeded"
    # the stored gate decision is the final one: the policy allowed, the gate denied
    decision = chain.why("bad").decision
    assert decision is not None and decision.verdict is Verdict.DENIED
    assert decision.reason.endswith("then denied: record not durable: StorageError: disk full")
    assert chain.why("ok").decision.verdict is Verdict.ALLOWED  # type: ignore[union-attr]


class RefusingSink(SQLiteSink):
    """A durable sink whose ``commit_action`` refuses every record."""

    def commit_action(self, event: Event) -> None:
        super().commit_action(event.replace(refs=()))  # the real validation refuses it


def test_a_refused_record_denies(tmp_path: Path) -> None:
    with RefusingSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowAll())
        tool = Tool()
        with gate.run("x") as run, pytest.raises(ToolDenied, match="not self-explaining"):
            run.call("write", {"path": "a"}, tool, call_id="c1")
        assert tool.calls == []
        intent = sink.chain(run.run_id).action("c1").intent
        assert intent.verdict is Verdict.DENIED and "record not durable" in intent.reason


@pytest.mark.parametrize("name", ["", "   ", None, 3])
def test_a_tool_without_a_usable_name_is_denied(sqlite_sink: SQLiteSink, name: Any) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll(), safe_tools={""})
    tool = Tool()
    with gate.run("x") as run, pytest.raises(ToolDenied, match="tool name"):
        run.call(name, {}, tool)
    assert tool.calls == []


def test_tool_result_and_error_pass_through_unchanged(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())
    marker = object()
    boom = ValueError("no such file")

    def fails(**_: Any) -> None:
        time.sleep(0.02)
        raise boom

    with gate.run("x") as run:
        assert run.call("t", {}, lambda: marker, call_id="a") is marker
        with pytest.raises(ValueError) as info:
            run.call("t", {"p": 1}, fails, call_id="b")
    assert info.value is boom
    chain = sqlite_sink.chain(run.run_id)
    failed = chain.action("b")
    assert failed.outcome == "failed" and failed.result is not None
    assert failed.result.err == "ValueError: no such file"
    assert failed.result.duration_ms >= 15
    ok = chain.action("a").result
    assert ok is not None and ok.result is not None and "object" in ok.result


def test_safe_read_lands_in_available_with_its_hash(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, safe_tools={"read_file"}, policy=AllowAll())
    with gate.run("x") as run:
        run.call("read_file", {"path": "a"}, lambda path: "the text", call_id="r")
        evidence = run.ref("r")
        run.call("write_file", {"path": "b"}, lambda path: None, evidence=[evidence])
        write_id = run.last_call_id
    chain = sqlite_sink.chain(run.run_id)
    assert chain.available == (evidence,)
    assert evidence.hash == content_hash('"the text"')
    assert chain.why(write_id).evidence[1] == evidence


def test_call_ids_are_minted_and_must_be_unique(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, safe_tools={"t"})
    tool = Tool()
    with gate.run("x") as run:
        run.call("t", {}, tool)
        assert run.last_call_id.startswith("call_") and len(run.last_call_id) == 31
        run.call("t", {}, tool, call_id="same")
        with pytest.raises(ToolDenied, match="already used"):
            run.call("t", {}, tool, call_id="same")
    assert len(tool.calls) == 2


def test_bad_args_and_async_tools_in_sync_calls_are_denied(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())

    async def atool() -> None:
        raise AssertionError("must not run")

    with gate.run("x") as run:
        with pytest.raises(ToolDenied, match="mapping"):
            run.call("t", ["a"], Tool())  # type: ignore[arg-type]
        with pytest.raises(ToolDenied, match="acall"):
            run.call("t", {}, atool)  # type: ignore[unused-coroutine]
    assert len(sqlite_sink.chain(run.run_id).denied) == 2


def test_wiring_sqlite_runs_discard_does_not(tmp_path: Path) -> None:
    approve = Approver(lambda call: True)
    with SQLiteSink(tmp_path / "w.db") as sink:
        ran = Tool()
        with Gate(sink, policy=approve).run("x") as run:
            run.call("deploy", {"v": 1}, ran)
        assert ran.calls == [{"v": 1}]
    not_ran = Tool()
    with Gate(DiscardSink(), policy=approve).run("x") as run, pytest.raises(ToolDenied):
        run.call("deploy", {"v": 1}, not_ran)
    assert not_ran.calls == []


def test_decorated_tools_sync_and_async(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())

    @gate.tool(safe=True)
    def read_file(path: str) -> str:
        return f"content of {path}"

    @gate.tool(name="write")
    async def write_file(path: str, text: str = "") -> int:
        return len(text)

    assert read_file.tool_name == "read_file" and read_file.safe  # type: ignore[attr-defined]

    async def agent() -> str:
        async with gate.run("x") as run:
            text = read_file("a.txt")  # positional args are bound to their names
            await write_file(path="b.txt", text=text)
            return run.run_id

    import asyncio

    run_id = asyncio.run(agent())
    chain = sqlite_sink.chain(run_id)
    assert [a.tool for a in chain.actions] == ["write"]
    assert chain.actions[0].intent.args == '{"path":"b.txt","text":"content of a.txt"}'
    assert chain.actions[0].result is not None and chain.actions[0].result.result == "16"
    assert len(chain.available) == 1


def test_decorated_tool_outside_a_run_is_denied_and_recorded(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())
    ran: list[str] = []

    @gate.tool(safe=True)
    def read_file(path: str) -> str:
        ran.append(path)
        return ""

    with pytest.raises(ToolDenied, match="no active run") as info:
        read_file(path="secret.txt")
    assert ran == []
    (denial,) = sqlite_sink.events(kind="action")
    assert denial.run_id.startswith("norun-") and denial.verdict is Verdict.DENIED
    assert denial.call_id == info.value.call_id and denial.tool == "read_file"
    other = Gate(sqlite_sink, policy=AllowAll())
    with other.run("a run of another gate"), pytest.raises(ToolDenied):
        read_file(path="x")


class BrokenArgs(Mapping[str, Any]):
    """Arguments whose iteration fails inside the gate's own checks."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def __getitem__(self, key: str) -> Any:
        return self.kwargs[key]

    def __len__(self) -> int:
        return len(self.kwargs)

    def __iter__(self) -> Any:
        raise RuntimeError("the gate itself failed")


def test_an_error_inside_the_gate_denies(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())
    ran: list[int] = []
    with gate.run("x") as run, pytest.raises(ToolDenied, match="gate error") as info:
        run.call("write", BrokenArgs(a=1), lambda **_: ran.append(1), call_id="g")
    assert ran == [] and info.value.call_id == "g"
    assert sqlite_sink.chain(run.run_id).action("g").denied


def test_a_run_that_was_not_entered_refuses_calls(sqlite_sink: SQLiteSink) -> None:
    run = Gate(sqlite_sink, safe_tools={"t"}).run("x")
    with pytest.raises(ToolDenied, match="was not entered"):
        run.call("t", {}, lambda: None)


def test_safe_calls_are_marked_safe_in_their_decision_whatever_the_policy(tmp_path: Path) -> None:
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowAll(), safe_tools={"look"})
        with gate.run("look and touch") as run:
            run.call("look", {}, lambda: 1)
            run.call("touch", {"p": "x"}, lambda p: 2)
        decisions = {
            e.tool: e.label for e in sink.chain(run.run_id).events if e.kind is Kind.GATE_DECISION
        }
    assert decisions["look"].startswith("safe:")
    assert not decisions["touch"].startswith("safe:")

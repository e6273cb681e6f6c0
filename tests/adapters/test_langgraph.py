"""LangGraph: gate_tool_node in a real StateGraph with a scripted model node (no network)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from ledger import AllowList, Gate, Kind, Verdict
from ledger.adapters.langgraph import gate_tool_node
from ledger.sinks import SQLiteSink

WRITTEN: list[str] = []


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
def write_file(path: str, text: str) -> str:
    """Write a file."""
    WRITTEN.append(path)
    return "ok"


@tool
def broken(path: str) -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


def graph(node: ToolNode, calls: list[dict[str, Any]]) -> Any:
    def model(state: MessagesState) -> dict[str, Any]:
        if len(state["messages"]) == 1:
            return {"messages": [AIMessage("", tool_calls=calls)]}
        return {"messages": [AIMessage("done")]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", node)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", lambda s: "tools" if s["messages"][-1].tool_calls else END)
    g.add_edge("tools", "model")
    return g.compile()


CALLS = [
    {"name": "read_file", "args": {"path": "notes.txt"}, "id": "tc-read"},
    {"name": "write_file", "args": {"path": "/etc/passwd", "text": "x"}, "id": "tc-write"},
]


def tool_messages(out: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_one_run_per_agent_run_and_a_denial_is_an_error_tool_message(
    tmp_path: Path, mode: str
) -> None:
    WRITTEN.clear()
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList([]), safe_tools={"read_file"})
        app = graph(gate_tool_node(gate, [read_file, write_file]), CALLS)
        if mode == "sync":
            with gate.run("tidy the notes", agent_path="planner") as run:
                out = app.invoke({"messages": [("user", "tidy the notes")]})
        else:

            async def main() -> Any:
                async with gate.run("tidy the notes", agent_path="planner") as r:
                    return r, await app.ainvoke({"messages": [("user", "tidy the notes")]})

            run, out = asyncio.run(main())
        msgs = tool_messages(out)
        assert msgs["tc-read"].content == "contents of notes.txt"
        denied = msgs["tc-write"]
        assert denied.status == "error"
        assert str(denied.content).startswith("agentledger denied this call: ")
        assert WRITTEN == []
        chain = sink.chain(run.run_id)
        assert [a.call_id for a in chain.actions] == ["tc-write"]
        assert chain.actions[0].intent.verdict is Verdict.DENIED
        assert json.loads(chain.actions[0].intent.args or "{}") == CALLS[1]["args"]
        (result,) = list(sink.events(kind=Kind.TOOL_RESULT, run_id=run.run_id))
        assert result.call_id == "tc-read" and json.loads(result.result or "null") == (
            "contents of notes.txt"
        )


def test_allowed_calls_run_after_their_commit_and_failures_are_recorded(tmp_path: Path) -> None:
    WRITTEN.clear()
    calls = [
        {"name": "write_file", "args": {"path": "out.txt", "text": "hi"}, "id": "w1"},
        {"name": "broken", "args": {"path": "x"}, "id": "b1"},
    ]
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList(["write_file", "broken"]))
        app = graph(gate_tool_node(gate, [write_file, broken], handle_tool_errors=True), calls)
        out = app.invoke({"messages": [("user", "write it")]})  # no run: the node makes one
        msgs = tool_messages(out)
        assert msgs["w1"].content == "ok" and WRITTEN == ["out.txt"]
        assert msgs["b1"].status == "error"
        (run,) = list(sink.runs())
        chain = sink.chain(run.run_id)
        assert chain.request is not None and "LangGraph tool node tools" in chain.request.preview
        outcome = {a.call_id: a.outcome for a in chain.actions}
        assert outcome == {"w1": "succeeded", "b1": "failed"}


def test_a_users_own_wrapper_runs_outside_the_gate(tmp_path: Path) -> None:
    WRITTEN.clear()
    seen: list[str] = []

    def mine(request: Any, execute: Any) -> Any:
        seen.append(request.tool_call["name"])
        changed = {**request.tool_call, "args": {**request.tool_call["args"], "path": "safe.txt"}}
        return execute(request.override(tool_call=changed))

    calls = [{"name": "write_file", "args": {"path": "evil.txt", "text": "x"}, "id": "w1"}]
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList(["write_file"]))
        app = graph(gate_tool_node(gate, [write_file], wrap_tool_call=mine), calls)
        app.invoke({"messages": [("user", "w")]})
        (action,) = list(sink.events(kind=Kind.ACTION, tool="write_file"))
        # the record holds what ran, after the user's wrapper changed it
        assert json.loads(action.args or "{}")["path"] == "safe.txt"
    assert seen == ["write_file"] and WRITTEN == ["safe.txt"]

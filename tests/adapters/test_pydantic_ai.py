"""PydanticAI: GateCapability with the framework's own FunctionModel and TestModel."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from ledger import AllowList, Gate, Kind, Verdict
from ledger.adapters.pydantic_ai import GateCapability
from ledger.sinks import SQLiteSink


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                ToolCallPart("read_file", {"path": "notes.txt"}, tool_call_id="call-read"),
                ToolCallPart("delete_file", {"path": "/"}, tool_call_id="call-del"),
            ]
        )
    return ModelResponse(parts=[TextPart("done")])


def make_agent(gate: Gate, deleted: list[str], **kw: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(
        FunctionModel(scripted), capabilities=[GateCapability(gate, **kw)], name="tidier"
    )

    @agent.tool_plain
    def read_file(path: str) -> str:
        return f"contents of {path}"

    @agent.tool_plain
    def delete_file(path: str) -> str:
        deleted.append(path)
        return "deleted"

    return agent


def returns(result: Any) -> dict[str, ToolReturnPart]:
    return {
        p.tool_call_id: p
        for m in result.all_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }


def test_a_run_per_agent_run_and_a_denial_the_model_sees(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList([]), safe_tools={"read_file"})
        agent = make_agent(gate, deleted)
        result = agent.run_sync("tidy the notes")
        assert result.output == "done"
        parts = returns(result)
        assert parts["call-read"].content == "contents of notes.txt"
        denied = parts["call-del"]
        assert denied.outcome == "denied"
        assert str(denied.content).startswith("agentledger denied this call: ")
        assert deleted == []
        (run,) = list(sink.runs())
        chain = sink.chain(run.run_id)
        assert chain.request is not None and chain.request.preview == "tidy the notes"
        assert chain.request.agent_path == "tidier"
        (action,) = chain.actions
        assert action.call_id == "call-del" and action.intent.verdict is Verdict.DENIED
        assert json.loads(action.intent.args or "{}") == {"path": "/"}
        agent.run_sync("again")  # a second agent run is a second gate run
        assert len(list(sink.runs())) == 2


def test_allowed_calls_are_committed_then_run_and_results_recorded(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList(["delete_file"]), safe_tools={"read_file"})
        result = asyncio.run(make_agent(gate, deleted).run("tidy"))
        assert deleted == ["/"]
        assert returns(result)["call-del"].outcome == "success"
        (run,) = list(sink.runs())
        (action,) = sink.chain(run.run_id).actions
        assert action.intent.verdict is Verdict.ALLOWED and action.outcome == "succeeded"
        assert json.loads(action.result.result or "null") == "deleted"  # type: ignore[union-attr]


def test_retry_mode_and_an_outer_run_is_joined(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList([]), safe_tools={"read_file"})
        agent = make_agent(gate, deleted, on_denied="retry")
        with gate.run("the operator's request") as outer:
            result = agent.run_sync("tidy")
        assert returns(result)["call-del"].outcome == "retried"
        assert [r.run_id for r in sink.runs()] == [outer.run_id]


def test_with_test_model_every_tool_is_gated(tmp_path: Path) -> None:
    deleted: list[str] = []
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList([]), safe_tools={"read_file"})
        agent = make_agent(gate, deleted)
        agent.run_sync("go", model=TestModel())
        assert deleted == []
        tools = {e.tool: e.verdict for e in sink.events(kind=Kind.ACTION)}
        assert tools == {"delete_file": Verdict.DENIED}


def test_mcp_server_tools_of_an_agent_are_gated(tmp_path: Path) -> None:
    import sys

    pytest.importorskip("fastmcp")

    from fastmcp.client import Client as FastMCPClient
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    from tests.adapters.conftest import SERVERS, env

    state = tmp_path / "state"
    state.mkdir()

    def calls(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("echo", {"text": "hi"}, tool_call_id="m-echo"),
                    ToolCallPart("write_note", {"line": "secret"}, tool_call_id="m-write"),
                ]
            )
        return ModelResponse(parts=[TextPart("done")])

    transport = StdioTransport(
        command=sys.executable, args=[str(SERVERS / "flaky_server.py"), str(state)], env=env()
    )
    server = MCPToolset(FastMCPClient(transport))
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList([]), safe_tools={"echo"})
        agent: Agent[None, str] = Agent(
            FunctionModel(calls), toolsets=[server], capabilities=[GateCapability(gate)]
        )
        result = agent.run_sync("use the server")
        parts = returns(result)
        assert parts["m-write"].outcome == "denied"
        assert not (state / "notes.txt").exists()
        tools = {e.tool: e.verdict for e in sink.events(kind=Kind.ACTION)}
        assert tools == {"write_note": Verdict.DENIED}
        (res,) = list(sink.events(kind=Kind.TOOL_RESULT, tool="echo"))
        assert res.call_id == "m-echo"

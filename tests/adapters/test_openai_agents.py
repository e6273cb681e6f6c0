"""OpenAI Agents SDK: gated tools under the SDK's own ScriptedModel (no network, no key)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from ledger import AllowList, Gate, Kind, Verdict
from ledger.adapters.openai_agents import gate_agent, run_gated, run_gated_sync
from ledger.sinks import SQLiteSink
from tests.adapters.conftest import SERVERS, env

set_tracing_disabled(True)  # no trace export (no network, no API key)
DELETED: list[str] = []


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@function_tool
def delete_file(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return "deleted"


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            [
                function_call("read_file", {"path": "notes.txt"}, call_id="call_read"),
                function_call("delete_file", {"path": "/"}, call_id="call_del"),
            ],
            [assistant_message("done")],
        ]
    )


def outputs(result: Any) -> dict[str, str]:
    out = {}
    for item in result.to_input_list():
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            out[item["call_id"]] = str(item["output"])
    return out


def test_a_denied_tool_never_runs_and_the_model_reads_the_reason(tmp_path: Path) -> None:
    DELETED.clear()
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList([]), safe_tools={"read_file"})
        agent = Agent(name="tidier", model=model(), tools=[read_file, delete_file])
        result = run_gated_sync(gate, agent, "tidy the notes")
        assert result.final_output == "done"
        out = outputs(result)
        assert out["call_read"] == "contents of notes.txt"
        assert out["call_del"].startswith("agentledger denied this call: ")
        assert DELETED == []
        (run,) = list(sink.runs())
        chain = sink.chain(run.run_id)
        assert chain.request is not None and chain.request.preview == "tidy the notes"
        (action,) = chain.actions
        assert action.call_id == "call_del" and action.intent.verdict is Verdict.DENIED
        assert json.loads(action.intent.args or "{}") == {"path": "/"}


def test_an_allowed_tool_runs_after_its_commit(tmp_path: Path) -> None:
    DELETED.clear()
    import asyncio

    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList(["delete_file"]), safe_tools={"read_file"})
        agent = Agent(name="tidier", model=model(), tools=[read_file, delete_file])
        asyncio.run(run_gated(gate, agent, "tidy"))
        assert DELETED == ["/"]
        (run,) = list(sink.runs())
        (action,) = sink.chain(run.run_id).actions
        assert action.intent.verdict is Verdict.ALLOWED and action.outcome == "succeeded"
        assert json.loads(action.result.result or "null") == "deleted"  # type: ignore[union-attr]


def test_bad_arguments_never_reach_the_tool(tmp_path: Path) -> None:
    DELETED.clear()
    scripted = ScriptedModel(
        [[function_call("delete_file", "[1, 2]", call_id="c1")], [assistant_message("ok")]]
    )
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList(["delete_file"]))
        agent = Agent(name="a", model=scripted, tools=[delete_file])
        result = run_gated_sync(gate, agent, "x")
        assert "the tool did not run" in outputs(result)["c1"]
        assert DELETED == []


def test_local_mcp_server_tools_are_gated(tmp_path: Path) -> None:
    from agents.mcp import MCPServerStdio

    state = tmp_path / "state"
    state.mkdir()
    scripted = ScriptedModel(
        [
            [
                function_call("echo", {"text": "hi"}, call_id="c-echo"),
                function_call("write_note", {"line": "secret"}, call_id="c-write"),
            ],
            [assistant_message("ok")],
        ]
    )

    async def main() -> Any:
        server = MCPServerStdio(
            params={
                "command": sys.executable,
                "args": [str(SERVERS / "flaky_server.py"), str(state)],
                "env": env(),
            }
        )
        async with server:
            agent = Agent(name="a", model=scripted, mcp_servers=[server])
            return await run_gated(gate, agent, "use the mcp tools")

    import asyncio

    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList([]), safe_tools={"echo"})
        result = asyncio.run(main())
        out = outputs(result)
        assert "hi" in out["c-echo"]
        assert out["c-write"].startswith("agentledger denied this call")
        assert not (state / "notes.txt").exists()
        tools = {e.tool: e.verdict for e in sink.events(kind=Kind.ACTION)}
        assert tools == {"write_note": Verdict.DENIED}


def test_gate_agent_gates_handoff_agents() -> None:
    from ledger.sinks import DiscardSink

    gate = Gate(DiscardSink())
    helper = Agent(name="helper", tools=[delete_file])
    main = Agent(name="main", tools=[read_file], handoffs=[helper])
    gated = gate_agent(gate, main)
    (h,) = gated.handoffs
    assert isinstance(h, Agent) and h is not helper
    assert all(
        getattr(getattr(t, "on_invoke_tool", None), "_agentledger_gate", None) is gate
        for t in h.tools
    )
    assert main.tools[0] is read_file  # the original agent is left as it was


def test_a_handoff_object_hands_over_to_a_gated_agent(tmp_path: Path) -> None:
    from agents import handoff

    DELETED.clear()
    helper_model = ScriptedModel(
        [[function_call("delete_file", {"path": "/"}, call_id="h1")], [assistant_message("ok")]]
    )
    helper = Agent(name="helper", model=helper_model, tools=[delete_file])
    main_model = ScriptedModel([[function_call("transfer_to_helper", {}, call_id="t1")]])
    main = Agent(name="main", model=main_model, handoffs=[handoff(helper)])
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=AllowList([]))
        result = run_gated_sync(gate, main, "hand it over")
        assert result.final_output == "ok"
        assert DELETED == []
        tools = {e.tool: e.verdict for e in sink.events(kind=Kind.ACTION)}
        assert tools == {"delete_file": Verdict.DENIED}

"""A tool that fails is recorded as failed, in every adapter (acceptance probes).

A tool that errors must not show in the ledger as a success: its ``tool_result`` carries
the error (``err``), so ``ledger runs`` counts it, ``ledger why`` shows it as failed and
the OpenTelemetry span has ``error.type``; the client or model still sees what it would
see without the gate."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ledger import AllowList, Event, Gate, Kind
from ledger.sinks import SQLiteSink
from tests.adapters.conftest import PY, env


def _results(db: Path, tool: str) -> list[Event]:
    with SQLiteSink(db) as sink:
        return list(sink.events(kind=Kind.TOOL_RESULT, tool=tool))


def test_an_mcp_tool_error_result_is_recorded_as_the_calls_error(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    pytest.importorskip("mcp_server_time")
    from mcp import Client, StdioServerParameters

    from ledger.adapters.mcp import McpGateway

    db = tmp_path / "l.db"
    server = StdioServerParameters(command=PY, args=["-m", "mcp_server_time"], env=env())

    async def main() -> tuple[Any, Any, Any]:
        with SQLiteSink(db) as sink:
            gate = Gate(sink, policy=AllowList(["convert_time"]), safe_tools={"get_current_time"})
            async with McpGateway(gate, server) as gw, Client(gw.server, mode="legacy") as c:
                safe = await c.call_tool("get_current_time", {"timezone": "Not/AZone"})
                unsafe = await c.call_tool(
                    "convert_time",
                    {"source_timezone": "Not/AZone", "time": "12:00", "target_timezone": "UTC"},
                )
                fine = await c.call_tool("get_current_time", {"timezone": "UTC"})
                await gw.settle()
                return safe, unsafe, fine

    safe, unsafe, fine = asyncio.run(main())
    assert safe.is_error and unsafe.is_error and not fine.is_error  # passed on unchanged
    assert "Not/AZone" in "".join(getattr(b, "text", "") for b in safe.content)
    failed_safe, ok = _results(db, "get_current_time")
    (failed_unsafe,) = _results(db, "convert_time")
    for failed in (failed_safe, failed_unsafe):
        assert failed.err and "Not/AZone" in failed.err, failed
    assert not ok.err and ok.result is not None
    with SQLiteSink(db) as sink:
        (summary,) = list(sink.runs())
        assert summary.errors == 2


def test_an_openai_agents_tool_exception_is_recorded_as_the_calls_error(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    from agents import Agent, function_tool, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message, function_call

    from ledger.adapters.openai_agents import run_gated_sync

    set_tracing_disabled(True)

    @function_tool
    def boom(path: str) -> str:
        """Fail."""
        raise RuntimeError(f"disk on fire at {path}")

    model = ScriptedModel(
        [[function_call("boom", {"path": "x"}, call_id="c1")], [assistant_message("done")]]
    )
    db = tmp_path / "l.db"
    with SQLiteSink(db) as sink:
        result = run_gated_sync(
            Gate(sink, policy=AllowList(["boom"])), Agent(name="a", tools=[boom], model=model), "go"
        )
    assert result.final_output == "done"
    shown = [
        str(i["output"])
        for i in result.to_input_list()
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    ]
    assert shown and "error occurred" in shown[0]  # the SDK's own failure text, as without us
    (failed,) = _results(db, "boom")
    assert "RuntimeError" in failed.err and "disk on fire at x" in failed.err
    assert failed.call_id == "c1"

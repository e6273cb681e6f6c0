"""OpenAI Agents SDK adapter (``agentledger[openai-agents]``): every tool call gated.

>>> result = await run_gated(gate, agent, "tidy the notes")       # doctest: +SKIP
>>> result = run_gated_sync(gate, agent, "tidy the notes")        # doctest: +SKIP

The gate sits in each function tool's ``on_invoke_tool``, the SDK's own blocking hook:

- :func:`gate_tool` wraps one ``FunctionTool``; :func:`gate_agent` returns a copy of an
  agent whose function tools, agents-as-tools, handoff agents (given as agents or as
  ``handoff(...)`` objects) and **local MCP server tools** (``mcp_servers``) are all
  wrapped (MCP tools are wrapped as the SDK lists them
  for each turn, so a tool a server adds later is gated too).
- :func:`run_gated` / :func:`run_gated_sync` run ``Runner.run`` inside ``gate.run(input)``:
  one gate run per agent run. A gated tool called with no active run of the gate gets a
  run of its own for that call.
- The call id is the model's ``call_id``; the recorded args are the tool's JSON
  arguments, and the tool is invoked with exactly those (re-serialized) arguments.
- A denied call never runs; its output, which the model reads as the tool's answer, is
  ``"agentledger denied this call: <reason>"`` (what a tool input guardrail's
  ``reject_content`` would show). Arguments that are not a JSON object never reach the
  tool: the attempt is recorded (args ``{"arguments": ...}``) with the error as outcome.
- A tool's exception is recorded as the call's error (the gate sits inside the SDK's
  failure handler); the model then gets what the SDK shows without the gate, by default
  its ``failure_error_function`` text, and a tool built with
  ``failure_error_function=None`` raises.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from ledger.adapters import needs_extra
from ledger.errors import ToolDenied
from ledger.gate import Gate, Run

with needs_extra(__name__, "openai-agents", ("agents",)):
    from agents import Agent, FunctionTool, Handoff, Runner
    from agents.tool_context import ToolContext


__all__ = [
    "DENIED_PREFIX",
    "GatedAgent",
    "gate_agent",
    "gate_tool",
    "gate_tools",
    "run_gated",
    "run_gated_sync",
]

DENIED_PREFIX = "agentledger denied this call: "
_GATED = "_agentledger_gate"


class _BadArguments(ValueError):
    """Tool arguments that are not a JSON object (the model's mistake)."""


def _input_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str)[:2000]
    except (TypeError, ValueError):
        return str(value)[:2000]


def gate_tool(gate: Gate, tool: FunctionTool) -> FunctionTool:
    """A copy of ``tool`` whose every invocation goes through ``gate``."""
    if not isinstance(tool, FunctionTool):
        raise TypeError(f"gate_tool wraps a FunctionTool, got {type(tool).__name__}")
    if getattr(tool.on_invoke_tool, _GATED, None) is gate:
        return tool
    original = tool.on_invoke_tool
    # The SDK's own invoker turns a tool's exception into an error text for the model
    # (``failure_error_function``). Gate the raw invocation inside that handler, so the
    # gate sees the exception and records it as the call's error (else the ledger shows
    # the SDK's generic text as a success, and the error itself is lost) and the model
    # still gets the SDK's text.
    raw = getattr(original, "_invoke_tool_impl", None)
    handled = getattr(original, "_on_handled_error", None)
    inner = raw if callable(raw) and callable(handled) else original
    name = tool.name

    async def gated(ctx: ToolContext[Any], input_json: str) -> Any:
        call_id = getattr(ctx, "tool_call_id", None) or None
        try:
            parsed = json.loads(input_json) if input_json.strip() else {}
        except ValueError:
            parsed = None
        run = gate.current_run()
        if run is None:
            async with gate.run(
                f"OpenAI Agents tool call {name} outside run_gated", agent_path=""
            ) as own:
                return await _call(own, ctx, parsed, call_id)
        return await _call(run, ctx, parsed, call_id)

    async def _call(run: Run, ctx: ToolContext[Any], parsed: Any, call_id: str | None) -> Any:
        args = parsed if isinstance(parsed, dict) else {"arguments": parsed}

        async def invoke(**given: Any) -> Any:
            if not isinstance(parsed, dict):  # recorded as the call's error; never run
                raise _BadArguments("the tool arguments are not a JSON object")
            return await inner(ctx, json.dumps(given))

        try:
            return await run.acall(name, args, invoke, call_id=call_id)
        except ToolDenied as denied:
            return DENIED_PREFIX + denied.reason
        except _BadArguments as exc:
            return f"agentledger: {exc}; the tool did not run"

    on_invoke_tool: Any = gated
    if inner is raw:
        for marker in dir(raw):  # the SDK's markers on its implementation (approval, ...)
            if marker.startswith("__agents_"):
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(gated, marker, getattr(raw, marker))
        invoker: Any = type(original)  # the SDK's failure-handling invoker class
        on_invoke_tool = invoker(gated, handled)  # bound to the copy by the SDK
        for marker in dir(original):
            if marker.startswith("__agents_") and not callable(getattr(original, marker)):
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(on_invoke_tool, marker, getattr(original, marker))
    copy = dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)
    setattr(copy.on_invoke_tool, _GATED, gate)
    return copy


def gate_tools(gate: Gate, tools: Iterable[Any]) -> list[Any]:
    """``tools`` with every ``FunctionTool`` gated (other tool kinds are kept as they are:
    hosted tools run on OpenAI's side, where no local gate can hold them)."""
    return [gate_tool(gate, t) if isinstance(t, FunctionTool) else t for t in tools]


@dataclasses.dataclass
class GatedAgent(Agent[Any]):
    """An ``Agent`` whose MCP tools are gated as the SDK lists them (see :func:`gate_agent`)."""

    ledger_gate: Gate | None = None

    async def get_mcp_tools(self, run_context: Any) -> list[Any]:
        tools = await super().get_mcp_tools(run_context)
        if self.ledger_gate is None:
            return tools
        return gate_tools(self.ledger_gate, tools)


def gate_agent(gate: Gate, agent: Agent[Any]) -> GatedAgent:
    """A copy of ``agent`` with all its tools gated, handoff agents included."""
    return _gate_agent(gate, agent, {})


def _gate_agent(gate: Gate, agent: Agent[Any], seen: dict[int, GatedAgent]) -> GatedAgent:
    if isinstance(agent, GatedAgent) and agent.ledger_gate is gate:
        return agent
    if id(agent) in seen:
        return seen[id(agent)]
    values = {
        f.name: getattr(agent, f.name)
        for f in dataclasses.fields(agent)
        if f.init and f.name != "ledger_gate"
    }
    gated = GatedAgent(**values, ledger_gate=gate)
    seen[id(agent)] = gated
    gated.tools = gate_tools(gate, agent.tools)
    gated.handoffs = [_gate_handoff(gate, h, seen) for h in agent.handoffs]
    return gated


def _gate_handoff(gate: Gate, handoff: Any, seen: dict[int, GatedAgent]) -> Any:
    """A handoff whose target agent is gated too: an ``Agent`` directly, a ``Handoff``
    through its ``on_invoke_handoff`` (the agent it hands over to is gated when it does)."""
    if isinstance(handoff, Agent):
        return _gate_agent(gate, handoff, seen)
    if not isinstance(handoff, Handoff):
        return handoff
    original = handoff.on_invoke_handoff

    async def on_invoke_handoff(ctx: Any, input_json: str) -> Any:
        target = await original(ctx, input_json)
        return _gate_agent(gate, target, seen) if isinstance(target, Agent) else target

    return dataclasses.replace(handoff, on_invoke_handoff=on_invoke_handoff)


async def run_gated(gate: Gate, agent: Agent[Any], input: Any, **runner_kwargs: Any) -> Any:
    """``Runner.run(gate_agent(gate, agent), input, ...)`` inside one gate run."""
    gated = gate_agent(gate, agent)
    if gate.current_run() is not None:
        return await Runner.run(gated, input, **runner_kwargs)
    async with gate.run(_input_text(input), agent_path=agent.name):
        return await Runner.run(gated, input, **runner_kwargs)


def run_gated_sync(gate: Gate, agent: Agent[Any], input: Any, **runner_kwargs: Any) -> Any:
    """The blocking twin of :func:`run_gated` (no event loop may be running)."""
    import asyncio

    return asyncio.run(run_gated(gate, agent, input, **runner_kwargs))

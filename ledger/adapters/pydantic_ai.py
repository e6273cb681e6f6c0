"""PydanticAI adapter (``agentledger[pydantic-ai]``): the gate as an agent capability.

>>> from pydantic_ai import Agent                                   # doctest: +SKIP
>>> agent = Agent("openai:gpt-5", capabilities=[GateCapability(gate)])  # doctest: +SKIP
>>> agent.run_sync("tidy the notes")       # one run in the ledger   # doctest: +SKIP

:class:`GateCapability` sits at PydanticAI's own blocking hooks, so no tool of the agent
(function tools, toolsets, MCP server tools) runs around it:

- ``wrap_run``: each agent run is one gate run (request = the user prompt, as text). When
  a run of the same gate is already active (``async with gate.run(...)`` around the agent
  call), the agent's tool calls join that run instead.
- ``wrap_tool_execute``: every call goes through :meth:`ledger.gate.Run.acall` with the
  model's tool-call id as the call id and the validated arguments as the recorded args.
  A denied call never runs; the model is shown PydanticAI's own denial, a
  ``ToolReturnPart`` with ``outcome='denied'`` whose content is
  ``"agentledger denied this call: <reason>"`` (it does not use up the tool's retries).
  With ``on_denied="retry"`` the denial is a ``ModelRetry`` instead (the model is asked
  to try again, counted against the tool's retries).
- Results are recorded as the tool returned them; a tool's exception is recorded as the
  call's error and then handled by PydanticAI as it would be without the gate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ledger.adapters import needs_extra
from ledger.errors import ToolDenied
from ledger.gate import Gate, Run

with needs_extra(__name__, "pydantic-ai", ("pydantic_ai",)):
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ModelRetry
    from pydantic_ai.tools import ToolDenied as PydanticToolDenied


__all__ = ["DENIED_PREFIX", "GateCapability"]

DENIED_PREFIX = "agentledger denied this call: "


def _prompt_text(prompt: str | Sequence[Any] | None) -> str:
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    return " ".join(p if isinstance(p, str) else f"[{type(p).__name__}]" for p in prompt)


class GateCapability(AbstractCapability[Any]):
    """``GateCapability(gate, *, agent_path="", on_denied="deny")``: pass it in an
    ``Agent``'s ``capabilities``. ``agent_path`` defaults to the agent's name."""

    def __init__(
        self,
        gate: Gate,
        *,
        agent_path: str = "",
        on_denied: Literal["deny", "retry"] = "deny",
    ) -> None:
        if not isinstance(gate, Gate):
            raise TypeError(f"gate must be a ledger Gate, got {type(gate).__name__}")
        if on_denied not in ("deny", "retry"):
            raise ValueError("on_denied must be 'deny' or 'retry'")
        self.gate = gate
        self.agent_path = agent_path
        self.on_denied = on_denied

    async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
        if self.gate.current_run() is not None:
            return await handler()
        agent = getattr(ctx, "agent", None)
        path = self.agent_path or str(getattr(agent, "name", "") or "")
        async with self.gate.run(_prompt_text(ctx.prompt), agent_path=path):
            return await handler()

    async def wrap_tool_execute(
        self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        run: Run | None = self.gate.current_run()
        if run is None:  # a tool run outside an agent run: fail closed, and say so
            async with self.gate.run(
                f"PydanticAI tool call {call.tool_name} outside an agent run",
                agent_path=self.agent_path,
            ) as orphan:
                return await self._call(orphan, call, args, handler)
        return await self._call(run, call, args, handler)

    async def _call(self, run: Run, call: Any, args: Any, handler: Any) -> Any:
        kwargs = dict(args) if isinstance(args, dict) else {"args": args}

        async def execute(**given: Any) -> Any:
            return await handler(given if isinstance(args, dict) else args)

        try:
            return await run.acall(
                call.tool_name, kwargs, execute, call_id=call.tool_call_id or None
            )
        except ToolDenied as denied:
            message = DENIED_PREFIX + denied.reason
            if self.on_denied == "retry":
                raise ModelRetry(message) from None
            return PydanticToolDenied(message)

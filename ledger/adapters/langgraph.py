"""LangGraph adapter (``agentledger[langgraph]``): a ``ToolNode`` whose every call is gated.

>>> node = gate_tool_node(gate, [read_file, write_file])          # doctest: +SKIP
>>> graph.add_node("tools", node)                                  # doctest: +SKIP
>>> with gate.run("tidy the notes"):                               # doctest: +SKIP
...     app.invoke({"messages": [("user", "tidy the notes")]})

:func:`gate_tool_node` returns a :class:`GatedToolNode` (a ``ToolNode``) whose
``wrap_tool_call`` and ``awrap_tool_call``, LangGraph's own blocking hooks, send every
tool call through :meth:`ledger.gate.Run.call` / ``acall``:

- The call id is the model's tool-call id; the recorded args are the tool call's ``args``
  (exactly what the tool is then executed with).
- A denial never runs the tool; the model gets a ``ToolMessage`` with
  ``status="error"`` and ``"agentledger denied this call: <reason>"`` as its content.
- A tool that fails (LangGraph's error ``ToolMessage``) is recorded as the call's error.
- **Runs**: the calls join the gate's active run when there is one (``with
  gate.run(request)`` around ``graph.invoke``: one run per agent run). Without one, each
  invocation of the node (one model turn's tool calls) is a run of its own, whose request
  names the node, step and thread.
- Your own ``wrap_tool_call`` / ``awrap_tool_call`` still run, outside the gate: the gate
  records the request they finally execute.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ledger.adapters import needs_extra
from ledger.errors import ToolDenied
from ledger.gate import Gate, Run

with needs_extra(__name__, "langgraph", ("langgraph", "langchain_core")):
    from langchain_core.messages import ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool
    from langgraph.prebuilt import ToolNode
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime
    from langgraph.types import Command


__all__ = ["DENIED_PREFIX", "GatedToolNode", "gate_tool_node"]

DENIED_PREFIX = "agentledger denied this call: "

_Out = ToolMessage | Command[Any]

_Execute = Callable[[ToolCallRequest], _Out]
_AExecute = Callable[[ToolCallRequest], Awaitable[_Out]]


class _ToolFailed(Exception):
    """A tool's error message, re-raised so the gate records the call as failed."""


def _recorded(out: _Out) -> Any:
    if isinstance(out, ToolMessage):
        content = out.content
        if isinstance(content, str):
            try:
                return json.loads(content)
            except ValueError:
                return content
        return content
    return {"command": repr(out)}


def _failed(out: _Out) -> str | None:
    if isinstance(out, ToolMessage) and out.status == "error":
        text = out.content if isinstance(out.content, str) else json.dumps(out.content)
        return text or "tool error"
    return None


def _denied(request: ToolCallRequest, reason: str) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(
        content=DENIED_PREFIX + reason,
        name=call["name"],
        tool_call_id=call.get("id") or "",
        status="error",
    )


class GatedToolNode(ToolNode):
    """A ``ToolNode`` with the gate at ``wrap_tool_call`` / ``awrap_tool_call``; build it
    with :func:`gate_tool_node`."""

    def __init__(
        self,
        gate: Gate,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        agent_path: str = "",
        wrap_tool_call: Callable[[ToolCallRequest, _Execute], _Out] | None = None,
        awrap_tool_call: Callable[[ToolCallRequest, _AExecute], Awaitable[_Out]] | None = None,
        **toolnode_kwargs: Any,
    ) -> None:
        if not isinstance(gate, Gate):
            raise TypeError(f"gate must be a ledger Gate, got {type(gate).__name__}")
        self._gate = gate
        self._agent_path = agent_path
        self._user_wrap = wrap_tool_call
        self._user_awrap = awrap_tool_call
        super().__init__(
            tools,
            wrap_tool_call=self._wrap,
            awrap_tool_call=self._awrap,
            **toolnode_kwargs,
        )

    # --- one run per node invocation when no run is active --------------------------

    def _request(self, config: RunnableConfig | None) -> str:
        meta = (config or {}).get("metadata", {}) or {}
        conf = (config or {}).get("configurable", {}) or {}
        step = meta.get("langgraph_step", "?")
        thread = conf.get("thread_id")
        where = f", thread {thread}" if thread else ""
        return f"LangGraph tool node {self.name} (step {step}{where})"

    def _func(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        if self._gate.current_run() is not None:
            return super()._func(input, config, runtime)
        with self._gate.run(self._request(config), agent_path=self._agent_path):
            return super()._func(input, config, runtime)

    async def _afunc(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        if self._gate.current_run() is not None:
            return await super()._afunc(input, config, runtime)
        async with self._gate.run(self._request(config), agent_path=self._agent_path):
            return await super()._afunc(input, config, runtime)

    # --- the gate around execution -------------------------------------------------

    def _wrap(self, request: ToolCallRequest, execute: _Execute) -> _Out:
        def gated(req: ToolCallRequest) -> _Out:
            run = self._gate.current_run()
            if run is None:  # a thread that lost the context: a run for this call
                with self._gate.run(self._request(None), agent_path=self._agent_path) as own:
                    return self._through(own, req, execute)
            return self._through(run, req, execute)

        if self._user_wrap is not None:
            return self._user_wrap(request, gated)
        return gated(request)

    async def _awrap(self, request: ToolCallRequest, execute: _AExecute) -> _Out:
        async def gated(req: ToolCallRequest) -> _Out:
            run = self._gate.current_run()
            if run is None:
                async with self._gate.run(self._request(None), agent_path=self._agent_path) as own:
                    return await self._athrough(own, req, execute)
            return await self._athrough(run, req, execute)

        if self._user_awrap is not None:
            return await self._user_awrap(request, gated)
        if self._user_wrap is not None:
            raise TypeError(
                "gate_tool_node: a sync wrap_tool_call cannot wrap async execution; "
                "give awrap_tool_call too"
            )
        return await gated(request)

    @staticmethod
    def _through(run: Run, request: ToolCallRequest, execute: _Execute) -> _Out:
        call = request.tool_call
        out: list[_Out] = []

        def fn(**args: Any) -> Any:
            result = execute(request.override(tool_call={**call, "args": args}))
            out.append(result)
            failed = _failed(result)
            if failed is not None:
                raise _ToolFailed(failed)
            return _recorded(result)

        try:
            run.call(call["name"], dict(call.get("args") or {}), fn, call_id=call.get("id"))
        except ToolDenied as denied:
            return _denied(request, denied.reason)
        except _ToolFailed:
            return out[-1]
        return out[-1]

    @staticmethod
    async def _athrough(run: Run, request: ToolCallRequest, execute: _AExecute) -> _Out:
        call = request.tool_call
        out: list[_Out] = []

        async def fn(**args: Any) -> Any:
            result = await execute(request.override(tool_call={**call, "args": args}))
            out.append(result)
            failed = _failed(result)
            if failed is not None:
                raise _ToolFailed(failed)
            return _recorded(result)

        try:
            await run.acall(call["name"], dict(call.get("args") or {}), fn, call_id=call.get("id"))
        except ToolDenied as denied:
            return _denied(request, denied.reason)
        except _ToolFailed:
            return out[-1]
        return out[-1]


def gate_tool_node(
    gate: Gate, tools: Sequence[BaseTool | Callable[..., Any]], **toolnode_kwargs: Any
) -> GatedToolNode:
    """A ``ToolNode`` over ``tools`` whose every call goes through ``gate``.

    ``toolnode_kwargs`` go to ``ToolNode`` (``name``, ``handle_tool_errors``,
    ``messages_key``, your own ``wrap_tool_call``/``awrap_tool_call``, ...), plus
    ``agent_path`` for the runs the node starts itself.
    """
    return GatedToolNode(gate, tools, **toolnode_kwargs)

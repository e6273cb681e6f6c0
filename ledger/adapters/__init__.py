"""Where agents run: the MCP gateway, framework adapters and OpenTelemetry export.

Each adapter is an optional extra over the same :class:`~ledger.gate.Gate`, and nothing
here is imported by ``import ledger``:

- :mod:`ledger.adapters.mcp`: ``ledger mcp proxy``, a gateway in front of any MCP server
  (``agentledger[mcp]``).
- :mod:`ledger.adapters.langgraph`: ``gate_tool_node(gate, tools)`` (``[langgraph]``).
- :mod:`ledger.adapters.pydantic_ai`: ``GatedToolset`` (``[pydantic-ai]``).
- :mod:`ledger.adapters.openai_agents`: ``gate_tools`` / ``GatedAgentHooks`` (``[openai-agents]``).
- :mod:`ledger.adapters.otel`: ``export_runs`` and ``SpanHook`` (``[otel]``).

See ``docs/adapters.md``.
"""

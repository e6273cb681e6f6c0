"""The MCP gateway (``agentledger[mcp]``): ``ledger mcp proxy`` in front of any MCP server.

>>> from ledger.adapters.mcp import McpGateway      # doctest: +SKIP

:class:`~ledger.adapters.mcp.gateway.McpGateway` is the gateway;
:mod:`ledger.adapters.mcp.definitions` records tool definitions as evidence and keeps the
pins (it does not need the MCP SDK). Names are loaded on first use, so importing this
package does not import the SDK; without it, the first use raises
:class:`~ledger.adapters.MissingExtra` with the ``pip install`` command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ledger.adapters import needs_extra

if TYPE_CHECKING:
    from ledger.adapters.mcp.definitions import DefinitionResolver, Pins, PinsError
    from ledger.adapters.mcp.gateway import (
        ClientLeft,
        GatewayError,
        GatewayStopped,
        McpGateway,
        ToolError,
        proxy_policy,
        serve_http,
        serve_stdio,
    )

__all__ = [
    "ClientLeft",
    "DefinitionResolver",
    "GatewayError",
    "GatewayStopped",
    "McpGateway",
    "Pins",
    "PinsError",
    "ToolError",
    "proxy_policy",
    "serve_http",
    "serve_stdio",
]

# what `agentledger[mcp]` brings that the gateway imports
_EXTRA = ("mcp", "mcp_types", "anyio", "uvicorn", "starlette", "sse_starlette",
          "opentelemetry", "pydantic", "pydantic_core")  # fmt: skip
_LAZY = {
    "DefinitionResolver": "ledger.adapters.mcp.definitions",
    "Pins": "ledger.adapters.mcp.definitions",
    "PinsError": "ledger.adapters.mcp.definitions",
    "ClientLeft": "ledger.adapters.mcp.gateway",
    "GatewayError": "ledger.adapters.mcp.gateway",
    "GatewayStopped": "ledger.adapters.mcp.gateway",
    "McpGateway": "ledger.adapters.mcp.gateway",
    "ToolError": "ledger.adapters.mcp.gateway",
    "proxy_policy": "ledger.adapters.mcp.gateway",
    "serve_http": "ledger.adapters.mcp.gateway",
    "serve_stdio": "ledger.adapters.mcp.gateway",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger.adapters.mcp' has no attribute {name!r}")
    with needs_extra("ledger.adapters.mcp", "mcp", _EXTRA):
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
